"""SageMaker's EventBridge events: every job state change put on the default event bus, as AWS does.

AWS publishes ``source: aws.sagemaker`` events with the detail-types ``SageMaker Training Job State
Change`` and ``SageMaker Processing Job State Change``; the detail is the Describe response. The engine
reports every change it records to :meth:`EventPublisher.record` (its observer hook), which renders the
Describe response at that moment into an AWS envelope and queues it, subject to the scenario's ``events``
settings (delay, loss, duplicates). :class:`EventPump`, a daemon thread started with the server, ticks the
service every 0.1 real seconds: the world advances even when nobody calls SageMaker, and the due events
are delivered, in the order the changes happened, to the enabled rules of moto's default bus in the
scenario's account and the job's region (so a rule with an SQS target receives them).

Delivery goes through moto's ``Rule.send_to_targets``: it matches the rule's pattern and sends to the
targets, writing the envelope's epoch ``time`` as ISO 8601 for SQS and CloudWatch Logs targets.
"""

from __future__ import annotations

import copy
import datetime
import functools
import logging
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from offline_sagemaker.botocore_model import service_model
from offline_sagemaker.models import Job, JobKind
from offline_sagemaker.scenario_types import EVENT_KEYS, EventSettings, Scenario

__all__ = [
    "DETAIL_TYPES",
    "PUMP_INTERVAL_SECONDS",
    "SOURCE",
    "EventPublisher",
    "EventPump",
    "event_time",
    "put_on_default_bus",
]

log = logging.getLogger(__name__)

SOURCE = "aws.sagemaker"
#: The ``detail-type`` of each job kind's state-change events.
DETAIL_TYPES: Mapping[JobKind, str] = {
    JobKind.TRAINING: "SageMaker Training Job State Change",
    JobKind.PROCESSING: "SageMaker Processing Job State Change",
}
_RESPONSE_SHAPES = {
    JobKind.TRAINING: "DescribeTrainingJobResponse",
    JobKind.PROCESSING: "DescribeProcessingJobResponse",
}
#: Real seconds between two ticks of the pump.
PUMP_INTERVAL_SECONDS = 0.1

Render = Callable[[Job], dict[str, Any]]


