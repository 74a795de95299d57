"""Cost fixes for moto's SQS, which the offline SageMaker serves for event mode, and for moto's request
dispatch; and one timing fix of a long poll (below).

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
  removes it in one C-level copy, and only scans the whole queue for a handle that matches nothing;
* moto's dispatcher finds the backend of every request anew, under one lock: it lists moto's package
  directory (``os.listdir`` and an ``isdir`` per entry, about 200) and then tries its URL patterns one by
  one. That was about a third of the emulator's time serving an SQS consumer. The directory listing is
  read once, and the backend found for a host is remembered (both depend on the installed moto only);
* ``camelcase_to_underscores`` (a character-by-character loop) is remembered per name where SQS and the
  response dispatch call it: every send builds the queue's attributes, a dozen names converted each time.

**A long poll sees a released message at once.** SQS's long poll "returns messages as soon as they become
available". moto's waiting receive is woken by a SendMessage only, and otherwise looks again once a
second: a message a consumer hands on to its peers with ``ChangeMessageVisibility`` (``VisibilityTimeout``
0, as event mode does) waited up to a second for a peer's receive already waiting, long enough for the
consumer that released it to take it back first. Here a visibility change wakes the queue's waiting
receives at once.

Applied once, when the first :class:`~.server.OfflineSageMaker` of the process starts serving; importing
this module (or :mod:`.handler`) patches nothing.

Which moto
----------
The patches replace private members of ``moto.sqs.models`` (``Queue._messages``, ``_messages_lock``,
``pending_messages``, ``deleted_messages``, ``Message._old_receipt_handles``, ...), which moto may rename
or reshape in any release. They are applied only on the releases of :data:`PROVEN_MOTO` (the distribution
caps moto to the same range). On any other moto they are not
applied: SQS keeps moto's own code, correct and slower the more messages wait, and a warning says so
once per process.

The fix upstream
----------------
What would make this module unnecessary, as a change to ``moto/sqs/models.py`` (moto 5.2.5), behaviour
unchanged:

1. ``Queue.messages`` returns a generator of the visible, undelayed messages (its own comment: "This can
   become very inefficient if a large number of messages are in-flight"), so that
   ``SQSBackend.receive_message`` stops scanning once it holds ``count`` messages;
   ``Queue.wait_for_messages`` waits for ``next(iter(self.messages), None) is not None``, and
   ``approximate_number_of_messages`` counts the generator.
2. ``SQSBackend.is_message_valid_based_on_retention_period`` reads
   ``int(queue.message_retention_period)`` from ``self.get_queue(queue_name)`` instead of calling
   ``get_queue_attributes``, which builds ``Queue.attributes`` (three full scans of the queue) for every
   message received.
3. ``SQSBackend.send_message``, ``Queue.add_message`` and ``SQSBackend._validate_message`` read
   ``queue.fifo_queue and queue.content_based_deduplication`` (``Queue.attributes`` holds the key for
   FIFO queues only) instead of ``queue.attributes.get("ContentBasedDeduplication") == "true"``, for the
   same reason, on every message sent.
4. ``Queue.attributes`` computes the three ``ApproximateNumberOfMessages*`` counts in one pass over
   ``_messages`` (one helper returning the three) rather than one scan each.
5. ``Message.visible`` and ``Message.delayed`` compare against ``time.time() * 1000`` (what
   ``unix_time_millis()`` returns, without building a datetime per message per call).
6. ``Queue.delete_message`` finds the index of the first message with ``had_receipt_handle`` in one pass,
   raises ``ReceiptHandleIsInvalid`` when there is none, and replaces ``_messages`` with a copy without
   that index (a new list still, so a receive iterating the old one is unaffected).

With 1 to 6 each SendMessage, ReceiveMessage (of up to ten) and DeleteMessage of the oldest messages costs
the same whatever the queue holds. And in ``moto/backends.py`` and ``moto/moto_server/werkzeug_app.py``:

7. ``list_of_moto_modules`` is computed once (``functools.cache``; the package directory does not change
   while moto runs), and ``DomainDispatcherApplication.get_backend_for_host`` remembers its answer per
   host.
8. ``camelcase_to_underscores`` is cached (``functools.lru_cache``: a pure function of a few hundred
   distinct names), or ``Queue.attributes`` keeps its attribute names in underscore form.

Only this module's reuse of the counts for :data:`COUNTS_TTL` seconds
would remain, and it matters only to GetQueueAttributes, which the offline SageMaker's clients seldom call.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["COUNTS_TTL", "PROVEN_MOTO", "apply", "is_proven"]

log = logging.getLogger(__name__)

#: The approximate message counts are recomputed at most this often (seconds), per queue.
COUNTS_TTL = 1.0

#: The moto releases the patches are applied on: from the first (the one they were written against and
#: tested on) up to, not including, the second (a patch release of 5.2 is trusted to keep the internals
#: they touch, a new minor is not). Widen it, with offline-sagemaker's ``moto`` requirement, only after
#: reading the new release's ``moto/sqs/models.py`` and running the SQS tests on it.
PROVEN_MOTO = ((5, 2, 5), (5, 3, 0))

#: Hosts whose backend the dispatcher remembers, at most.
HOSTS_KEPT = 4096

_APPLIED = False
_DECLINED = False


def is_proven(moto_version: str) -> bool:
    """Whether ``moto_version`` (``moto.__version__``) is within :data:`PROVEN_MOTO`."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", moto_version)
    if match is None:
        return False
    release = tuple(int(part) for part in match.groups())
    return PROVEN_MOTO[0] <= release < PROVEN_MOTO[1]


