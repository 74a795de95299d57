"""DAGs whose lineage the test suite reads: requests written in the DAG (not in run conf), with
hyperparameters and environment values that must never reach a lineage event."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG

from airflow_provider_sm_prefs.operators import (
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)
from offline_sagemaker.jobs import training_config as base_training_config

#: Values that stand for secrets: the lineage tests assert none of them appears in any event.
SECRET_VALUES = ("hp-secret-4711", "env-secret-0815", "proc-env-secret-2342")
PRICES = {"ml.g6.48xlarge": 13.35, "ml.g5.48xlarge": 16.29, "ml.p4d.24xlarge": 37.69}
PREFERENCES = [
    {"instance_type": "ml.g6.48xlarge", "instance_count": 2},
    {"instance_type": "ml.g5.48xlarge", "instance_count": 4},
    {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
]


def training_config(name: str, tags: dict[str, str] | None = None) -> dict[str, Any]:
    """The offline SageMaker's minimal request, with two S3 channels, an output path and secrets."""
    config = base_training_config(name, max_runtime_seconds=86400, tags=tags, VolumeSizeInGB=50)
    config["InputDataConfig"] = [
        {
            "ChannelName": channel,
            "DataSource": {
                "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://lineage-data/{channel}/"}
            },
        }
        for channel in ("train", "validation")
    ]
    config["OutputDataConfig"] = {"S3OutputPath": "s3://lineage-models/nightly"}
    config["HyperParameters"] = {"learning_rate": "0.001", "api_key": SECRET_VALUES[0]}
    config["Environment"] = {"WANDB_API_KEY": SECRET_VALUES[1]}
    return config


PROCESSING_CONFIG: dict[str, Any] = {
    "ProcessingJobName": "lineage-prep",
    "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
    "ProcessingInputs": [
        {
            "InputName": "raw",
            "S3Input": {
                "S3Uri": "s3://lineage-data/raw/2026-09-15/",
                "LocalPath": "/opt/ml/processing/input",
                "S3DataType": "S3Prefix",
                "S3InputMode": "File",
            },
        }
    ],
    "ProcessingOutputConfig": {
        "Outputs": [
            {
                "OutputName": "features",
                "S3Output": {
                    "S3Uri": "s3://lineage-data/features/",
                    "LocalPath": "/opt/ml/processing/output",
                    "S3UploadMode": "EndOfJob",
                },
            }
        ]
    },
    "ProcessingResources": {"ClusterConfig": {"InstanceCount": 1, "VolumeSizeInGB": 30}},
    "Environment": {"DB_PASSWORD": SECRET_VALUES[2]},
}


def _dag(dag_id: str) -> DAG:
    return DAG(dag_id, schedule=None, start_date=datetime(2026, 9, 15), catchup=False)


with _dag("t_lineage_train") as t_lineage_train:
    SageMakerPreferenceTrainingOperator(
        task_id="train",
        config=training_config("lineage-train"),
        instance_preferences=PREFERENCES,
        max_pending=3600,
        prices=PRICES,
        poll_interval=0.2,
    )

with _dag("t_lineage_train_fails") as t_lineage_train_fails:
    SageMakerPreferenceTrainingOperator(
        task_id="train",
        config=training_config("lineage-train-fails", tags={"emulator:outcome": "Failed"}),
        instance_preferences=PREFERENCES,
        max_pending=3600,
        poll_interval=0.2,
    )

with _dag("t_lineage_process") as t_lineage_process:
    SageMakerPreferenceProcessingOperator(
        task_id="prepare",
        config=PROCESSING_CONFIG,
        instance_preferences=["ml.c7i.4xlarge", "ml.m7i.4xlarge"],
        max_pending=600,
        poll_interval=0.2,
    )
