"""Cost fixes for moto's SQS, which the offline SageMaker serves for event mode. Behaviour unchanged.

SQS answers SendMessage, ReceiveMessage and DeleteMessage in constant time whatever the queue holds.
moto scans the whole queue in Python, several times per call: a send computes every queue attribute
(three ``ApproximateNumberOfMessages*`` counts) to read ``ContentBasedDeduplication``; a receive builds
the list of every visible message before taking ten, and checks each one's retention by computing every
attribute again; a delete scans the queue twice, building each message's list of receipt handles, and
then rebuilds the queue. Each call costs more the more messages wait (measured in
airflow-provider-sm-prefs's docs/performance.md), and event mode at scale (tens of thousands of events in flight) would measure
moto, not the provider. Here:

* the three approximate counts come from one pass, reused for up to :data:`COUNTS_TTL` seconds. AWS
  documents them as approximate and eventually consistent ("may not achieve consistency until at least 1
  minute after the producers stop sending messages"), so a count up to a second old is within contract;
* ``Queue.messages`` yields the visible, undelayed messages in order instead of listing them all, so a
  receive of ten looks no further than it must (the long-poll's "any message?" check stops at the first);
* a retention check reads the retention period alone; visibility and delay compare ``time.time()``;
* a delete finds its message by the first match (the oldest messages are received, and deleted, first),
  removes it in one C-level copy, and only scans the whole queue for a handle that matches nothing.

Applied once, when the first :class:`~.server.OfflineSageMaker` of the process starts serving; importing
this module (or :mod:`.handler`) patches nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

__all__ = ["COUNTS_TTL", "apply"]

#: The approximate message counts are recomputed at most this often (seconds), per queue.
COUNTS_TTL = 1.0

_APPLIED = False


def apply() -> None:
    """Patch moto's SQS models in this process (idempotent)."""
    global _APPLIED
    if _APPLIED:
        return
    from moto.sqs.models import Message, Queue, SQSBackend

    SQSBackend.is_message_valid_based_on_retention_period = _within_retention  # type: ignore[method-assign,assignment]
    Message.visible = property(_visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(_delayed)  # type: ignore[method-assign,assignment]
    Queue.messages = property(_messages)  # type: ignore[method-assign,assignment]
    Queue.approximate_number_of_messages = property(lambda q: _counts(q)[0])  # type: ignore[method-assign,assignment]
    Queue.approximate_number_of_messages_not_visible = property(lambda q: _counts(q)[1])  # type: ignore[method-assign,assignment]
    Queue.approximate_number_of_messages_delayed = property(lambda q: _counts(q)[2])  # type: ignore[method-assign,assignment]
    Queue.wait_for_messages = _wait_for_messages  # type: ignore[method-assign,assignment]
    Queue.delete_message = _delete_message  # type: ignore[method-assign,assignment]
    _APPLIED = True


def _within_retention(backend: Any, queue_name: str, message: Any) -> bool:
    retention = int(backend.get_queue(queue_name).message_retention_period)
    return bool(retention + message.sent_timestamp / 1000 > time.time())


def _visible(message: Any) -> bool:
    return bool(time.time() * 1000.0 > message.visible_at)


def _delayed(message: Any) -> bool:
    return bool(time.time() * 1000.0 < message.delayed_until)


def _messages(queue: Any) -> Iterator[Any]:
    """The visible, undelayed messages, oldest first, as they are reached."""
    for message in queue._messages:
        now = time.time() * 1000.0
        if now > message.visible_at and now >= message.delayed_until:
            yield message


def _counts(queue: Any) -> tuple[int, int, int]:
    """(visible, not visible, delayed), from one pass at most every COUNTS_TTL seconds."""
    cached = queue.__dict__.get("_sm_prefs_counts")
    wall = time.monotonic()
    if cached is not None and wall - cached[0] < COUNTS_TTL:
        counted: tuple[int, int, int] = cached[1]
        return counted
    now = time.time() * 1000.0
    shown = hidden = held = 0
    for message in queue._messages:
        is_visible, is_delayed = now > message.visible_at, now < message.delayed_until
        shown += is_visible and not is_delayed
        hidden += not is_visible
        held += is_delayed
    queue.__dict__["_sm_prefs_counts"] = (wall, (shown, hidden, held))
    return shown, hidden, held


def _wait_for_messages(queue: Any, timeout: int) -> None:
    with queue._messages_lock:
        queue._messages_lock.wait_for(lambda: next(iter(queue.messages), None) is not None, timeout=timeout)


def _position(queued: list[Any], receipt_handle: str) -> int | None:
    """Where the message that had ``receipt_handle`` is, searching from the oldest."""
    for index, message in enumerate(queued):
        if message.receipt_handle == receipt_handle or receipt_handle in message._old_receipt_handles:
            return index
    return None


def _delete_message(queue: Any, receipt_handle: str) -> None:
    from moto.sqs.exceptions import ReceiptHandleIsInvalid

    if receipt_handle in queue.deleted_messages:
        return  # already deleted: SQS accepts deleting it again
    queued = queue._messages
    index = _position(queued, receipt_handle)
    if index is None:
        raise ReceiptHandleIsInvalid()
    message = queued[index]
    # A new list, as moto's own delete makes, so a receive iterating the old one is unaffected.
    queue._messages = queued[:index] + queued[index + 1 :]
    queue.pending_messages.discard(message)
    queue.deleted_messages.update(message.all_receipt_handles)
