"""Scenarios for the offline SageMaker: how much capacity exists, when, and how the service misbehaves.

A scenario is written by users as YAML or JSON (or passed as a dict) and validated here into an immutable
:class:`Scenario`. Every error names the offending key with its full path, e.g.
``capacity.ml.g6.48xlarge[1].free: must be an integer >= 0, got -1``, because a scenario that silently
means something else than its author thought makes every test built on it worthless.

Times inside a scenario (capacity windows, training-plan windows) are emulated seconds since the world
started (the emulator's start, or its last reset). With ``capacity_period``, capacity windows repeat:
their times are then seconds into each period, so scarcity shows whenever a job is submitted (training
plans stay absolute: a reservation has one window).
"""

from __future__ import annotations

import copy
import difflib
import fnmatch
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "BUILTIN_SCENARIOS",
    "CapacityWindow",
    "Faults",
    "PhaseSeconds",
    "Scenario",
    "ScenarioError",
    "TrainingPlan",
    "load_scenario",
]

#: Names of the scenarios shipped in ``airflow_provider_sm_prefs/testing/scenarios/*.yaml``.
BUILTIN_SCENARIOS: tuple[str, ...] = (
    "default",
    "first-choice-scarce",
    "all-scarce-past-deadline",
    "cpu-only-no-capacity",
    "plan-no-capacity",
    "throttling-storm",
    "nightly-demo",
    "local-airflow",
)

#: AWS's upper bound for ``MaxPendingTimeInSeconds`` (28 days); used when a job gives none, because the
#: service's own default is not documented.
DEFAULT_MAX_PENDING_SECONDS = 2_419_200

_TOP_LEVEL_KEYS = frozenset(
    {
        "name",
        "description",
        "time_scale",
        "start_epoch",
        "job_runtime_seconds",
        "processing_runtime_seconds",
        "pending_timeout_outcome",
        "processing_when_no_capacity",
        "default_max_pending_seconds",
        "quotas",
        "capacity",
        "capacity_period",
        "training_plans",
        "faults",
        "rate_limits",
        "phase_seconds",
        "region",
        "account_id",
        "builtin_algorithms",
        "seed",
    }
)
_JOB_KINDS = ("training", "processing")
_PHASES = ("starting", "downloading", "uploading", "stopping")
_FAULT_KEYS = ("throttle_rate", "error_rate", "latency_ms", "drop_rate")
_OPERATIONS = frozenset(
    {
        "CreateTrainingJob",
        "DescribeTrainingJob",
        "StopTrainingJob",
        "ListTrainingJobs",
        "CreateProcessingJob",
        "DescribeProcessingJob",
        "StopProcessingJob",
        "ListProcessingJobs",
    }
)
_PLAN_ARN_PREFIX = "arn:aws:sagemaker:"


class ScenarioError(ValueError):
    """A scenario file, dict or name is invalid; the message names the offending key."""


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


@dataclass(frozen=True)
class TrainingPlan:
    """A reservation of ``count`` instances of one type, usable within ``[start, end)``."""

    arn: str
    instance_type: str
    count: int
    start: float
    end: float

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
        return {name: getattr(self, name) for name in _PHASES}


@dataclass(frozen=True)
class Faults:
    """Probabilities (0..1) of injected faults per SageMaker call, and a fixed added latency."""

    throttle_rate: float = 0.0
    error_rate: float = 0.0
    latency_ms: float = 0.0
    drop_rate: float = 0.0

    def as_dict(self) -> dict[str, float]:
        """Render in the scenario file's form."""
        return {name: getattr(self, name) for name in _FAULT_KEYS}


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
    :param quotas: ``{kind: {instance type or glob: max instances}}``; absent means unlimited.
    :param capacity: ``{instance type or glob: windows}``; types matching nothing are unlimited.
    :param capacity_period: when set, every capacity window repeats every this many emulated seconds
        (window times are offsets into the period; an open ``to`` means the period's end).
    :param training_plans: reservations that plan-backed entries draw from.
    :param faults: injected fault rates for the eight SageMaker operations.
    :param rate_limits: ``{operation: calls per second}`` above which ``ThrottlingException`` is returned.
    :param phase_seconds: durations of Starting, Downloading, Uploading and Stopping.
    :param builtin_algorithms: extra ``{image repository name: [instance type globs or cpu/gpu]}``.
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
            if _is_glob(pattern) and fnmatch.fnmatchcase(instance_type, pattern):
                return windows
        return None

    def quota(self, kind: str, instance_type: str) -> int | None:
        """Account quota for ``instance_type`` in job kind ``kind``; None = unlimited."""
        per_kind = self.quotas.get(kind, {})
        exact = per_kind.get(instance_type)
        if exact is not None:
            return exact
        for pattern, limit in per_kind.items():
            if _is_glob(pattern) and fnmatch.fnmatchcase(instance_type, pattern):
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
        }
        if self.start_epoch is not None:
            out["start_epoch"] = self.start_epoch
        if self.capacity_period is not None:
            out["capacity_period"] = self.capacity_period
        if self.processing_runtime_seconds is not None:
            out["processing_runtime_seconds"] = self.processing_runtime_seconds
        if self.seed is not None:
            out["seed"] = self.seed
        return out


