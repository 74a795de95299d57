"""The SageMaker Python SDK's own flows against the offline SageMaker. Runs in build/sdk-venv.

The SDK is not in the project's .venv on any Python (on Python 3.12 and later it cannot be installed next to
apache-airflow 3.3: sagemaker-core pins importlib-metadata<7, airflow-core needs >=7 there), so
tests/sdk/test_sdk_flows.py runs this script with that venv's Python:
``python flows.py <flow> <job name> uniform|per-entry logs|no-logs``. Every client reaches the emulator through ``AWS_ENDPOINT_URL``
(set by the test, as a user would). The last line printed is a JSON summary the test reads.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1"
G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"


class Lines(logging.Handler):
    """Every log record any SDK logger emits, as text (the SDK prints job logs through logging)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _training_summary(job: Any) -> dict[str, Any]:
    """Name, status and selection of a sagemaker-core ``TrainingJob``, from a fresh Describe."""
    job.refresh()
    rc = job.resource_config
    return {
        "job_name": job.training_job_name,
        "status": job.training_job_status,
        "selected": [rc.selected_instance_type, rc.selected_instance_count],
    }


def model_trainer(name: str, per_entry_counts: bool, logs: bool) -> dict[str, Any]:
    """sagemaker.train.ModelTrainer with Compute(instance_preferences=...): train(wait=True, logs=...)."""
    from sagemaker.core.shapes import InstancePreference
    from sagemaker.core.training.configs import Compute, OutputDataConfig
    from sagemaker.train import ModelTrainer

    if per_entry_counts:
        compute = Compute(
            instance_preferences=[
                InstancePreference(instance_type=G6, instance_count=2),
                InstancePreference(instance_type=G5, instance_count=4),
            ],
            volume_size_in_gb=50,
        )
    else:
        compute = Compute(
            instance_preferences=[InstancePreference(instance_type=G6), InstancePreference(instance_type=G5)],
            instance_count=2,
            volume_size_in_gb=50,
        )
    trainer = ModelTrainer(
        training_image=IMAGE,
        role=ROLE,
        compute=compute,
        base_job_name=name,
        output_data_config=OutputDataConfig(s3_output_path="s3://sdk-models/out"),
        hyperparameters={"epochs": "3"},
    )
    trainer.train(wait=True, logs=logs)
    return _training_summary(trainer._latest_training_job)


def core_training_job(name: str, per_entry_counts: bool, logs: bool) -> dict[str, Any]:
    """sagemaker-core: TrainingJob.create(...) then wait(logs=...)."""
    from sagemaker.core.resources import TrainingJob
    from sagemaker.core.shapes import (
        AlgorithmSpecification,
        InstancePreference,
        OutputDataConfig,
        ResourceConfig,
        StoppingCondition,
    )

    prefs = [
        InstancePreference(instance_type=G6, instance_count=2 if per_entry_counts else None),
        InstancePreference(instance_type=G5, instance_count=4 if per_entry_counts else None),
    ]
    resource = ResourceConfig(
        instance_preferences=prefs, volume_size_in_gb=50, instance_count=None if per_entry_counts else 2
    )
    job = TrainingJob.create(
        training_job_name=name,
        algorithm_specification=AlgorithmSpecification(training_image=IMAGE, training_input_mode="File"),
        role_arn=ROLE,
        output_data_config=OutputDataConfig(s3_output_path="s3://sdk-models/out"),
        resource_config=resource,
        stopping_condition=StoppingCondition(max_runtime_in_seconds=3600),
    )
    job.wait(poll=1, logs=logs)
    return _training_summary(job)


def processor(name: str, per_entry_counts: bool, logs: bool) -> dict[str, Any]:
    """sagemaker.core.processing.Processor(instance_preferences=...).run(wait=True, logs=...)."""
    from sagemaker.core.processing import Processor

    if per_entry_counts:
        prefs = [
            {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2},
            {"InstanceType": "ml.c5.xlarge", "InstanceCount": 3},
        ]
        count = None
    else:
        prefs = [{"InstanceType": "ml.m5.xlarge"}, {"InstanceType": "ml.c5.xlarge"}]
        count = 2
    proc = Processor(
        role=ROLE,
        image_uri=IMAGE,
        instance_count=count,
        instance_preferences=prefs,
        base_job_name=name,
    )
    proc.run(wait=True, logs=logs)
    job = proc.latest_job
    job.refresh()
    cluster = job.processing_resources.cluster_config
    return {
        "job_name": job.processing_job_name,
        "status": job.processing_job_status,
        "selected": [cluster.selected_instance_type, cluster.selected_instance_count],
    }


FLOWS = {"model_trainer": model_trainer, "core_training_job": core_training_job, "processor": processor}


def main() -> None:
    flow, name = sys.argv[1], sys.argv[2]
    counts, logs = sys.argv[3] == "per-entry", sys.argv[4] == "logs"
    handler = Lines()
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    result: dict[str, Any] = {"flow": flow}
    try:
        result.update(FLOWS[flow](name, counts, logs))
    except Exception as err:  # reported to the test, which decides
        result["error"] = f"{type(err).__name__}: {err}"
    # The job lines the SDK logged (the Processor prints them instead: the test reads stdout too).
    result["log_lines"] = [line for line in handler.lines if "Container started" in line]
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
