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

**Several consumers, one queue.** Two triggerers (or more) may read the same queue, and SQS gives each
message to one of them at a time. A process that receives an event about a job it does not watch must
not take it from the process that does. So the consumers know each other, and an event visits every
live consumer before it is dropped:

* *presence*: each consumer sends a small presence message (not an event) when it starts and every
  :data:`PRESENCE_EVERY` seconds; whoever receives it learns of the sender and deletes it. A consumer
  also learns of every consumer named on a message passed on to it. A peer not heard of for
  :data:`PEER_TTL` is forgotten;
* *leaving*: a consumer whose waits all ended goes on reading for :data:`IDLE_GRACE` (its peers still
  count on it: what they pass it must not come back to them), then sends a presence message that says it
  leaves; whoever receives it forgets the leaver and passes the message on to the peers it has not
  visited, as below;
* an event about a job this process watches: the waiters are woken and the message is deleted;
* a duplicate of an event this process already handled (same EventBridge ``id``): deleted;
* an event about a job this process does not watch, when every live peer has already seen it (or there
  is none): deleted. Otherwise it is *passed on*: sent to the queue again (same body, message attributes
  naming the consumers it visited and when it first arrived) and the original deleted. A new message
  wakes the other consumers' waiting long-polls at once, so a peer usually takes it first. After passing
  anything on, a consumer waits a random :data:`PASS_PAUSE` before its next receive. If an event comes
  back to a consumer it visited already (no peer was polling when it was passed on), that consumer
  passes it on again and stays away from the queue for a random :data:`RETURN_PAUSE` times the number of
  returns (longer than a long-poll takes to notice a message: moto rechecks every second), so a peer
  polls in the meantime; two consumers passing each other's events at the same moment draw different
  pauses and take turns. A peer that is gone (until :data:`PEER_TTL`) thus makes its events bounce at
  most every :data:`RETURN_PAUSE_MAX` seconds, and delays this consumer's own events by as much.
  Nothing is passed on for longer than :data:`HORIZON`;
* not a SageMaker job event at all: deleted.

