"""What an event-queue message says: a SageMaker job event in EventBridge's envelope, or a consumer's
presence, and the message attributes consumers of one queue pass events on with (see
:mod:`.eventbridge_queue`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_sm_prefs.domain.kinds import JobKind

#: EventBridge detail-types of the job state changes, by job kind.
DETAIL_TYPES = {
    "SageMaker Training Job State Change": JobKind.TRAINING,
    "SageMaker Processing Job State Change": JobKind.PROCESSING,
}
#: Message attributes of a message passed on: the consumers it visited, when SQS first received it.
PASSED_BY = "sm-prefs-passed-by"
FIRST_SENT = "sm-prefs-first-sent"
#: The body key of a presence message.
PRESENCE = "sm-prefs-consumer"
#: In a presence message: the consumer stopped reading the queue (its peers forget it at once).
LEAVING = "leaving"


@dataclass(frozen=True)
class JobEvent:
    """A SageMaker job state change as it came from the queue."""

    kind: JobKind
    job_name: str
    event_id: str
    detail: dict[str, Any]


def parse_event(body: str) -> JobEvent | None:
    """The SageMaker job event in an SQS message body (EventBridge's envelope), or None if it is not one."""
    try:
        envelope = json.loads(body)
    except ValueError:
        return None
    if not isinstance(envelope, dict) or envelope.get("source") != "aws.sagemaker":
        return None
    kind = DETAIL_TYPES.get(str(envelope.get("detail-type")))
    detail = envelope.get("detail")
    if kind is None or not isinstance(detail, dict):
        return None
    name = detail.get(kind.spec.name_field)
    if not isinstance(name, str) or not name:
        return None
    return JobEvent(kind, name, str(envelope.get("id") or ""), detail)


def presence_of(body: str) -> str | None:
    """The consumer id of a presence message (a leaving one too), or None."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    peer = data.get(PRESENCE) if isinstance(data, dict) else None
    return str(peer) if isinstance(peer, str) and peer else None


def is_leaving(body: str) -> bool:
    """Whether a presence message says its consumer stopped reading the queue."""
    try:
        data = json.loads(body)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get(LEAVING) is True


def text(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def attribute_text(message: dict[str, Any], name: str) -> str | None:
    value = (message.get("MessageAttributes") or {}).get(name) or {}
    text = value.get("StringValue")
    return str(text) if text is not None else None


def attribute(message: dict[str, Any], name: str) -> float | None:
    """A numeric message attribute of epoch milliseconds, as epoch seconds (None if absent or bad)."""
    try:
        return int(str(attribute_text(message, name))) / 1000.0
    except ValueError:
        return None


def sent_at(message: dict[str, Any], default: float) -> float:
    """When SQS received the message (epoch seconds), from its ``SentTimestamp`` attribute."""
    try:
        return int(message.get("Attributes", {}).get("SentTimestamp")) / 1000.0
    except (TypeError, ValueError):
        return default


@dataclass
class ConsumerStats:
    """What a consumer did (for logs, tests and the benchmark)."""

    receives: int = 0
    messages: int = 0
    woke: int = 0
    deleted: int = 0
    passed: int = 0
    duplicates: int = 0
    expired: int = 0
    foreign: int = 0
    presence_sent: int = 0
    presence_heard: int = 0
    #: Messages that came back to this consumer after it passed them on (each paused its reading).
    returns: int = 0
    errors: int = 0
    by_job: dict[str, int] = field(default_factory=dict)
