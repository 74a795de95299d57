"""Where a SageMaker job stands, read from a Describe response *or* a List summary (pure).

One answer for everyone who waits: the operator before deferring, the trigger after each look, the
sensor's poke and the shared List loop all ask :func:`phase_of` and :func:`is_done` here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.domain.kinds import JobKind


class JobStatus(str, Enum):
    """TrainingJobStatus / ProcessingJobStatus (processing has no Deleting)."""

    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    DELETING = "Deleting"

    def is_terminal(self) -> bool:
        return self in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.STOPPED, JobStatus.DELETING)


#: Secondary statuses during which no instance has been provisioned for the job yet.
WAITING_SECONDARY = frozenset({"Starting", "Pending"})


class Phase(str, Enum):
    """Where a job stands, as far as capacity is concerned."""

    WAITING = "waiting"  # no entry selected yet (Starting/Pending, or processing without Selected*)
    RUNNING = "running"  # an entry was selected; the job is running
    STOPPING = "stopping"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"

    def is_terminal(self) -> bool:
        return self in (Phase.COMPLETED, Phase.FAILED, Phase.STOPPED)


class WaitFor(str, Enum):
    """What a wait waits for."""

    CAPACITY = "capacity"  # an entry was selected (or the job already ended)
    COMPLETION = "completion"  # the job reached a terminal status


_PHASE_OF_STATUS = {
    JobStatus.COMPLETED: Phase.COMPLETED,
    JobStatus.FAILED: Phase.FAILED,
    JobStatus.STOPPED: Phase.STOPPED,
    JobStatus.DELETING: Phase.STOPPED,
    JobStatus.STOPPING: Phase.STOPPING,
}


def cluster_of(kind: JobKind, describe: Mapping[str, Any]) -> Mapping[str, Any]:
    """ResourceConfig (training) or ProcessingResources.ClusterConfig (processing) of a Describe response."""
    return kind.spec.cluster_of(describe)


def job_status(kind: JobKind, response: Mapping[str, Any]) -> JobStatus:
    """The job's status in a Describe response or a List summary."""
    return JobStatus(response[kind.spec.status_field])


