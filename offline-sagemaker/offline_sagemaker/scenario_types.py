"""What a scenario is: the validated, immutable :class:`Scenario` and its parts. A leaf module.

Parsing and validating scenario files lives in :mod:`.scenario` (the public entry point) and
:mod:`.scenario_fields`; the engine needs only these types, so it does not import YAML.

Times inside a scenario (capacity windows, training-plan windows) are emulated seconds since the world
started (the emulator's start, or its last reset). With ``capacity_period``, capacity windows repeat:
their times are then seconds into each period, so scarcity shows whenever a job is submitted (training
plans stay absolute: a reservation has one window).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BUILTIN_SCENARIOS",
    "CLUSTER_KEYS",
    "DEFAULT_MAX_PENDING_SECONDS",
    "EVENT_KEYS",
    "FAULT_KEYS",
    "JOB_LOG_FIELDS",
    "JOB_LOG_KEYS",
    "PARTIAL_GROUP_STATUSES",
    "PHASES",
    "PLAN_STATUSES",
    "REGION_KEYS",
    "SCALE_UP_TYPES",
    "CapacityWindow",
    "ClusterSettings",
    "EventSettings",
    "Faults",
    "JobLogs",
    "PhaseSeconds",
    "RegionSettings",
    "Scenario",
    "ScenarioSource",
    "TrainingPlan",
    "is_glob",
]

#: Names of the scenarios shipped in ``offline_sagemaker/scenarios/*.yaml``.
BUILTIN_SCENARIOS: tuple[str, ...] = (
    "default",
    "first-choice-scarce",
    "all-scarce-past-deadline",
    "cpu-only-no-capacity",
    "plan-no-capacity",
    "throttling-storm",
    "nightly-demo",
    "local-airflow",
    "capacity-history",
)

#: AWS's upper bound for ``MaxPendingTimeInSeconds`` (28 days); used when a job gives none, because the
#: service's own default is not documented.
DEFAULT_MAX_PENDING_SECONDS = 2_419_200

#: The lifecycle phases whose durations a scenario sets, in file order.
PHASES = ("starting", "downloading", "uploading", "stopping")
#: The injected fault settings, in file order.
FAULT_KEYS = ("throttle_rate", "error_rate", "latency_ms", "drop_rate", "response_latency_ms")
#: The EventBridge event settings, in file order.
EVENT_KEYS = ("enabled", "delay_seconds", "loss_rate", "duplicate_rate")


def is_glob(pattern: str) -> bool:
    """Whether an instance type key is a glob (``ml.g*``) rather than one type."""
    return any(ch in pattern for ch in "*?[")


@dataclass(frozen=True)
class CapacityWindow:
    """``free`` instances exist from ``start`` (inclusive) to ``end`` (exclusive, ``inf`` = forever)."""

    start: float
    end: float
    free: int

    def as_dict(self) -> dict[str, Any]:
        """Render in the scenario file's form."""
        out: dict[str, Any] = {"from": self.start, "free": self.free}
        if not math.isinf(self.end):
            out["to"] = self.end
        return out


#: Statuses a scenario may pin a training plan to (AWS's ``TrainingPlanStatus``).
PLAN_STATUSES = ("Pending", "Active", "Scheduled", "Expired", "Failed")


@dataclass(frozen=True)
class TrainingPlan:
    """A reservation of ``count`` instances of one type, usable within ``[start, end)``.

    ``status`` pins the status DescribeTrainingPlan reports (and a plan that is not ``Active`` lends no
    instances); None derives it from the window: Scheduled before, Active within, Expired after.
    """

    arn: str
    instance_type: str
    count: int
    start: float
    end: float
    status: str | None = None

    @property
    def name(self) -> str:
        """The plan's name: the ARN's last part."""
        return self.arn.rsplit("/", 1)[-1]

    def as_dict(self) -> dict[str, Any]:
        """Render in the scenario file's form."""
        out: dict[str, Any] = {
            "arn": self.arn,
            "instance_type": self.instance_type,
            "count": self.count,
            "from": self.start,
        }
        if not math.isinf(self.end):
            out["to"] = self.end
        if self.status is not None:
            out["status"] = self.status
        return out


@dataclass(frozen=True)
class PhaseSeconds:
    """Emulated duration of the lifecycle phases around the job's own run time."""

    starting: float = 60.0
    downloading: float = 60.0
    uploading: float = 30.0
    stopping: float = 30.0

    def as_dict(self) -> dict[str, float]:
        """Render in the scenario file's form."""
        return {name: getattr(self, name) for name in PHASES}


