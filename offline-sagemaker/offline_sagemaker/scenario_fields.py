"""Validation of a scenario's values, one small helper per kind of value and per section of the file.

Each section helper takes the whole (already key-checked) scenario mapping and returns the
:class:`~offline_sagemaker.scenario_types.Scenario` keyword arguments of its section;
:func:`offline_sagemaker.scenario.parse_scenario` runs them in file order, so the first
error in that order is the one reported. Every error names the offending key with its full path, e.g.
``capacity.ml.g6.48xlarge[1].free: must be an integer >= 0, got -1``.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import itertools
import math
import string
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from offline_sagemaker.botocore_model import all_instance_types
from offline_sagemaker.exceptions import ScenarioError
from offline_sagemaker.operations import OPERATIONS
from offline_sagemaker.scenario_types import (
    CLUSTER_KEYS,
    EVENT_KEYS,
    FAULT_KEYS,
    JOB_LOG_FIELDS,
    JOB_LOG_KEYS,
    PARTIAL_GROUP_STATUSES,
    PHASES,
    PLAN_STATUSES,
    SCALE_UP_TYPES,
    CapacityWindow,
    ClusterSettings,
    EventSettings,
    Faults,
    JobLogs,
    PhaseSeconds,
    Scenario,
    TrainingPlan,
    is_glob,
)

__all__ = ["SECTIONS", "TOP_LEVEL_KEYS", "unknown_key"]

#: Every top-level key of a scenario file: one per field of :class:`Scenario`, whose names they share.
TOP_LEVEL_KEYS = frozenset(f.name for f in dataclasses.fields(Scenario))
_QUOTA_KINDS = ("training", "processing", "cluster")
_WINDOW_KEYS = ("from", "to", "free")
_PLAN_KEYS = ("arn", "instance_type", "count", "from", "to", "status")
_PLAN_ARN_PREFIX = "arn:aws:sagemaker:"

Section = Callable[[Mapping[str, Any]], dict[str, Any]]

# ------------------------------------------------------------------------------------------- values


def unknown_key(where: str, key: object, allowed: Sequence[str] | frozenset[str]) -> ScenarioError:
    """The error for a key that is not allowed at ``where``, suggesting the closest allowed one."""
    close = difflib.get_close_matches(str(key), list(allowed), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    prefix = f"{where}." if where else ""
    return ScenarioError(f"{prefix}{key}: unknown key{hint}; allowed: {', '.join(sorted(allowed))}")


def _only_keys(item: Mapping[str, Any], where: str, allowed: Sequence[str]) -> None:
    for key in item:
        if key not in allowed:
            raise unknown_key(where, key, allowed)


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


def _choice(value: Any, where: str, *, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        raise ScenarioError(f"{where}: must be one of {', '.join(allowed)}, got {value!r}")
    return value.lower()


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ScenarioError(f"{where}: must be a mapping, got {type(value).__name__}")
    return value


def _list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)


def _region(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ScenarioError(f"{where}: must be a region name such as us-east-1, got {value!r}")
    return value


def _account_id(value: Any, where: str) -> str:
    account = str(value)
    if not (account.isdigit() and len(account) == 12):
        raise ScenarioError(f"{where}: must be 12 digits, got {value!r}")
    return account


def _instance_type_key(key: Any, where: str) -> str:
    if not isinstance(key, str) or not key:
        raise ScenarioError(f"{where}: instance type keys must be non-empty strings, got {key!r}")
    types = all_instance_types()
    if is_glob(key):
        if not any(fnmatch.fnmatchcase(t, key) for t in types):
            raise ScenarioError(f"{where}.{key}: the pattern matches no SageMaker instance type")
        return key
    if key not in types:
        close = difflib.get_close_matches(key, sorted(types), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ScenarioError(f"{where}.{key}: not a SageMaker instance type{hint}")
    return key


def _span(item: Mapping[str, Any], where: str) -> tuple[float, float]:
    """``[from, to)`` of a window or plan: ``from`` defaults to 0, a missing ``to`` means forever."""
    start = _number(item.get("from", 0), f"{where}.from")
    end = _number(item["to"], f"{where}.to", allow_inf=True) if "to" in item else math.inf
    if end <= start:
        raise ScenarioError(f"{where}.to: must be greater than from ({start:g}), got {end:g}")
    return start, end


def _window(raw: Any, where: str) -> CapacityWindow:
    item = _mapping(raw, where)
    _only_keys(item, where, _WINDOW_KEYS)
    if "free" not in item:
        raise ScenarioError(f"{where}.free: required")
    start, end = _span(item, where)
    return CapacityWindow(start, end, _integer(item["free"], f"{where}.free"))


def _windows(value: Any, where: str) -> tuple[CapacityWindow, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        # Shorthand: a bare number is that many instances for the whole run.
        return (CapacityWindow(0.0, math.inf, _integer(value, where)),)
    if not _list(value):
        raise ScenarioError(f"{where}: must be a list of {{from, to, free}} windows or an integer")
    windows = sorted((_window(raw, f"{where}[{index}]") for index, raw in enumerate(value)), key=_start)
    for previous, current in itertools.pairwise(windows):
        if current.start < previous.end:
            raise ScenarioError(
                f"{where}: windows overlap ({previous.start:g}..{previous.end:g} and "
                f"{current.start:g}..{current.end:g}); each moment must have one pool size"
            )
    return tuple(windows)


def _start(window: CapacityWindow) -> float:
    return window.start


def _periodic_window(window: CapacityWindow, period: float, where: str) -> CapacityWindow:
    """One window of a period: within ``[0, period]``, an open end closed at the period's end."""
    if window.start >= period:
        raise ScenarioError(
            f"{where}.from: must be below capacity_period ({period:g}), got {window.start:g}; "
            f"with capacity_period, window times are seconds into each period"
        )
    if not math.isinf(window.end) and window.end > period:
        raise ScenarioError(
            f"{where}.to: must be at most capacity_period ({period:g}), got {window.end:g}; "
            f"with capacity_period, window times are seconds into each period"
        )
    return CapacityWindow(window.start, min(window.end, period), window.free)


