"""A deferrable sensor for a HyperPod flexible instance group scaled elsewhere: wait for its count, push the mix."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from functools import cached_property
from typing import Any

from airflow.sdk import Context

from airflow_provider_sm_prefs.compat import AirflowSensorTimeout, AirflowSkipException
from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.hyperpod import (
    FlexibleGroup,
    find_group,
    listed_types,
    pending_bound,
    provisions_continuously,
)
from airflow_provider_sm_prefs.domain.hyperpod_event import GroupEvent
from airflow_provider_sm_prefs.domain.hyperpod_outcome import group_outcome, request_fields
from airflow_provider_sm_prefs.domain.kinds import GROUP_KIND
from airflow_provider_sm_prefs.hooks.clock import service_now
from airflow_provider_sm_prefs.hooks.hyperpod import SageMakerHyperPodHook
from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings
from airflow_provider_sm_prefs.operators.hyperpod import OUTCOME_KEY, seconds_of
from airflow_provider_sm_prefs.recording import CapacityRecorder, TryProgress
from airflow_provider_sm_prefs.sensors.base import SageMakerBaseSensor
from airflow_provider_sm_prefs.triggers.dwell import deferral
from airflow_provider_sm_prefs.triggers.hyperpod import HyperPodGroupSpec, HyperPodGroupTrigger


class SageMakerHyperPodGroupSensor(SageMakerBaseSensor[SageMakerHyperPodHook]):
    """Wait until a flexible instance group someone else scaled runs its target count (or its minimum).

    Pushes the same outcome as :class:`~airflow_provider_sm_prefs.operators.hyperpod.SageMakerHyperPodGroupOperator`
    (XCom ``hyperpod_outcome`` and the return value) and never changes the group: it belongs to someone else.

    :param cluster_name: the HyperPod cluster (templated).
    :param group_name: the instance group (templated).
    :param target_count: the count to wait for; None: the group's own ``TargetCount`` when first seen.
    :param accept_minimum: end the wait once the group is InService at its ``MinInstanceCount``.
    :param max_pending: fail as a capacity shortfall this long (seconds or timedelta) after the sensor first
        looked, if the group is still short. None: no bound of its own, except on a cluster in
        ``NodeProvisioningMode: Continuous``, where HyperPod never gives up and three hours apply (logged).
    :param poll_interval: seconds between DescribeCluster calls.

    ``deferrable``, ``min_defer_seconds`` and the AWS connection arguments are every sensor's
    (:class:`~airflow_provider_sm_prefs.sensors.base.SageMakerBaseSensor`).

    Of ``BaseSensorOperator``'s own arguments: ``timeout`` bounds the whole wait (the deferral's timeout,
    or the worker's wait with ``deferrable=False``): past it the task fails with ``AirflowSensorTimeout``;
    ``soft_fail`` (and ``never_fail``) skip the task instead of failing it, on a timeout and on a failed
    wait (a shortfall, a rollback, a failed or missing group). ``mode="reschedule"`` is refused: one wait
    keeps its start and its state from look to look; ``deferrable=True`` (the default) frees the worker
    slot as rescheduling would. ``poke_interval`` is ``poll_interval``'s.
    """

    template_fields: Sequence[str] = ("cluster_name", "group_name", "target_count")
    ui_color = "#e6f4ea"
    aws_hook_class = SageMakerHyperPodHook

    def __init__(
        self,
        *,
        cluster_name: str,
        group_name: str,
        target_count: int | None = None,
        accept_minimum: bool = False,
        max_pending: float | timedelta | None = None,
        poll_interval: float = 30.0,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        super().__init__(poll_interval=poll_interval, **kwargs)
        if self.mode == "reschedule":
            raise ValueError(
                f"{self.task_id}: mode='reschedule' is not supported by SageMakerHyperPodGroupSensor: its wait "
                f"keeps its start and state between looks. Use deferrable=True (the default), which frees the "
                f"worker slot while it waits, or mode='poke' with deferrable=False"
            )
        self.cluster_name = cluster_name
        self.group_name = group_name
        self.target_count = target_count
        self.accept_minimum = accept_minimum
        self.max_pending = max_pending
        self._max_pending = seconds_of(max_pending, "max_pending")

    @cached_property
    def recorder(self) -> CapacityRecorder:
        """Leaves this try's capacity record: the group's outcome, or why the try failed."""
        return CapacityRecorder(lambda: GROUP_KIND, lambda: self.hook.conn_region_name, self.log)

    def execute(self, context: Context) -> Any:
        progress = TryProgress(group=request_fields(self.cluster_name, self.group_name))
        with self._skip_if_soft(), self.recorder.failures(context, progress):
            event, group = self._watch(context, progress)
        return self.execute_complete(context, event, group=group)

    @contextmanager
    def _skip_if_soft(self) -> Iterator[None]:
        """A failed wait or a timeout skips the task under ``soft_fail``/``never_fail``, as Airflow's own
        sensors do (the failure is recorded first)."""
        try:
            yield
        except (errors.SageMakerPreferencesError, AirflowSensorTimeout) as err:
            if self.soft_fail or getattr(self, "never_fail", False):
                raise AirflowSkipException(f"Skipping (soft_fail): {err}") from err
            raise

    def _timeout(self) -> timedelta | None:
        """The sensor's ``timeout`` as the wait's bound (None: none)."""
        seconds = float(self.timeout) if self.timeout is not None else None
        return timedelta(seconds=seconds) if seconds is not None and seconds < float("inf") else None

    def _pending_bound(self, cluster: Mapping[str, Any]) -> float | None:
        """``max_pending``, or three hours on a cluster in Continuous mode when none was given: HyperPod then
        never gives up on a group short of its target, and this wait would not either (said in the log)."""
        bound = pending_bound(self._max_pending, provisions_continuously(cluster))
        if bound != self._max_pending:
            self.log.warning(
                "%s has NodeProvisioningMode Continuous, where HyperPod retries without end: without "
                "max_pending the watch of %s ends after %.0f s as a capacity shortfall; set max_pending to "
                "choose the bound",
                self.cluster_name,
                self.group_name,
                bound,
            )
        return bound

    def _watch(self, context: Context, progress: TryProgress) -> tuple[dict[str, Any], dict[str, Any]]:
        cluster = self.hook.describe_cluster(self.cluster_name)
        details = find_group(cluster, self.group_name) if cluster is not None else None
        if cluster is None or details is None:
            raise errors.ClusterConfigError(
                self.cluster_name, self.group_name, "NotFound", "no such cluster or instance group to watch"
            )
        types = listed_types(details)
        target = int(self.target_count if self.target_count is not None else details.get("TargetCount") or 0)
        group = FlexibleGroup(
            group_name=self.group_name,
            instance_types=types,
            instance_count=target,
            min_instance_count=details.get("MinCount"),
        )
        progress.group = request_fields(self.cluster_name, self.group_name, group)
        spec = HyperPodGroupSpec(
            cluster_name=self.cluster_name,
            group=group.as_dict(),
            previous_count=-1,  # not this task's request: a rollback shows as a shortfall, never undone here
            requested_at=service_now(cluster).isoformat(),
            accept_after_seconds=0.0 if self.accept_minimum else None,
            max_pending_seconds=self._pending_bound(cluster),
            poll_interval=self.poll_interval,
            rollback=False,
            aws=AwsSettings.of(self),
            **deferral(self.deferrable, self.min_defer_seconds),
        )
        trigger = HyperPodGroupTrigger.of(spec)
        timeout = self._timeout()
        if self.deferrable:
            self.defer(
                trigger=trigger,
                method_name="execute_complete",
                kwargs={"group": group.as_dict()},
                timeout=timeout,
            )
        try:
            ended = asyncio.run(
                asyncio.wait_for(trigger.wait(), timeout.total_seconds() if timeout is not None else None)
            )
        except asyncio.TimeoutError as err:
            raise AirflowSensorTimeout(
                f"{self.cluster_name}/{self.group_name}: not ready within the sensor's timeout ({self.timeout} s)"
            ) from err
        return ended.as_payload(), group.as_dict()

    def execute_complete(
        self, context: Context, event: dict[str, Any] | None = None, group: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        progress = TryProgress(group=request_fields(self.cluster_name, self.group_name))
        with self._skip_if_soft(), self.recorder.failures(context, progress):
            return self._complete(context, event or {}, group, progress)

    def _complete(
        self, context: Context, event: dict[str, Any], group: dict[str, Any] | None, progress: TryProgress
    ) -> dict[str, Any]:
        ended = GroupEvent.from_payload(event)
        details = ended.group or {}
        if group is None:
            types = listed_types(details)
            target = self.target_count if self.target_count is not None else details.get("TargetCount") or 0
            group = FlexibleGroup(self.group_name, types, int(target)).as_dict()
        flexible = FlexibleGroup.from_dict(group)
        progress.group = request_fields(self.cluster_name, self.group_name, flexible)
        if not ended.succeeded:
            raise ended.error(self.cluster_name, self.group_name)
        outcome = group_outcome(self.cluster_name, flexible, details, ended.phase, None, ended.now)
        self.log.info("Instance group ready: %s", outcome.summary())
        context["ti"].xcom_push(key=OUTCOME_KEY, value=outcome.as_dict())
        self.recorder.record(context, outcome)
        return outcome.as_dict()
