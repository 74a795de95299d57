"""What an event-queue message says: a SageMaker job event in EventBridge's envelope (what its envelope
claims about where it comes from included), and what SQS says about the message (see
:mod:`.eventbridge_queue`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_sm_prefs.domain.event_detail import EventOrigin
from airflow_provider_sm_prefs.domain.kinds import JobKind

#: EventBridge detail-types of the job state changes, by job kind.
DETAIL_TYPES = {f"SageMaker {kind.spec.label} Job State Change": kind for kind in JobKind}


@dataclass(frozen=True)
class JobEvent:
    """A SageMaker job state change as it came from the queue.

    Nothing in it is proven: ``origin`` is what the envelope claims (a wait checks it against the job
    it knows, :func:`~airflow_provider_sm_prefs.domain.event_detail.weigh_event`).
    """

    kind: JobKind
    job_name: str
    event_id: str
    detail: dict[str, Any]
    origin: EventOrigin | None = None


def origin_of(envelope: dict[str, Any]) -> EventOrigin | None:
    """The account, region and resources an EventBridge envelope names; None if it lacks them."""
    account, region, resources = envelope.get("account"), envelope.get("region"), envelope.get("resources")
    if not isinstance(account, str) or not isinstance(region, str) or not isinstance(resources, list):
        return None
    return EventOrigin(account, region, tuple(r for r in resources if isinstance(r, str)))


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
    return JobEvent(kind, name, str(envelope.get("id") or ""), detail, origin_of(envelope))


def receive_count(message: dict[str, Any]) -> int | None:
    """How often SQS has handed the message out, this receive included (``ApproximateReceiveCount``)."""
    try:
        return int(message.get("Attributes", {}).get("ApproximateReceiveCount"))
    except (TypeError, ValueError):
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
    #: Events about jobs this consumer does not watch, released for a peer.
    passed: int = 0
    duplicates: int = 0
    expired: int = 0
    foreign: int = 0
    #: Times another consumer was heard of after none had been for PEER_TTL.
    peers_heard: int = 0
    #: Messages that came back to this consumer after it released them (each paused its reading).
    returns: int = 0
    errors: int = 0
    by_job: dict[str, int] = field(default_factory=dict)
