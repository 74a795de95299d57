"""OpenLineage for the operators: S3 inputs and outputs, and the capacity outcome as a run facet.

Airflow's OpenLineage provider calls ``get_openlineage_facets_on_start`` when the task starts (and again
each time it resumes from a deferral), ``..._on_complete`` when it succeeds and ``..._on_failure`` when
it fails, on the task object that ran; they call :func:`operator_lineage`. Every OpenLineage import is
inside it: without the provider (``pip install "airflow-provider-sm-prefs[openlineage]"``) nothing here runs or is imported.

What the datasets and the facet hold is decided by the pure :mod:`airflow_provider_sm_prefs.domain.lineage`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_provider_sm_prefs.domain import lineage
from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList, build_request, to_seconds
from airflow_provider_sm_prefs.operators.rendered import RenderedArguments
from airflow_provider_sm_prefs.recording import TryProgress

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors.base import OperatorLineage

__all__ = ["lineage_listener_expected", "operator_lineage"]


def operator_lineage(
    kind: JobKind,
    config: Callable[[], Any],
    instance_preferences: Any,
    max_pending: Any,
    progress: TryProgress,
    *,
    finished: bool,
    arguments: Callable[[], tuple[dict[str, Any], InstancePreferenceList]] | None = None,
) -> OperatorLineage[Any, Any]:
    """The task's lineage: the request's S3 inputs and outputs, and the capacity run facet.

    :param config: gives the rendered ``config`` (it may raise ``InvalidInstancePreferencesError``).
    :param instance_preferences: the rendered argument of the same name.
    :param max_pending: the operator's ``max_pending``.
    :param progress: this try's progress (its job name, the list as validated, the outcome pushed).
    :param finished: the task ended: report the outcome (the selected entry, its rank, the wait, costs,
        and for a completed training job the model artifact instead of the output prefix).
    :param arguments: gives the request and the list as the task checked them (the operator's, parsed
        once per rendering); None: built here from ``config``, ``instance_preferences`` and ``max_pending``.
    """
    from airflow.providers.common.compat.openlineage.facet import Dataset
    from airflow.providers.openlineage.extractors.base import OperatorLineage

    from airflow_provider_sm_prefs.operators.lineage_facet import SageMakerCapacityRunFacet

    request, preferences = _lineage_request(
        kind, config, instance_preferences, max_pending, progress, arguments
    )
    outcome = progress.outcome if finished else None
    job_name = progress.job_name or kind.spec.name_of(request)
    facet = SageMakerCapacityRunFacet(**lineage.capacity_facet_fields(kind, preferences, outcome, job_name))
    return OperatorLineage(
        inputs=[Dataset(namespace=s3.namespace, name=s3.name) for s3 in lineage.job_inputs(kind, request)],
        outputs=[
            Dataset(namespace=s3.namespace, name=s3.name)
            for s3 in lineage.job_outputs(kind, request, outcome)
        ],
        run_facets={lineage.FACET_NAME: facet},
    )


def _lineage_request(
    kind: JobKind,
    config: Callable[[], Any],
    instance_preferences: Any,
    max_pending: Any,
    progress: TryProgress,
    arguments: Callable[[], tuple[dict[str, Any], InstancePreferenceList]] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The Create* request and the list as written; ``({}, [])`` parts where they do not validate."""
    try:
        rendered = config()
    except InvalidInstancePreferencesError:  # a config that rendered to junk: no datasets to name
        return {}, []
    if not isinstance(rendered, Mapping):
        return {}, []
    try:
        if arguments is not None:
            request, prefs = arguments()
        else:
            request, prefs = build_request(kind, rendered, instance_preferences, to_seconds(max_pending))
    except (InvalidInstancePreferencesError, ValueError, TypeError):
        # The task fails on it with the full message; lineage still names the datasets.
        return dict(rendered), list(progress.preferences)
    return request, prefs.as_list()


def lineage_listener_expected(task: Any) -> bool:
    """Whether Airflow's OpenLineage listener will report ``task``'s completion (from a worker).

    False without the provider, when it is disabled (no transport configured is disabled too), when the
    operator's class is in ``[openlineage] disabled_for_operators``, or with ``selective_enable`` when
    neither the task nor its DAG enabled lineage. Anything unexpected counts as expected: the caller then
    keeps the path where the listener runs.
    """
    try:
        from airflow.providers.openlineage import conf
    except ImportError:
        return False
    try:
        if conf.is_disabled():
            return False
        from airflow.providers.openlineage.utils.utils import (
            is_operator_disabled,
            is_selective_lineage_enabled,
        )

        if is_operator_disabled(task):
            return False
        return bool(is_selective_lineage_enabled(task))
    except Exception:
        return True


class OperatorLineageMethods:
    """The OpenLineage methods of the job operators: Airflow's OpenLineage listener calls them on the task
    object that ran (the request's S3 inputs and outputs, the preference list, and the outcome once known)."""

    job_kind: ClassVar[JobKind]
    instance_preferences: Any
    max_pending: Any
    _progress: TryProgress
    #: The operator's: the config as rendered for this try.
    _rendered_config: Callable[[], Any]
    #: The operator's: the rendered arguments, checked (parsed once per rendering).
    _arguments: Callable[[], RenderedArguments]

    def _lineage(self, *, finished: bool) -> OperatorLineage[Any, Any]:
        return operator_lineage(
            self.job_kind,
            self._rendered_config,
            self.instance_preferences,
            self.max_pending,
            self._progress,
            finished=finished,
            arguments=self._checked_request,
        )

    def _checked_request(self) -> tuple[dict[str, Any], InstancePreferenceList]:
        rendered = self._arguments()
        return rendered.request, rendered.preferences

    def get_openlineage_facets_on_start(self) -> OperatorLineage[Any, Any]:
        """The request's S3 inputs and outputs, and the preference list (nothing selected yet)."""
        return self._lineage(finished=False)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        """As on start, with the outcome: the selected entry, its rank, the wait, costs; for a completed
        training job the model artifact SageMaker reports instead of the output prefix."""
        return self._lineage(finished=True)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        """As on complete: the outcome when SageMaker had selected an entry before the task failed."""
        return self._lineage(finished=True)
