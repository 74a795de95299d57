"""The DAGs of the capacity page's seeded history (``harness.history``): a nightly retrain, a fine-tune
and a CPU-only preparation step. Paused at creation and never scheduled: the history runs them with
dag.test(), one run per night, each at an hour of the emulated day that decides its outcome."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_sm_prefs.domain.preferences import InstancePreference
from airflow_provider_sm_prefs.operators import (
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)

POLL = float(os.environ.get("SM_PREFS_HISTORY_POLL_INTERVAL", "0.2"))
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311"


def _training(volume: int = 100) -> dict[str, object]:
    return {
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "RoleArn": ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://sm-prefs-history/models/"},
        "ResourceConfig": {"VolumeSizeInGB": volume},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
    }


def _dag(dag_id: str, description: str) -> DAG:
    return DAG(
        dag_id,
        description=description,
        schedule=None,
        start_date=datetime(2026, 9, 15),
        catchup=False,
        is_paused_upon_creation=True,
        render_template_as_native_obj=True,
        params={"finetune_count": 1},
        tags=["sagemaker", "capacity-history"],
    )


with _dag(
    "sm_prefs_history_nightly", "Nightly retrain on [g6 x2, g5 x4, p4d x2, p5 x1], waiting for completion"
) as nightly:
    SageMakerPreferenceTrainingOperator(
        task_id="train",
        config=_training(),
        instance_preferences=[
            InstancePreference("ml.g6.48xlarge", 2),
            InstancePreference("ml.g5.48xlarge", 4),
            InstancePreference("ml.p4d.24xlarge", 2),
            # A dead entry: p5 has capacity only while the first choice has it too, so it never wins (the
            # capacity page's insights flag it as never selected).
            InstancePreference("ml.p5.48xlarge", 1),
        ],
        max_pending=3600,
        wait_for_completion=True,
        poll_interval=POLL,
    )

with _dag("sm_prefs_history_finetune", "Fine-tune on [p5 xN, p4d x2]; N from the run's conf") as finetune:
    SageMakerPreferenceTrainingOperator(
        task_id="finetune",
        config=_training(200),
        instance_preferences=[
            {"instance_type": "ml.p5.48xlarge", "instance_count": "{{ params.finetune_count }}"},
            {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
        ],
        max_pending=1800,
        poll_interval=POLL,
        # A cap the list stays under: the task reads the price list, so its records carry their cost.
        max_hourly_cost=200,
        # No preflight: an over-quota count is sent and SageMaker rejects the request, as it does for a
        # team without the guardrails (with them, the entry would be pruned before Create).
        preflight="off",
    )

with _dag("sm_prefs_history_prep", "CPU-only preparation on [c7i, c6i, m5] 4xlarge") as prep:
    SageMakerPreferenceProcessingOperator(
        task_id="prep",
        config={
            "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
            "RoleArn": ROLE,
            "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1}},
        },
        instance_preferences=["ml.c7i.4xlarge", "ml.c6i.4xlarge", "ml.m5.4xlarge"],
        max_pending=3600,
        poll_interval=POLL,
    )
