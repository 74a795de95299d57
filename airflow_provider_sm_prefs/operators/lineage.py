"""OpenLineage for the operators: S3 inputs and outputs, and the capacity outcome as a run facet.

Airflow's OpenLineage provider calls ``get_openlineage_facets_on_start`` when the task starts (and again
each time it resumes from a deferral), ``..._on_complete`` when it succeeds and ``..._on_failure`` when
it fails, on the task object that ran. Every OpenLineage import is inside those methods: without the
provider (``pip install "airflow-provider-sm-prefs[openlineage]"``) nothing here runs or is imported.

What the datasets and the facet hold is decided by the pure :mod:`airflow_provider_sm_prefs.lineage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_provider_sm_prefs import lineage
from airflow_provider_sm_prefs.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.kinds import JobKind
from airflow_provider_sm_prefs.outcome import CapacityOutcome
from airflow_provider_sm_prefs.preferences import build_request, to_seconds

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors.base import OperatorLineage

__all__ = ["LineageMixin"]


class LineageMixin:
    """OpenLineage methods of the Training and Processing operators.

    Reads what the operator keeps: the rendered ``config`` and ``instance_preferences``, the job name
    (``_job_name``) and the outcome this try pushed (``_pushed_outcome``, set by
    :meth:`~airflow_provider_sm_prefs.recording.CapacityRecording.push_outcome`).
    """

    job_kind: ClassVar[JobKind]
    config: Any
    instance_preferences: Any
    max_pending: Any
    _job_name: str | None
    _record_preferences: list[dict[str, Any]]
    _pushed_outcome: CapacityOutcome | None
    log: Any

    def _rendered_config(self) -> Any:
        raise NotImplementedError

    def _lineage_request(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The Create* request and the list as written; ``({}, [])`` parts where they do not validate."""
        try:
            config = self._rendered_config()
        except InvalidInstancePreferencesError:  # a config that rendered to junk: no datasets to name
            return {}, []
        if not isinstance(config, Mapping):
            return {}, []
        try:
            request, prefs = build_request(
                self.job_kind, config, self.instance_preferences, to_seconds(self.max_pending)
            )
        except (InvalidInstancePreferencesError, ValueError, TypeError):
            # The task fails on it with the full message; lineage still names the datasets.
            return dict(config), list(getattr(self, "_record_preferences", None) or [])
        return request, prefs.as_list()

    def _operator_lineage(self, *, finished: bool) -> OperatorLineage[Any, Any]:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors.base import OperatorLineage

        from airflow_provider_sm_prefs.operators.lineage_facet import SageMakerCapacityRunFacet

        kind = self.job_kind
        request, preferences = self._lineage_request()
        outcome = getattr(self, "_pushed_outcome", None) if finished else None
        job_name = getattr(self, "_job_name", None) or kind.spec.name_of(request)
        facet = SageMakerCapacityRunFacet(
            **lineage.capacity_facet_fields(kind, preferences, outcome, job_name)
        )
        return OperatorLineage(
            inputs=[
                Dataset(namespace=s3.namespace, name=s3.name) for s3 in lineage.job_inputs(kind, request)
            ],
            outputs=[
                Dataset(namespace=s3.namespace, name=s3.name)
                for s3 in lineage.job_outputs(kind, request, outcome)
            ],
            run_facets={lineage.FACET_NAME: facet},
        )

    def get_openlineage_facets_on_start(self) -> OperatorLineage[Any, Any]:
        """The request's S3 inputs and outputs, and the preference list (nothing selected yet)."""
        return self._operator_lineage(finished=False)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        """As on start, with the outcome: the selected entry, its rank, the wait, costs; for a completed
        training job the model artifact SageMaker reports instead of the output prefix."""
        return self._operator_lineage(finished=True)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        """As on complete: the outcome when SageMaker had selected an entry before the task failed."""
        return self._operator_lineage(finished=True)