def load_scenario(source: str | Path | Mapping[str, Any] | Scenario) -> Scenario:
    """Load and validate a scenario.

    :param source: a :class:`Scenario` (returned as is), a dict, a builtin name (see
        :data:`BUILTIN_SCENARIOS`), or a path to a ``.yaml``/``.yml``/``.json`` file.
    :raises ScenarioError: when the source cannot be found or any key is invalid.
    """
    if isinstance(source, Scenario):
        return source
    if isinstance(source, Mapping):
        return _parse(source, default_name="custom")
    text_source = str(source)
    if isinstance(source, str) and source in BUILTIN_SCENARIOS:
        resource = resources.files("airflow_provider_sm_prefs.testing").joinpath(f"scenarios/{source}.yaml")
        return _parse(
            _read_mapping(resource.read_text(encoding="utf-8"), f"builtin scenario {source!r}"), source
        )
    path = Path(text_source)
    if not path.is_file():
        close = difflib.get_close_matches(text_source, BUILTIN_SCENARIOS, n=1)
        hint = f" Did you mean the builtin {close[0]!r}?" if close else ""
        raise ScenarioError(
            f"scenario {text_source!r} is neither a builtin scenario ({', '.join(BUILTIN_SCENARIOS)}) "
            f"nor an existing file.{hint}"
        )
    data = _read_mapping(path.read_text(encoding="utf-8"), str(path))
    return _parse(data, default_name=path.stem)


