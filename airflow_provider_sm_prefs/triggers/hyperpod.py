"""The async wait for a HyperPod flexible instance group: until it reaches its target, an accepted minimum,
or fails, rolls back, or runs out of the task's wait.

Each look is one DescribeCluster on the process's shared client; elapsed time is judged on the service's
clock (the ``Date`` of each answer) against the time of the request, so a triggerer restart, a skewed
host clock or the offline SageMaker's accelerated clock cannot move a window or a deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, ClassVar

from airflow.triggers.base import TriggerEvent
from botocore.exceptions import ClientError

from airflow_provider_sm_prefs.compat import TRIGGER_ON_KILL
from airflow_provider_sm_prefs.domain.hyperpod import (
    MIN_COUNT_DEADLINE_SECONDS,
    FlexibleGroup,
    GroupPhase,
    find_group,
    group_progress,
)
from airflow_provider_sm_prefs.domain.hyperpod_event import GroupEvent
from airflow_provider_sm_prefs.domain.hyperpod_rollback import RollbackPlan, RollbackResult, plan_rollback
from airflow_provider_sm_prefs.hooks.clock import service_now
from airflow_provider_sm_prefs.hooks.hyperpod import SageMakerHyperPodHook, busy_rollback_message, is_busy
from airflow_provider_sm_prefs.hooks.pool import shared_client
from airflow_provider_sm_prefs.hooks.retry import Retry, error_code, is_transient, retry_async
from airflow_provider_sm_prefs.task_state import current_state_async
from airflow_provider_sm_prefs.triggers.dwell import hold_after_deferral
from airflow_provider_sm_prefs.triggers.kill import shielded, task_goes_on
from airflow_provider_sm_prefs.triggers.spec import SpecTrigger, TriggerSpec


@dataclass(frozen=True)
class HyperPodGroupSpec(TriggerSpec):
    """One wait of a flexible instance group, as :class:`HyperPodGroupTrigger` is given (and serializes) it.

    :param cluster_name: the HyperPod cluster.
    :param group: the group as the task asked for it (``FlexibleGroup.as_dict()``).
    :param previous_count: the group's count before the request (0 for a new group).
    :param requested_at: ISO time of the request on the service's clock.
    :param accept_after_seconds: from the request, after which ``MinInstanceCount`` running nodes are
        enough (0: at once; None: only the target ends the wait).
    :param max_pending_seconds: from the request, after which a group short of its target (and of an
        accepted minimum) ends the wait as a capacity shortfall (None: HyperPod's own three-hour rule).
    :param poll_interval: seconds between looks.
    :param rollback: scale the group back to ``previous_count`` when the wait fails (here, before the event,
        waiting for the cluster to accept the update), or when the task is marked or cleared while
        deferred (Airflow 3.3's ``on_kill``).
    :param aws: how the trigger reaches SageMaker (serialized flat, keyword only).
    :param deferred_at: when the task deferred (ISO 8601 UTC, the worker's clock).
    :param min_defer_seconds: hold the event until this long after ``deferred_at``
        (apache/airflow#72716; see :mod:`airflow_provider_sm_prefs.triggers.dwell`).
    """

    positional: ClassVar[tuple[str, ...]] = ("cluster_name", "group", "previous_count", "requested_at")

    cluster_name: str
    group: dict[str, Any]
    previous_count: int
    requested_at: str
    accept_after_seconds: float | None = None
    max_pending_seconds: float | None = None
    poll_interval: float = 30.0
    rollback: bool = True
    deferred_at: str | None = None
    min_defer_seconds: float | None = None

    def __post_init__(self) -> None:
        converted = {
            "group": dict(self.group),
            "previous_count": int(self.previous_count),
            "accept_after_seconds": _float_or_none(self.accept_after_seconds),
            "max_pending_seconds": _float_or_none(self.max_pending_seconds),
            "poll_interval": float(self.poll_interval),
        }
        for name, value in converted.items():
            object.__setattr__(self, name, value)

    @property
    def flexible_group(self) -> FlexibleGroup:
        return FlexibleGroup.from_dict(self.group)

    @property
    def name(self) -> str:
        return f"{self.cluster_name}/{self.group['group_name']}"


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


class HyperPodGroupTrigger(SpecTrigger[HyperPodGroupSpec]):
    """Wait until a flexible instance group reaches ``target_count`` nodes (or its minimum, once accepted).

    Its arguments are the fields of its :class:`HyperPodGroupSpec`: build it with
    ``HyperPodGroupTrigger.of(spec)``, or with the same names as keyword arguments.
    """

    spec_type = HyperPodGroupSpec

    def hook(self) -> SageMakerHyperPodHook:
        return SageMakerHyperPodHook(**self.settings.hook_kwargs())

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            event = await self.wait()
        except asyncio.CancelledError:
            if not TRIGGER_ON_KILL:
                await self._rollback_unless_moved(rollback_if_unknown=False)
            raise
        await hold_after_deferral(
            self.log, self.spec.name, self.spec.deferred_at, self.spec.min_defer_seconds
        )
        yield TriggerEvent(event.as_payload())  # type: ignore[no-untyped-call]

    async def wait(self) -> GroupEvent:
        """Look, and wait between looks, until a look decides; the decision.

        A failed wait first scales the group back (``rollback``): the event says how that went.
        """
        async with shared_client(self.settings.pool_key(), self.hook().get_async_conn) as client:
            while True:
                look = await self.look(client)
                decided = self.decide(look)
                if decided is not None:
                    break
                await asyncio.sleep(self.spec.poll_interval)
            if not decided.succeeded and self.spec.rollback and look.phase is not GroupPhase.GONE:
                assert look.now is not None
                decided = replace(decided, rollback=await self.roll_back(client, look.now))
            return decided

    async def look(self, client: Any) -> GroupEvent:
        """One DescribeCluster (transient errors retried, never raised) read for the group."""
        policy = Retry(attempts=None, base=min(self.spec.poll_interval, 2.0), cap=60.0)
        describe = await retry_async(
            lambda: SageMakerHyperPodHook.describe_cluster_async(client, self.spec.cluster_name),
            f"Describe {self.spec.cluster_name}",
            policy,
        )
        group = self.spec.flexible_group
        if describe is None:
            return GroupEvent(GroupPhase.GONE, None, None, 0.0, datetime.now().astimezone())
        now = service_now(describe)
        elapsed = max(0.0, (now - datetime.fromisoformat(self.spec.requested_at)).total_seconds())
        accept_minimum = (
            self.spec.accept_after_seconds is not None and elapsed >= self.spec.accept_after_seconds
        )
        phase = group_progress(
            describe, group.group_name, group.instance_count, self.spec.previous_count, accept_minimum
        )
        return GroupEvent(
            phase, find_group(describe, group.group_name), describe.get("ClusterStatus"), elapsed, now
        )

    def decide(self, look: GroupEvent) -> GroupEvent | None:
        """The event a look ends the wait with, or None to keep waiting."""
        if look.phase is not GroupPhase.WAITING:
            if look.phase is not GroupPhase.REACHED_TARGET:
                self.log.info("%s: %s", self.spec.name, look.phase.value)
            return replace(look, reason=_reason(look))
        if self.spec.max_pending_seconds is not None and look.elapsed >= self.spec.max_pending_seconds:
            current = (look.group or {}).get("CurrentCount", 0)
            return replace(
                look,
                phase=GroupPhase.SHORTFALL,
                reason=(
                    f"{current} of {self.spec.group['instance_count']} nodes after {look.elapsed:.0f} s, past "
                    f"max_pending ({self.spec.max_pending_seconds:.0f} s)"
                ),
            )
        self.log.info(
            "%s/%s: %s of %s nodes, %.0f s since the request",
            self.spec.cluster_name,
            self.spec.group["group_name"],
            (look.group or {}).get("CurrentCount", 0),
            self.spec.group["instance_count"],
            look.elapsed,
        )
        return None

    async def roll_back(self, client: Any, since: datetime) -> RollbackResult:
        """Scale the group back to ``previous_count`` once the cluster accepts an update.

        Outside Continuous mode SageMaker refuses an update while the cluster is Updating; the scale-up
        then either completes or HyperPod rolls it back itself (at most three hours), so this waits for
        the cluster to be InService, within that bound. Returns :class:`RollbackResult` ``DONE``,
        ``NOT_NEEDED`` (HyperPod put the group back already), ``REFUSED`` (the group changed since this
        task's scale-up: not the task's to scale back any more) or ``GAVE_UP``.
        """
        while True:
            describe = await SageMakerHyperPodHook.describe_cluster_async(client, self.spec.cluster_name)
            plan = self._plan(describe)
            if plan.specification is None:
                return plan.result or RollbackResult.NOT_NEEDED
            if (
                describe
                and (service_now(describe) - since).total_seconds() > MIN_COUNT_DEADLINE_SECONDS + 3600
            ):
                self.log.error(
                    "%s: the cluster never accepted the rollback to %d nodes",
                    self.spec.name,
                    self.spec.previous_count,
                )
                return RollbackResult.GAVE_UP
            try:
                await client.update_cluster(
                    ClusterName=self.spec.cluster_name, InstanceGroups=[plan.specification]
                )
            except ClientError as err:
                if not (is_busy(err) or is_transient(err)):
                    raise
                self.log.info(
                    "%s: waiting for the cluster to accept the rollback (%s)", self.spec.name, error_code(err)
                )
                await asyncio.sleep(self.spec.poll_interval)
                continue
            self.log.warning("%s: scaled back to %d nodes", self.spec.name, self.spec.previous_count)
            return RollbackResult.DONE

    def _plan(self, describe: Mapping[str, Any] | None) -> RollbackPlan:
        """The rollback to send now (:func:`plan_rollback`); a refusal is logged."""
        plan = plan_rollback(
            describe,
            self.spec.group["group_name"],
            self.spec.flexible_group.instance_count,
            self.spec.previous_count,
        )
        if plan.result is RollbackResult.REFUSED:
            self.log.error("%s: not rolled back: %s", self.spec.name, plan.reason)
        return plan

    async def on_kill(self) -> None:
        """The deferred task was marked or cleared: roll the scale-up back unless the task goes on."""
        await self._rollback_unless_moved(rollback_if_unknown=True)

    async def _rollback_unless_moved(self, rollback_if_unknown: bool) -> None:
        """Roll back unless the task goes on (:func:`.kill.task_goes_on`); the state is read inside the
        shield, so a repeated cancellation cannot cut the kill path between the read and the update."""
        if self.spec.rollback:
            await shielded(self._rollback_if_ended(rollback_if_unknown))

    async def _rollback_if_ended(self, rollback_if_unknown: bool) -> None:
        state = await current_state_async(getattr(self, "task_instance", None))
        if task_goes_on(state, rollback_if_unknown):
            self.log.info(
                "Trigger of %s cancelled while its task is %s: the scale-up is left to the task",
                self.spec.name,
                state or "in an unreadable state",
            )
            return
        await self._roll_back_once()

    async def _roll_back_once(self) -> None:
        """One try (a kill path is bounded): a busy cluster is left to HyperPod's own rollback, and said so."""
        async with shared_client(self.settings.pool_key(), self.hook().get_async_conn) as client:
            plan = self._plan(
                await SageMakerHyperPodHook.describe_cluster_async(client, self.spec.cluster_name)
            )
            if plan.specification is None:
                return
            try:
                await client.update_cluster(
                    ClusterName=self.spec.cluster_name, InstanceGroups=[plan.specification]
                )
            except ClientError as err:
                if not is_busy(err):
                    raise
                self.log.error("%s: %s", self.spec.name, busy_rollback_message(self.spec.previous_count))
                return
        self.log.info(
            "Scaled %s back to %d nodes: its task was marked or cleared",
            self.spec.name,
            self.spec.previous_count,
        )


def _reason(look: GroupEvent) -> str | None:
    if look.phase is GroupPhase.ROLLED_BACK:
        return "HyperPod rolled the group back to its previous settings (MinInstanceCount not met in time?)"
    if look.phase is GroupPhase.FAILED:
        return f"the cluster is {look.cluster_status}, the group {(look.group or {}).get('Status')}"
    if look.phase is GroupPhase.GONE:
        return "the cluster or the group no longer exists"
    return None
