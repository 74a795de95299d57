"""moto's state in this process: what a reset of the offline SageMaker clears, and the event queues it keeps.

moto holds what callers create at the endpoint (S3 buckets and objects, SQS queues and messages,
EventBridge rules and targets, CloudWatch Logs groups and events of their own, IAM roles, ...) in
process-wide backends. :func:`reset` clears every one of them, in every account and region, with moto's
own reset (the one its server's ``/moto-api/reset`` runs: S3 also closes its temporary files and frees
its bucket names), and then puts back the event queues kept with :func:`keep_event_queue`.

An event queue (what :meth:`~.controls.EmulatorControls.create_event_queue` sets up: an SQS queue, a rule
on the default bus and the queue as its target) is the endpoint's setup, like an Airflow connection
pointing at it, rather than a test's state: after a reset it exists again, empty, at the same URL, with
the same rule and target. :func:`forget_event_queue` (``remove_event_queue``) stops that.

moto is one per process, so this is too: emulators served in the same process share one moto, and a
reset of any of them clears it for all (and puts back the event queues kept by any of them).
Imports moto only when called, and :func:`reset` not even then if this process never loaded moto.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import asdict, dataclass

__all__ = ["EventQueue", "forget_event_queue", "keep_event_queue", "kept_event_queues", "reset"]

#: The target id :meth:`~.controls.EmulatorControls.create_event_queue` gives the queue on its rule.
TARGET_ID = "sm-prefs-queue"

_KEPT_LOCK = threading.Lock()
#: Kept event queues by queue ARN.
_kept: dict[str, EventQueue] = {}


@dataclass(frozen=True)
class EventQueue:
    """An SQS queue fed by an EventBridge rule of the default bus in the queue's account and region.

    :param queue_arn: ``arn:aws:sqs:<region>:<account>:<queue name>``.
    :param rule: the rule's name.
    :param event_pattern: the rule's event pattern (JSON).
    :param target_id: the queue's target id on the rule.
    """

    queue_arn: str
    rule: str
    event_pattern: str
    target_id: str = TARGET_ID

    def where(self) -> tuple[str, str, str]:
        """``(account, region, queue name)`` from the queue's ARN; ValueError if it is not an SQS ARN."""
        parts = self.queue_arn.split(":")
        if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not all(parts[3:]):
            raise ValueError(f"queue_arn: not an SQS queue ARN: {self.queue_arn!r}")
        return parts[4], parts[3], parts[5]


def keep_event_queue(queue: EventQueue) -> list[dict[str, str]]:
    """Put ``queue`` back after every reset from now on (it replaces one kept for the same queue); returns
    the event queues kept."""
    queue.where()
    if not queue.rule or not queue.event_pattern or not queue.target_id:
        raise ValueError("rule, event_pattern and target_id must not be empty")
    with _KEPT_LOCK:
        _kept[queue.queue_arn] = queue
    return kept_event_queues()


def forget_event_queue(rule: str) -> list[dict[str, str]]:
    """Stop putting back the event queues of the rule named ``rule``; returns the event queues kept."""
    with _KEPT_LOCK:
        for arn in [arn for arn, queue in _kept.items() if queue.rule == rule]:
            del _kept[arn]
    return kept_event_queues()


def kept_event_queues() -> list[dict[str, str]]:
    """The event queues a reset puts back, as dicts."""
    with _KEPT_LOCK:
        return [asdict(queue) for queue in _kept.values()]


def reset() -> None:
    """Clear every moto backend of this process, then put the kept event queues back (empty).

    moto's backend lock is held throughout, so a request creating a backend anew waits for the kept queues
    to be back. A call moto is serving at that moment may fail or act on the world being dropped.
    """
    if "moto.core.base_backend" not in sys.modules:
        return  # moto never loaded here: it holds nothing
    from moto.core.base_backend import BackendDict, backend_lock
    from moto.core.model_instances import reset_model_data

    with _KEPT_LOCK:
        kept = list(_kept.values())
    with backend_lock:
        BackendDict.reset()
        reset_model_data()
        for queue in kept:
            _put_back(queue)


def _put_back(queue: EventQueue) -> None:
    from moto.events.models import events_backends
    from moto.sqs.models import sqs_backends

    account, region, name = queue.where()
    sqs_backends[account][region].create_queue(name)
    events = events_backends[account][region]
    events.put_rule(queue.rule, event_pattern=queue.event_pattern, state="ENABLED")
    events.put_targets(queue.rule, None, [{"Id": queue.target_id, "Arn": queue.queue_arn}])
