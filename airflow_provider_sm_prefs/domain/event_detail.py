"""When a SageMaker job event's detail can stand in for a Describe of the job (pure).

SageMaker's state-change events carry the job's Describe response as their ``detail`` (timestamps as
epoch milliseconds). A wait that receives one can end on it without a Describe when the detail is a
newer view of the job than any the wait has seen, shows the wait is over, and holds every field the
outcome is built from. Anything else is a doubt, and a Describe settles it: a job the wait has not
seen yet (nothing to compare with), an event older than or the same as what it saw (late, out of
order, duplicated), a detail that skips a step back in the order of progress, or one missing fields.
Events that show no change worth a look wake nobody, as before; they only move what the wait has seen.

**Only SageMaker's own event about this job stands in for a Describe.** A queue message is what anyone
allowed to send to the queue made it; an event bus may also carry other accounts' and regions' events,
whose jobs may share a name with ours. So a detail settles a wait alone only when the envelope's
``account`` and ``region`` and its ``resources`` name the job the wait knows from SageMaker itself (the
ARN of a Describe or a List summary: :class:`EventOrigin`), and the detail's own ARN is that ARN too.
Any other event is a hint: it costs one Describe, whose answer decides, and it moves nothing the wait
has seen.

:func:`weigh_event` decides; it returns one of :class:`NoNews`, :class:`Settled` or :class:`Confirm`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.status import (
    JobSnapshot,
    JobStamp,
    JobStatus,
    Order,
    Phase,
    WaitFor,
    cluster_of,
    is_done,
    phase_of,
    worth_a_look,
)

__all__ = [
    "Confirm",
    "EventOrigin",
    "EventWeight",
    "NoNews",
    "Settled",
    "describe_of_detail",
    "foreign_reason",
    "missing_fields",
    "weigh_event",
]

#: Fields of the detail's SecondaryStatusTransitions entries that hold timestamps.
_TRANSITION_TIMES = ("StartTime", "EndTime")


@dataclass(frozen=True)
class NoNews:
    """The event shows no change worth a look; ``seen`` is the newest view the wait has seen now."""

    seen: JobStamp | None


@dataclass(frozen=True)
class Settled:
    """The event's detail ends the wait: ``job`` reads it as a Describe, on the clock of its
    LastModifiedTime; ``seen`` is its stamp."""

    job: JobSnapshot
    seen: JobStamp


@dataclass(frozen=True)
class Confirm:
    """The event shows a change, but the detail cannot be trusted alone: Describe the job (``reason``
    says why, for the log)."""

    reason: str


EventWeight = NoNews | Settled | Confirm


@dataclass(frozen=True)
class EventOrigin:
    """Where an event's EventBridge envelope says it comes from.

    :param account: the envelope's ``account``.
    :param region: the envelope's ``region``.
    :param resources: the envelope's ``resources`` (SageMaker names the job's ARN there).
    """

    account: str
    region: str
    resources: tuple[str, ...] = ()


def _arn_parts(arn: str) -> tuple[str, str] | None:
    """``(region, account)`` of an ARN, None if it is not one."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or not parts[3] or not parts[4]:
        return None
    return parts[3], parts[4]


def foreign_reason(
    kind: JobKind, detail: Mapping[str, Any], origin: EventOrigin | None, job_arn: str | None
) -> str | None:
    """Why an event cannot be taken as SageMaker's own about the job whose ARN is ``job_arn``; None
    when its account, region and resource all match that job.

    :param job_arn: the job's ARN as SageMaker itself answered it (a Describe, a List summary); never
        one read from an event.
    """
    if not job_arn:
        return "the job's ARN is not known yet"
    where = _arn_parts(job_arn)
    if where is None:
        return f"the job's ARN {job_arn!r} cannot be read"
    if origin is None:
        return "the event names no account, region or resource"
    region, account = where
    if origin.account != account:
        return f"the event's account {origin.account!r} is not the job's {account!r}"
    if origin.region != region:
        return f"the event's region {origin.region!r} is not the job's {region!r}"
    if job_arn not in origin.resources:
        return f"the event's resources do not name {job_arn}"
    if detail.get(kind.spec.arn_field) != job_arn:
        return f"the detail's {kind.spec.arn_field} is not {job_arn}"
    return None


