"""Event mode: one long-poll of an SQS queue, fed by an EventBridge rule, wakes the waits of a process.

SageMaker publishes ``SageMaker Training Job State Change`` and ``SageMaker Processing Job State Change``
events (``source: aws.sagemaker``) to EventBridge; a rule with an SQS target puts them on a queue. When
the Airflow config option ``[sm_prefs] event_queue_url`` or the AWS connection's extra
``sm_prefs_event_queue_url`` names that queue, every waiting trigger of a process learns of its job's
changes from one shared :class:`EventQueueConsumer` instead of the List loop's cadence.

**Events are data, checked before they are trusted.** An event about a watched job whose detail shows a
change worth a look is handed to the job's waiters; a detail that ends the wait, is newer than what the
wait has seen and holds every field of the outcome ends it as a Describe would, anything else makes the
trigger Describe its job once (:mod:`airflow_provider_sm_prefs.domain.event_detail`). The
shared List loop (:mod:`.watcher`) keeps running, slowly (``[sm_prefs] event_safety_list_seconds``,
default 300 s), so a lost, late or duplicated event, a deleted queue or a denied permission costs
latency, never correctness. While the queue cannot be read, the List loop runs at its normal cadence.

**Several consumers, one queue, and nothing sent.** Two triggerers (or more) may read the same queue,
and SQS gives each message to one of them at a time. A process that receives an event about a job it
does not watch must not take it from the process that does. No consumer ever sends to the queue (only
the EventBridge rule may: see docs/iam.md), so an event is handed on by releasing it, never by a copy:

* an event about a job this process watches: the waiters are woken and the message is deleted;
* a duplicate of an event this process already handled (same EventBridge ``id``): deleted;
* an event about a job this process does not watch: *released* (``ChangeMessageVisibility`` to 0, so it
  is visible at once and wakes the peers' waiting long-polls) and this consumer waits a random
  :data:`PASS_PAUSE` before its next receive, so a peer usually takes it first. A message that comes back
  to a consumer that released it already makes that consumer stay away from the queue for a random
  :data:`RETURN_PAUSE` times the number of returns (at most :data:`RETURN_PAUSE_MAX`). It is deleted
  once SQS has handed it out :data:`VISITS` times, or once it is older than :data:`HORIZON`;
* a consumer that has heard of no peer for :data:`PEER_TTL` is alone: it drops an event it does not
  watch at once, except one every :data:`PROBE_EVERY`, which it releases (a peer not heard of yet may
  watch it, and is heard of by receiving it) and drops when it comes back;
* peers are heard of without a word: a message whose ``ApproximateReceiveCount`` shows receives this
  consumer did not make was received by another consumer;
* not a SageMaker job event at all: deleted.

A single triggerer therefore pays one receive per ten events, and one release and one more receive per
:data:`PROBE_EVERY` for the events it does not watch. While receives come back full (a backlog: a wave of
selections, a triggerer that was down), up to :data:`RECEIVERS` run at once (they join one at a time
while full batches hold messages older than :data:`BACKLOG_AGE`), each extra one leaving at its first
short batch; order does not matter (a wait Describes its job on an event older than what it has seen).
What it does not cover: with more consumers than :data:`VISITS` allows for, or one that has not been
heard of yet, an event may be dropped before its watcher sees it. Like a lost event, that costs latency
(its trigger's safety List passes), never correctness. Narrowing the rule's event pattern to your own jobs
(a job-name prefix) cuts the rest; see docs/events.md. Permissions: ``sqs:ReceiveMessage``,
``sqs:DeleteMessage`` and ``sqs:ChangeMessageVisibility`` on the queue; never ``sqs:SendMessage``.

**Events are claims, not facts.** Anyone allowed to send to the queue writes what a message says; a wait
takes an event's detail in place of a Describe only when its account, region and resource are the job's
(:func:`~airflow_provider_sm_prefs.domain.event_detail.weigh_event`); any other event costs one Describe.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.hooks.pool import shared_client
from airflow_provider_sm_prefs.hooks.retry import backoff_delay, error_code, is_transient
from airflow_provider_sm_prefs.triggers.eventbridge_messages import (
    ConsumerStats,
    JobEvent,
    parse_event,
    receive_count,
    sent_at,
)

log = logging.getLogger(__name__)

#: Long-poll wait of one ReceiveMessage (SQS's maximum).
WAIT_SECONDS = 20
#: Messages per ReceiveMessage (SQS's maximum).
BATCH = 10
#: After a short batch (fewer than BATCH messages), wait this long (seconds) before the next receive:
#: under a stream of events the receives then come full, and an event that arrives meanwhile is seen
#: this much later at most.
GATHER = 0.5
#: Receives in flight at most: while receives come back full with messages older than BACKLOG_AGE
#: (seconds; the consumer is behind), receivers join the long-poll one at a time, each leaving at its
#: first short batch. A stream the consumer keeps up with is read by the long-poll alone.
RECEIVERS = 4
BACKLOG_AGE = 2.0
#: An event is passed on between consumers for at most this long (seconds since SQS first received it).
HORIZON = 60.0
#: After passing messages on, wait a random time in this range (seconds) before the next receive.
PASS_PAUSE = (0.05, 0.5)
#: After passing on an event that came back n times, stay away from the queue a random time in this
#: range (seconds) times n, at most RETURN_PAUSE_MAX.
RETURN_PAUSE = (1.1, 2.2)
RETURN_PAUSE_MAX = 8.0
#: An event nobody here watches is deleted once SQS has handed it out this many times (to anyone).
VISITS = 6
#: A peer is a consumer heard of (through a message's receive count) within this many seconds.
PEER_TTL = 90.0
#: Alone, release at most one event nobody here watches this often (seconds), so that a peer not heard
#: of yet may receive it and be heard of; drop the others at once.
PROBE_EVERY = 5.0
#: Event ids, and the receives of released messages, remembered.
REMEMBER = 20_000
#: After the queue failed for a non-transient reason (deleted, access denied), try again this often.
UNAVAILABLE_RETRY = 300.0
#: With nothing subscribed, go on reading the queue this long (seconds), then stop the loop and
#: release its client.
IDLE_GRACE = 60.0

#: ``callback(event)`` of a subscription: the event as it came (its detail mirrors Describe).
Callback = Callable[[JobEvent], None]


class EventQueueConsumer:
    """The process's long-poll of one queue, shared by every wait on the same connection settings.

    :param key: the settings key (``AwsSettings.pool_key``) plus the queue URL.
    :param opener: returns an awaitable of an aiobotocore SQS client context (``get_async_conn``).
    :param queue_url: the SQS queue URL.
    """

    def __init__(self, key: tuple[Any, ...], opener: Callable[[], Any], queue_url: str) -> None:
        self.key = key
        self.queue_url = queue_url
        self._opener = opener
        self._subscribers: dict[tuple[JobKind, str], list[Callback]] = {}
        self._health_listeners: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._handled: OrderedDict[str, None] = OrderedDict()
        #: Released messages: SQS message id -> how often this consumer received it.
        self._visits: OrderedDict[str, int] = OrderedDict()
        #: When (this process's monotonic clock) another consumer was last heard of; None: never.
        self.peer_heard: float | None = None
        #: When (monotonic) this consumer, alone, last released an event to find peers.
        self._probed_at: float | None = None
        #: The loop decided to stop (idle): a wait that subscribes now starts a new one.
        self._stopping = False
        #: The receivers that joined the long-poll to work off a backlog (see RECEIVERS).
        self._drainers: set[asyncio.Task[None]] = set()
        #: True once a receive succeeded, False again after a non-transient failure.
        self.healthy = False
        self.stats = ConsumerStats()

    # ------------------------------------------------------------------------------- subscriptions

    def subscribe(self, kind: JobKind, job_name: str, callback: Callback) -> Callable[[], None]:
        """Call ``callback(event)`` for every event about the job; returns the unsubscribe function."""
        key = (kind, job_name)
        self._subscribers.setdefault(key, []).append(callback)
        if self._task is None or self._task.done() or self._stopping:
            self._stopping = False
            _CONSUMERS.setdefault(self.key, self)  # registered again after an idle stop
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sm-prefs-event-queue")

        def unsubscribe() -> None:
            callbacks = self._subscribers.get(key, [])
            if callback in callbacks:
                callbacks.remove(callback)
            if not callbacks:
                self._subscribers.pop(key, None)

        return unsubscribe

    def on_health_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever :attr:`healthy` changes (the List loop adapts its cadence)."""
        if listener not in self._health_listeners:
            self._health_listeners.append(listener)

    def _set_healthy(self, healthy: bool) -> None:
        if healthy == self.healthy:
            return
        self.healthy = healthy
        for listener in list(self._health_listeners):
            listener()

    # ------------------------------------------------------------------------------------- the loop

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        idle_since: float | None = None
        attempt = 0
        try:
            async with shared_client(self.key, self._opener) as client:
                while True:
                    idle_since = None if self._subscribers else idle_since or loop.time()
                    if idle_since is not None and loop.time() - idle_since > IDLE_GRACE:
                        self._stopping = True
                        return
                    try:
                        answer = await client.receive_message(
                            QueueUrl=self.queue_url,
                            MaxNumberOfMessages=BATCH,
                            # The first receive returns at once: it shows the queue can be read,
                            # and the List loop slows down only then.
                            WaitTimeSeconds=WAIT_SECONDS if self.healthy else 0,
                            MessageSystemAttributeNames=["SentTimestamp", "ApproximateReceiveCount"],
                        )
                    except Exception as err:
                        self.stats.errors += 1
                        if is_transient(err):
                            attempt += 1
                            delay = backoff_delay(attempt, base=1.0, cap=60.0)
                            log.warning("Reading the event queue failed (%s); retrying in %.1fs", err, delay)
                        else:
                            attempt, delay = 0, UNAVAILABLE_RETRY
                            self._set_healthy(False)
                            log.warning(
                                "The event queue %s cannot be read (%s): waits fall back to the List loop's "
                                "cadence; trying the queue again in %.0fs",
                                self.queue_url,
                                (error_code(err) if hasattr(err, "response") else "") or type(err).__name__,
                                delay,
                            )
                        await asyncio.sleep(delay)
                        continue
                    attempt = 0
                    self.stats.receives += 1
                    if not self.healthy:
                        log.info("Reading job events from %s", self.queue_url)
                    self._set_healthy(True)
                    await self._after_receive(client, answer.get("Messages") or [])
        except Exception as err:  # never take the waits down with the queue
            log.warning("The event queue loop stopped (%s: %s)", type(err).__name__, err)
        finally:
            if self._task is asyncio.current_task():  # not replaced by a wait that came while stopping
                for drainer in self._drainers:
                    drainer.cancel()
                self._set_healthy(False)
                if _CONSUMERS.get(self.key) is self:
                    del _CONSUMERS[self.key]

    async def _after_receive(self, client: Any, messages: list[dict[str, Any]]) -> None:
        """Handle a batch, and pause if that helps (see below)."""
        passed, returned = await self._handle(client, messages)
        if returned:
            await asyncio.sleep(min(RETURN_PAUSE_MAX, returned * random.uniform(*RETURN_PAUSE)))
        elif passed:
            await asyncio.sleep(random.uniform(*PASS_PAUSE))
        elif len(messages) == BATCH:
            self._widen(client, messages)
        elif messages:
            # Events trickling in one or two at a time (others' jobs, or a wave of ours): let a batch
            # gather. Bounds the calls per event; delays an event by GATHER at most.
            await asyncio.sleep(GATHER)

    def _widen(self, client: Any, batch: list[dict[str, Any]]) -> None:
        """After a full batch: if it shows a backlog, one more receiver (up to RECEIVERS in flight)."""
        now = time.time()
        if now - min(sent_at(m, now) for m in batch) <= BACKLOG_AGE:
            return  # keeping up
        self._drainers = {task for task in self._drainers if not task.done()}
        if len(self._drainers) < RECEIVERS - 1:
            task = asyncio.get_running_loop().create_task(
                self._drain(client), name="sm-prefs-event-queue-drain"
            )
            self._drainers.add(task)

    async def _drain(self, client: Any) -> None:
        """Receive without waiting while batches come back full; leave at the first short one.

        Whatever else a batch calls for (a pause after releasing events) is left to the long-poll loop,
        which goes on meanwhile.
        """
        try:
            while self._subscribers:
                answer = await client.receive_message(
                    QueueUrl=self.queue_url,
                    MaxNumberOfMessages=BATCH,
                    WaitTimeSeconds=0,
                    MessageSystemAttributeNames=["SentTimestamp", "ApproximateReceiveCount"],
                )
                self.stats.receives += 1
                messages = answer.get("Messages") or []
                passed, returned = await self._handle(client, messages)
                if passed or returned or len(messages) < BATCH:
                    return
                self._widen(client, messages)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the long-poll loop reports and retries what fails for good
            self.stats.errors += 1
            log.debug("A backlog receive failed: %s", err)

    def has_peers(self) -> bool:
        """Another consumer of the queue was heard of within :data:`PEER_TTL`."""
        return self.peer_heard is not None and time.monotonic() - self.peer_heard <= PEER_TTL

    async def _handle(self, client: Any, messages: list[dict[str, Any]]) -> tuple[bool, int]:
        """Wake, delete or release each message; returns whether any was released, and how often the
        most returned of them had come back to this consumer (see RETURN_PAUSE)."""
        delete: list[dict[str, Any]] = []
        release: list[dict[str, Any]] = []
        now = time.time()
        returned = 0
        for index, message in enumerate(messages):
            self.stats.messages += 1
            entry = {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
            keep, again = self._route(message, now)
            returned = max(returned, again)
            if keep:
                release.append({**entry, "VisibilityTimeout": 0})
            else:
                delete.append(entry)
        if release:
            self.stats.passed += len(release)
            await self._quietly(
                client.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=release)
            )
        if delete:
            self.stats.deleted += len(delete)
            await self._quietly(client.delete_message_batch(QueueUrl=self.queue_url, Entries=delete))
        return bool(release), returned

    def _route(self, message: dict[str, Any], now: float) -> tuple[bool, int]:
        """Handle one message: (False, 0) to delete it, or (True, n) to release it for a peer, where n is
        how often it had come back to this consumer (see the module docstring)."""
        event = parse_event(message.get("Body") or "")
        if event is None:
            self.stats.foreign += 1
            return False, 0
        if event.event_id and event.event_id in self._handled:
            self.stats.duplicates += 1
            return False, 0
        callbacks = list(self._subscribers.get((event.kind, event.job_name), ()))
        if callbacks:
            self._remember(self._handled, event.event_id)
            self.stats.woke += 1
            self.stats.by_job[event.job_name] = self.stats.by_job.get(event.job_name, 0) + 1
            for callback in callbacks:
                callback(event)
            return False, 0
        message_id = str(message.get("MessageId") or "")
        mine = self._visits.get(message_id, 0)
        received = receive_count(message)
        if received is not None and received - 1 > mine:
            if not self.has_peers():
                self.stats.peers_heard += 1
                log.info(
                    "Another consumer reads the event queue %s: events about jobs not watched here are "
                    "handed on to it",
                    self.queue_url,
                )
            self.peer_heard = time.monotonic()  # someone else received it in between
        if (
            now - sent_at(message, now) >= HORIZON
            or (received is not None and received >= VISITS)
            or (not self.has_peers() and not self._probe(first_sight=not mine))
        ):
            self.stats.expired += 1
            # Remembered, not forgotten: should its delete come too late (a loaded host, past the
            # visibility timeout), its return is this consumer's own receive, not a peer's.
            self._remember(self._visits, message_id, mine + 1)
            return False, 0
        self._remember(self._visits, message_id, mine + 1)
        if mine:
            self.stats.returns += 1
        return True, mine

    def _probe(self, first_sight: bool) -> bool:
        """Alone: whether to release an event nobody here watches anyway, to find a peer not heard of yet
        (one every PROBE_EVERY, on its first receive here; what comes back is dropped)."""
        clock = time.monotonic()
        if not first_sight or (self._probed_at is not None and clock - self._probed_at < PROBE_EVERY):
            return False
        self._probed_at = clock
        return True

    async def _quietly(self, call: Any) -> None:
        """A delete or a visibility change that fails only means the message comes back: log and go on."""
        try:
            await call
        except Exception as err:
            self.stats.errors += 1
            log.debug("Event queue housekeeping failed: %s", err)

    @staticmethod
    def _remember(store: OrderedDict[str, Any], key: str, value: Any = None) -> None:
        if not key:
            return
        store[key] = value
        store.move_to_end(key)
        while len(store) > REMEMBER:
            store.popitem(last=False)


_CONSUMERS: dict[tuple[Any, ...], EventQueueConsumer] = {}


def consumer_for(
    client_key: tuple[Any, ...], opener: Callable[[], Any], queue_url: str
) -> EventQueueConsumer:
    """The process's consumer of ``queue_url`` for these connection settings (``AwsSettings.pool_key``)."""
    key = (*client_key, "sqs", queue_url)
    consumer = _CONSUMERS.get(key)
    if consumer is None:
        consumer = _CONSUMERS[key] = EventQueueConsumer(key, opener, queue_url)
    return consumer