def _plan_arn(arn: Any, where: str, plans: Sequence[TrainingPlan]) -> str:
    if not isinstance(arn, str) or not arn.startswith(_PLAN_ARN_PREFIX) or ":training-plan/" not in arn:
        raise ScenarioError(
            f"{where}.arn: must look like arn:aws:sagemaker:<region>:<account>:training-plan/<name>, "
            f"got {arn!r}"
        )
    if any(p.arn == arn for p in plans):
        raise ScenarioError(f"{where}.arn: {arn} is defined twice")
    return arn


def _training_plan(raw: Any, where: str, plans: Sequence[TrainingPlan]) -> TrainingPlan:
    item = _mapping(raw, where)
    _only_keys(item, where, _PLAN_KEYS)
    for required in ("arn", "instance_type", "count"):
        if required not in item:
            raise ScenarioError(f"{where}.{required}: required")
    arn = _plan_arn(item["arn"], where, plans)
    instance_type = item["instance_type"]
    if not isinstance(instance_type, str) or is_glob(instance_type):
        raise ScenarioError(f"{where}.instance_type: must be one instance type, got {instance_type!r}")
    _instance_type_key(instance_type, where)
    start, end = _span(item, where)
    status = item.get("status")
    if status is not None and status not in PLAN_STATUSES:
        raise ScenarioError(
            f"{where}.status: must be one of {', '.join(PLAN_STATUSES)} (or left out to follow the window), "
            f"got {status!r}"
        )
    return TrainingPlan(arn, instance_type, _integer(item["count"], f"{where}.count"), start, end, status)


def _algorithm_patterns(patterns: Any, where: str) -> tuple[str, ...]:
    if not _list(patterns) or not patterns:
        raise ScenarioError(f"{where}: must be a non-empty list of instance type globs or cpu/gpu")
    if not all(isinstance(p, str) and p for p in patterns):
        raise ScenarioError(f"{where}: every entry must be a non-empty string")
    return tuple(patterns)


# ----------------------------------------------------------------------------------------- sections

#: ``(key, validator, None means absent)`` for single-valued settings.
_Setting = tuple[str, Callable[[Any, str], Any], bool]

_GENERAL: tuple[_Setting, ...] = (
    ("description", lambda value, where: str(value), False),
    ("time_scale", _number, False),
    ("start_epoch", _number, True),
    ("job_runtime_seconds", partial(_number, minimum=1), False),
    ("processing_runtime_seconds", partial(_number, minimum=1), True),
    ("pending_timeout_outcome", partial(_choice, allowed=("stopped", "failed")), False),
    ("processing_when_no_capacity", partial(_choice, allowed=("wait", "fail")), False),
    ("default_max_pending_seconds", partial(_number, minimum=1, allow_inf=True), False),
    ("describe_instance_count", partial(_choice, allowed=("omitted", "selected")), False),
)
_IDENTITY: tuple[_Setting, ...] = (("region", _region, False), ("account_id", _account_id, False))
_SEED: tuple[_Setting, ...] = (("seed", _integer, True),)


