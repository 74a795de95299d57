"""The simulation behind the offline SageMaker: jobs, capacity pools and an emulated clock. No HTTP here.

The world is advanced lazily: nothing runs in the background. Every call first brings the world up to the
emulated "now" by processing the due events from one heap in time order (phase ends, pending deadlines,
capacity and training-plan window boundaries). Jobs waiting for capacity are indexed by the pools they
could use, so a release only re-examines the jobs that could take the freed instances, in creation (FIFO)
order. That keeps a thousand concurrent jobs cheap.

The engine is not thread-safe; the server serialises calls with one lock.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from airflow_provider_sm_prefs.testing.scenario_types import CapacityWindow, Scenario

__all__ = [
    "ACCELERATED_PREFIXES",
    "ApiError",
    "CapacityKind",
    "Choice",
    "Engine",
    "Job",
    "JobKind",
    "JobSpec",
    "is_accelerated",
]

#: Instance families SageMaker lets wait for capacity (Pending) instead of failing at once.
ACCELERATED_PREFIXES = ("ml.p", "ml.g", "ml.trn")

CAPACITY_ERROR = (
    "CapacityError: Unable to provision requested ML compute capacity. "
    "Please retry using a different ML instance type."
)
PENDING_EXPIRED_STOPPED = "MaxPendingTimeInSeconds exceeded while waiting for capacity"
PENDING_EXPIRED_FAILED = "InsufficientCapacityError: Unable to provision requested ML compute capacity within MaxPendingTimeInSeconds"
EMULATED_FAILURE = "AlgorithmError: emulated failure"
MAX_RUNTIME_EXCEEDED = "Training job runtime exceeded MaxRuntimeInSeconds provided"


def is_accelerated(instance_type: str) -> bool:
    """True for GPU/Trainium families (``ml.p*``, ``ml.g*``, ``ml.trn*``)."""
    return instance_type.startswith(ACCELERATED_PREFIXES)


class ApiError(Exception):
    """An error the service returns to the client, in AWS's JSON error form.

    :param code: the error code (``__type``), e.g. ``ValidationException``.
    :param message: the human-readable message.
    :param status: the HTTP status code.
    """

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class JobKind(StrEnum):
    """The two job kinds the emulator simulates."""

    TRAINING = "training"
    PROCESSING = "processing"

    @property
    def label(self) -> str:
        """``Training``/``Processing`` as used in AWS messages."""
        return self.value.capitalize()


class CapacityKind(StrEnum):
    """Where a selected entry's instances come from."""

    TRAINING_PLAN = "training-plan"
    ON_DEMAND = "on-demand"


class TrainingStatus(StrEnum):
    """``TrainingJobStatus``/``ProcessingJobStatus`` values the emulator emits."""

    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"


TERMINAL = frozenset({TrainingStatus.COMPLETED, TrainingStatus.FAILED, TrainingStatus.STOPPED})


class _Phase(Enum):
    STARTING = "starting"
    PENDING = "pending"
    DOWNLOADING = "downloading"
    TRAINING = "training"
    UPLOADING = "uploading"
    RUNNING = "running"
    STOPPING = "stopping"
    DONE = "done"


class _Event(Enum):
    EVALUATE = 1
    DOWNLOADED = 2
    TRAINED = 3
    UPLOADED = 4
    RUN_END = 5
    STOPPED = 6
    PENDING_EXPIRED = 7
    MAX_RUNTIME = 8
    CAPACITY = 9


@dataclass(frozen=True)
class Choice:
    """One acceptable way to run a job: an entry of the preference list, or the plain request.

    :param rank: 1-based position in the preference list.
    :param groups: ``(instance type, count)`` pairs needed together; one pair except for InstanceGroups.
    :param plan_arn: the training plan the instances come from, or None for On-Demand.
    """

    rank: int
    groups: tuple[tuple[str, int], ...]
    plan_arn: str | None = None

    @property
    def instance_type(self) -> str:
        """The (first) instance type of this choice."""
        return self.groups[0][0]

    @property
    def count(self) -> int:
        """The (first) instance count of this choice."""
        return self.groups[0][1]


