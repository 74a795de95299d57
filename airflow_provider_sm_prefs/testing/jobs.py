"""A minimal valid CreateTrainingJob config for tests against the offline SageMaker.

The instance preference list is given separately (to ``build_request`` or an operator), so the config
holds no instance type:

>>> from airflow_provider_sm_prefs.domain.preferences import build_request
>>> config = training_config("nightly", InstanceCount=2)
>>> request, prefs = build_request("training", config, ["ml.g6.48xlarge", "ml.g5.48xlarge"], 3600)
>>> prefs.describe(2)
'ml.g6.48xlarge×2 → ml.g5.48xlarge×2'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ACCOUNT = "123456789012"


def training_config(
    name: str,
    *,
    max_runtime_seconds: int = 3600,
    tags: Mapping[str, str] | None = None,
    **resource: Any,
) -> dict[str, Any]:
    """``TrainingJobName`` ``name``; ``resource`` adds ``ResourceConfig`` fields (e.g. ``InstanceCount``)."""
    config: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/t:1",
            "TrainingInputMode": "File",
        },
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/r",
        "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
        "ResourceConfig": {"VolumeSizeInGB": 10, **resource},
        "StoppingCondition": {"MaxRuntimeInSeconds": max_runtime_seconds},
    }
    if tags:
        config["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    return config
