"""The job model of the offline SageMaker: job kinds, statuses, requests as the simulation sees them, jobs.

A leaf: plain data with no behaviour beyond rendering, mutated only by :mod:`.engine` (lifecycle) and
:mod:`.capacity` (which instances a job holds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = [
    "ACCELERATED_PREFIXES",
    "TERMINAL",
    "CapacityKind",
    "Choice",
    "Job",
    "JobKind",
    "JobSpec",
    "Phase",
    "PoolKey",
    "TrainingStatus",
    "is_accelerated",
]

#: Instance families SageMaker lets wait for capacity (Pending) instead of failing at once.
ACCELERATED_PREFIXES = ("ml.p", "ml.g", "ml.trn")


def is_accelerated(instance_type: str) -> bool:
    """True for GPU/Trainium families (``ml.p*``, ``ml.g*``, ``ml.trn*``)."""
    return instance_type.startswith(ACCELERATED_PREFIXES)


class _StrEnum(str, Enum):
    """A ``str`` enum whose ``str()`` and ``format()`` are its value, as ``enum.StrEnum`` (Python 3.11+).

    Both are spelled out: a ``(str, Enum)`` member formats as its value on 3.10 but as ``Cls.NAME`` from
    3.11 on, and its ``str()`` is ``Cls.NAME`` everywhere.
    """

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(str.__str__(self), format_spec)


class JobKind(_StrEnum):
    """The two job kinds the emulator simulates."""

    TRAINING = "training"
    PROCESSING = "processing"

    @property
    def label(self) -> str:
        """``Training``/``Processing`` as used in AWS messages."""
        return self.value.capitalize()


class CapacityKind(_StrEnum):
    """Where a selected entry's instances come from."""

    TRAINING_PLAN = "training-plan"
    ON_DEMAND = "on-demand"


class TrainingStatus(_StrEnum):
    """``TrainingJobStatus``/``ProcessingJobStatus`` values the emulator emits."""

    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"


TERMINAL = frozenset({TrainingStatus.COMPLETED, TrainingStatus.FAILED, TrainingStatus.STOPPED})


class Phase(Enum):
    """Where a job is in its lifecycle (finer than its status; the engine's own bookkeeping)."""

    STARTING = "starting"
    PENDING = "pending"
    DOWNLOADING = "downloading"
    TRAINING = "training"
    UPLOADING = "uploading"
    RUNNING = "running"
    STOPPING = "stopping"
    DONE = "done"


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
    """A validated job request as the simulation needs it (built by :mod:`.rules`, run by :mod:`.engine`).

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


#: A capacity pool: ``("od", instance type)`` for On-Demand, ``("plan", plan ARN)`` for a training plan.
PoolKey = tuple[str, str]


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
    held: dict[PoolKey, int] = field(default_factory=dict)
    phase: Phase = Phase.STARTING
    #: The job's tags (given at Create, changed by AddTags / DeleteTags; see :mod:`.tagging`).
    tags: dict[str, str] = field(default_factory=dict)
    #: Bumped whenever the job's scheduled events become stale (stopped, selected, finished).
    token: int = 0

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
            "region": self.arn.split(":")[3],
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