def _settings(table: tuple[_Setting, ...]) -> Section:
    """A section of single-valued settings, each validated when present."""

    def section(data: Mapping[str, Any]) -> dict[str, Any]:
        return {
            key: validate(data[key], key)
            for key, validate, none_is_absent in table
            if key in data and not (none_is_absent and data[key] is None)
        }

    return section


def _quotas(data: Mapping[str, Any]) -> dict[str, Any]:
    quotas: dict[str, dict[str, int]] = {}
    for kind, limits in _mapping(data.get("quotas"), "quotas").items():
        if kind not in _QUOTA_KINDS:
            raise unknown_key("quotas", kind, _QUOTA_KINDS)
        where = f"quotas.{kind}"
        quotas[kind] = {
            _instance_type_key(t, where): _integer(n, f"{where}.{t}")
            for t, n in _mapping(limits, where).items()
        }
    return {"quotas": quotas}


def _capacity(data: Mapping[str, Any]) -> dict[str, Any]:
    capacity = {
        _instance_type_key(t, "capacity"): _windows(w, f"capacity.{t}")
        for t, w in _mapping(data.get("capacity"), "capacity").items()
    }
    if data.get("capacity_period") is None:
        return {"capacity": capacity}
    period = _number(data["capacity_period"], "capacity_period", minimum=1)
    periodic = {
        t: tuple(_periodic_window(w, period, f"capacity.{t}[{i}]") for i, w in enumerate(ws))
        for t, ws in capacity.items()
    }
    return {"capacity": periodic, "capacity_period": period}


def _training_plans(data: Mapping[str, Any]) -> dict[str, Any]:
    raw_plans = data.get("training_plans") or []
    if not _list(raw_plans):
        raise ScenarioError("training_plans: must be a list of plans")
    plans: list[TrainingPlan] = []
    for index, raw in enumerate(raw_plans):
        plans.append(_training_plan(raw, f"training_plans[{index}]", plans))
    return {"training_plans": tuple(plans)}


def _faults(data: Mapping[str, Any]) -> dict[str, Any]:
    faults = _mapping(data.get("faults"), "faults")
    _only_keys(faults, "faults", FAULT_KEYS)
    return {
        "faults": Faults(
            throttle_rate=_rate(faults.get("throttle_rate", 0.0), "faults.throttle_rate"),
            error_rate=_rate(faults.get("error_rate", 0.0), "faults.error_rate"),
            latency_ms=_number(faults.get("latency_ms", 0.0), "faults.latency_ms"),
            drop_rate=_rate(faults.get("drop_rate", 0.0), "faults.drop_rate"),
            response_latency_ms=_response_latency(
                faults.get("response_latency_ms"), "faults.response_latency_ms"
            ),
        )
    }


def _response_latency(value: Any, where: str) -> dict[str, float]:
    latencies: dict[str, float] = {}
    for op, ms in _mapping(value, where).items():
        if op not in OPERATIONS:
            raise unknown_key(where, op, OPERATIONS)
        latencies[op] = _number(ms, f"{where}.{op}")
    return latencies


def _rate_limits(data: Mapping[str, Any]) -> dict[str, Any]:
    rate_limits: dict[str, float] = {}
    for op, limit in _mapping(data.get("rate_limits"), "rate_limits").items():
        if op not in OPERATIONS:
            raise unknown_key("rate_limits", op, OPERATIONS)
        rate_limits[op] = _number(limit, f"rate_limits.{op}", minimum=0.001)
    return {"rate_limits": rate_limits}


def _phase_seconds(data: Mapping[str, Any]) -> dict[str, Any]:
    phases = _mapping(data.get("phase_seconds"), "phase_seconds")
    _only_keys(phases, "phase_seconds", PHASES)
    defaults = PhaseSeconds()
    durations = {
        name: _number(phases.get(name, getattr(defaults, name)), f"phase_seconds.{name}") for name in PHASES
    }
    return {"phase_seconds": PhaseSeconds(**durations)}


def _builtin_algorithms(data: Mapping[str, Any]) -> dict[str, Any]:
    algorithms = {
        str(repo): _algorithm_patterns(patterns, f"builtin_algorithms.{repo}")
        for repo, patterns in _mapping(data.get("builtin_algorithms"), "builtin_algorithms").items()
    }
    return {"builtin_algorithms": algorithms}


def _price(value: Any, where: str) -> float:
    number = _number(value, where)
    if number <= 0:
        raise ScenarioError(f"{where}: must be a price in USD per instance-hour above 0, got {value!r}")
    return number


