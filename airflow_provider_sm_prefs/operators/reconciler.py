"""Operator: one reconciler pass from inside Airflow (the maintenance DAG runs it hourly).

Task states come through the Task SDK of the running task
(:class:`~airflow_provider_sm_prefs.reconcile.sources.TaskSdkTaskStates`): no database access and no API
token. Dry run by default: it decides and reports; ``dry_run=False`` stops the jobs whose owning task is
gone. The report is the return value (XCom ``return_value``) and is logged as a table; the counts go out
as metrics through Airflow's own metrics layer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook
from airflow_provider_sm_prefs.operators.aws_task import AwsTask

__all__ = ["METRICS_PREFIX", "SageMakerJobReconcilerOperator", "emit_metrics"]

log = logging.getLogger(__name__)

METRICS_PREFIX = "sm_prefs.reconciler"
#: The report's counts sent as ``sm_prefs.reconciler.<count>`` counters.
_COUNTERS = (
    "seen",
    "stopped",
    "would_stop",
    "scaled_back",
    "would_scale_back",
    "kept",
    "unattributed",
    "errors",
)


def emit_metrics(summary: dict[str, Any]) -> None:
    """``sm_prefs.reconciler.<count>`` counters of one pass; a failing metrics backend fails nothing."""
    try:
        from airflow_provider_sm_prefs.compat import Stats

        tags = {"deployment": str(summary.get("deployment_id", "")), "dry_run": str(summary.get("dry_run"))}
        for name in _COUNTERS:
            Stats.incr(f"{METRICS_PREFIX}.{name}", int(summary.get(name) or 0), tags=tags)
    except Exception:
        log.warning("Could not send reconciler metrics", exc_info=True)


def _as_bool(value: Any) -> bool:
    """A templated flag: anything but an explicit false is True (a dry run is the safe reading)."""
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "0", "no")
    return bool(value)


#: Every job kind the provider submits: what a pass reconciles unless told otherwise (as the command).
EVERY_KIND: tuple[str, ...] = tuple(job_kind.value for job_kind in JobKind)


class SageMakerJobReconcilerOperator(AwsTask[SageMakerPreferenceHook]):
    """Stop the provider's running jobs whose owning task instance is gone, and scale back the HyperPod
    groups whose last scale-up outlived its task (dry run by default).

    :param aws_conn_id: the amazon provider's ``aws`` connection.
    :param region_name: AWS region (default: the connection's).
    :param verify: TLS verification, as for every amazon provider hook.
    :param botocore_config: a botocore config dict.
    :param dry_run: decide and report only (default True); False stops the jobs decided STOP. Templated:
        a rendered string counts as False only when it reads ``false``, ``0`` or ``no``.
    :param deployment_id: judge the jobs of this deployment (default: ``[sm_prefs] deployment_id`` or the
        id generated for the deployment, as the operators tag them).
    :param adopt_legacy_ids: also judge (and stop) jobs tagged with the id an earlier release derived from
        this deployment's URL. Off by default: every deployment with the same URL (all those started from
        one compose file) shares that id, so such jobs are reported only.
    :param max_calls_per_second: the limit of SageMaker calls of a pass.
    :param kinds: which job kinds (``training``, ``processing``); default every kind, as the command.
    :param hyperpod_groups: also judge the HyperPod groups whose last scale-up outlived its task, and (not
        in a dry run) scale them back to the count that task found (default True).
    """

    template_fields: Sequence[str] = ("deployment_id", "region_name", "dry_run_mode")
    aws_hook_class = SageMakerPreferenceHook

    def __init__(
        self,
        *,
        dry_run: bool | str = True,
        deployment_id: str | None = None,
        max_calls_per_second: float | None = 5.0,
        kinds: Sequence[str] = EVERY_KIND,
        adopt_legacy_ids: bool = False,
        hyperpod_groups: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # BaseOperator.dry_run is a method: the argument lives under another attribute name.
        self.dry_run_mode = dry_run
        self.deployment_id = deployment_id
        self.max_calls_per_second = max_calls_per_second
        self.kinds = [JobKind(k).value for k in kinds]  # a misspelt kind fails the DAG's import
        self.adopt_legacy_ids = adopt_legacy_ids
        self.hyperpod_groups = hyperpod_groups

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_sm_prefs.operators.identity import deployment_id, legacy_deployment_ids
        from airflow_provider_sm_prefs.reconcile import Reconciler, TaskSdkTaskStates

        reconciler = Reconciler(
            self.hook,
            TaskSdkTaskStates(context["ti"]),
            self.deployment_id or deployment_id(),
            dry_run=_as_bool(self.dry_run_mode),
            kinds=self.kinds,
            max_calls_per_second=self.max_calls_per_second,
            legacy_ids=legacy_deployment_ids(),
            adopt_legacy_ids=self.adopt_legacy_ids,
            hyperpod_groups=self.hyperpod_groups,
        )
        summary = reconciler.run().as_dict()
        emit_metrics(summary)
        return summary