A single triggerer therefore pays one receive per ten events and nothing more. While receives come
back full (a backlog: a wave of selections, a triggerer that was down), up to :data:`RECEIVERS` run at
once (they join one at a time while full batches hold messages older than :data:`BACKLOG_AGE`), each
extra one leaving at its first short batch; order does not matter (a wait Describes its job on an event
older than what it has seen). With peers, an event nobody watches costs one send and one receive per live consumer. What it does not cover: a consumer that
started in the last :data:`PRESENCE_EVERY` seconds may not be known to the others yet, so an event about
one of its jobs may be dropped by a peer in that window. Like a lost event, that costs latency (its
trigger's first List pass, then the safety passes), never correctness. Narrowing the rule's event
pattern to your own jobs (a job-name prefix) cuts the rest; see docs/events.md. Permissions:
``sqs:ReceiveMessage``, ``sqs:DeleteMessage`` and ``sqs:SendMessage`` on the queue.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.hooks.pool import shared_client
from airflow_provider_sm_prefs.hooks.retry import backoff_delay, error_code, is_transient
from airflow_provider_sm_prefs.triggers.eventbridge_messages import (
    FIRST_SENT,
    LEAVING,
    PASSED_BY,
    PRESENCE,
    ConsumerStats,
    attribute,
    attribute_text,
    is_leaving,
    parse_event,
    presence_of,
    sent_at,
    text,
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
#: Visits remembered on a message passed on (the newest).
PASSED_BY_KEEP = 32
#: Each consumer announces itself this often (seconds); peers not heard of for PEER_TTL are forgotten.
PRESENCE_EVERY = 30.0
PEER_TTL = 3 * PRESENCE_EVERY
#: A presence message that comes back to its sender is offered again for this long (seconds).
PRESENCE_OFFER = 5.0
#: Marks a presence message offered again among the copies to send (never sent).
PRESENCE_ATTRIBUTE = "_presence"
#: Event ids remembered, to drop duplicates.
REMEMBER = 20_000
#: After the queue failed for a non-transient reason (deleted, access denied), try again this often.
UNAVAILABLE_RETRY = 300.0
#: With nothing subscribed, go on reading the queue this long (seconds), then leave: say so to the
#: peers, stop the loop and release its client.
IDLE_GRACE = 60.0

#: ``callback(detail)`` of a subscription: the event's detail (mirrors Describe).
Callback = Callable[[dict[str, Any]], None]


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
        #: Names this consumer in PASSED_BY: unique per consumer, nothing about the host.
        self.consumer_id = uuid.uuid4().hex[:10]
        #: Other consumers of the queue: id -> when last heard of (this process's monotonic clock).
        self.peers: dict[str, float] = {}
        #: Consumers that said they left: id -> when (this process's monotonic clock).
        self._departed: dict[str, float] = {}
        self._presence_due = 0.0
        #: The receivers that joined the long-poll to work off a backlog (see RECEIVERS).
        self._drainers: set[asyncio.Task[None]] = set()
        #: True once a receive succeeded, False again after a non-transient failure.
        self.healthy = False
        self.stats = ConsumerStats()

    # ------------------------------------------------------------------------------- subscriptions

    def subscribe(self, kind: JobKind, job_name: str, callback: Callback) -> Callable[[], None]:
        """Call ``callback(detail)`` for every event about the job; returns the unsubscribe function."""
        key = (kind, job_name)
        self._subscribers.setdefault(key, []).append(callback)
        if self._task is None or self._task.done():
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
                self._presence_due = 0.0  # announce at once, after an idle stop too
                while True:
                    idle_since = None if self._subscribers else idle_since or loop.time()
                    if idle_since is not None and loop.time() - idle_since > IDLE_GRACE:
                        if await self._leave(client):
                            return
                        idle_since = None
                    try:
                        answer = await client.receive_message(
                            QueueUrl=self.queue_url,
                            MaxNumberOfMessages=BATCH,
                            # The first receive returns at once: it shows the queue can be read,
                            # and the List loop slows down only then.
                            WaitTimeSeconds=WAIT_SECONDS if self.healthy else 0,
                            MessageSystemAttributeNames=["SentTimestamp"],
                            MessageAttributeNames=[PASSED_BY, FIRST_SENT],
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
            for drainer in self._drainers:
                drainer.cancel()
            self._set_healthy(False)
            if _CONSUMERS.get(self.key) is self:
                del _CONSUMERS[self.key]

    async def _leave(self, client: Any) -> bool:
        """Say this consumer leaves (see *leaving* in the module docstring); False if a wait subscribed
        meanwhile: it stays, and announces itself again at once."""
        await self._announce(client, leaving=True)
        if self._subscribers:
            self._presence_due = 0.0
            return False
        return True

    async def _after_receive(self, client: Any, messages: list[dict[str, Any]]) -> None:
        """Handle a batch, announce this consumer when due, and pause if that helps (see below)."""
        loop = asyncio.get_running_loop()
        passed, returned = await self._handle(client, messages)
        if loop.time() >= self._presence_due:
            self._presence_due = loop.time() + PRESENCE_EVERY
            await self._announce(client)
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

        Whatever else a batch calls for (a pause after passing events on, announcing this consumer) is
        left to the long-poll loop, which goes on meanwhile.
        """
        try:
            while self._subscribers:
                answer = await client.receive_message(
                    QueueUrl=self.queue_url,
                    MaxNumberOfMessages=BATCH,
                    WaitTimeSeconds=0,
                    MessageSystemAttributeNames=["SentTimestamp"],
                    MessageAttributeNames=[PASSED_BY, FIRST_SENT],
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

    def live_peers(self) -> set[str]:
        """The other consumers heard of within :data:`PEER_TTL`."""
        now = time.monotonic()
        for peer, heard in list(self.peers.items()):
            if now - heard > PEER_TTL:
                del self.peers[peer]
        return set(self.peers)

    def _heard(self, peers: list[str]) -> None:
        now = time.monotonic()
        for peer in peers:
            if peer and peer != self.consumer_id and now - self._departed.get(peer, -PEER_TTL) >= PEER_TTL:
                self.peers[peer] = now

    def _depart(self, peer: str) -> None:
        """``peer`` said it stopped reading: forget it, and do not learn of it again from the names on
        older passed-on messages (for PEER_TTL, or until its own presence says it is back)."""
        self.peers.pop(peer, None)
        self._departed[peer] = time.monotonic()

    async def _announce(self, client: Any, leaving: bool = False) -> None:
        """Send this consumer's presence message, or (``leaving``) its departure (see the module docstring)."""
        body = json.dumps(
            {PRESENCE: self.consumer_id, "at": time.time(), **({LEAVING: True} if leaving else {})}
        )
        try:
            await client.send_message(QueueUrl=self.queue_url, MessageBody=body)
            self.stats.presence_sent += 1
        except Exception as err:
            self.stats.errors += 1
            log.debug("Announcing this consumer failed: %s", err)

    async def _handle(self, client: Any, messages: list[dict[str, Any]]) -> tuple[bool, int]:
        """Wake, delete or pass on each message; returns whether any was passed on, and how often the
        most returned of them had come back to this consumer (see RETURN_PAUSE)."""
        delete: list[dict[str, Any]] = []
        resend: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        now = time.time()
        returned = 0
        for index, message in enumerate(messages):
            self.stats.messages += 1
            entry = {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
            copy, again = self._route(message, now)
            returned = max(returned, again)
            if copy is None:
                delete.append(entry)
            else:
                resend[entry["Id"]] = (entry, {"Id": entry["Id"], **copy})
        passed = False
        if resend:
            copies = [
                {k: v for k, v in item.items() if k != PRESENCE_ATTRIBUTE} for _, item in resend.values()
            ]
            for key in await self._send(client, copies):
                delete.append(resend[key][0])
                passed = True
                if PRESENCE_ATTRIBUTE in resend[key][1]:
                    self.stats.presence_sent += 1
                else:
                    self.stats.passed += 1
        if delete:
            self.stats.deleted += len(delete)
            await self._quietly(client.delete_message_batch(QueueUrl=self.queue_url, Entries=delete))
        return passed, returned

    def _presence(self, message: dict[str, Any], body: str, now: float) -> dict[str, Any] | None:
        """A message that is no event: a consumer's presence (learn it), or foreign (drop it)."""
        peer = presence_of(body)
        if peer is None:
            self.stats.foreign += 1
            return None
        if peer != self.consumer_id:
            self.stats.presence_heard += 1
            self._departed.pop(peer, None)  # back (a departed consumer got a wait again)
            if peer not in self.live_peers():
                self._presence_due = 0.0  # a newcomer: tell it about this consumer too
            self._heard([peer])
            return None
        try:
            announced = float(json.loads(body).get("at"))
        except (TypeError, ValueError):
            announced = 0.0
        if now - announced >= PRESENCE_OFFER:
            return None
        # Our own presence came back before anyone else took it: offer it once more, a little later.
        return {"MessageBody": body, "DelaySeconds": 1, PRESENCE_ATTRIBUTE: True}

    def _route(self, message: dict[str, Any], now: float) -> tuple[dict[str, Any] | None, int]:
        """Handle one message: (None, 0) to delete it, or the copy to pass on and how often the message
        had come back to this consumer (see the module docstring)."""
        body = message.get("Body") or ""
        passers = [p for p in str(attribute_text(message, PASSED_BY) or "").split(",") if p]
        self._heard(passers)
        event = parse_event(body)
        if event is None:
            if not is_leaving(body):
                return self._presence(message, body, now), 0
            leaver = presence_of(body)
            if leaver == self.consumer_id:
                return None, 0
            if leaver:
                self.stats.presence_heard += 1
                self._depart(leaver)
            # Every live peer should forget it too: passed on as an event nobody here watches is.
            copy, _ = self._pass_on(message, body, passers, now)
            return copy, 0
        if event.event_id and event.event_id in self._handled:
            self.stats.duplicates += 1
            return None, 0
        callbacks = list(self._subscribers.get((event.kind, event.job_name), ()))
        if callbacks:
            self._remember(self._handled, event.event_id)
            self.stats.woke += 1
            self.stats.by_job[event.job_name] = self.stats.by_job.get(event.job_name, 0) + 1
            for callback in callbacks:
                callback(event.detail)
            return None, 0
        copy, again = self._pass_on(message, body, passers, now)
        if copy is None:
            self.stats.expired += 1
        elif again:
            self.stats.returns += 1
        return copy, again

    def _pass_on(
        self, message: dict[str, Any], body: str, passers: list[str], now: float
    ) -> tuple[dict[str, Any] | None, int]:
        """The copy that takes ``message`` to the live peers it has not visited, or None when it has
        visited them all (or is older than HORIZON); and how often it had come back to this consumer."""
        first_sent = attribute(message, FIRST_SENT) or sent_at(message, now)
        if not (self.live_peers() - set(passers)) or now - first_sent >= HORIZON:
            return None, 0
        # Came back to this consumer before: a peer may be gone (until PEER_TTL) or busy; back off.
        again = passers.count(self.consumer_id)
        return {
            "MessageBody": body,
            "MessageAttributes": {
                PASSED_BY: text(",".join([*passers, self.consumer_id][-PASSED_BY_KEEP:])),
                FIRST_SENT: {"DataType": "Number", "StringValue": str(int(first_sent * 1000))},
            },
        }, again

    async def _send(self, client: Any, entries: list[dict[str, Any]]) -> list[str]:
        """Send ``entries`` again; the ids sent (an original whose copy failed stays, and comes back)."""
        try:
            answer = await client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
        except Exception as err:
            self.stats.errors += 1
            log.debug("Passing events on failed: %s", err)
            return []
        return [str(item["Id"]) for item in answer.get("Successful") or []]

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