@dataclass(frozen=True)
class Faults:
    """Probabilities (0..1) of injected faults per SageMaker call, a fixed added latency, and per-operation
    response latencies.

    ``latency_ms`` delays every call before it runs; ``response_latency_ms`` (``{operation: ms}``) delays
    the answer of one operation after it ran, so its effect (a created job) exists before the client
    learns of it.
    """

    throttle_rate: float = 0.0
    error_rate: float = 0.0
    latency_ms: float = 0.0
    drop_rate: float = 0.0
    response_latency_ms: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Render in the scenario file's form."""
        out: dict[str, Any] = {name: getattr(self, name) for name in FAULT_KEYS}
        out["response_latency_ms"] = dict(self.response_latency_ms)
        return out


@dataclass(frozen=True)
class EventSettings:
    """How the job state-change events reach EventBridge (see :mod:`.eventbridge`).

    :param enabled: whether changes are published at all.
    :param delay_seconds: real seconds between a change and its delivery to the default bus.
    :param loss_rate: probability (0..1) that an event is never delivered.
    :param duplicate_rate: probability (0..1) that an event is delivered twice (same ``id``).
    """

    enabled: bool = True
    delay_seconds: float = 0.0
    loss_rate: float = 0.0
    duplicate_rate: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """Render in the scenario file's form."""
        return {name: getattr(self, name) for name in EVENT_KEYS}


#: The HyperPod cluster settings, in file order, with the values the choices allow.
CLUSTER_KEYS = (
    "node_provisioning_seconds",
    "node_shutdown_seconds",
    "scale_up_types",
    "partial_group_status",
)
SCALE_UP_TYPES = ("any", "running")
PARTIAL_GROUP_STATUSES = ("in-service", "degraded")


@dataclass(frozen=True)
class ClusterSettings:
    """How HyperPod cluster nodes come and go (see :mod:`.clusters`).

    :param node_provisioning_seconds: emulated seconds a node is Pending once it has an instance.
    :param node_shutdown_seconds: emulated seconds a node is ShuttingDown before its instance is free.
    :param scale_up_types: which types a scale-up of a group that already runs nodes may add: ``any``
        listed type, in priority order (default), or only types it ``running`` already (AWS does not say).
    :param partial_group_status: the status of a group short of its target once ``MinInstanceCount``
        nodes run, outside Continuous mode: ``in-service`` (default) or ``degraded`` (AWS does not say).
    """

    node_provisioning_seconds: float = 600.0
    node_shutdown_seconds: float = 60.0
    scale_up_types: str = "any"
    partial_group_status: str = "in-service"

    def as_dict(self) -> dict[str, Any]:
        """Render in the scenario file's form."""
        return {name: getattr(self, name) for name in CLUSTER_KEYS}


#: The sections of ``job_logs``, in file order.
JOB_LOG_KEYS = ("training", "processing", "failure")
#: The placeholders a ``job_logs`` line may use (``str.format`` fields).
JOB_LOG_FIELDS = ("job_name", "host", "instance_type", "instance_count")


@dataclass(frozen=True)
class JobLogs:
    """What a job's containers write to CloudWatch Logs, one stream per instance.

    ``training`` / ``processing``: the lines every instance writes while the job runs, spread evenly over
    its run time. ``failure``: the last lines of the first instance (``algo-1``) of a job that fails
    after it started, after the FailureReason's own line. Each line may use the placeholders
    :data:`JOB_LOG_FIELDS`.
    """

    training: tuple[str, ...] = (
        "Container started on {instance_type} ({host} of {instance_count} instances)",
        "Reading training data from /opt/ml/input/data",
        "Epoch 1/3: loss=0.912",
        "Epoch 2/3: loss=0.534",
        "Epoch 3/3: loss=0.301",
        "Saving the model to /opt/ml/model",
    )
    processing: tuple[str, ...] = (
        "Container started on {instance_type} ({host} of {instance_count} instances)",
        "Reading inputs from /opt/ml/processing/input",
        "Processed 50% of the records",
        "Processed 100% of the records",
        "Writing outputs to /opt/ml/processing/output",
    )
    failure: tuple[str, ...] = (
        "Traceback (most recent call last):",
        '  File "/opt/ml/code/entrypoint.py", line 42, in <module>',
        "RuntimeError: emulated failure in {job_name} on {host}",
    )

    def as_dict(self) -> dict[str, list[str]]:
        """Render in the scenario file's form."""
        return {key: list(getattr(self, key)) for key in JOB_LOG_KEYS}


#: What a region of ``regions`` may set for itself (every other setting is the scenario's own).
REGION_KEYS = ("capacity", "quotas", "training_plans")