def selected(kind: JobKind, describe: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """``(SelectedInstanceType, SelectedInstanceCount)``; both None while no entry is selected."""
    cluster = cluster_of(kind, describe)
    return cluster.get("SelectedInstanceType"), cluster.get("SelectedInstanceCount")


def phase_of(kind: JobKind, response: Mapping[str, Any]) -> Phase:
    """Derive the capacity phase from a Describe response or a List summary.

    Training leaves WAITING when SageMaker reports a selected entry or a secondary status past
    Starting/Pending (both in Describe; a summary carries the secondary status). Processing has no
    secondary status: the only documented sign of a selection is ``SelectedInstanceType``, which only
    Describe shows — a processing summary reads WAITING until the job ends.
    """
    status = job_status(kind, response)
    terminal = _PHASE_OF_STATUS.get(status)
    if terminal is not None:
        return terminal
    instance_type, _ = selected(kind, response)
    if instance_type:
        return Phase.RUNNING
    if kind.spec.secondary_status:
        secondary = response.get("SecondaryStatus")
        if secondary and secondary not in WAITING_SECONDARY:
            return Phase.RUNNING
    return Phase.WAITING


def is_done(phase: Phase, wait_for: WaitFor | str) -> bool:
    """Whether a wait for ``wait_for`` is over in ``phase``: the job ended, or (for capacity) it runs."""
    if phase.is_terminal():
        return True
    return WaitFor(wait_for) is WaitFor.CAPACITY and phase is Phase.RUNNING


def worth_a_look(phase: Phase, wait_for: WaitFor | str) -> bool:
    """Whether a List summary in ``phase`` shows a change that a Describe should confirm.

    For capacity: anything but WAITING (a stopping job too, so its end is reported without delay).
    For completion: a terminal status.
    """
    if WaitFor(wait_for) is WaitFor.CAPACITY:
        return phase is not Phase.WAITING
    return phase.is_terminal()


def as_datetime(value: Any) -> datetime | None:
    """A timestamp as botocore or JSON carries it (datetime, epoch seconds, ISO 8601), timezone-aware."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, tz=timezone.utc)
    if isinstance(value, str):
        return from_iso(value)
    raise TypeError(f"not a timestamp: {value!r}")


# The time of day in an ISO 8601 date and time (after ``YYYY-MM-DD`` and the separator).
_TIME = re.compile(r"(\d\d(?::\d\d(?::\d\d)?)?)(?:[.,](\d+))?([Zz]|[+-]\d\d(?::?\d\d)?)?")


def from_iso(text: str) -> datetime:
    """An ISO 8601 date and time as AWS, browsers and JSON write it, read alike on every supported Python.

    Python 3.10's ``datetime.fromisoformat`` reads only what ``isoformat()`` writes; 3.11 added ``Z``,
    fractions of any length and offsets without a colon. Those are rewritten to the 3.10 form first (the
    fraction cut or padded to microseconds). Anything else is left to ``fromisoformat`` (ValueError).
    """
    time = _TIME.fullmatch(text[11:]) if len(text) > 11 else None
    if time:
        clock, fraction, offset = time.groups()
        if fraction:
            clock += "." + fraction[:6].ljust(6, "0")
        if offset in ("Z", "z"):
            offset = "+00:00"
        elif offset:
            digits = offset[1:].replace(":", "")
            offset = f"{offset[0]}{digits[:2]}:{digits[2:] or '00'}"
        text = f"{text[:11]}{clock}{offset or ''}"
    return datetime.fromisoformat(text)


def waiting_seconds(response: Mapping[str, Any], now: datetime) -> float:
    """Seconds since the job was created (Describe or summary), by the service clock ``now``."""
    created = as_datetime(response.get("CreationTime"))
    return max(0.0, (now - created).total_seconds()) if created else 0.0


def client_timer_passed(
    phase: Phase, response: Mapping[str, Any], now: datetime, timer_seconds: float | None
) -> float | None:
    """Seconds waited when a client-side timer has gone off with no entry selected, else None.

    The one rule for every timer a wait keeps where SageMaker keeps none: the capacity deadline
    (``max_pending`` for processing, CPU-only lists, a sensor's bound) and the close of an acceptance
    window. Counted from CreationTime on the service clock, so restarts do not move it.
    """
    if phase is not Phase.WAITING or timer_seconds is None:
        return None
    waited = waiting_seconds(response, now)
    return waited if waited >= timer_seconds else None


#: The earlier name of :func:`client_timer_passed`, from when it timed only the capacity deadline.
client_deadline_passed = client_timer_passed


@dataclass(frozen=True)
class JobSnapshot:
    """A job as one Describe* response showed it, read on the clock of the service that answered.

    What a wait decides from (done, a timer gone off, progress to log) is always this group; it is read
    once per look and passed on whole.

    :param kind: the job kind.
    :param describe: the Describe* response.
    :param phase: the job's :class:`Phase` in that response.
    :param now: the service clock when it answered (the response's ``Date``).
    """

    kind: JobKind
    describe: Mapping[str, Any]
    phase: Phase
    now: datetime

    @classmethod
    def of(cls, kind: JobKind, describe: Mapping[str, Any], now: datetime) -> JobSnapshot:
        return cls(kind, describe, phase_of(kind, describe), now)

    @property
    def status(self) -> str | None:
        """TrainingJobStatus / ProcessingJobStatus, as the response spells it."""
        value = self.describe.get(self.kind.spec.status_field)
        return None if value is None else str(value)

    @property
    def created(self) -> datetime:
        """The job's CreationTime (the service clock of the look when the response carries none)."""
        return as_datetime(self.describe.get("CreationTime")) or self.now

    @property
    def waited(self) -> float:
        """Seconds since CreationTime, by the service clock."""
        return waiting_seconds(self.describe, self.now)

    def timer_passed(self, timer_seconds: float | None) -> float | None:
        """:func:`client_timer_passed` for this look."""
        return client_timer_passed(self.phase, self.describe, self.now, timer_seconds)


#: Order of progress of the views of one job: Starting, Pending (no entry selected), running (an entry
#: selected, or a secondary status past Pending), stopping, ended. A job moves forward in it (a managed
#: spot job interrupted and pending again aside, which its LastModifiedTime tells apart).
_PROGRESS_OF_PHASE = {
    Phase.WAITING: 1,
    Phase.RUNNING: 2,
    Phase.STOPPING: 3,
    Phase.COMPLETED: 4,
    Phase.FAILED: 4,
    Phase.STOPPED: 4,
}


def progress_of(kind: JobKind, response: Mapping[str, Any]) -> int:
    """The place of a view of the job (Describe, List summary, event detail) in the order of progress."""
    phase = phase_of(kind, response)
    if (
        phase is Phase.WAITING
        and kind.spec.secondary_status
        and response.get("SecondaryStatus") == "Starting"
    ):
        return 0
    return _PROGRESS_OF_PHASE[phase]


class Order(str, Enum):
    """How one view of a job stands against another."""

    NEWER = "newer"
    SAME = "same"
    OLDER = "older"
    #: The timestamps and the order of progress disagree, or a timestamp is missing.
    UNCLEAR = "unclear"


@dataclass(frozen=True)
class JobStamp:
    """How far along one view of a job (Describe, List summary, event detail) shows it.

    :param modified: the view's LastModifiedTime, to the millisecond (event details carry no finer).
    :param progress: its place in the order of progress (:func:`progress_of`).
    """

    modified: datetime | None
    progress: int

    @classmethod
    def of(cls, kind: JobKind, response: Mapping[str, Any]) -> JobStamp:
        modified = as_datetime(response.get("LastModifiedTime"))
        if modified is not None:
            millis = round(modified.timestamp() * 1000)
            modified = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
        return cls(modified, progress_of(kind, response))

    def against(self, other: JobStamp) -> Order:
        """How this view stands against ``other``: later LastModifiedTime and no step back, or the same
        LastModifiedTime and a step forward, is newer."""
        if self.modified is None or other.modified is None:
            return Order.NEWER if self.progress > other.progress else Order.UNCLEAR
        if self.modified < other.modified:
            return Order.OLDER
        if self.modified > other.modified:
            return Order.NEWER if self.progress >= other.progress else Order.UNCLEAR
        if self.progress == other.progress:
            return Order.SAME
        return Order.NEWER if self.progress > other.progress else Order.OLDER

    def newest(self, other: JobStamp | None) -> JobStamp:
        """This view or ``other``, whichever is newer (this one unless ``other`` is)."""
        if other is not None and other.against(self) is Order.NEWER:
            return other
        return self
