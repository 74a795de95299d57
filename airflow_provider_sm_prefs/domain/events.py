"""What a capacity wait reports: one typed event, shared by the trigger, the operators and the sensor.

A wait ends in exactly one :class:`CapacityEvent`: success with the outcome record, or an error that
names the domain exception it stands for. The trigger sends it as a JSON-safe payload
(:meth:`CapacityEvent.as_payload`); the task reads it back (:meth:`CapacityEvent.from_payload`) and
either takes the outcome or raises the exception (:meth:`CapacityEvent.outcome_or_raise`). An event can
also be built straight from a Describe response (:func:`event_from_describe`), so a task that finds its
job already past the wait does not defer at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import (
    CapacityOutcome,
    capacity_deadline_error,
    format_duration,
    outcome_from_describe,
    terminal_error,
)
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.domain.status import JobSnapshot, Phase, WaitFor

__all__ = [
    "CapacityEvent",
    "DeadlinePassed",
    "EventStatus",
    "deadline_event",
    "deadline_passed",
    "event_from_describe",
]

#: The domain exceptions an error event may stand for, by class name (the payload's ``error_type``).
ERROR_TYPES: dict[str, type[errors.SageMakerJobError]] = {
    cls.__name__: cls
    for cls in (
        errors.CapacityTimeoutError,
        errors.CapacityUnavailableError,
        errors.JobFailedError,
        errors.JobStoppedError,
        errors.QuotaExceededError,
        errors.JobSubmissionError,
    )
}


class EventStatus(str, Enum):
    """What a capacity event reports. The values are the stored and wire form (trigger payloads, rows
    of deferred tasks): they never change, whatever the members are called."""

    SUCCESS = "success"
    ERROR = "error"
    #: The job is still Pending when its acceptance window closed: the task submits its next stage.
    #: The value predates the name: events and payloads stored by earlier releases carry it.
    WINDOW_CLOSED = "escalate"
    #: The earlier name of :attr:`WINDOW_CLOSED` (an alias: the same member).
    ESCALATE = "escalate"


@dataclass(frozen=True)
class CapacityEvent:
    """The one event of a capacity wait. Its payload keys are stable across releases.

    :param status: success (``outcome`` set), error (``error_type`` and ``reason`` set), or window
        closed (the job is still Pending when its acceptance window closed and the next one opened;
        ``reason`` says how long).
    :param phase: the job's :class:`~airflow_provider_sm_prefs.domain.status.Phase` when the wait ended.
    :param outcome: :meth:`CapacityOutcome.as_dict` on success.
    :param error_type: the class name of the domain exception on error (see :data:`ERROR_TYPES`).
    :param job_status: the job's TrainingJobStatus/ProcessingJobStatus when known.
    :param reason: AWS's reason, or ours.
    """

    status: EventStatus
    job_name: str
    job_kind: str
    wait_for: str
    phase: str
    outcome: dict[str, Any] | None = None
    error_type: str | None = None
    job_status: str | None = None
    reason: str | None = None

    @classmethod
    def _of(
        cls,
        status: EventStatus,
        kind: JobKind,
        job_name: str,
        job_status: str | None,
        wait_for: WaitFor | str,
        phase: Phase,
        *,
        outcome: dict[str, Any] | None = None,
        error_type: str | None = None,
        reason: str | None = None,
    ) -> CapacityEvent:
        """The one place an event is built: the enums stored as the payload carries them."""
        return cls(
            status=status,
            job_name=job_name,
            job_kind=kind.value,
            wait_for=WaitFor(wait_for).value,
            phase=phase.value,
            outcome=outcome,
            error_type=error_type,
            job_status=job_status,
            reason=reason,
        )

    @classmethod
    def success(
        cls, kind: JobKind, wait_for: WaitFor | str, phase: Phase, outcome: CapacityOutcome
    ) -> CapacityEvent:
        return cls._of(
            EventStatus.SUCCESS,
            kind,
            outcome.job_name,
            outcome.job_status,
            wait_for,
            phase,
            outcome=outcome.as_dict(),
        )

    @classmethod
    def failure(
        cls, kind: JobKind, wait_for: WaitFor | str, phase: Phase, error: errors.SageMakerJobError
    ) -> CapacityEvent:
        return cls._of(
            EventStatus.ERROR,
            kind,
            error.job_name,
            error.status,
            wait_for,
            phase,
            error_type=type(error).__name__,
            reason=error.reason,
        )

    @classmethod
    def window_closed(
        cls, kind: JobKind, job_name: str, job_status: str | None, waited: float
    ) -> CapacityEvent:
        """The job is still Pending after ``waited`` seconds, when its acceptance window closed."""
        return cls._of(
            EventStatus.WINDOW_CLOSED,
            kind,
            job_name,
            job_status,
            WaitFor.CAPACITY,
            Phase.WAITING,
            reason=f"still pending after {format_duration(waited)}; the next acceptance window is open",
        )

    #: The earlier name of :meth:`window_closed`.
    escalation = window_closed

    def as_payload(self) -> dict[str, Any]:
        """The JSON-safe dict a ``TriggerEvent`` carries."""
        payload = asdict(self)
        payload["status"] = self.status.value
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any] | None, job_name: str = "?") -> CapacityEvent:
        """Read a payload back; anything malformed becomes an error event that says what arrived."""
        if not isinstance(payload, Mapping) or payload.get("status") not in {s.value for s in EventStatus}:
            return cls._of(
                EventStatus.ERROR,
                JobKind.TRAINING,
                job_name,
                None,
                WaitFor.CAPACITY,
                Phase.FAILED,
                error_type=errors.JobFailedError.__name__,
                reason=f"unexpected trigger event {payload!r}",
            )
        fields: dict[str, Any] = {k: payload.get(k) for k in cls.__dataclass_fields__ if k != "status"}
        fields["job_name"] = str(fields.get("job_name") or job_name)
        return cls(status=EventStatus(payload["status"]), **fields)

    def error(self) -> errors.SageMakerJobError:
        """The domain exception an error event stands for (JobFailedError for an unknown type)."""
        cls = ERROR_TYPES.get(str(self.error_type), errors.JobFailedError)
        if cls is errors.QuotaExceededError:
            return errors.QuotaExceededError(self.job_name, str(self.reason))
        return cls(self.job_name, self.job_status, self.reason)

    def outcome_or_raise(self) -> CapacityOutcome:
        """The outcome of a success; raises the domain exception of anything else."""
        if self.status is not EventStatus.SUCCESS or not self.outcome:
            raise self.error()
        return CapacityOutcome.from_dict(self.outcome)

    @property
    def job_ended(self) -> bool:
        return Phase(self.phase).is_terminal()


def event_from_describe(
    kind: JobKind,
    wait_for: WaitFor | str,
    describe: Mapping[str, Any],
    phase: Phase,
    preferences: InstancePreferenceList | None = None,
    now: datetime | None = None,
) -> CapacityEvent:
    """The event of a wait that is over (``is_done(phase, wait_for)``), from the Describe that showed it."""
    error = terminal_error(kind, describe, now=now)
    if error is not None:
        return CapacityEvent.failure(kind, wait_for, phase, error)
    return CapacityEvent.success(
        kind, wait_for, phase, outcome_from_describe(kind, describe, preferences, now=now)
    )


@dataclass(frozen=True)
class DeadlinePassed:
    """A client-side ``max_pending`` passed with no entry selected: how the wait ends.

    :param event: the capacity-timeout error event that ends the wait.
    :param stop_job: the waiter stops the job before it reports the event.
    """

    event: CapacityEvent
    stop_job: bool


def deadline_passed(
    job: JobSnapshot,
    wait_for: WaitFor | str,
    job_name: str,
    deadline_seconds: float | None,
    stop_job: bool,
) -> DeadlinePassed | None:
    """The deadline step of every wait: None until a client-side ``max_pending`` has passed.

    The trigger's (deferred, and the operators' in-worker wait, which runs the trigger) and the sensor's
    poke all take it: the same rule, the same event, and the stop decided once with the message that
    says whether the job was stopped. ``stop_job``: the waiter's setting to stop the job on it.
    """
    waited = job.timer_passed(deadline_seconds)
    if waited is None:
        return None
    error = capacity_deadline_error(job_name, job.status, deadline_seconds or 0.0, waited, stopped=stop_job)
    return DeadlinePassed(CapacityEvent.failure(job.kind, wait_for, Phase.STOPPING, error), stop_job)


def deadline_event(
    kind: JobKind,
    wait_for: WaitFor | str,
    job_name: str,
    describe: Mapping[str, Any],
    phase: Phase,
    now: datetime,
    deadline_seconds: float | None,
    stopped: bool,
) -> CapacityEvent | None:
    """The event of :func:`deadline_passed`, in the form of earlier releases (still importable)."""
    passed = deadline_passed(
        JobSnapshot(kind, describe, phase, now), wait_for, job_name, deadline_seconds, stopped
    )
    return None if passed is None else passed.event
