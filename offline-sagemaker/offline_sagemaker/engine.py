"""The simulation behind the offline SageMaker: the lifecycle of jobs over an emulated clock. No HTTP here.

The world is advanced lazily: nothing runs in the background. Every call first brings the world up to the
emulated "now" by processing the due events of one heap in time order (phase ends, pending deadlines,
capacity and training-plan window boundaries; see :mod:`.clock`). Which instances exist and who waits
for them is :mod:`.capacity`'s business; the jobs themselves are plain data (:mod:`.models`).

Every change the engine records (a timeline entry: a status or secondary-status transition, or a
processing job's waiting/running) is reported to :attr:`Engine.observer`, if one is set, while the job is
in exactly that state; what to do with it (the EventBridge events of :mod:`.eventbridge`) is not the engine's
business.

Errors a client sees are raised as :mod:`.exceptions` (AWS error codes, no HTTP statuses).
The engine is not thread-safe; the service serialises calls with one lock.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from offline_sagemaker.capacity import Boundary, CapacityPools
from offline_sagemaker.clock import EmulatedClock, Event, EventQueue
from offline_sagemaker.cluster_models import InstanceGroup
from offline_sagemaker.clusters import ClusterFleet
from offline_sagemaker.exceptions import ResourceInUse, ResourceNotFound, ValidationError
from offline_sagemaker.models import (
    CapacityKind,
    Choice,
    Job,
    JobKind,
    JobSpec,
    Phase,
    PoolKey,
    TrainingStatus,
    is_accelerated,
)
from offline_sagemaker.scenario_types import Scenario

__all__ = ["Engine"]

CAPACITY_ERROR = (
    "CapacityError: Unable to provision requested ML compute capacity. "
    "Please retry using a different ML instance type."
)
PENDING_EXPIRED_STOPPED = "MaxPendingTimeInSeconds exceeded while waiting for capacity"
PENDING_EXPIRED_FAILED = "InsufficientCapacityError: Unable to provision requested ML compute capacity within MaxPendingTimeInSeconds"
EMULATED_FAILURE = "AlgorithmError: emulated failure"
MAX_RUNTIME_EXCEEDED = "Training job runtime exceeded MaxRuntimeInSeconds provided"


class Engine:
    """The emulated SageMaker world.

    :param scenario: the validated scenario.
    :param real_clock: monotonic real seconds (inject a fake for deterministic unit tests).
    :param wall_clock: real epoch seconds, used for the emulated epoch when the scenario gives none.
    :param clock: a clock shared with the worlds of other regions; its owner restarts it (every world
        brings itself up to its now before it answers). None: the engine has a clock of its own.
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        real_clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        clock: EmulatedClock | None = None,
    ) -> None:
        self._owns_clock = clock is None
        self._clock = EmulatedClock(real_clock, wall_clock) if clock is None else clock
        self._handlers: dict[Event, Callable[[Job, float], None]] = {
            Event.EVALUATE: self._evaluate,
            Event.DOWNLOADED: self._on_downloaded,
            Event.TRAINED: self._on_trained,
            Event.UPLOADED: self._on_uploaded,
            Event.RUN_END: self._on_run_end,
            Event.MAX_RUNTIME: self._on_max_runtime,
            Event.STOPPED: self._on_stopped,
            Event.PENDING_EXPIRED: self._on_pending_expired,
        }
        #: Called with ``(job, emulated time)`` after every recorded change; must not touch the engine.
        self.observer: Callable[[Job, float], None] | None = None
        self.reset(scenario)

    # ----------------------------------------------------------------------------------------- clock

    @property
    def scenario(self) -> Scenario:
        """The scenario in force."""
        return self._scenario

    @property
    def start_epoch(self) -> float:
        """Emulated epoch seconds at which the world started (capacity times are relative to it)."""
        return self._clock.start_epoch

    def now(self) -> float:
        """Emulated epoch seconds now (does not advance the world)."""
        return self._clock.now()

    def elapsed(self) -> float:
        """Emulated seconds since the world started."""
        return self.now() - self.start_epoch

    def advance(self, seconds: float) -> float:
        """Jump the emulated clock forward and process everything that became due; returns the new now.
        A shared clock moves for every region (each brings its world up to it before it answers)."""
        self._clock.advance(seconds)
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
        if self._owns_clock:
            self._clock.restart(self._scenario)
        self._jobs: dict[JobKind, dict[str, Job]] = {JobKind.TRAINING: {}, JobKind.PROCESSING: {}}
        self._events = EventQueue()
        self._job_seq = itertools.count(1)
        self._pools = CapacityPools(self._scenario, self._clock)
        for when, boundary in self._pools.boundaries():
            self._events.push(when, Event.CAPACITY, boundary)
        self._clusters = ClusterFleet(
            self._scenario, self._pools, self._events, lambda: next(self._job_seq), self._retry
        )

    @property
    def clusters(self) -> ClusterFleet:
        """The HyperPod clusters of this world (they draw from the same capacity pools as jobs)."""
        return self._clusters

    # -------------------------------------------------------------------------------------- queries

    def get(self, kind: JobKind, name: str) -> Job:
        """The job, or ``ValidationException: Requested resource not found.`` as AWS answers."""
        job = self._jobs[kind].get(name)
        if job is None:
            raise ResourceNotFound()
        return job

    def find_kind(self, kind: JobKind, name: str) -> Job | None:
        """The job of ``kind`` named ``name``, or None."""
        return self._jobs[kind].get(name)

    @staticmethod
    def name_in_use(job: Job) -> ResourceInUse:
        """The ``ResourceInUse`` error AWS returns for a second Create with ``job``'s name."""
        kind = job.kind
        return ResourceInUse(
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
        return self._pools.utilization(kind, instance_type)

    def cluster_utilization(self, instance_type: str) -> int:
        """Instances of ``instance_type`` held right now by HyperPod cluster nodes (for quota checks)."""
        return self._pools.cluster_utilization(instance_type)

    def plan_in_use(self, arn: str) -> int:
        """Instances of the training plan ``arn`` held right now."""
        return self._pools.in_use(("plan", arn))

    def epoch_at(self, offset: float) -> float:
        """Emulated epoch of a scenario time (seconds since the world started)."""
        return self._clock.at(offset)

    def available(self, key: PoolKey, at: float | None = None) -> float:
        """Free instances in a pool (``inf`` when unlimited) at emulated time ``at`` (default: now)."""
        return self._pools.available(key, self.now() if at is None else at)

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
        self._schedule(job, now + self._scenario.phase_seconds.starting, Event.EVALUATE)
        return job

    def stop(self, kind: JobKind, name: str, now: float) -> Job:
        """Stop a job in any non-terminal state; ``ValidationException`` for a finished one."""
        job = self.get(kind, name)
        if job.terminal:
            raise ValidationError(
                f"The request was rejected because the {kind.value} job is in status {job.status.value}."
            )
        if job.status is TrainingStatus.STOPPING:
            return job
        self._pools.unwait(job)
        job.token += 1
        job.phase = Phase.STOPPING
        secondary = "Stopping" if kind is JobKind.TRAINING else None
        self._transition(job, now, secondary, f"Stopping the {kind.value} job", TrainingStatus.STOPPING)
        self._schedule(job, now + self._scenario.phase_seconds.stopping, Event.STOPPED)
        return job

    def stop_all(self, now: float) -> int:
        """Stop every non-terminal job; returns how many were asked to stop."""
        count = 0
        for job in self.jobs():
            if not job.terminal and job.status is not TrainingStatus.STOPPING:
                self.stop(job.kind, job.name, now)
                count += 1
        return count

    # --------------------------------------------------------------------------------------- events

    def _schedule(self, job: Job, when: float, event: Event) -> None:
        self._events.push(when, event, job, job.token)

    def _run_until(self, now: float) -> None:
        for when, event, ref, token in self._events.pop_due(now):
            if event is Event.CAPACITY:
                self._on_capacity_boundary(ref, when)
                continue
            if event is Event.CLUSTER:
                self._clusters.on_timer(ref, token, when)
                continue
            job: Job = ref
            if token != job.token:
                continue  # superseded (the job was stopped or selected meanwhile)
            self._handlers[event](job, when)

    def _on_capacity_boundary(self, boundary: Boundary, now: float) -> None:
        following, keys = self._pools.on_boundary(boundary)
        if following is not None:
            self._events.push(following[0], Event.CAPACITY, following[1])
        self._retry(keys, now)

    def _on_downloaded(self, job: Job, now: float) -> None:
        job.phase = Phase.TRAINING
        self._transition(job, now, "Training", "Training image download completed. Training in progress.")
        runtime = job.spec.runtime_seconds or self._scenario.job_runtime_seconds
        max_runtime = job.spec.max_runtime_seconds
        assert job.start_time is not None
        if max_runtime is not None and (now - job.start_time) + runtime > max_runtime:
            self._schedule(job, job.start_time + max_runtime, Event.MAX_RUNTIME)
        else:
            self._schedule(job, now + runtime, Event.TRAINED)

    def _on_trained(self, job: Job, now: float) -> None:
        if job.spec.fail:
            self._finish(job, now, TrainingStatus.FAILED, "Failed", "Training job failed", EMULATED_FAILURE)
            return
        job.phase = Phase.UPLOADING
        self._transition(job, now, "Uploading", "Uploading generated training model")
        self._schedule(job, now + self._scenario.phase_seconds.uploading, Event.UPLOADED)

    def _on_uploaded(self, job: Job, now: float) -> None:
        self._finish(job, now, TrainingStatus.COMPLETED, "Completed", "Training job completed")

    def _on_run_end(self, job: Job, now: float) -> None:
        if job.spec.fail:
            job.exit_message = "emulated failure"
            self._finish(job, now, TrainingStatus.FAILED, None, "Processing job failed", EMULATED_FAILURE)
        else:
            self._finish(job, now, TrainingStatus.COMPLETED, None, "Processing job completed")

    def _on_max_runtime(self, job: Job, now: float) -> None:
        self._finish(job, now, TrainingStatus.STOPPED, "MaxRuntimeExceeded", MAX_RUNTIME_EXCEEDED)

    def _on_stopped(self, job: Job, now: float) -> None:
        secondary = "Stopped" if job.kind is JobKind.TRAINING else None
        self._finish(job, now, TrainingStatus.STOPPED, secondary, f"{job.kind.label} job stopped")

    def _on_pending_expired(self, job: Job, now: float) -> None:
        if job.phase is not Phase.PENDING:
            return
        self._pools.unwait(job)
        if self._scenario.pending_timeout_outcome == "failed":
            reason, status = PENDING_EXPIRED_FAILED, TrainingStatus.FAILED
        else:
            reason, status = PENDING_EXPIRED_STOPPED, TrainingStatus.STOPPED
        self._finish(job, now, status, status.value, reason, reason)

    # ------------------------------------------------------------------------------------- capacity

    def _evaluate(self, job: Job, now: float) -> None:
        """End of Starting: take the first entry with capacity, else wait or fail."""
        found = self._pools.find_choice(job, now)
        if found is not None:
            self._select(job, *found, now)
            return
        if job.kind is JobKind.TRAINING:
            may_wait = any(is_accelerated(t) for c in job.spec.choices for t, _ in c.groups)
            if not may_wait:
                self._finish(job, now, TrainingStatus.FAILED, "Failed", CAPACITY_ERROR, CAPACITY_ERROR)
                return
            self._transition(job, now, "Pending", "Waiting for compute capacity")
            limit = job.spec.max_pending_seconds or self._scenario.default_max_pending_seconds
            if not math.isinf(limit):
                self._schedule(job, now + limit, Event.PENDING_EXPIRED)
        else:
            if self._scenario.processing_when_no_capacity == "fail":
                self._finish(job, now, TrainingStatus.FAILED, None, CAPACITY_ERROR, CAPACITY_ERROR)
                return
            self._timeline(job, now, "Waiting for compute capacity")
        job.phase = Phase.PENDING
        job.pending_since = now
        self._pools.wait(job)

    def _select(self, job: Job, choice: Choice, needs: dict[PoolKey, int], now: float) -> None:
        self._pools.take(job, choice, needs)
        job.selected = choice
        job.capacity_kind = CapacityKind.TRAINING_PLAN if choice.plan_arn else CapacityKind.ON_DEMAND
        job.selected_at = now
        job.start_time = now
        job.token += 1  # cancels a pending deadline
        if job.kind is JobKind.TRAINING:
            job.phase = Phase.DOWNLOADING
            self._transition(job, now, "Downloading", "Downloading input data")
            self._schedule(job, now + self._scenario.phase_seconds.downloading, Event.DOWNLOADED)
        else:
            job.phase = Phase.RUNNING
            self._timeline(job, now, f"Running on {choice.count} x {choice.instance_type}")
            runtime = job.spec.runtime_seconds or self._scenario.effective_processing_runtime
            self._schedule(job, now + runtime, Event.RUN_END)

    def _retry(self, keys: Iterable[PoolKey], now: float) -> None:
        """Capacity in ``keys`` may have grown: give it to waiting jobs and groups in creation order."""
        for waiter in self._pools.ready(keys, now):
            match waiter:
                case Job():
                    found = self._pools.find_choice(waiter, now)
                    if found is not None:
                        self._pools.unwait(waiter)
                        self._select(waiter, *found, now)
                case InstanceGroup():
                    self._clusters.provision(waiter, now)

    # ----------------------------------------------------------------------------------- transitions

    def _finish(
        self,
        job: Job,
        now: float,
        status: TrainingStatus,
        secondary: str | None,
        message: str,
        failure_reason: str | None = None,
    ) -> None:
        job.phase = Phase.DONE
        job.token += 1
        if failure_reason is not None:
            job.failure_reason = failure_reason
        if job.start_time is not None:
            job.end_time = now
        self._transition(job, now, secondary, message, status, terminal=True)
        if job.held:
            self._retry(self._pools.release(job), now)

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
        if self.observer is not None:
            self.observer(job, now)
