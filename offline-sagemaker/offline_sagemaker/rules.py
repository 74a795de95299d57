"""Server-side validation of Create requests: the rules AWS documents for instance preference lists.

botocore's client-side validation checks only minimums (see the project reference, section 1), so the
service is where six entries, duplicate types, counts in both places, two plan ARNs, an unknown type or an
over-long pending time are rejected. Rule numbers (R1..R14) follow ``sagemaker-instance-preferences.md``;
R10 (built-in algorithms) lives in :mod:`.algorithms`. Every message names the offending field with its
path, e.g. ``ResourceConfig.InstancePreferences[2].InstanceType: ml.g5.48xlarge appears more than once``
(list indexes are 0-based, as in botocore's own parameter messages).

This module deliberately shares no code with the provider's client-side checks: the emulator is the
stand-in for the service, and a test that passes because both sides share one bug proves nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from botocore.validate import ParamValidator

from offline_sagemaker.algorithms import BUILTIN_ALGORITHMS, check_algorithm
from offline_sagemaker.botocore_model import instance_types, operation_model
from offline_sagemaker.exceptions import ResourceLimitExceeded, ValidationError
from offline_sagemaker.models import Choice, JobKind, JobSpec
from offline_sagemaker.scenario_types import Scenario, TrainingPlan

__all__ = [
    "ALL_INSTANCE_TYPES",
    "BUILTIN_ALGORITHMS",
    "MAX_PENDING_SECONDS",
    "MIN_PENDING_SECONDS",
    "PROCESSING_INSTANCE_TYPES",
    "TRAINING_INSTANCE_TYPES",
    "check_quotas",
    "processing_job_spec",
    "training_job_spec",
    "validate_shape",
]

MIN_PENDING_SECONDS = 1800
MAX_PENDING_SECONDS = 2_419_200
MAX_PREFERENCES = 5
PROCESSING_MAX_COUNT = 100
RUNTIME_TAG = "emulator:runtime-seconds"
OUTCOME_TAG = "emulator:outcome"

_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_JOB_NAME_PATTERN = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
_TRAINING_PREFERENCES = "ResourceConfig.InstancePreferences"
_CLUSTER = "ProcessingResources.ClusterConfig"
_PROCESSING_PREFERENCES = f"{_CLUSTER}.InstancePreferences"
#: How botocore's report words an unknown member (one line per error).
_UNKNOWN_MEMBER = "Unknown parameter in "

TRAINING_INSTANCE_TYPES: frozenset[str] = instance_types("training")
PROCESSING_INSTANCE_TYPES: frozenset[str] = instance_types("processing")
ALL_INSTANCE_TYPES: frozenset[str] = TRAINING_INSTANCE_TYPES | PROCESSING_INSTANCE_TYPES

_VALIDATOR = ParamValidator()
#: ``(field path, instance type)`` of every listed type, for R10.
_Fields = list[tuple[str, str]]


def validate_shape(operation: str, params: Mapping[str, Any], service: str = "sagemaker") -> None:
    """Check ``params`` against botocore's input shape: required members, types and minimums.

    Unknown members are ignored, as the service ignores fields newer than this model (their lines are
    left out of botocore's report); the rules below look for the few unknown fields that matter (R8, R13).

    :param service: botocore's name of the service (``sagemaker``, ``pricing``, ``service-quotas``).
    """
    report = _VALIDATOR.validate(params, operation_model(operation, service).input_shape)
    if not report.has_errors():
        return
    lines = [line for line in report.generate_report().splitlines() if not line.startswith(_UNKNOWN_MEMBER)]
    if not lines:
        return
    noun = "error" if len(lines) == 1 else "errors"
    raise ValidationError(f"{len(lines)} validation {noun} detected: " + "; ".join(lines))


# ------------------------------------------------------------------------------------- single fields


def _check_name(name: Any, field: str) -> str:
    if not isinstance(name, str) or not _JOB_NAME.match(name):
        raise ValidationError(
            f"1 validation error detected: Value '{name}' at '{field}' failed to satisfy constraint: "
            f"Member must satisfy regular expression pattern: {_JOB_NAME_PATTERN} and have length <= 63"
        )
    return name


def _check_type(instance_type: Any, field: str, kind: JobKind) -> str:
    """R14: the type must be in the job kind's enum from botocore's model."""
    allowed = TRAINING_INSTANCE_TYPES if kind is JobKind.TRAINING else PROCESSING_INSTANCE_TYPES
    if not isinstance(instance_type, str) or instance_type not in allowed:
        also = ""
        if kind is JobKind.PROCESSING and instance_type in TRAINING_INSTANCE_TYPES:
            also = " (it is a training-only type)"
        raise ValidationError(f"{field}: {instance_type} is not a valid {kind.value} instance type{also}")
    return instance_type


def _check_count(count: Any, field: str, kind: JobKind) -> int:
    upper = PROCESSING_MAX_COUNT if kind is JobKind.PROCESSING else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 1 or (upper and count > upper):
        bounds = f"between 1 and {upper}" if upper else "at least 1"
        raise ValidationError(f"{field}: instance count must be {bounds}, got {count!r}")
    return count


def _tags(params: Mapping[str, Any]) -> tuple[float | None, bool]:
    runtime: float | None = None
    fail = False
    for index, tag in enumerate(params.get("Tags") or []):
        if not isinstance(tag, Mapping):
            continue
        key, value = tag.get("Key"), tag.get("Value")
        if key == RUNTIME_TAG:
            runtime = _runtime_tag(value, index)
        elif key == OUTCOME_TAG:
            if value not in ("Failed", "Completed"):
                raise ValidationError(
                    f"Tags[{index}].Value: {OUTCOME_TAG} must be Failed or Completed, got {value!r}"
                )
            fail = value == "Failed"
    return runtime, fail


def _runtime_tag(value: Any, index: int) -> float:
    try:
        runtime: float | None = float(str(value))
    except ValueError:
        runtime = None
    if runtime is None or not math.isfinite(runtime) or runtime <= 0:
        raise ValidationError(f"Tags[{index}].Value: {RUNTIME_TAG} must be a positive number, got {value!r}")
    return runtime


def _pending_time(stopping: Any) -> float | None:
    """R13: MaxPendingTimeInSeconds within 1800..2419200 (covers the whole list)."""
    if not isinstance(stopping, Mapping) or stopping.get("MaxPendingTimeInSeconds") is None:
        return None
    value = stopping["MaxPendingTimeInSeconds"]
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not (MIN_PENDING_SECONDS <= value <= MAX_PENDING_SECONDS)
    ):
        raise ValidationError(
            f"StoppingCondition.MaxPendingTimeInSeconds: must be between {MIN_PENDING_SECONDS} and "
            f"{MAX_PENDING_SECONDS} seconds, got {value!r}"
        )
    return float(value)


def _max_runtime(stopping: Any) -> float | None:
    max_runtime = stopping.get("MaxRuntimeInSeconds") if isinstance(stopping, Mapping) else None
    return float(max_runtime) if isinstance(max_runtime, int) else None


def _plan(arn: Any, field: str, scenario: Scenario) -> TrainingPlan:
    if not isinstance(arn, str):
        raise ValidationError(f"{field}: must be a training plan ARN, got {arn!r}")
    plan = scenario.plan(arn)
    if plan is None:
        raise ValidationError(f"{field}: training plan {arn} does not exist")
    return plan


# ---------------------------------------------------------------------------------- preference lists


def _preference_entries(raw: Any, where: str) -> list[Mapping[str, Any]]:
    """R1: 1 to 5 entries, each an object."""
    if not isinstance(raw, list):
        raise ValidationError(f"{where}: must be a list of 1 to {MAX_PREFERENCES} instance preferences")
    if not 1 <= len(raw) <= MAX_PREFERENCES:
        raise ValidationError(f"{where}: must hold 1 to {MAX_PREFERENCES} entries, got {len(raw)}")
    for index, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            raise ValidationError(f"{where}[{index}]: must be an object with InstanceType")
        if "InstanceType" not in entry:
            raise ValidationError(f"{where}[{index}].InstanceType: required")
    return raw


def _preference_counts(
    entries: list[Mapping[str, Any]], job_count: Any, where: str, count_field: str, kind: JobKind
) -> list[int]:
    """R3: counts on every entry and not at job level, or only at job level."""
    with_count = [i for i, e in enumerate(entries) if e.get("InstanceCount") is not None]
    if job_count is not None:
        if with_count:
            raise ValidationError(
                f"{where}[{with_count[0]}].InstanceCount: give counts either on every entry of {where} "
                f"or once in {count_field}, not both"
            )
        count = _check_count(job_count, count_field, kind)
        return [count] * len(entries)
    if not with_count:
        raise ValidationError(f"{count_field}: required; give a count on every entry of {where} or once here")
    if len(with_count) != len(entries):
        missing = next(i for i in range(len(entries)) if i not in with_count)
        raise ValidationError(
            f"{where}[{missing}].InstanceCount: missing; when counts are given per entry, every entry needs one"
        )
    return [
        _check_count(e["InstanceCount"], f"{where}[{i}].InstanceCount", kind) for i, e in enumerate(entries)
    ]


def _check_duplicates(types: list[str], where: str) -> None:
    """R2: each instance type at most once."""
    seen: set[str] = set()
    for index, instance_type in enumerate(types):
        if instance_type in seen:
            raise ValidationError(f"{where}[{index}].InstanceType: {instance_type} appears more than once")
        seen.add(instance_type)


def _types_and_counts(
    entries: list[Mapping[str, Any]], config: Mapping[str, Any], prefix: str, kind: JobKind
) -> tuple[list[str], list[int]]:
    """R14, R2 and R3 for the entries of ``{prefix}.InstancePreferences``."""
    where = f"{prefix}.InstancePreferences"
    types = [
        _check_type(e["InstanceType"], f"{where}[{i}].InstanceType", kind) for i, e in enumerate(entries)
    ]
    _check_duplicates(types, where)
    counts = _preference_counts(entries, config.get("InstanceCount"), where, f"{prefix}.InstanceCount", kind)
    return types, counts


def _single_type(config: Mapping[str, Any], prefix: str, kind: JobKind, alternatives: str) -> tuple[str, int]:
    """A plain request's ``{prefix}.InstanceType`` and ``InstanceCount``."""
    if config.get("InstanceType") is None:
        raise ValidationError(f"{prefix}.InstanceType: required unless {alternatives} is given")
    instance_type = _check_type(config["InstanceType"], f"{prefix}.InstanceType", kind)
    count = config.get("InstanceCount")
    if count is None and kind is JobKind.PROCESSING:
        count = 1  # ProcessingClusterConfig.InstanceCount: "The default value is 1."
    return instance_type, _check_count(count, f"{prefix}.InstanceCount", kind)


def _type_fields(where: str, types: list[str]) -> _Fields:
    return [(f"{where}[{i}].InstanceType", t) for i, t in enumerate(types)]


# ------------------------------------------------------------------------------------------ training


def _exclusive_with_preferences(params: Mapping[str, Any], config: Mapping[str, Any]) -> None:
    """R4 and R5: what a training request must not combine with a preference list."""
    where = _TRAINING_PREFERENCES
    if config.get("InstanceType") is not None:
        raise ValidationError(f"ResourceConfig.InstanceType: must not be set together with {where} (R4)")
    if config.get("InstanceGroups"):
        raise ValidationError(f"ResourceConfig.InstanceGroups: must not be set together with {where}")
    if config.get("InstancePlacementConfig") is not None:
        raise ValidationError(
            f"ResourceConfig.InstancePlacementConfig: must not be set together with {where}"
        )
    if params.get("EnableManagedSpotTraining") is True:
        raise ValidationError(
            f"EnableManagedSpotTraining: managed spot training cannot be used with {where}; "
            "preference lists use On-Demand or training plan capacity only"
        )


def _entry_plan(
    entry: Mapping[str, Any], index: int, instance_type: str, job_plan_arn: Any, scenario: Scenario
) -> str | None:
    """R6 and R7: the plan of one entry's ``TrainingPlanArns``, if it has one."""
    arns = entry.get("TrainingPlanArns")
    if arns is None:
        return None
    field = f"{_TRAINING_PREFERENCES}[{index}].TrainingPlanArns"
    if job_plan_arn:
        raise ValidationError(
            f"ResourceConfig.TrainingPlanArn: must not be set together with per-entry TrainingPlanArns "
            f"({field})"
        )
    if not isinstance(arns, list) or len(arns) != 1:
        got = len(arns) if isinstance(arns, list) else arns
        raise ValidationError(f"{field}: must hold exactly one training plan ARN, got {got}")
    plan = _plan(arns[0], f"{field}[0]", scenario)
    if plan.instance_type != instance_type:
        raise ValidationError(
            f"{field}[0]: training plan {plan.arn} reserves {plan.instance_type}, not {instance_type}"
        )
    return plan.arn


def _job_plan_entries(job_plan: TrainingPlan, types: list[str]) -> list[str | None]:
    """R7: a job-level plan backs the entry of its type, which must be listed."""
    if job_plan.instance_type not in types:
        raise ValidationError(
            f"ResourceConfig.TrainingPlanArn: training plan {job_plan.arn} reserves "
            f"{job_plan.instance_type}, which no entry of {_TRAINING_PREFERENCES} lists"
        )
    return [job_plan.arn if t == job_plan.instance_type else None for t in types]


def _training_preferences(
    params: Mapping[str, Any], config: Mapping[str, Any], scenario: Scenario
) -> tuple[list[Choice], _Fields]:
    """R1-R7 and R14 for ``ResourceConfig.InstancePreferences``."""
    entries = _preference_entries(config["InstancePreferences"], _TRAINING_PREFERENCES)
    _exclusive_with_preferences(params, config)
    types, counts = _types_and_counts(entries, config, "ResourceConfig", JobKind.TRAINING)
    job_plan_arn = config.get("TrainingPlanArn")
    plans = [
        _entry_plan(entry, index, types[index], job_plan_arn, scenario) for index, entry in enumerate(entries)
    ]
    if job_plan_arn:
        plans = _job_plan_entries(_plan(job_plan_arn, "ResourceConfig.TrainingPlanArn", scenario), types)
    choices = [
        Choice(rank=i + 1, groups=((t, c),), plan_arn=p)
        for i, (t, c, p) in enumerate(zip(types, counts, plans, strict=True))
    ]
    return choices, _type_fields(_TRAINING_PREFERENCES, types)


def _instance_groups(config: Mapping[str, Any]) -> tuple[list[Choice], _Fields]:
    """A heterogeneous-cluster request: every group is needed together, one choice."""
    if config.get("InstanceType") is not None:
        raise ValidationError(
            "ResourceConfig.InstanceType: must not be set together with ResourceConfig.InstanceGroups"
        )
    groups: list[tuple[str, int]] = []
    for index, group in enumerate(config["InstanceGroups"]):
        where = f"ResourceConfig.InstanceGroups[{index}]"
        if not isinstance(group, Mapping):
            raise ValidationError(f"{where}: must be an object")
        instance_type = _check_type(group.get("InstanceType"), f"{where}.InstanceType", JobKind.TRAINING)
        count = _check_count(group.get("InstanceCount"), f"{where}.InstanceCount", JobKind.TRAINING)
        groups.append((instance_type, count))
    return [Choice(rank=1, groups=tuple(groups))], _type_fields(
        "ResourceConfig.InstanceGroups", [t for t, _ in groups]
    )


def _single_training_type(config: Mapping[str, Any], scenario: Scenario) -> tuple[list[Choice], _Fields]:
    """A plain request, possibly on a job-level training plan of the same type."""
    alternatives = f"{_TRAINING_PREFERENCES} or InstanceGroups"
    instance_type, count = _single_type(config, "ResourceConfig", JobKind.TRAINING, alternatives)
    plan_arn = None
    job_plan_arn = config.get("TrainingPlanArn")
    if job_plan_arn:
        job_plan = _plan(job_plan_arn, "ResourceConfig.TrainingPlanArn", scenario)
        if job_plan.instance_type != instance_type:
            raise ValidationError(
                f"ResourceConfig.TrainingPlanArn: training plan {job_plan.arn} reserves "
                f"{job_plan.instance_type}, not {instance_type}"
            )
        plan_arn = job_plan.arn
    choice = Choice(rank=1, groups=((instance_type, count),), plan_arn=plan_arn)
    return [choice], [("ResourceConfig.InstanceType", instance_type)]


def training_job_spec(params: Mapping[str, Any], scenario: Scenario) -> JobSpec:
    """Validate a CreateTrainingJob request (R1-R7, R10, R13, R14) and turn it into a :class:`JobSpec`."""
    name = _check_name(params.get("TrainingJobName"), "trainingJobName")
    config = params.get("ResourceConfig")
    if not isinstance(config, Mapping):
        raise ValidationError("ResourceConfig: required for a training job")
    job_plan_arn = config.get("TrainingPlanArn")
    if job_plan_arn:
        _plan(job_plan_arn, "ResourceConfig.TrainingPlanArn", scenario)
    has_preferences = config.get("InstancePreferences") is not None
    if has_preferences:
        choices, fields = _training_preferences(params, config, scenario)
    elif config.get("InstanceGroups"):
        choices, fields = _instance_groups(config)
    else:
        choices, fields = _single_training_type(config, scenario)
    stopping = params.get("StoppingCondition")
    max_pending = _pending_time(stopping)
    algorithm = params.get("AlgorithmSpecification")
    if isinstance(algorithm, Mapping):
        check_algorithm(algorithm.get("TrainingImage"), fields, scenario)
    runtime, fail = _tags(params)
    return JobSpec(
        name=name,
        kind=JobKind.TRAINING,
        choices=tuple(choices),
        has_preferences=has_preferences,
        max_pending_seconds=max_pending,
        runtime_seconds=runtime,
        fail=fail,
        max_runtime_seconds=_max_runtime(stopping),
    )


# ---------------------------------------------------------------------------------------- processing


def _on_demand_only(config: Mapping[str, Any]) -> None:
    """R8: processing jobs use no training plans."""
    for plan_field in ("TrainingPlanArn", "TrainingPlanArns"):
        if plan_field in config:
            raise ValidationError(
                f"{_CLUSTER}.{plan_field}: processing jobs use On-Demand capacity only; training plans are "
                "not supported"
            )


def _processing_entry_keys(entries: list[Mapping[str, Any]]) -> None:
    """R8: a processing entry holds an instance type and count, no plans and nothing else."""
    where = _PROCESSING_PREFERENCES
    for index, entry in enumerate(entries):
        for key in entry:
            if key in ("TrainingPlanArns", "TrainingPlanArn"):
                raise ValidationError(
                    f"{where}[{index}].{key}: processing jobs use On-Demand capacity only; training "
                    "plans are not supported"
                )
            if key not in ("InstanceType", "InstanceCount"):
                raise ValidationError(
                    f"{where}[{index}].{key}: unknown field; allowed: InstanceType, InstanceCount"
                )


def _processing_choices(config: Mapping[str, Any]) -> tuple[list[Choice], _Fields]:
    """R1-R4, R8 and R14 for a processing cluster, with or without a preference list."""
    kind = JobKind.PROCESSING
    where = _PROCESSING_PREFERENCES
    if config.get("InstancePreferences") is None:
        instance_type, count = _single_type(config, _CLUSTER, kind, where)
        choice = Choice(rank=1, groups=((instance_type, count),))
        return [choice], [(f"{_CLUSTER}.InstanceType", instance_type)]
    entries = _preference_entries(config["InstancePreferences"], where)
    if config.get("InstanceType") is not None:
        raise ValidationError(f"{_CLUSTER}.InstanceType: must not be set together with {where} (R4)")
    _processing_entry_keys(entries)
    types, counts = _types_and_counts(entries, config, _CLUSTER, kind)
    choices = [
        Choice(rank=i + 1, groups=((t, c),)) for i, (t, c) in enumerate(zip(types, counts, strict=True))
    ]
    return choices, _type_fields(where, types)


def processing_job_spec(params: Mapping[str, Any], scenario: Scenario) -> JobSpec:
    """Validate a CreateProcessingJob request (R1-R4, R8, R10, R13, R14) into a :class:`JobSpec`."""
    name = _check_name(params.get("ProcessingJobName"), "processingJobName")
    resources = params.get("ProcessingResources")
    config = resources.get("ClusterConfig") if isinstance(resources, Mapping) else None
    if not isinstance(config, Mapping):
        raise ValidationError(f"{_CLUSTER}: required")
    _on_demand_only(config)
    choices, fields = _processing_choices(config)
    stopping = params.get("StoppingCondition")
    if isinstance(stopping, Mapping) and "MaxPendingTimeInSeconds" in stopping:
        raise ValidationError(
            "StoppingCondition.MaxPendingTimeInSeconds: not a field of processing jobs; bound the wait "
            "on the client side"
        )
    app = params.get("AppSpecification")
    if isinstance(app, Mapping):
        check_algorithm(app.get("ImageUri"), fields, scenario)
    runtime, fail = _tags(params)
    return JobSpec(
        name=name,
        kind=JobKind.PROCESSING,
        choices=tuple(choices),
        has_preferences=config.get("InstancePreferences") is not None,
        runtime_seconds=runtime,
        fail=fail,
        max_runtime_seconds=_max_runtime(stopping),
    )


# -------------------------------------------------------------------------------------------- quotas


def check_quotas(spec: JobSpec, scenario: Scenario, utilization: Callable[[JobKind, str], int]) -> None:
    """R9: every entry at its count must fit the account quota; one shortfall rejects the request."""
    usage = "training job usage" if spec.kind is JobKind.TRAINING else "processing job usage"
    for choice in spec.choices:
        for instance_type, count in choice.groups:
            limit = scenario.quota(spec.kind.value, instance_type)
            if limit is None:
                continue
            current = utilization(spec.kind, instance_type)
            if current + count > limit:
                raise ResourceLimitExceeded(
                    f"The account-level service limit '{instance_type} for {usage}' is {limit} Instances, "
                    f"with current utilization of {current} Instances and a request delta of {count} "
                    "Instances. Please use AWS Service Quotas to request an increase for this quota. If AWS "
                    "Service Quotas is not available, contact AWS support to request an increase for this "
                    "quota.",
                )