def describe_of_detail(detail: Mapping[str, Any]) -> dict[str, Any]:
    """The detail as a Describe response reads: top-level ``…Time`` fields and the secondary-status
    transitions' times from epoch milliseconds (as SageMaker's events carry them) to datetimes.

    Other values are left as they are (ISO 8601 strings are read as such by ``as_datetime``).
    """
    describe = dict(detail)
    for key, value in detail.items():
        if key.endswith("Time"):
            describe[key] = _from_millis(value)
    transitions = detail.get("SecondaryStatusTransitions")
    if isinstance(transitions, list):
        describe["SecondaryStatusTransitions"] = [
            {k: (_from_millis(v) if k in _TRANSITION_TIMES else v) for k, v in t.items()}
            if isinstance(t, Mapping)
            else t
            for t in transitions
        ]
    return describe


def _from_millis(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc)
    return value


def missing_fields(kind: JobKind, describe: Mapping[str, Any], phase: Phase) -> list[str]:
    """The fields an ended wait's outcome (or error) is built from that ``describe`` lacks.

    An entry is selected (running, or ended after a selection): its type and count, or a single-type
    job's ``InstanceType``. Training: the secondary-status transitions the pending time is summed from.
    A job with a preference list that ended with no selected type: never settled from a detail, since a
    detail that merely left the selection out would read as "never got capacity".
    """
    spec = kind.spec
    wanted = [spec.name_field, spec.arn_field, spec.status_field, "CreationTime", "LastModifiedTime"]
    missing = [name for name in wanted if describe.get(name) is None]
    cluster = cluster_of(kind, describe)
    path = ".".join(kind.spec.cluster_path)
    if not cluster:
        return [*missing, path]
    if kind.spec.secondary_status and not isinstance(describe.get("SecondaryStatusTransitions"), list):
        missing.append("SecondaryStatusTransitions")
    if cluster.get("InstancePreferences") is not None:
        for name in ("SelectedInstanceType", "SelectedInstanceCount"):
            if cluster.get(name) is None:
                missing.append(f"{path}.{name}")
    elif cluster.get("InstanceType") is None:
        missing.append(f"{path}.InstanceType")
    if (
        phase is Phase.RUNNING
        and not kind.spec.secondary_status
        and describe.get("ProcessingStartTime") is None
    ):
        missing.append("ProcessingStartTime")
    return missing


def weigh_event(
    kind: JobKind,
    wait_for: WaitFor | str,
    detail: Mapping[str, Any],
    seen: JobStamp | None,
    *,
    origin: EventOrigin | None,
    job_arn: str | None,
) -> EventWeight:
    """What an event about the waited-for job means to the wait, given the newest view it has ``seen``.

    :param detail: the event's detail, as it came (timestamps in epoch milliseconds).
    :param seen: the newest view of the job the wait has seen (a Describe, a List summary, an earlier
        event), None if none yet.
    :param origin: the event's envelope (account, region, resources); None when it had none.
    :param job_arn: the job's ARN as SageMaker answered it: unless the event's origin and detail name
        it (:func:`foreign_reason`), the event can only ask for a Describe.
    """
    foreign = foreign_reason(kind, detail, origin, job_arn)
    describe = describe_of_detail(detail)
    try:
        JobStatus(describe.get(kind.spec.status_field))
    except ValueError:
        return Confirm(f"the detail has no valid {kind.spec.status_field}")
    phase = phase_of(kind, describe)
    try:
        stamp = JobStamp.of(kind, describe)
    except (TypeError, ValueError):
        return Confirm("the detail's LastModifiedTime cannot be read")
    if not worth_a_look(phase, wait_for):
        if foreign is not None:
            return NoNews(seen)  # what it claims is nobody's word: the wait's view stays its own
        return NoNews(stamp if seen is None or stamp.against(seen) is Order.NEWER else seen)
    if foreign is not None:
        return Confirm(f"the event may not be SageMaker's about this job: {foreign}")
    if seen is None:
        return Confirm("the wait has not seen the job yet")
    order = stamp.against(seen)
    if order is not Order.NEWER:
        return Confirm(f"the event is {order.value} than what the wait has seen")
    if not is_done(phase, wait_for):
        return Confirm(f"the job is {phase.value}, which does not end the wait")
    missing = missing_fields(kind, describe, phase)
    if missing or stamp.modified is None:
        return Confirm(f"the detail lacks {', '.join(missing or ['LastModifiedTime'])}")
    # The detail was rendered when the job last changed: that is the clock it was read on.
    return Settled(JobSnapshot(kind, describe, phase, stamp.modified), stamp)