def event_time(epoch: float) -> str:
    """An envelope's ``time`` as AWS writes it: ISO 8601 UTC at second precision (``2018-10-06T12:26:13Z``)."""
    moment = datetime.datetime.fromtimestamp(int(epoch), tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


_TIMESTAMP = "timestamp"


def _compile(shape: Any, seen: frozenset[str] = frozenset()) -> Any:
    """Where ``shape`` holds timestamps: ``"timestamp"``, ``{member: node}`` for a structure (only members
    holding some), ``("list" | "map", node)``; None where there are none."""
    kind = shape.type_name
    if kind == _TIMESTAMP:
        return _TIMESTAMP
    if shape.name in seen:
        return None
    seen = seen | {shape.name}
    if kind == "structure":
        members = {name: node for name, m in shape.members.items() if (node := _compile(m, seen)) is not None}
        return members or None
    if kind in ("list", "map"):
        node = _compile(shape.member if kind == "list" else shape.value, seen)
        return None if node is None else (kind, node)
    return None


@functools.cache
def _timestamps(kind: JobKind) -> Any:
    """Where the Describe response of a ``kind`` job holds timestamps (botocore's model, read once)."""
    return _compile(service_model().shape_for(_RESPONSE_SHAPES[kind]))


def _millis(value: Any, node: Any) -> Any:
    """``value`` with the timestamps ``node`` locates as integer epoch milliseconds, as AWS's sample
    SageMaker events carry them (e.g. ``"CreationTime": 1704320199000``). Containers on the way are new;
    the rest is shared (the echoed request is never mutated)."""
    if node is None:
        return value
    if node == _TIMESTAMP:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return round(value * 1000)
        return value
    if isinstance(node, dict):
        if isinstance(value, dict):
            return {k: _millis(v, node.get(k)) for k, v in value.items()}
        return value
    kind, inner = node
    if kind == "list" and isinstance(value, list):
        return [_millis(v, inner) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: _millis(v, inner) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class _Queued:
    due: float  # real monotonic seconds
    epoch: float  # emulated time of the change
    envelope: dict[str, Any]


class EventPublisher:
    """Turns the engine's changes into AWS events and holds them until they are due. Not thread-safe: the
    service calls :meth:`record`, :meth:`take_due` and the settings methods under its lock.

    :param scenario: the scenario whose ``events`` settings, ``seed``, account and region apply.
    :param render: the Describe response of a job as it is now (the API's own rendering).
    :param real_clock: monotonic real seconds, injectable for tests.
    """

    def __init__(self, scenario: Scenario, render: Render, real_clock: Callable[[], float] = time.monotonic):
        self._render = render
        self._real_clock = real_clock
        self.restart(scenario)

    def restart(self, scenario: Scenario) -> None:
        """Forget queued events and counters; take the scenario's settings and seed."""
        self._scenario = scenario
        self.settings: EventSettings = scenario.events
        # Its own generator: event draws neither disturb nor depend on the fault draws.
        self._rng = random.Random(None if scenario.seed is None else f"events:{scenario.seed}")
        self._queue: deque[_Queued] = deque()
        self._counts = {"emitted": 0, "delivered": 0, "lost": 0, "duplicated": 0}

    # ------------------------------------------------------------------------------------- changes

    def record(self, job: Job, now: float) -> None:
        """The engine's observer: ``job`` changed at emulated ``now``; queue its event (or lose it)."""
        settings = self.settings
        if not settings.enabled:
            return
        counts = self._counts
        counts["emitted"] += 1
        rng = self._rng
        if settings.loss_rate and rng.random() < settings.loss_rate:
            counts["lost"] += 1
            return
        envelope = self.envelope(job, now, uuid.UUID(int=rng.getrandbits(128), version=4))
        queued = _Queued(self._real_clock() + settings.delay_seconds, now, envelope)
        self._queue.append(queued)
        if settings.duplicate_rate and rng.random() < settings.duplicate_rate:
            # AWS's duplicates are the same event again: same id, same content.
            counts["duplicated"] += 1
            self._queue.append(queued)

    def envelope(self, job: Job, now: float, event_id: uuid.UUID) -> dict[str, Any]:
        """The event of ``job`` as it is at emulated ``now``, in AWS's envelope."""
        scenario = self._scenario
        detail = _millis(self._render(job), _timestamps(job.kind))
        return {
            "version": "0",
            "id": str(event_id),
            "detail-type": DETAIL_TYPES[job.kind],
            "source": SOURCE,
            "account": scenario.account_id,
            "time": event_time(now),
            "region": job.arn.split(":")[3],
            "resources": [job.arn],
            "detail": detail,
        }

    def take_due(self) -> list[tuple[dict[str, Any], float]]:
        """Remove and return the events due for delivery, oldest first, as ``(envelope, epoch)``.

        Only the head of the queue is looked at, so a tick costs nothing however many jobs exist, and an
        event never overtakes an earlier one (even after ``delay_seconds`` was lowered).
        """
        now = self._real_clock()
        queue = self._queue
        due: list[tuple[dict[str, Any], float]] = []
        while queue and queue[0].due <= now:
            queued = queue.popleft()
            due.append((queued.envelope, queued.epoch))
        self._counts["delivered"] += len(due)
        return due

    # ------------------------------------------------------------------------------------ settings

    def update(self, changes: Mapping[str, Any]) -> None:
        """Change settings (None keeps one); :raises ValueError: naming the first bad one, changing nothing."""
        for key, value in changes.items():
            if key not in EVENT_KEYS:
                raise ValueError(f"{key}: unknown event setting; allowed: {', '.join(EVENT_KEYS)}")
            if value is None:
                continue
            if key == "enabled":
                if not isinstance(value, bool):
                    raise ValueError("enabled: must be true or false")
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ValueError(f"{key}: must be a number >= 0")
            if key != "delay_seconds" and value > 1:
                raise ValueError(f"{key}: must be a probability between 0 and 1")
        kept: dict[str, Any] = {
            k: (v if k == "enabled" else float(v)) for k, v in changes.items() if v is not None
        }
        self.settings = replace(self.settings, **kept)

    def snapshot(self) -> dict[str, int]:
        """Counters: changes ``emitted``, events ``delivered`` to the bus (a duplicate counts twice),
        ``lost``, ``duplicated``, and ``pending`` (queued, not yet due)."""
        return {**self._counts, "pending": len(self._queue)}


def put_on_default_bus(envelope: dict[str, Any], epoch: float, account_id: str, region: str) -> None:
    """Deliver one event to every enabled rule of moto's default bus in ``account_id``/``region``.

    moto writes ``time`` as ISO 8601 itself and needs it as epoch seconds, so it gets those. Targets with
    an ``InputTransformer`` get moto's transformation (which reads an ``ingestion-time``); the others get
    the envelope as it is.
    """
    from moto.events.models import events_backends

    bus = events_backends[account_id][region].event_buses.get("default")
    if bus is None:
        return
    event: Any = {**envelope, "time": float(int(epoch))}
    for rule in list(bus.rules.values()):
        if not str(rule.state).startswith("ENABLED"):
            continue
        targets = list(rule.targets)
        plain = [t for t in targets if "InputTransformer" not in t]
        transformed = [t for t in targets if "InputTransformer" in t]
        view = copy.copy(rule)  # the same rule with a subset of its targets
        if plain:
            view.targets = plain
            view.send_to_targets(event, transform_input=False)
        if transformed:
            view.targets = transformed
            with_ingestion: Any = {**event, "ingestion-time": event["time"]}
            view.send_to_targets(with_ingestion, transform_input=True)


class EventPump:
    """A daemon thread calling ``tick`` every :data:`PUMP_INTERVAL_SECONDS` real seconds until stopped.

    :param tick: one round of work (the service's :meth:`~.service.EmulatorService.pump_events`).
    """

    def __init__(self, tick: Callable[[], object], interval: float = PUMP_INTERVAL_SECONDS) -> None:
        self._tick = tick
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> EventPump:
        """Start ticking; returns self."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="offline-sagemaker-events", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop ticking and wait for the thread."""
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._tick()
            except Exception:  # a failing delivery must not stop the world from advancing
                log.exception("offline SageMaker: event pump tick failed")
