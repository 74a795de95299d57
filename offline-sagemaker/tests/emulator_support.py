"""Scenarios and request builders shared by the offline SageMaker's tests (conftest.py makes fixtures of them).

Most scenarios here freeze the clock (``time_scale: 0``) so that only ``advance()`` moves time and every
assertion is deterministic.
"""

from __future__ import annotations

from typing import Any

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
PLAN_P5 = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-now"
PLAN_P5_LATER = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-later"
PLAN_G5 = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/g5-now"

#: A frozen-clock world with a bit of everything; tests move time with advance().
FROZEN: dict[str, Any] = {
    "name": "frozen",
    "time_scale": 0,
    "start_epoch": 1_800_000_000,
    "job_runtime_seconds": 600,
    "phase_seconds": {"starting": 60, "downloading": 60, "uploading": 30, "stopping": 30},
    "quotas": {"training": {"ml.p4d.24xlarge": 4}, "processing": {"ml.m5.xlarge": 3}},
    "capacity": {
        "ml.g6.48xlarge": [{"from": 0, "to": 1200, "free": 0}, {"from": 1200, "free": 2}],
        "ml.g5.48xlarge": [{"from": 0, "free": 4}],
        "ml.p5.48xlarge": [{"from": 0, "free": 0}],
        "ml.p4d.24xlarge": [{"from": 0, "free": 2}],
        "ml.m5.xlarge": [{"from": 0, "free": 0}],
        "ml.c5.xlarge": [{"from": 0, "free": 0}],
        "ml.m5.4xlarge": [{"from": 0, "free": 2}],
    },
    "training_plans": [
        {"arn": PLAN_P5, "instance_type": "ml.p5.48xlarge", "count": 2, "from": 0},
        {"arn": PLAN_P5_LATER, "instance_type": "ml.p5.48xlarge", "count": 2, "from": 7200},
        {"arn": PLAN_G5, "instance_type": "ml.g5.48xlarge", "count": 1, "from": 0},
    ],
}


def frozen(**overrides: Any) -> dict[str, Any]:
    """The frozen scenario with top-level keys replaced."""
    return {**FROZEN, **overrides}


def training_request(
    name: str,
    preferences: list[dict[str, Any]] | None = None,
    *,
    instance_type: str | None = None,
    count: int | None = None,
    stopping: dict[str, Any] | None = None,
    image: str = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-trainer:latest",
    tags: dict[str, str] | None = None,
    resource_extra: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """CreateTrainingJob kwargs: a preference list, or a plain single-type job with ``instance_type``."""
    resource: dict[str, Any] = {"VolumeSizeInGB": 50}
    if preferences is not None:
        resource["InstancePreferences"] = preferences
    if instance_type is not None:
        resource["InstanceType"] = instance_type
    if count is not None:
        resource["InstanceCount"] = count
    resource.update(resource_extra or {})
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File"},
        "RoleArn": ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://models/out"},
        "ResourceConfig": resource,
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400, **(stopping or {})},
    }
    if tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    request.update(extra)
    return request


def processing_request(
    name: str,
    preferences: list[dict[str, Any]] | None = None,
    *,
    instance_type: str | None = None,
    count: int | None = None,
    image: str = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-processor:latest",
    tags: dict[str, str] | None = None,
    cluster_extra: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """CreateProcessingJob kwargs: a preference list, or a plain job with ``instance_type``."""
    cluster: dict[str, Any] = {"VolumeSizeInGB": 30}
    if preferences is not None:
        cluster["InstancePreferences"] = preferences
    if instance_type is not None:
        cluster["InstanceType"] = instance_type
    if count is not None:
        cluster["InstanceCount"] = count
    cluster.update(cluster_extra or {})
    request: dict[str, Any] = {
        "ProcessingJobName": name,
        "ProcessingResources": {"ClusterConfig": cluster},
        "AppSpecification": {"ImageUri": image},
        "RoleArn": ROLE,
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    }
    if tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    request.update(extra)
    return request
