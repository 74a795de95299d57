"""Server-side validation of Create requests: the rules AWS documents for instance preference lists.

botocore's client-side validation checks only minimums (see the project reference, section 1), so the
service is where six entries, duplicate types, counts in both places, two plan ARNs, an unknown type or an
over-long pending time are rejected. Rule numbers (R1..R14) follow ``sagemaker-instance-preferences.md``.
Every message names the offending field with its path, e.g.
``ResourceConfig.InstancePreferences[2].InstanceType: ml.g5.48xlarge appears more than once``
(list indexes are 0-based, as in botocore's own parameter messages).

This module deliberately shares no code with the provider's client-side checks: the emulator is the
stand-in for the service, and a test that passes because both sides share one bug proves nothing.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from botocore.validate import ParamValidator

from airflow_provider_sm_prefs.testing.botocore_model import instance_types, operation_model, service_model
from airflow_provider_sm_prefs.testing.exceptions import ApiError
from airflow_provider_sm_prefs.testing.models import Choice, JobKind, JobSpec, is_accelerated
from airflow_provider_sm_prefs.testing.scenario_types import Scenario

__all__ = [
    "ALL_INSTANCE_TYPES",
    "BUILTIN_ALGORITHMS",
    "MAX_PENDING_SECONDS",
    "MIN_PENDING_SECONDS",
    "PROCESSING_INSTANCE_TYPES",
    "TRAINING_INSTANCE_TYPES",
    "check_quotas",
    "processing_job_spec",
    "service_model",
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
#: How botocore's report words an unknown member (one line per error).
_UNKNOWN_MEMBER = "Unknown parameter in "


TRAINING_INSTANCE_TYPES: frozenset[str] = instance_types("training")
PROCESSING_INSTANCE_TYPES: frozenset[str] = instance_types("processing")
ALL_INSTANCE_TYPES: frozenset[str] = TRAINING_INSTANCE_TYPES | PROCESSING_INSTANCE_TYPES

#: Built-in algorithms by ECR repository name (the last path part of ``TrainingImage``/``ImageUri``),
#: with the instance classes each supports: ``cpu`` = any non-accelerated type, ``gpu`` = ``ml.p*`` and
#: ``ml.g*`` (no built-in algorithm ships Neuron kernels for ``ml.trn*``). A scenario can add entries or
#: override one with ``builtin_algorithms``; entries may also be instance type globs.
BUILTIN_ALGORITHMS: Mapping[str, tuple[str, ...]] = {
    "xgboost": ("cpu", "gpu"),
    "sagemaker-xgboost": ("cpu", "gpu"),
    "linear-learner": ("cpu", "gpu"),
    "kmeans": ("cpu", "gpu"),
    "pca": ("cpu", "gpu"),
    "factorization-machines": ("cpu", "gpu"),
    "knn": ("cpu", "gpu"),
    "ntm": ("cpu", "gpu"),
    "object2vec": ("cpu", "gpu"),
    "forecasting-deepar": ("cpu", "gpu"),
    "blazingtext": ("cpu", "gpu"),
    "ipinsights": ("cpu", "gpu"),
    "lda": ("cpu",),
    "randomcutforest": ("cpu",),
    "image-classification": ("gpu",),
    "object-detection": ("gpu",),
    "semantic-segmentation": ("gpu",),
    "seq2seq": ("gpu",),
    "sagemaker-scikit-learn": ("cpu",),
}

_VALIDATOR = ParamValidator()


def _invalid(message: str) -> ApiError:
    return ApiError("ValidationException", message)


def validate_shape(operation: str, params: Mapping[str, Any]) -> None:
    """Check ``params`` against botocore's input shape: required members, types and minimums.

    Unknown members are ignored, as the service ignores fields newer than this model (their lines are
    left out of botocore's report); the rules below look for the few unknown fields that matter (R8, R13).
    """
    report = _VALIDATOR.validate(params, operation_model(operation).input_shape)
    if not report.has_errors():
        return
    lines = [line for line in report.generate_report().splitlines() if not line.startswith(_UNKNOWN_MEMBER)]
    if not lines:
        return
    noun = "error" if len(lines) == 1 else "errors"
    raise _invalid(f"{len(lines)} validation {noun} detected: " + "; ".join(lines))


def _check_name(name: Any, field: str) -> str:
    if not isinstance(name, str) or not _JOB_NAME.match(name):
        raise _invalid(
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
        raise _invalid(f"{field}: {instance_type} is not a valid {kind.value} instance type{also}")
    return instance_type


def _check_count(count: Any, field: str, kind: JobKind) -> int:
    upper = PROCESSING_MAX_COUNT if kind is JobKind.PROCESSING else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 1 or (upper and count > upper):
        bounds = f"between 1 and {upper}" if upper else "at least 1"
        raise _invalid(f"{field}: instance count must be {bounds}, got {count!r}")
    return count


def _image_repository(image: Any) -> str | None:
    if not isinstance(image, str) or not image:
        return None
    last = image.rsplit("/", 1)[-1]
    return last.split("@", 1)[0].split(":", 1)[0]


def _supports(patterns: tuple[str, ...], instance_type: str) -> bool:
    for pattern in patterns:
        if pattern == "cpu" and not is_accelerated(instance_type):
            return True
        if pattern == "gpu" and instance_type.startswith(("ml.p", "ml.g")):
            return True
        if fnmatch.fnmatchcase(instance_type, pattern):
            return True
    return False


def _check_algorithm(image: Any, choices: list[tuple[str, str]], scenario: Scenario) -> None:
    """R10: with a built-in algorithm every listed type must be supported by it."""
    repository = _image_repository(image)
    if repository is None:
        return
    patterns = scenario.builtin_algorithms.get(repository) or BUILTIN_ALGORITHMS.get(repository)
    if patterns is None:
        return
    for field, instance_type in choices:
        if not _supports(patterns, instance_type):
            raise _invalid(
                f"{field}: {instance_type} is not supported by the built-in algorithm {repository} "
                f"(supported: {', '.join(patterns)})"
            )


def _tags(params: Mapping[str, Any]) -> tuple[float | None, bool]:
    runtime: float | None = None
    fail = False
    for index, tag in enumerate(params.get("Tags") or []):
        if not isinstance(tag, Mapping):
            continue
        key, value = tag.get("Key"), tag.get("Value")
        if key == RUNTIME_TAG:
            try:
                runtime = float(str(value))
            except ValueError:
                runtime = None
            if runtime is None or not math.isfinite(runtime) or runtime <= 0:
                raise _invalid(f"Tags[{index}].Value: {RUNTIME_TAG} must be a positive number, got {value!r}")
        elif key == OUTCOME_TAG:
            if value not in ("Failed", "Completed"):
                raise _invalid(
                    f"Tags[{index}].Value: {OUTCOME_TAG} must be Failed or Completed, got {value!r}"
                )
            fail = value == "Failed"
    return runtime, fail


def _preference_entries(raw: Any, where: str) -> list[Mapping[str, Any]]:
    """R1: 1 to 5 entries, each an object."""
    if not isinstance(raw, list):
        raise _invalid(f"{where}: must be a list of 1 to {MAX_PREFERENCES} instance preferences")
    if not 1 <= len(raw) <= MAX_PREFERENCES:
        raise _invalid(f"{where}: must hold 1 to {MAX_PREFERENCES} entries, got {len(raw)}")
    for index, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            raise _invalid(f"{where}[{index}]: must be an object with InstanceType")
        if "InstanceType" not in entry:
            raise _invalid(f"{where}[{index}].InstanceType: required")
    return raw


def _preference_counts(
    entries: list[Mapping[str, Any]], job_count: Any, where: str, count_field: str, kind: JobKind
) -> list[int]:
    """R3: counts on every entry and not at job level, or only at job level."""
    with_count = [i for i, e in enumerate(entries) if e.get("InstanceCount") is not None]
    if job_count is not None:
        if with_count:
            raise _invalid(
                f"{where}[{with_count[0]}].InstanceCount: give counts either on every entry of {where} "
                f"or once in {count_field}, not both"
            )
        count = _check_count(job_count, count_field, kind)
        return [count] * len(entries)
    if not with_count:
        raise _invalid(f"{count_field}: required; give a count on every entry of {where} or once here")
    if len(with_count) != len(entries):
        missing = next(i for i in range(len(entries)) if i not in with_count)
        raise _invalid(
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
            raise _invalid(f"{where}[{index}].InstanceType: {instance_type} appears more than once")
        seen.add(instance_type)


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
        raise _invalid(
            f"StoppingCondition.MaxPendingTimeInSeconds: must be between {MIN_PENDING_SECONDS} and "
            f"{MAX_PENDING_SECONDS} seconds, got {value!r}"
        )
    return float(value)


def _plan(arn: Any, field: str, scenario: Scenario) -> Any:
    if not isinstance(arn, str):
        raise _invalid(f"{field}: must be a training plan ARN, got {arn!r}")
    plan = scenario.plan(arn)
    if plan is None:
        raise _invalid(f"{field}: training plan {arn} does not exist")
    return plan


def training_job_spec(params: Mapping[str, Any], scenario: Scenario) -> JobSpec:
    """Validate a CreateTrainingJob request (R1-R7, R10, R13, R14) and turn it into a :class:`JobSpec`."""
    kind = JobKind.TRAINING
    name = _check_name(params.get("TrainingJobName"), "trainingJobName")
    config = params.get("ResourceConfig")
    if not isinstance(config, Mapping):
        raise _invalid("ResourceConfig: required for a training job")
    job_plan_arn = config.get("TrainingPlanArn")
    job_plan = _plan(job_plan_arn, "ResourceConfig.TrainingPlanArn", scenario) if job_plan_arn else None
    raw_preferences = config.get("InstancePreferences")
    where = "ResourceConfig.InstancePreferences"
    choices: list[Choice] = []
    if raw_preferences is not None:
        entries = _preference_entries(raw_preferences, where)
        if config.get("InstanceType") is not None:
            raise _invalid(f"ResourceConfig.InstanceType: must not be set together with {where} (R4)")
        if config.get("InstanceGroups"):
            raise _invalid(f"ResourceConfig.InstanceGroups: must not be set together with {where}")
        if config.get("InstancePlacementConfig") is not None:
            raise _invalid(f"ResourceConfig.InstancePlacementConfig: must not be set together with {where}")
        if params.get("EnableManagedSpotTraining") is True:
            raise _invalid(
                f"EnableManagedSpotTraining: managed spot training cannot be used with {where}; "
                "preference lists use On-Demand or training plan capacity only"
            )
        types = [
            _check_type(e["InstanceType"], f"{where}[{i}].InstanceType", kind) for i, e in enumerate(entries)
        ]
        _check_duplicates(types, where)
        counts = _preference_counts(
            entries, config.get("InstanceCount"), where, "ResourceConfig.InstanceCount", kind
        )
        entry_plans: list[str | None] = []
        for index, entry in enumerate(entries):
            arns = entry.get("TrainingPlanArns")
            field = f"{where}[{index}].TrainingPlanArns"
            if arns is None:
                entry_plans.append(None)
                continue
            if job_plan_arn:
                raise _invalid(
                    f"ResourceConfig.TrainingPlanArn: must not be set together with per-entry TrainingPlanArns "
                    f"({field})"
                )
            if not isinstance(arns, list) or len(arns) != 1:
                got = len(arns) if isinstance(arns, list) else arns
                raise _invalid(f"{field}: must hold exactly one training plan ARN, got {got}")
            plan = _plan(arns[0], f"{field}[0]", scenario)
            if plan.instance_type != types[index]:
                raise _invalid(
                    f"{field}[0]: training plan {plan.arn} reserves {plan.instance_type}, not {types[index]}"
                )
            entry_plans.append(plan.arn)
        if job_plan is not None:
            if job_plan.instance_type not in types:
                raise _invalid(
                    f"ResourceConfig.TrainingPlanArn: training plan {job_plan.arn} reserves "
                    f"{job_plan.instance_type}, which no entry of {where} lists"
                )
            entry_plans = [job_plan.arn if t == job_plan.instance_type else None for t in types]
        choices = [
            Choice(rank=i + 1, groups=((t, c),), plan_arn=p)
            for i, (t, c, p) in enumerate(zip(types, counts, entry_plans, strict=True))
        ]
        algorithm_fields = [(f"{where}[{i}].InstanceType", t) for i, t in enumerate(types)]
    elif config.get("InstanceGroups"):
        if config.get("InstanceType") is not None:
            raise _invalid(
                "ResourceConfig.InstanceType: must not be set together with ResourceConfig.InstanceGroups"
            )
        groups: list[tuple[str, int]] = []
        for index, group in enumerate(config["InstanceGroups"]):
            group_where = f"ResourceConfig.InstanceGroups[{index}]"
            if not isinstance(group, Mapping):
                raise _invalid(f"{group_where}: must be an object")
            groups.append(
                (
                    _check_type(group.get("InstanceType"), f"{group_where}.InstanceType", kind),
                    _check_count(group.get("InstanceCount"), f"{group_where}.InstanceCount", kind),
                )
            )
        choices = [Choice(rank=1, groups=tuple(groups))]
        algorithm_fields = [
            (f"ResourceConfig.InstanceGroups[{i}].InstanceType", t) for i, (t, _) in enumerate(groups)
        ]
    else:
        if config.get("InstanceType") is None:
            raise _invalid(f"ResourceConfig.InstanceType: required unless {where} or InstanceGroups is given")
        instance_type = _check_type(config["InstanceType"], "ResourceConfig.InstanceType", kind)
        count = _check_count(config.get("InstanceCount"), "ResourceConfig.InstanceCount", kind)
        plan_arn = None
        if job_plan is not None:
            if job_plan.instance_type != instance_type:
                raise _invalid(
                    f"ResourceConfig.TrainingPlanArn: training plan {job_plan.arn} reserves "
                    f"{job_plan.instance_type}, not {instance_type}"
                )
            plan_arn = job_plan.arn
        choices = [Choice(rank=1, groups=((instance_type, count),), plan_arn=plan_arn)]
        algorithm_fields = [("ResourceConfig.InstanceType", instance_type)]

    stopping = params.get("StoppingCondition")
    max_pending = _pending_time(stopping)
    max_runtime = stopping.get("MaxRuntimeInSeconds") if isinstance(stopping, Mapping) else None
    algorithm = params.get("AlgorithmSpecification")
    if isinstance(algorithm, Mapping):
        _check_algorithm(algorithm.get("TrainingImage"), algorithm_fields, scenario)
    runtime, fail = _tags(params)
    return JobSpec(
        name=name,
        kind=kind,
        choices=tuple(choices),
        has_preferences=raw_preferences is not None,
        max_pending_seconds=max_pending,
        runtime_seconds=runtime,
        fail=fail,
        max_runtime_seconds=float(max_runtime) if isinstance(max_runtime, int) else None,
    )


def processing_job_spec(params: Mapping[str, Any], scenario: Scenario) -> JobSpec:
    """Validate a CreateProcessingJob request (R1-R4, R8, R10, R13, R14) into a :class:`JobSpec`."""
    kind = JobKind.PROCESSING
    name = _check_name(params.get("ProcessingJobName"), "processingJobName")
    resources = params.get("ProcessingResources")
    config = resources.get("ClusterConfig") if isinstance(resources, Mapping) else None
    if not isinstance(config, Mapping):
        raise _invalid("ProcessingResources.ClusterConfig: required")
    prefix = "ProcessingResources.ClusterConfig"
    where = f"{prefix}.InstancePreferences"
    for plan_field in ("TrainingPlanArn", "TrainingPlanArns"):
        if plan_field in config:
            raise _invalid(
                f"{prefix}.{plan_field}: processing jobs use On-Demand capacity only; training plans are "
                "not supported"
            )
    raw_preferences = config.get("InstancePreferences")
    if raw_preferences is not None:
        entries = _preference_entries(raw_preferences, where)
        if config.get("InstanceType") is not None:
            raise _invalid(f"{prefix}.InstanceType: must not be set together with {where} (R4)")
        for index, entry in enumerate(entries):
            for key in entry:
                if key in ("TrainingPlanArns", "TrainingPlanArn"):
                    raise _invalid(
                        f"{where}[{index}].{key}: processing jobs use On-Demand capacity only; training "
                        "plans are not supported"
                    )
                if key not in ("InstanceType", "InstanceCount"):
                    raise _invalid(
                        f"{where}[{index}].{key}: unknown field; allowed: InstanceType, InstanceCount"
                    )
        types = [
            _check_type(e["InstanceType"], f"{where}[{i}].InstanceType", kind) for i, e in enumerate(entries)
        ]
        _check_duplicates(types, where)
        counts = _preference_counts(
            entries, config.get("InstanceCount"), where, f"{prefix}.InstanceCount", kind
        )
        choices = [
            Choice(rank=i + 1, groups=((t, c),)) for i, (t, c) in enumerate(zip(types, counts, strict=True))
        ]
        algorithm_fields = [(f"{where}[{i}].InstanceType", t) for i, t in enumerate(types)]
    else:
        if config.get("InstanceType") is None:
            raise _invalid(f"{prefix}.InstanceType: required unless {where} is given")
        instance_type = _check_type(config["InstanceType"], f"{prefix}.InstanceType", kind)
        count = _check_count(config.get("InstanceCount"), f"{prefix}.InstanceCount", kind)
        choices = [Choice(rank=1, groups=((instance_type, count),))]
        algorithm_fields = [(f"{prefix}.InstanceType", instance_type)]
    stopping = params.get("StoppingCondition")
    if isinstance(stopping, Mapping) and "MaxPendingTimeInSeconds" in stopping:
        raise _invalid(
            "StoppingCondition.MaxPendingTimeInSeconds: not a field of processing jobs; bound the wait "
            "on the client side"
        )
    max_runtime = stopping.get("MaxRuntimeInSeconds") if isinstance(stopping, Mapping) else None
    app = params.get("AppSpecification")
    if isinstance(app, Mapping):
        _check_algorithm(app.get("ImageUri"), algorithm_fields, scenario)
    runtime, fail = _tags(params)
    return JobSpec(
        name=name,
        kind=kind,
        choices=tuple(choices),
        has_preferences=raw_preferences is not None,
        runtime_seconds=runtime,
        fail=fail,
        max_runtime_seconds=float(max_runtime) if isinstance(max_runtime, int) else None,
    )


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
                raise ApiError(
                    "ResourceLimitExceeded",
                    f"The account-level service limit '{instance_type} for {usage}' is {limit} Instances, "
                    f"with current utilization of {current} Instances and a request delta of {count} "
                    "Instances. Please use AWS Service Quotas to request an increase for this quota. If AWS "
                    "Service Quotas is not available, contact AWS support to request an increase for this "
                    "quota.",
                )
