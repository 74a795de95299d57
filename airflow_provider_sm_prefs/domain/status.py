"""Where a SageMaker job stands, read from a Describe response *or* a List summary (pure).

One answer for everyone who waits: the operator before deferring, the trigger after each look, the
sensor's poke and the shared List loop all ask :func:`phase_of` and :func:`is_done` here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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


def client_deadline_passed(
    phase: Phase, response: Mapping[str, Any], now: datetime, deadline_seconds: float | None
) -> float | None:
    """Seconds waited when a client-side capacity deadline has passed with no entry selected, else None.

    The one rule for ``max_pending`` where SageMaker enforces none (processing, CPU-only lists, a
    sensor's bound): counted from CreationTime on the service clock, so restarts do not move it.
    """
    if phase is not Phase.WAITING or deadline_seconds is None:
        return None
    waited = waiting_seconds(response, now)
    return waited if waited >= deadline_seconds else None