@dataclass(frozen=True)
class JobSpec:
    """A validated job request as the simulation needs it (built by :mod:`.rules`).

    :param name: the job name.
    :param kind: training or processing.
    :param choices: acceptable choices in priority order.
    :param has_preferences: the request used ``InstancePreferences`` (controls Selected* reporting).
    :param max_pending_seconds: ``StoppingCondition.MaxPendingTimeInSeconds`` if given.
    :param runtime_seconds: per-job run time override (tag ``emulator:runtime-seconds``).
    :param fail: the job fails while running (tag ``emulator:outcome=Failed``).
    :param max_runtime_seconds: ``StoppingCondition.MaxRuntimeInSeconds`` if given.
    """

    name: str
    kind: JobKind
    choices: tuple[Choice, ...]
    has_preferences: bool
    max_pending_seconds: float | None = None
    runtime_seconds: float | None = None
    fail: bool = False
    max_runtime_seconds: float | None = None


_PoolKey = tuple[str, str]  # ("od", instance type) or ("plan", plan ARN)


@dataclass(eq=False)
class Job:
    """One simulated job; mutated only by the engine."""

    spec: JobSpec
    request: dict[str, Any]
    seq: int
    arn: str
    created_at: float
    status: TrainingStatus = TrainingStatus.IN_PROGRESS
    secondary_status: str | None = None
    last_modified: float = 0.0
    transitions: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    selected: Choice | None = None
    capacity_kind: CapacityKind | None = None
    selected_at: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    pending_since: float | None = None
    failure_reason: str | None = None
    exit_message: str | None = None
    held: dict[_PoolKey, int] = field(default_factory=dict)
    _phase: _Phase = _Phase.STARTING
    _token: int = 0

    @property
    def name(self) -> str:
        """The job name."""
        return self.spec.name

    @property
    def kind(self) -> JobKind:
        """Training or processing."""
        return self.spec.kind

    @property
    def terminal(self) -> bool:
        """Completed, Failed or Stopped."""
        return self.status in TERMINAL

    def view(self, start_epoch: float) -> dict[str, Any]:
        """The admin view of this job (``OfflineSageMaker.job``), JSON-serialisable."""
        choice = self.selected
        return {
            "name": self.name,
            "kind": self.kind.value,
            "arn": self.arn,
            "status": self.status.value,
            "secondary_status": self.secondary_status,
            "selected_instance_type": choice.instance_type if choice else None,
            "selected_instance_count": choice.count if choice else None,
            "selected_rank": choice.rank if choice else None,
            "capacity": self.capacity_kind.value if self.capacity_kind else None,
            "has_preferences": self.spec.has_preferences,
            "preferences": [
                {"instance_type": c.instance_type, "instance_count": c.count, "training_plan_arn": c.plan_arn}
                for c in self.spec.choices
            ],
            "created_at": self.created_at,
            "selected_at": self.selected_at,
            "waited_seconds": (self.selected_at - self.created_at) if self.selected_at is not None else None,
            "pending_since": self.pending_since,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "last_modified": self.last_modified,
            "failure_reason": self.failure_reason,
            "created_offset_seconds": self.created_at - start_epoch,
            "timeline": [dict(entry) for entry in self.timeline],
        }


