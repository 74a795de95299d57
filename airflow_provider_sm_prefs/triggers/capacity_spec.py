"""What a capacity wait is given: :class:`CapacityWaitSpec`, the arguments of
:class:`~airflow_provider_sm_prefs.triggers.capacity.SageMakerCapacityTrigger`, declared once.

The operators (:mod:`airflow_provider_sm_prefs.operators.waiting`) and the sensor build one; the trigger
serializes it and is rebuilt from it (:mod:`airflow_provider_sm_prefs.triggers.spec`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_provider_sm_prefs.domain.identity import OwnerClaim
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.status import WaitFor
from airflow_provider_sm_prefs.triggers.spec import TriggerSpec

__all__ = ["CapacityWaitSpec"]


def _seconds(value: Any) -> float | None:
    """A duration argument: None (and 0, which earlier releases treated as unset) is no duration."""
    return float(value) if value else None


@dataclass(frozen=True)
class CapacityWaitSpec(TriggerSpec):
    """One wait of a SageMaker job: for capacity (leaving Pending) or for its end.

    :param job_name: SageMaker job name.
    :param job_kind: ``training`` or ``processing``.
    :param wait_for: ``capacity`` (leave Pending) or ``completion`` (terminal status).
    :param preferences: the submitted list (``InstancePreferenceList.as_list()``), for rank and logs.
    :param poll_interval: seconds between Describe calls at first.
    :param max_poll_interval: the cadence grows by 1.5× per poll up to this while nothing changes
        (defaults to ``poll_interval``: a fixed cadence).
    :param deadline_seconds: client-side capacity deadline from CreationTime; when it passes with no
        entry selected the job is stopped (if ``stop_on_deadline``) and a capacity-timeout error is
        yielded. Used where SageMaker enforces none (processing, CPU-only lists).
    :param stop_on_deadline: stop the job when the client-side deadline passes.
    :param stop_job_on_kill: stop the job when the deferred task is marked failed/success or cleared.
    :param shared_poll: learn about changes from one paginated List* loop shared by every trigger of
        this process (same connection and region) instead of one Describe per job per poll; the job
        is Described only when its summary changed (and every hour as a safety net). Falls back
        to per-job polling if listing is not permitted. Not used for processing capacity waits: a
        processing summary does not show a selected entry.
    :param aws: the connection, region, TLS verification and botocore config (serialized flat as
        ``aws_conn_id``, ``region_name``, ``verify`` and ``botocore_config``; the region is kept across
        deferral, never re-derived). Keyword only.
    :param creation_time: the job's CreationTime (ISO 8601) from the deferring task's last Describe.
        With it, a shared-poll wait starts from the shared List loop instead of Describing the job
        again; without it the trigger Describes the job first.
    :param window_closes_after_seconds: seconds from CreationTime (service clock) when the job's
        acceptance window closes: a job still Pending then ends the wait with a window-closed event
        (:attr:`~airflow_provider_sm_prefs.domain.events.EventStatus.WINDOW_CLOSED`), and the task
        submits its next stage (see :mod:`airflow_provider_sm_prefs.domain.windows`). The job is
        not stopped here: the task looks once more right before stopping it. Rows of earlier releases
        call it ``escalate_after_seconds`` (read, never written; passing both is an error).
    :param deferred_at: when the task deferred (ISO 8601 UTC, the worker's clock).
    :param min_defer_seconds: yield no event sooner than this many seconds after ``deferred_at``: a job
        that leaves Pending right after the deferral is reported a few seconds later instead of
        racing Airflow's scheduler, which fails a task resumed before it has processed the worker's
        exit from the deferral (apache/airflow#72716). An event that ends the task (``finish``) is not
        held: that race is only for a task the scheduler finds scheduled, queued or running again. A
        wait longer than this is not delayed at all; without ``deferred_at`` (a trigger serialized by
        an earlier release) nothing is held.
    :param finish: a :class:`~airflow_provider_sm_prefs.triggers.finish.FinishPlan` (``as_dict()``): end
        the task here when the wait is over (push its XComs and record, send the metrics, write the job's
        log lines) instead of resuming it in a worker; None (rows of earlier releases too): resume it.
    :param owner: what proves the job the task's own (``OwnerClaim.as_dict()``): the deadline and kill
        stops read the job's tags right before ``Stop*`` and stop only a job they prove ours. None (a sensor
        watching another's job, or a row of an earlier release): nothing is proved, so nothing is stopped.
    """

    renamed: ClassVar[dict[str, str]] = {"escalate_after_seconds": "window_closes_after_seconds"}
    positional: ClassVar[tuple[str, ...]] = (
        "job_name",
        "job_kind",
        "wait_for",
        "preferences",
        "poll_interval",
    )

    job_name: str
    job_kind: str = JobKind.TRAINING.value
    wait_for: str = WaitFor.CAPACITY.value
    preferences: list[dict[str, Any]] = field(default_factory=list)
    poll_interval: float = 30.0
    max_poll_interval: float | None = None
    deadline_seconds: float | None = None
    stop_on_deadline: bool = True
    stop_job_on_kill: bool = True
    shared_poll: bool = True
    creation_time: str | None = None
    window_closes_after_seconds: float | None = None
    deferred_at: str | None = None
    min_defer_seconds: float | None = None
    finish: dict[str, Any] | None = None
    owner: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        converted = {
            "job_kind": JobKind(self.job_kind).value,
            "wait_for": WaitFor(self.wait_for).value,
            "preferences": list(self.preferences or []),
            "poll_interval": float(self.poll_interval),
            "max_poll_interval": _seconds(self.max_poll_interval),
            "deadline_seconds": _seconds(self.deadline_seconds),
            "window_closes_after_seconds": (
                None if self.window_closes_after_seconds is None else float(self.window_closes_after_seconds)
            ),
            "min_defer_seconds": _seconds(self.min_defer_seconds),
            "finish": dict(self.finish) if self.finish else None,
            "owner": dict(self.owner) if self.owner else None,
        }
        for name, value in converted.items():
            object.__setattr__(self, name, value)

    @property
    def kind(self) -> JobKind:
        return JobKind(self.job_kind)

    @property
    def waits_for(self) -> WaitFor:
        return WaitFor(self.wait_for)

    @property
    def claim(self) -> OwnerClaim:
        """What proves the job the task's own (:attr:`owner`)."""
        return OwnerClaim.from_dict(self.owner)

    def timer(self) -> float | None:
        """The nearest timer while waiting (seconds from CreationTime): the client deadline or the window."""
        timers = [t for t in (self.deadline_seconds, self.window_closes_after_seconds) if t is not None]
        return min(timers) if timers else None