def _read_mapping(text: str, origin: str) -> Mapping[str, Any]:
    try:
        # YAML is a superset of JSON, so one parser serves both file kinds.
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{origin}: not valid YAML/JSON: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{origin}: a scenario must be a mapping of keys, got {type(data).__name__}")
    return data


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _unknown_key(where: str, key: object, allowed: Sequence[str] | frozenset[str]) -> ScenarioError:
    close = difflib.get_close_matches(str(key), list(allowed), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    prefix = f"{where}." if where else ""
    return ScenarioError(f"{prefix}{key}: unknown key{hint}; allowed: {', '.join(sorted(allowed))}")


def _number(value: Any, where: str, *, minimum: float = 0.0, allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(f"{where}: must be a number >= {minimum:g}, got {value!r}")
    if math.isnan(value) or (math.isinf(value) and not allow_inf) or value < minimum:
        raise ScenarioError(f"{where}: must be a number >= {minimum:g}, got {value!r}")
    return float(value)


def _integer(value: Any, where: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScenarioError(f"{where}: must be an integer >= {minimum}, got {value!r}")
    return value


def _rate(value: Any, where: str) -> float:
    number = _number(value, where)
    if number > 1:
        raise ScenarioError(f"{where}: must be a probability between 0 and 1, got {value!r}")
    return number


def _choice(value: Any, where: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        raise ScenarioError(f"{where}: must be one of {', '.join(allowed)}, got {value!r}")
    return value.lower()


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ScenarioError(f"{where}: must be a mapping, got {type(value).__name__}")
    return value


def _instance_type_key(key: Any, where: str) -> str:
    # Imported lazily: rules imports botocore's model, which scenario users need not pay for twice.
    from airflow_provider_sm_prefs.testing.rules import ALL_INSTANCE_TYPES

    if not isinstance(key, str) or not key:
        raise ScenarioError(f"{where}: instance type keys must be non-empty strings, got {key!r}")
    if _is_glob(key):
        if not any(fnmatch.fnmatchcase(t, key) for t in ALL_INSTANCE_TYPES):
            raise ScenarioError(f"{where}.{key}: the pattern matches no SageMaker instance type")
        return key
    if key not in ALL_INSTANCE_TYPES:
        close = difflib.get_close_matches(key, sorted(ALL_INSTANCE_TYPES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ScenarioError(f"{where}.{key}: not a SageMaker instance type{hint}")
    return key


def _windows(value: Any, where: str) -> tuple[CapacityWindow, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        # Shorthand: a bare number is that many instances for the whole run.
        return (CapacityWindow(0.0, math.inf, _integer(value, where)),)
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ScenarioError(f"{where}: must be a list of {{from, to, free}} windows or an integer")
    windows: list[CapacityWindow] = []
    for index, raw in enumerate(value):
        item_where = f"{where}[{index}]"
        item = _mapping(raw, item_where)
        for key in item:
            if key not in ("from", "to", "free"):
                raise _unknown_key(item_where, key, ("from", "to", "free"))
        if "free" not in item:
            raise ScenarioError(f"{item_where}.free: required")
        start = _number(item.get("from", 0), f"{item_where}.from")
        end = _number(item["to"], f"{item_where}.to", allow_inf=True) if "to" in item else math.inf
        if end <= start:
            raise ScenarioError(f"{item_where}.to: must be greater than from ({start:g}), got {end:g}")
        windows.append(CapacityWindow(start, end, _integer(item["free"], f"{item_where}.free")))
    windows.sort(key=lambda w: w.start)
    for previous, current in itertools.pairwise(windows):
        if current.start < previous.end:
            raise ScenarioError(
                f"{where}: windows overlap ({previous.start:g}..{previous.end:g} and "
                f"{current.start:g}..{current.end:g}); each moment must have one pool size"
            )
    return tuple(windows)


def _periodic_windows(
    windows: tuple[CapacityWindow, ...], period: float, where: str
) -> tuple[CapacityWindow, ...]:
    """Windows of one period: each within ``[0, period]``, an open end closed at the period's end."""
    out = []
    for index, window in enumerate(windows):
        if window.start >= period:
            raise ScenarioError(
                f"{where}[{index}].from: must be below capacity_period ({period:g}), got {window.start:g}; "
                f"with capacity_period, window times are seconds into each period"
            )
        if not math.isinf(window.end) and window.end > period:
            raise ScenarioError(
                f"{where}[{index}].to: must be at most capacity_period ({period:g}), got {window.end:g}; "
                f"with capacity_period, window times are seconds into each period"
            )
        out.append(CapacityWindow(window.start, min(window.end, period), window.free))
    return tuple(out)


def _parse(data: Mapping[str, Any], default_name: str) -> Scenario:
    data = copy.deepcopy(dict(data))
    for key in data:
        if key not in _TOP_LEVEL_KEYS:
            raise _unknown_key("", key, _TOP_LEVEL_KEYS)
    defaults = Scenario()
    kwargs: dict[str, Any] = {"name": str(data.get("name", default_name))}
    if "description" in data:
        kwargs["description"] = str(data["description"])
    if "time_scale" in data:
        kwargs["time_scale"] = _number(data["time_scale"], "time_scale")
    if data.get("start_epoch") is not None:
        kwargs["start_epoch"] = _number(data["start_epoch"], "start_epoch")
    if "job_runtime_seconds" in data:
        kwargs["job_runtime_seconds"] = _number(data["job_runtime_seconds"], "job_runtime_seconds", minimum=1)
    if data.get("processing_runtime_seconds") is not None:
        kwargs["processing_runtime_seconds"] = _number(
            data["processing_runtime_seconds"], "processing_runtime_seconds", minimum=1
        )
    if "pending_timeout_outcome" in data:
        kwargs["pending_timeout_outcome"] = _choice(
            data["pending_timeout_outcome"], "pending_timeout_outcome", ("stopped", "failed")
        )
    if "processing_when_no_capacity" in data:
        kwargs["processing_when_no_capacity"] = _choice(
            data["processing_when_no_capacity"], "processing_when_no_capacity", ("wait", "fail")
        )
    if "default_max_pending_seconds" in data:
        kwargs["default_max_pending_seconds"] = _number(
            data["default_max_pending_seconds"], "default_max_pending_seconds", minimum=1, allow_inf=True
        )

    quotas: dict[str, dict[str, int]] = {}
    for kind, limits in _mapping(data.get("quotas"), "quotas").items():
        if kind not in _JOB_KINDS:
            raise _unknown_key("quotas", kind, _JOB_KINDS)
        where = f"quotas.{kind}"
        quotas[kind] = {
            _instance_type_key(t, where): _integer(n, f"{where}.{t}")
            for t, n in _mapping(limits, where).items()
        }
    kwargs["quotas"] = quotas

    kwargs["capacity"] = {
        _instance_type_key(t, "capacity"): _windows(w, f"capacity.{t}")
        for t, w in _mapping(data.get("capacity"), "capacity").items()
    }
    if data.get("capacity_period") is not None:
        period = _number(data["capacity_period"], "capacity_period", minimum=1)
        kwargs["capacity_period"] = period
        kwargs["capacity"] = {
            t: _periodic_windows(ws, period, f"capacity.{t}") for t, ws in kwargs["capacity"].items()
        }

    plans: list[TrainingPlan] = []
    raw_plans = data.get("training_plans") or []
    if not isinstance(raw_plans, Sequence) or isinstance(raw_plans, str):
        raise ScenarioError("training_plans: must be a list of plans")
    plan_keys = ("arn", "instance_type", "count", "from", "to")
    for index, raw in enumerate(raw_plans):
        where = f"training_plans[{index}]"
        item = _mapping(raw, where)
        for key in item:
            if key not in plan_keys:
                raise _unknown_key(where, key, plan_keys)
        for required in ("arn", "instance_type", "count"):
            if required not in item:
                raise ScenarioError(f"{where}.{required}: required")
        arn = item["arn"]
        if not isinstance(arn, str) or not arn.startswith(_PLAN_ARN_PREFIX) or ":training-plan/" not in arn:
            raise ScenarioError(
                f"{where}.arn: must look like arn:aws:sagemaker:<region>:<account>:training-plan/<name>, "
                f"got {arn!r}"
            )
        if any(p.arn == arn for p in plans):
            raise ScenarioError(f"{where}.arn: {arn} is defined twice")
        instance_type = item["instance_type"]
        if not isinstance(instance_type, str) or _is_glob(instance_type):
            raise ScenarioError(f"{where}.instance_type: must be one instance type, got {instance_type!r}")
        _instance_type_key(instance_type, where)
        start = _number(item.get("from", 0), f"{where}.from")
        end = _number(item["to"], f"{where}.to", allow_inf=True) if "to" in item else math.inf
        if end <= start:
            raise ScenarioError(f"{where}.to: must be greater than from ({start:g}), got {end:g}")
        plans.append(TrainingPlan(arn, instance_type, _integer(item["count"], f"{where}.count"), start, end))
    kwargs["training_plans"] = tuple(plans)

    faults = _mapping(data.get("faults"), "faults")
    for key in faults:
        if key not in _FAULT_KEYS:
            raise _unknown_key("faults", key, _FAULT_KEYS)
    kwargs["faults"] = Faults(
        throttle_rate=_rate(faults.get("throttle_rate", 0.0), "faults.throttle_rate"),
        error_rate=_rate(faults.get("error_rate", 0.0), "faults.error_rate"),
        latency_ms=_number(faults.get("latency_ms", 0.0), "faults.latency_ms"),
        drop_rate=_rate(faults.get("drop_rate", 0.0), "faults.drop_rate"),
    )

    rate_limits: dict[str, float] = {}
    for op, limit in _mapping(data.get("rate_limits"), "rate_limits").items():
        if op not in _OPERATIONS:
            raise _unknown_key("rate_limits", op, _OPERATIONS)
        rate_limits[op] = _number(limit, f"rate_limits.{op}", minimum=0.001)
    kwargs["rate_limits"] = rate_limits

    phases = _mapping(data.get("phase_seconds"), "phase_seconds")
    for key in phases:
        if key not in _PHASES:
            raise _unknown_key("phase_seconds", key, _PHASES)
    kwargs["phase_seconds"] = PhaseSeconds(
        **{
            name: _number(phases.get(name, getattr(defaults.phase_seconds, name)), f"phase_seconds.{name}")
            for name in _PHASES
        }
    )

    if "region" in data:
        region = data["region"]
        if not isinstance(region, str) or not region:
            raise ScenarioError(f"region: must be a region name such as us-east-1, got {region!r}")
        kwargs["region"] = region
    if "account_id" in data:
        account = str(data["account_id"])
        if not (account.isdigit() and len(account) == 12):
            raise ScenarioError(f"account_id: must be 12 digits, got {data['account_id']!r}")
        kwargs["account_id"] = account

    algorithms: dict[str, tuple[str, ...]] = {}
    for repo, patterns in _mapping(data.get("builtin_algorithms"), "builtin_algorithms").items():
        where = f"builtin_algorithms.{repo}"
        if not isinstance(patterns, Sequence) or isinstance(patterns, str) or not patterns:
            raise ScenarioError(f"{where}: must be a non-empty list of instance type globs or cpu/gpu")
        if not all(isinstance(p, str) and p for p in patterns):
            raise ScenarioError(f"{where}: every entry must be a non-empty string")
        algorithms[str(repo)] = tuple(patterns)
    kwargs["builtin_algorithms"] = algorithms

    if data.get("seed") is not None:
        kwargs["seed"] = _integer(data["seed"], "seed")
    return Scenario(**kwargs)