class Engine:
    """The emulated SageMaker world.

    :param scenario: the validated scenario.
    :param real_clock: monotonic real seconds (inject a fake for deterministic unit tests).
    :param wall_clock: real epoch seconds, used for the emulated epoch when the scenario gives none.
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        real_clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._real_clock = real_clock
        self._wall_clock = wall_clock
        self.reset(scenario)

    # ----------------------------------------------------------------------------------------- clock

    @property
    def scenario(self) -> Scenario:
        """The scenario in force."""
        return self._scenario

    @property
    def start_epoch(self) -> float:
        """Emulated epoch seconds at which the world started (capacity times are relative to it)."""
        return self._start_epoch

    def now(self) -> float:
        """Emulated epoch seconds now (does not advance the world)."""
        real_elapsed = self._real_clock() - self._real_start
        return self._start_epoch + real_elapsed * self._scenario.time_scale + self._offset

    def elapsed(self) -> float:
        """Emulated seconds since the world started."""
        return self.now() - self._start_epoch

    def advance(self, seconds: float) -> float:
        """Jump the emulated clock forward and process everything that became due; returns the new now."""
        if seconds < 0 or math.isnan(seconds):
            raise ValueError(f"advance: seconds must be >= 0, got {seconds!r}")
        self._offset += seconds
        return self.sync()

    def sync(self) -> float:
        """Bring the world up to the emulated now; returns that now."""
        now = self.now()
        self._run_until(now)
        return now

    def reset(self, scenario: Scenario | None = None) -> None:
        """Forget all jobs and restart the clock, optionally with a new scenario."""
        if scenario is not None:
            self._scenario = scenario
        scenario = self._scenario
        self._real_start = self._real_clock()
        self._start_epoch = scenario.start_epoch if scenario.start_epoch is not None else self._wall_clock()
        self._offset = 0.0
        self._jobs: dict[JobKind, dict[str, Job]] = {JobKind.TRAINING: {}, JobKind.PROCESSING: {}}
        self._events: list[tuple[float, int, _Event, Any, int]] = []
        self._seq = itertools.count()
        self._job_seq = itertools.count(1)
        self._in_use: dict[_PoolKey, int] = {}
        self._held_by_kind: dict[tuple[JobKind, str], int] = {}
        self._waiting: dict[int, Job] = {}
        self._waiting_by_key: dict[_PoolKey, set[int]] = {}
        self._windows_cache: dict[str, Any] = {}
        self._pool_cache: dict[str, tuple[tuple[float, float, int], ...] | None] = {}
        period = scenario.capacity_period
        for cap_key, windows in scenario.capacity.items():
            boundaries = {b for w in windows for b in (w.start, w.end) if not math.isinf(b)}
            if period is not None:
                # Seconds into each period; the period's end is the next period's start (offset 0).
                for boundary in {b % period for b in boundaries}:
                    cycle = 0 if boundary > 0 else 1
                    self._push(
                        self._cycle_at(cycle, boundary),
                        _Event.CAPACITY,
                        ("od-pattern", cap_key, (cycle, boundary)),
                        0,
                    )
                continue
            for boundary in boundaries:
                if boundary > 0:
                    self._push(self._at(boundary), _Event.CAPACITY, ("od-pattern", cap_key, None), 0)
        for plan in scenario.training_plans:
            for boundary in (plan.start, plan.end):
                if not math.isinf(boundary) and boundary > 0:
                    self._push(self._at(boundary), _Event.CAPACITY, ("plan", plan.arn, None), 0)

    def _at(self, offset: float) -> float:
        """Emulated epoch of a scenario time (``offset`` emulated seconds since the start).

        The one conversion for window boundaries: a boundary's wake-up is scheduled at ``_at(boundary)``
        and ``_limit`` tests ``now`` against that same float, so a window is open at its own event.
        (Comparing ``now - start_epoch`` with the boundary instead is off by float rounding: at ~1.8e9
        the epoch has 2**-22 s steps, and ``(start + t) - start`` can come out just below ``t``.)
        """
        return self._start_epoch + offset

    def _cycle_at(self, cycle: int, offset: float) -> float:
        """Emulated epoch of ``offset`` seconds into period ``cycle`` (``capacity_period`` scenarios).

        Like :meth:`_at`, the one expression that both schedules a periodic boundary and tests it.
        """
        period = self._scenario.capacity_period
        assert period is not None
        return self._at(cycle * period + offset)

    # -------------------------------------------------------------------------------------- queries

    def get(self, kind: JobKind, name: str) -> Job:
        """The job, or ``ValidationException: Requested resource not found.`` as AWS answers."""
        job = self._jobs[kind].get(name)
        if job is None:
            raise ApiError("ValidationException", "Requested resource not found.")
        return job

    def find_kind(self, kind: JobKind, name: str) -> Job | None:
        """The job of ``kind`` named ``name``, or None."""
        return self._jobs[kind].get(name)

    @staticmethod
    def name_in_use(job: Job) -> ApiError:
        """The ``ResourceInUse`` error AWS returns for a second Create with ``job``'s name."""
        kind = job.kind
        return ApiError(
            "ResourceInUse",
            f"{kind.label} job names must be unique within an AWS account and region, and a "
            f"{kind.value} job with this name already exists ({job.arn})",
        )

    def find(self, name: str) -> Job | None:
        """A job of either kind by name (training first)."""
        return self._jobs[JobKind.TRAINING].get(name) or self._jobs[JobKind.PROCESSING].get(name)

    def jobs(self, kind: JobKind | None = None) -> list[Job]:
        """All jobs of a kind (or both), in creation order."""
        if kind is not None:
            return list(self._jobs[kind].values())
        return sorted(
            itertools.chain(self._jobs[JobKind.TRAINING].values(), self._jobs[JobKind.PROCESSING].values()),
            key=lambda job: job.seq,
        )

    def utilization(self, kind: JobKind, instance_type: str) -> int:
        """Instances of ``instance_type`` held right now by jobs of ``kind`` (for quota checks)."""
        return self._held_by_kind.get((kind, instance_type), 0)

    def available(self, key: _PoolKey, at: float | None = None) -> float:
        """Free instances in a pool (``inf`` when unlimited) at emulated time ``at`` (default: now)."""
        when = self.now() if at is None else at
        return self._limit(key, when) - self._in_use.get(key, 0)

    # ------------------------------------------------------------------------------------- commands

    def submit(self, spec: JobSpec, request: dict[str, Any], arn: str, now: float) -> Job:
        """Create a job in Starting; raises ``ResourceInUse`` when the name exists."""
        existing = self._jobs[spec.kind].get(spec.name)
        if existing is not None:
            raise self.name_in_use(existing)
        job = Job(spec=spec, request=request, seq=next(self._job_seq), arn=arn, created_at=now)
        self._jobs[spec.kind][spec.name] = job
        if spec.kind is JobKind.TRAINING:
            self._transition(job, now, "Starting", "Starting the training job")
        else:
            self._transition(job, now, None, "Starting the processing job")
        self._schedule(job, now + self._scenario.phase_seconds.starting, _Event.EVALUATE)
        return job

    def stop(self, kind: JobKind, name: str, now: float) -> Job:
        """Stop a job in any non-terminal state; ``ValidationException`` for a finished one."""
        job = self.get(kind, name)
        if job.terminal:
            raise ApiError(
                "ValidationException",
                f"The request was rejected because the {kind.value} job is in status {job.status.value}.",
            )
        if job.status is TrainingStatus.STOPPING:
            return job
        self._unwait(job)
        job._token += 1
        job._phase = _Phase.STOPPING
        secondary = "Stopping" if kind is JobKind.TRAINING else None
        self._transition(job, now, secondary, f"Stopping the {kind.value} job", TrainingStatus.STOPPING)
        self._schedule(job, now + self._scenario.phase_seconds.stopping, _Event.STOPPED)
        return job

    def stop_all(self, now: float) -> int:
        """Stop every non-terminal job; returns how many were asked to stop."""
        count = 0
        for job in self.jobs():
            if not job.terminal and job.status is not TrainingStatus.STOPPING:
                self.stop(job.kind, job.name, now)
                count += 1
        return count

    # ------------------------------------------------------------------------------------ internals

    def _push(self, when: float, event: _Event, ref: Any, token: int) -> None:
        heapq.heappush(self._events, (when, next(self._seq), event, ref, token))

    def _schedule(self, job: Job, when: float, event: _Event) -> None:
        self._push(when, event, job, job._token)

    def _run_until(self, now: float) -> None:
        events = self._events
        while events and events[0][0] <= now:
            when, _, event, ref, token = heapq.heappop(events)
            if event is _Event.CAPACITY:
                self._on_capacity_boundary(ref, when)
                continue
            job: Job = ref
            if token != job._token:
                continue  # superseded (the job was stopped or selected meanwhile)
            self._dispatch(job, event, when)

    def _dispatch(self, job: Job, event: _Event, now: float) -> None:
        scenario = self._scenario
        if event is _Event.EVALUATE:
            self._evaluate(job, now)
        elif event is _Event.DOWNLOADED:
            job._phase = _Phase.TRAINING
            self._transition(job, now, "Training", "Training image download completed. Training in progress.")
            runtime = job.spec.runtime_seconds or scenario.job_runtime_seconds
            max_runtime = job.spec.max_runtime_seconds
            assert job.start_time is not None
            if max_runtime is not None and (now - job.start_time) + runtime > max_runtime:
                self._schedule(job, job.start_time + max_runtime, _Event.MAX_RUNTIME)
            else:
                self._schedule(job, now + runtime, _Event.TRAINED)
        elif event is _Event.TRAINED:
            if job.spec.fail:
                self._finish(
                    job, now, TrainingStatus.FAILED, "Failed", "Training job failed", EMULATED_FAILURE
                )
            else:
                job._phase = _Phase.UPLOADING
                self._transition(job, now, "Uploading", "Uploading generated training model")
                self._schedule(job, now + scenario.phase_seconds.uploading, _Event.UPLOADED)
        elif event is _Event.UPLOADED:
            self._finish(job, now, TrainingStatus.COMPLETED, "Completed", "Training job completed")
        elif event is _Event.RUN_END:
            if job.spec.fail:
                job.exit_message = "emulated failure"
                self._finish(job, now, TrainingStatus.FAILED, None, "Processing job failed", EMULATED_FAILURE)
            else:
                self._finish(job, now, TrainingStatus.COMPLETED, None, "Processing job completed")
        elif event is _Event.MAX_RUNTIME:
            self._finish(job, now, TrainingStatus.STOPPED, "MaxRuntimeExceeded", MAX_RUNTIME_EXCEEDED)
        elif event is _Event.STOPPED:
            secondary = "Stopped" if job.kind is JobKind.TRAINING else None
            self._finish(job, now, TrainingStatus.STOPPED, secondary, f"{job.kind.label} job stopped")
        elif event is _Event.PENDING_EXPIRED and job._phase is _Phase.PENDING:
            self._unwait(job)
            if scenario.pending_timeout_outcome == "failed":
                self._finish(
                    job, now, TrainingStatus.FAILED, "Failed", PENDING_EXPIRED_FAILED, PENDING_EXPIRED_FAILED
                )
            else:
                self._finish(
                    job,
                    now,
                    TrainingStatus.STOPPED,
                    "Stopped",
                    PENDING_EXPIRED_STOPPED,
                    PENDING_EXPIRED_STOPPED,
                )

    def _evaluate(self, job: Job, now: float) -> None:
        """End of Starting: take the first entry with capacity, else wait or fail."""
        if self._try_select(job, now):
            return
        kind = job.kind
        if kind is JobKind.TRAINING:
            may_wait = any(is_accelerated(t) for c in job.spec.choices for t, _ in c.groups)
            if not may_wait:
                self._finish(job, now, TrainingStatus.FAILED, "Failed", CAPACITY_ERROR, CAPACITY_ERROR)
                return
            self._transition(job, now, "Pending", "Waiting for compute capacity")
            limit = job.spec.max_pending_seconds or self._scenario.default_max_pending_seconds
            if not math.isinf(limit):
                self._schedule(job, now + limit, _Event.PENDING_EXPIRED)
        else:
            if self._scenario.processing_when_no_capacity == "fail":
                self._finish(job, now, TrainingStatus.FAILED, None, CAPACITY_ERROR, CAPACITY_ERROR)
                return
            self._timeline(job, now, "Waiting for compute capacity")
        job._phase = _Phase.PENDING
        job.pending_since = now
        self._waiting[job.seq] = job
        for choice in job.spec.choices:
            for key in self._keys(choice):
                self._waiting_by_key.setdefault(key, set()).add(job.seq)

    def _keys(self, choice: Choice) -> list[_PoolKey]:
        if choice.plan_arn is not None:
            return [("plan", choice.plan_arn)]
        return [("od", instance_type) for instance_type, _ in choice.groups]

    def _needs(self, choice: Choice) -> dict[_PoolKey, int]:
        needs: dict[_PoolKey, int] = {}
        if choice.plan_arn is not None:
            needs[("plan", choice.plan_arn)] = sum(count for _, count in choice.groups)
            return needs
        for instance_type, count in choice.groups:
            key = ("od", instance_type)
            needs[key] = needs.get(key, 0) + count
        return needs

    def _try_select(self, job: Job, now: float) -> bool:
        found = self._find_choice(job, now)
        if found is None:
            return False
        self._select(job, *found, now)
        return True

    def _select(self, job: Job, choice: Choice, needs: dict[_PoolKey, int], now: float) -> None:
        for key, n in needs.items():
            self._in_use[key] = self._in_use.get(key, 0) + n
        for instance_type, count in choice.groups:
            kind_key = (job.kind, instance_type)
            self._held_by_kind[kind_key] = self._held_by_kind.get(kind_key, 0) + count
        job.held = needs
        job.selected = choice
        job.capacity_kind = CapacityKind.TRAINING_PLAN if choice.plan_arn else CapacityKind.ON_DEMAND
        job.selected_at = now
        job.start_time = now
        job._token += 1  # cancels a pending deadline
        if job.kind is JobKind.TRAINING:
            job._phase = _Phase.DOWNLOADING
            self._transition(job, now, "Downloading", "Downloading input data")
            self._schedule(job, now + self._scenario.phase_seconds.downloading, _Event.DOWNLOADED)
        else:
            job._phase = _Phase.RUNNING
            self._timeline(job, now, f"Running on {choice.count} x {choice.instance_type}")
            runtime = job.spec.runtime_seconds or self._scenario.effective_processing_runtime
            self._schedule(job, now + runtime, _Event.RUN_END)

    def _release(self, job: Job, now: float) -> None:
        if not job.held:
            return
        for key, n in job.held.items():
            self._in_use[key] -= n
        if job.selected is not None:
            for instance_type, count in job.selected.groups:
                self._held_by_kind[(job.kind, instance_type)] -= count
        released = list(job.held)
        job.held = {}
        self._retry(released, now)

    def _unwait(self, job: Job) -> None:
        if self._waiting.pop(job.seq, None) is None:
            return
        for choice in job.spec.choices:
            for key in self._keys(choice):
                seqs = self._waiting_by_key.get(key)
                if seqs is not None:
                    seqs.discard(job.seq)
                    if not seqs:
                        del self._waiting_by_key[key]

    def _retry(self, keys: Iterable[_PoolKey], now: float) -> None:
        """Capacity in ``keys`` may have grown: give it to waiting jobs in creation order."""
        keys = list(keys)
        candidates: set[int] = set()
        for key in keys:
            candidates.update(self._waiting_by_key.get(key, ()))
        for seq in sorted(candidates):
            # A waiting job had no usable entry when last checked, and only ``keys`` changed since, so
            # once those pools are empty no later candidate can start either.
            if all(self._limit(key, now) - self._in_use.get(key, 0) <= 0 for key in keys):
                break
            job = self._waiting.get(seq)
            if job is None:
                continue
            choice_found = self._find_choice(job, now)
            if choice_found is not None:
                self._unwait(job)
                choice, needs = choice_found
                self._select(job, choice, needs, now)

    def _find_choice(self, job: Job, now: float) -> tuple[Choice, dict[_PoolKey, int]] | None:
        for choice in job.spec.choices:
            needs = self._needs(choice)
            if all(self._limit(key, now) - self._in_use.get(key, 0) >= n for key, n in needs.items()):
                return choice, needs
        return None

    def _on_capacity_boundary(self, ref: tuple[str, str, tuple[int, float] | None], now: float) -> None:
        kind, name, periodic = ref
        if kind == "plan":
            self._retry([("plan", name)], now)
            return
        if periodic is not None:  # a periodic boundary: schedule the same one in the next period
            cycle, boundary = periodic
            self._push(
                self._cycle_at(cycle + 1, boundary), _Event.CAPACITY, (kind, name, (cycle + 1, boundary)), 0
            )
        # A capacity key may be a glob: retry every waited-on type whose windows come from it.
        keys = [
            key
            for key in self._waiting_by_key
            if key[0] == "od" and self._windows_for(key[1]) is self._scenario.capacity.get(name)
        ]
        if keys:
            self._retry(keys, now)

    def _windows_for(self, instance_type: str) -> Any:
        try:
            return self._windows_cache[instance_type]
        except KeyError:
            windows = self._scenario.capacity_windows(instance_type)
            self._windows_cache[instance_type] = windows
            return windows

    def _pool_windows(self, instance_type: str) -> tuple[tuple[float, float, int], ...] | None:
        """The type's windows as ``(epoch from, epoch to, free)``, converted by ``_at`` like their events."""
        try:
            return self._pool_cache[instance_type]
        except KeyError:
            windows = self._windows_for(instance_type)
            pool = (
                None
                if windows is None
                else tuple((self._at(w.start), self._at(w.end), w.free) for w in windows)
            )
            self._pool_cache[instance_type] = pool
            return pool

    def _periodic_limit(self, windows: tuple[CapacityWindow, ...], now: float) -> float:
        """Pool size at ``now`` when windows repeat every ``capacity_period`` (ends compared as scheduled)."""
        period = self._scenario.capacity_period
        assert period is not None
        cycle = max(0, math.floor((now - self._start_epoch) / period))
        # Float rounding may put ``now`` on the wrong side of a period start: settle on the period whose
        # start, computed as the boundary events compute it, is the last one at or before ``now``.
        while cycle > 0 and self._cycle_at(cycle, 0.0) > now:
            cycle -= 1
        while self._cycle_at(cycle + 1, 0.0) <= now:
            cycle += 1
        for window in windows:
            start = self._cycle_at(cycle, window.start)
            end = (
                self._cycle_at(cycle + 1, 0.0) if window.end >= period else self._cycle_at(cycle, window.end)
            )
            if start <= now < end:
                return window.free
        return 0

    def _limit(self, key: _PoolKey, now: float) -> float:
        # ``now`` is an emulated epoch; boundaries are compared as epochs (see ``_at``), never as
        # ``now - start_epoch``, so the instant a boundary event fires is inside the window it opens.
        kind, name = key
        if kind == "plan":
            plan = self._scenario.plan(name)
            if plan is None or not (self._at(plan.start) <= now < self._at(plan.end)):
                return 0
            return plan.count
        if self._scenario.capacity_period is not None:
            periodic = self._windows_for(name)
            return math.inf if periodic is None else self._periodic_limit(periodic, now)
        windows = self._pool_windows(name)
        if windows is None:
            return math.inf
        for start, end, free in windows:
            if start <= now < end:
                return free
        return 0

    def _finish(
        self,
        job: Job,
        now: float,
        status: TrainingStatus,
        secondary: str | None,
        message: str,
        failure_reason: str | None = None,
    ) -> None:
        job._phase = _Phase.DONE
        job._token += 1
        if failure_reason is not None:
            job.failure_reason = failure_reason
        if job.start_time is not None:
            job.end_time = now
        self._transition(job, now, secondary, message, status, terminal=True)
        self._release(job, now)

    def _transition(
        self,
        job: Job,
        now: float,
        secondary: str | None,
        message: str,
        status: TrainingStatus | None = None,
        *,
        terminal: bool = False,
    ) -> None:
        if status is not None:
            job.status = status
        job.last_modified = now
        if secondary is not None:
            if job.transitions:
                job.transitions[-1]["EndTime"] = now
            entry: dict[str, Any] = {"Status": secondary, "StartTime": now, "StatusMessage": message}
            if terminal:
                # AWS closes the final transition too; only a live one lacks EndTime.
                entry["EndTime"] = now
            job.transitions.append(entry)
            job.secondary_status = secondary
        self._timeline(job, now, message)

    def _timeline(self, job: Job, now: float, message: str) -> None:
        job.last_modified = now
        job.timeline.append(
            {
                "status": job.status.value,
                "secondary_status": job.secondary_status,
                "emulated_time": now,
                "message": message,
            }
        )