@dataclass(frozen=True)
class RegionSettings:
    """What differs in one more region of the scenario; None keeps the scenario's own value.

    :param capacity: the region's capacity windows (``{instance type or glob: windows}``).
    :param quotas: the region's account quotas (``{kind: {instance type or glob: max instances}}``).
    :param training_plans: the region's reservations (their ARNs name the region).
    """

    capacity: Mapping[str, tuple[CapacityWindow, ...]] | None = None
    quotas: Mapping[str, Mapping[str, int]] | None = None
    training_plans: tuple[TrainingPlan, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.capacity is not None:
            out["capacity"] = {t: [w.as_dict() for w in ws] for t, ws in self.capacity.items()}
        if self.quotas is not None:
            out["quotas"] = {kind: dict(limits) for kind, limits in self.quotas.items()}
        if self.training_plans is not None:
            out["training_plans"] = [p.as_dict() for p in self.training_plans]
        return out


@dataclass(frozen=True)
class Scenario:
    """A validated scenario. Build one with :func:`load_scenario`; the constructor does not validate.

    :param name: label shown in stats and logs.
    :param time_scale: emulated seconds per real second (0 freezes the clock: only ``advance`` moves it).
    :param job_runtime_seconds: emulated run time of a training job once it starts (tags may override).
    :param processing_runtime_seconds: the same for processing jobs.
    :param pending_timeout_outcome: ``stopped`` or ``failed`` when ``MaxPendingTimeInSeconds`` expires.
    :param processing_when_no_capacity: ``wait`` or ``fail`` when no processing entry has capacity.
    :param default_max_pending_seconds: pending bound for jobs that give no ``MaxPendingTimeInSeconds``.
    :param quotas: ``{kind: {instance type or glob: max instances}}`` for ``training``, ``processing``
        and ``cluster`` (HyperPod nodes); absent means unlimited.
    :param capacity: ``{instance type or glob: windows}``; types matching nothing are unlimited.
    :param capacity_period: when set, every capacity window repeats every this many emulated seconds
        (window times are offsets into the period; an open ``to`` means the period's end).
    :param training_plans: reservations that plan-backed entries draw from.
    :param faults: injected fault rates for the emulated operations.
    :param rate_limits: ``{operation: calls per second}`` above which ``ThrottlingException`` is returned.
    :param phase_seconds: durations of Starting, Downloading, Uploading and Stopping.
    :param builtin_algorithms: extra ``{image repository name: [instance type globs or cpu/gpu]}``.
    :param prices: ``{instance type: {region or "*": USD per instance-hour}}`` for the Price List API;
        a type without a price in a region is not offered there.
    :param access_denied: operations answered with ``AccessDeniedException``.
    :param job_logs: the lines jobs write to CloudWatch Logs (see :class:`JobLogs`).
    :param describe_instance_count: what Describe* answers for the job-level ``InstanceCount`` of a job
        whose preference entries carry the counts (AWS does not document it): ``omitted`` (default; the
        request is echoed, so the field is absent) or ``selected`` (``SelectedInstanceCount`` once an entry
        is selected).
    :param iam_denied_actions: actions IAM ``SimulatePrincipalPolicy`` reports as ``implicitDeny`` (all
        others are ``allowed``).
    :param events: how job state changes reach EventBridge (see :class:`EventSettings`).
    :param clusters: how HyperPod cluster nodes come and go (see :class:`ClusterSettings`).
    :param regions: the other regions' own capacity, quotas and training plans (see
        :class:`RegionSettings`). Every region is a world of its own (jobs, clusters, ARNs, capacity
        pools) on one clock; a region not named here has the scenario's own settings.
    """

    name: str = "custom"
    description: str = ""
    time_scale: float = 60.0
    start_epoch: float | None = None
    job_runtime_seconds: float = 900.0
    processing_runtime_seconds: float | None = None
    pending_timeout_outcome: str = "stopped"
    processing_when_no_capacity: str = "wait"
    default_max_pending_seconds: float = DEFAULT_MAX_PENDING_SECONDS
    quotas: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    capacity: Mapping[str, tuple[CapacityWindow, ...]] = field(default_factory=dict)
    capacity_period: float | None = None
    training_plans: tuple[TrainingPlan, ...] = ()
    faults: Faults = field(default_factory=Faults)
    rate_limits: Mapping[str, float] = field(default_factory=dict)
    phase_seconds: PhaseSeconds = field(default_factory=PhaseSeconds)
    region: str = "us-east-1"
    account_id: str = "123456789012"
    builtin_algorithms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    seed: int | None = None
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    access_denied: frozenset[str] = frozenset()
    job_logs: JobLogs = field(default_factory=JobLogs)
    describe_instance_count: str = "omitted"
    iam_denied_actions: frozenset[str] = frozenset()
    events: EventSettings = field(default_factory=EventSettings)
    clusters: ClusterSettings = field(default_factory=ClusterSettings)
    regions: Mapping[str, RegionSettings] = field(default_factory=dict)

    def in_region(self, region: str) -> Scenario:
        """The scenario as seen from ``region``: its identity, and that region's own settings if it has any."""
        if region == self.region:
            return self
        own = self.regions.get(region) or RegionSettings()
        return dataclasses.replace(
            self,
            region=region,
            capacity=self.capacity if own.capacity is None else own.capacity,
            quotas=self.quotas if own.quotas is None else own.quotas,
            training_plans=self.training_plans if own.training_plans is None else own.training_plans,
        )

    def price(self, instance_type: str, region: str) -> float | None:
        """USD per instance-hour of ``instance_type`` in ``region``; None when not offered there."""
        by_region = self.prices.get(instance_type) or {}
        return by_region.get(region, by_region.get("*"))

    @property
    def effective_processing_runtime(self) -> float:
        """Processing run time: its own setting, else the training one."""
        if self.processing_runtime_seconds is None:
            return self.job_runtime_seconds
        return self.processing_runtime_seconds

    def capacity_windows(self, instance_type: str) -> tuple[CapacityWindow, ...] | None:
        """Windows for ``instance_type`` (exact key first, then the first matching glob); None = unlimited."""
        exact = self.capacity.get(instance_type)
        if exact is not None:
            return exact
        for pattern, windows in self.capacity.items():
            if is_glob(pattern) and fnmatch.fnmatchcase(instance_type, pattern):
                return windows
        return None

    def quota(self, kind: str, instance_type: str) -> int | None:
        """Account quota for ``instance_type`` in job kind ``kind`` (or ``cluster``); None = unlimited."""
        per_kind = self.quotas.get(kind, {})
        exact = per_kind.get(instance_type)
        if exact is not None:
            return exact
        for pattern, limit in per_kind.items():
            if is_glob(pattern) and fnmatch.fnmatchcase(instance_type, pattern):
                return limit
        return None

    def plan(self, arn: str) -> TrainingPlan | None:
        """The training plan with this ARN, if the scenario defines it."""
        for plan in self.training_plans:
            if plan.arn == arn:
                return plan
        return None

    def as_dict(self) -> dict[str, Any]:
        """Render in the scenario file's form (round-trips through :func:`load_scenario`)."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "time_scale": self.time_scale,
            "job_runtime_seconds": self.job_runtime_seconds,
            "pending_timeout_outcome": self.pending_timeout_outcome,
            "processing_when_no_capacity": self.processing_when_no_capacity,
            "default_max_pending_seconds": self.default_max_pending_seconds,
            "quotas": {kind: dict(limits) for kind, limits in self.quotas.items()},
            "capacity": {t: [w.as_dict() for w in ws] for t, ws in self.capacity.items()},
            "training_plans": [p.as_dict() for p in self.training_plans],
            "faults": self.faults.as_dict(),
            "rate_limits": dict(self.rate_limits),
            "phase_seconds": self.phase_seconds.as_dict(),
            "region": self.region,
            "account_id": self.account_id,
            "builtin_algorithms": {k: list(v) for k, v in self.builtin_algorithms.items()},
            "job_logs": self.job_logs.as_dict(),
            "describe_instance_count": self.describe_instance_count,
            "events": self.events.as_dict(),
            "clusters": self.clusters.as_dict(),
        }
        if self.start_epoch is not None:
            out["start_epoch"] = self.start_epoch
        if self.capacity_period is not None:
            out["capacity_period"] = self.capacity_period
        if self.processing_runtime_seconds is not None:
            out["processing_runtime_seconds"] = self.processing_runtime_seconds
        if self.seed is not None:
            out["seed"] = self.seed
        if self.prices:
            out["prices"] = {t: dict(by_region) for t, by_region in self.prices.items()}
        if self.access_denied:
            out["access_denied"] = sorted(self.access_denied)
        if self.iam_denied_actions:
            out["iam_denied_actions"] = sorted(self.iam_denied_actions)
        if self.regions:
            out["regions"] = {region: own.as_dict() for region, own in self.regions.items()}
        return out


#: What :func:`~offline_sagemaker.scenario.load_scenario` accepts: a builtin name, a path
#: to a YAML/JSON file, a mapping, or a :class:`Scenario`.
ScenarioSource = str | Path | Mapping[str, Any] | Scenario
