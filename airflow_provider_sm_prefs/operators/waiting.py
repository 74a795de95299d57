"""How an operator waits for its job: the capacity trigger it defers to, or runs in the worker.

The same :class:`~airflow_provider_sm_prefs.triggers.capacity.SageMakerCapacityTrigger` serves both ways
of waiting: in the triggerer (deferrable; the task looks once before deferring, since a reattached or fast
job may already be past the wait) or here, in the worker, until its one event. With acceptance windows
the trigger also ends the wait when the current stage's window closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_sm_prefs.domain.events import event_from_describe
from airflow_provider_sm_prefs.domain.identity import OwnerClaim
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.domain.status import WaitFor, is_done, phase_of
from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings, service_now
from airflow_provider_sm_prefs.operators.windows import AcceptanceWindows
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger, creation_time_of
from airflow_provider_sm_prefs.triggers.capacity_spec import CapacityWaitSpec
from airflow_provider_sm_prefs.triggers.dwell import deferral

__all__ = ["CapacityWait", "TriggerSettings", "Wait"]


@dataclass(frozen=True)
class TriggerSettings:
    """The operator's arguments every capacity trigger of the task carries (rendered).

    :param poll_interval: seconds between status checks at first.
    :param max_poll_interval: cap of the growing cadence (None: fixed).
    :param stop_job_on_kill: the trigger stops the job when the task is killed.
    :param min_defer_seconds: the operator's ``min_defer_seconds`` (None: the configured default).
    :param aws: how the task reaches SageMaker.
    """

    poll_interval: float
    max_poll_interval: float | None
    stop_job_on_kill: bool
    min_defer_seconds: float | None
    aws: AwsSettings


@dataclass(frozen=True)
class Wait:
    """One wait of a task: on which job, for what, against which list, bounded how.

    :param job_name: the job waited on.
    :param wait_for: capacity or the job's end.
    :param prefs: the list the job was submitted with (with windows: the whole list).
    :param deadline: the capacity wait's client-side deadline in seconds (None: none).
    :param claim: what proves the job the task's own, for the trigger's stops (None: nothing).
    """

    job_name: str
    wait_for: WaitFor
    prefs: InstancePreferenceList
    deadline: float | None
    claim: OwnerClaim | None = None


class CapacityWait:
    """The waits of one task: for capacity (bounded by a deadline, in stages with windows) and for the
    job's end.

    :param job_kind: the kind of job.
    :param hook: the SageMaker hook of the task (the look before deferring).
    :param settings: what every trigger of the task carries.
    """

    def __init__(self, job_kind: JobKind, hook: Any, settings: TriggerSettings) -> None:
        self.job_kind = job_kind
        self.hook = hook
        self.settings = settings

    def look(
        self, wait: Wait, windows: AcceptanceWindows
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """One Describe before deferring: ``(event, describe)``, the event when the job is already past
        the wait (else None: defer, and the trigger starts from this look's CreationTime)."""
        kind = self.job_kind
        describe = self.hook.describe_job(kind, wait.job_name)
        windows.note_origin(describe)
        phase = phase_of(kind, describe) if describe is not None else None
        if describe is None or phase is None or not is_done(phase, wait.wait_for):
            return None, describe
        event = event_from_describe(
            kind, wait.wait_for, describe, phase, wait.prefs, now=service_now(describe)
        )
        return event.as_payload(), describe

    def run_here(self, wait: Wait, windows: AcceptanceWindows) -> dict[str, Any]:
        """Run the trigger in this process until its one event (a task that does not defer)."""
        describe = None
        if windows.state is not None and wait.wait_for is WaitFor.CAPACITY:
            describe = self.hook.describe_job(self.job_kind, wait.job_name)
            windows.note_origin(describe)
        return asyncio.run(_first_event(self.trigger(wait, windows, describe)))

    def trigger(
        self,
        wait: Wait,
        windows: AcceptanceWindows,
        describe: Mapping[str, Any] | None = None,
        deferring: bool = False,
        finish: dict[str, Any] | None = None,
    ) -> SageMakerCapacityTrigger:
        """The trigger of a wait; with acceptance windows, the capacity wait's timers are the stage's.

        :param finish: the plan to end the task in the triggerer (``FinishPlan.as_dict()``), if any.
        """
        capacity = wait.wait_for is WaitFor.CAPACITY
        window_closes_after, deadline = None, wait.deadline
        if windows.state is not None and capacity:
            window_closes_after, deadline = windows.state.timers(self.job_kind, describe)
        settings = self.settings
        spec = CapacityWaitSpec(
            job_name=wait.job_name,
            job_kind=self.job_kind.value,
            wait_for=wait.wait_for.value,
            preferences=wait.prefs.as_list(),
            poll_interval=settings.poll_interval,
            max_poll_interval=settings.max_poll_interval,
            deadline_seconds=deadline if capacity else None,
            stop_on_deadline=True,
            stop_job_on_kill=settings.stop_job_on_kill,
            aws=settings.aws,
            creation_time=creation_time_of(describe),
            window_closes_after_seconds=window_closes_after,
            finish=finish,
            owner=wait.claim.as_dict() if wait.claim is not None else None,
            **deferral(deferring, settings.min_defer_seconds),
        )
        return SageMakerCapacityTrigger.of(spec)


async def _first_event(trigger: SageMakerCapacityTrigger) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise RuntimeError("the capacity trigger ended without an event")
