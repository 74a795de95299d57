"""A minimal valid CreateTrainingJob config for tests against the offline SageMaker.

The instance preference list is given separately (``ResourceConfig.InstancePreferences``, or a client
that builds it, such as the Airflow provider's operators), so the config holds no instance type:

>>> config = training_config("nightly", InstanceCount=2)
>>> config["ResourceConfig"]
{'VolumeSizeInGB': 10, 'InstanceCount': 2}
>>> config["ResourceConfig"]["InstancePreferences"] = [
...     {"InstanceType": "ml.g6.48xlarge"},
...     {"InstanceType": "ml.g5.48xlarge"},
... ]
>>> "InstanceType" in config["ResourceConfig"]
False
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