def _prices(data: Mapping[str, Any]) -> dict[str, Any]:
    prices: dict[str, dict[str, float]] = {}
    for instance_type, raw in _mapping(data.get("prices"), "prices").items():
        where = f"prices.{instance_type}"
        if isinstance(instance_type, str) and is_glob(instance_type):
            raise ScenarioError(f"{where}: name one instance type per price (no patterns)")
        _instance_type_key(instance_type, "prices")
        if isinstance(raw, Mapping):
            if not raw:
                raise ScenarioError(
                    f"{where}: give a price for at least one region, e.g. {{us-east-1: 37.69}}"
                )
            prices[instance_type] = {
                _region(region, f"{where}.{region}"): _price(value, f"{where}.{region}")
                for region, value in raw.items()
            }
        else:
            # A bare number is the price in every region.
            prices[instance_type] = {"*": _price(raw, where)}
    return {"prices": prices}


def _access_denied(data: Mapping[str, Any]) -> dict[str, Any]:
    raw = data.get("access_denied") or []
    if not _list(raw):
        raise ScenarioError("access_denied: must be a list of operation names, e.g. [GetProducts]")
    for index, op in enumerate(raw):
        if op not in OPERATIONS:
            raise unknown_key(f"access_denied[{index}]", op, OPERATIONS)
    return {"access_denied": frozenset(raw)}


def _log_line(line: Any, where: str) -> str:
    if not isinstance(line, str):
        raise ScenarioError(f"{where}: must be a string, got {line!r}")
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(line) if name is not None]
    except ValueError as exc:
        raise ScenarioError(f"{where}: {exc} (write {{{{ and }}}} for literal braces)") from None
    for name in fields:
        if name not in JOB_LOG_FIELDS:
            raise ScenarioError(
                f"{where}: unknown placeholder {{{name}}}; allowed: "
                + ", ".join(f"{{{f}}}" for f in JOB_LOG_FIELDS)
            )
    return line


def _job_logs(data: Mapping[str, Any]) -> dict[str, Any]:
    raw = _mapping(data.get("job_logs"), "job_logs")
    _only_keys(raw, "job_logs", JOB_LOG_KEYS)
    defaults = JobLogs()
    sections: dict[str, tuple[str, ...]] = {}
    for key in JOB_LOG_KEYS:
        lines = raw.get(key, getattr(defaults, key))
        if not _list(lines) or (key != "failure" and not lines):
            raise ScenarioError(
                f"job_logs.{key}: must be a{' non-empty' if key != 'failure' else ''} list of lines"
            )
        sections[key] = tuple(_log_line(line, f"job_logs.{key}[{i}]") for i, line in enumerate(lines))
    return {"job_logs": JobLogs(**sections)}


def _iam_denied_actions(data: Mapping[str, Any]) -> dict[str, Any]:
    raw = data.get("iam_denied_actions") or []
    if not _list(raw) or not all(isinstance(a, str) and ":" in a for a in raw):
        raise ScenarioError("iam_denied_actions: must be a list of IAM actions, e.g. [s3:PutObject]")
    return {"iam_denied_actions": frozenset(raw)}


def _events(data: Mapping[str, Any]) -> dict[str, Any]:
    raw = _mapping(data.get("events"), "events")
    _only_keys(raw, "events", EVENT_KEYS)
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ScenarioError(f"events.enabled: must be true or false, got {enabled!r}")
    return {
        "events": EventSettings(
            enabled=enabled,
            delay_seconds=_number(raw.get("delay_seconds", 0.0), "events.delay_seconds"),
            loss_rate=_rate(raw.get("loss_rate", 0.0), "events.loss_rate"),
            duplicate_rate=_rate(raw.get("duplicate_rate", 0.0), "events.duplicate_rate"),
        )
    }


def _clusters(data: Mapping[str, Any]) -> dict[str, Any]:
    raw = _mapping(data.get("clusters"), "clusters")
    _only_keys(raw, "clusters", CLUSTER_KEYS)
    choices = {"scale_up_types": SCALE_UP_TYPES, "partial_group_status": PARTIAL_GROUP_STATUSES}
    settings: dict[str, Any] = {
        key: _choice(value, f"clusters.{key}", allowed=choices[key])
        if key in choices
        else _number(value, f"clusters.{key}")
        for key, value in {**ClusterSettings().as_dict(), **raw}.items()
    }
    return {"clusters": ClusterSettings(**settings)}


#: The sections in file order; each returns its part of the :class:`Scenario` keyword arguments.
SECTIONS: tuple[Section, ...] = (
    _settings(_GENERAL),
    _quotas,
    _capacity,
    _training_plans,
    _faults,
    _rate_limits,
    _phase_seconds,
    _settings(_IDENTITY),
    _builtin_algorithms,
    _settings(_SEED),
    _prices,
    _access_denied,
    _job_logs,
    _iam_denied_actions,
    _events,
    _clusters,
)