def apply() -> bool:
    """Patch moto's SQS models in this process if moto is a release they were tested with (idempotent).

    :return: whether the patches are in place. On another moto, nothing is patched and a warning is
        logged, once per process.
    """
    global _APPLIED, _DECLINED
    if _APPLIED:
        return True
    import moto

    if not is_proven(moto.__version__):
        if not _DECLINED:
            _DECLINED = True
            log.warning(
                "moto %s is outside the releases offline_sagemaker.moto_speedups is written for (%s to before %s): "
                "SQS runs on moto's own code, correct but slower the more messages a queue holds",
                moto.__version__,
                ".".join(map(str, PROVEN_MOTO[0])),
                ".".join(map(str, PROVEN_MOTO[1])),
            )
        return False
    from moto import backends
    from moto.core import responses as core_responses
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication
    from moto.sqs import models as sqs_models
    from moto.sqs.models import Message, Queue, SQSBackend

    for module in (sqs_models, core_responses):
        convert = getattr(module, "camelcase_to_underscores")  # noqa: B009 - imported into the module
        if not hasattr(convert, "cache_info"):
            setattr(module, "camelcase_to_underscores", functools.lru_cache(maxsize=1024)(convert))  # noqa: B010
    backends.list_of_moto_modules = _once(backends.list_of_moto_modules)
    DomainDispatcherApplication.get_backend_for_host = _per_host(  # type: ignore[method-assign,assignment]
        DomainDispatcherApplication.get_backend_for_host
    )

    SQSBackend.is_message_valid_based_on_retention_period = _within_retention  # type: ignore[method-assign,assignment]
    Message.visible = property(_visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(_delayed)  # type: ignore[method-assign,assignment]
    Queue.messages = property(_messages)  # type: ignore[method-assign,assignment]
    Queue.approximate_number_of_messages = property(lambda q: _counts(q)[0])  # type: ignore[method-assign,assignment]
    Queue.approximate_number_of_messages_not_visible = property(lambda q: _counts(q)[1])  # type: ignore[method-assign,assignment]
    Queue.approximate_number_of_messages_delayed = property(lambda q: _counts(q)[2])  # type: ignore[method-assign,assignment]
    Queue.wait_for_messages = _wait_for_messages  # type: ignore[method-assign,assignment]
    SQSBackend.change_message_visibility = _waking(SQSBackend.change_message_visibility)  # type: ignore[method-assign]
    SQSBackend.change_message_visibility_batch = _waking(SQSBackend.change_message_visibility_batch)  # type: ignore[method-assign]
    Queue.delete_message = _delete_message  # type: ignore[method-assign,assignment]
    _APPLIED = True
    return True


def _once(listing: Callable[[], Iterable[str]]) -> Callable[[], tuple[str, ...]]:
    """``listing``'s answer, read on the first call and kept."""
    kept: list[tuple[str, ...]] = []

    def listed() -> tuple[str, ...]:
        if not kept:
            kept.append(tuple(listing()))
        return kept[0]

    return listed


def _per_host(find: Callable[[Any, str | None], Any]) -> Callable[[Any, str | None], Any]:
    """``find(dispatcher, host)``, remembered per host (moto calls it under its dispatcher's lock).

    The hosts are those moto infers (service and region) and a few fixed names; at most
    :data:`HOSTS_KEPT` are remembered, so a client inventing hosts cannot grow it without bound.
    """
    found: dict[str | None, Any] = {}

    def backend_for(dispatcher: Any, host: str | None) -> Any:
        if host in found:
            return found[host]
        backend = find(dispatcher, host)
        if len(found) < HOSTS_KEPT:
            found[host] = backend
        return backend

    return backend_for


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


def _waking(change: Callable[..., Any]) -> Callable[..., Any]:
    """``SQSBackend.change_message_visibility[_batch]`` that then wakes the queue's waiting receives."""

    @functools.wraps(change)
    def changed(backend: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        result = change(backend, queue_name, *args, **kwargs)
        queue = backend.get_queue(queue_name)
        with queue._messages_lock:
            queue._messages_lock.notify_all()
        return result

    return changed


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
