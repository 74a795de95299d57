"""The DAG whose serialized form tests/golden/serialized_dag.json holds (written by an earlier release)."""

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_sm_prefs.operators import (
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)
from airflow_provider_sm_prefs.sensors import SageMakerCapacitySensor

TRAINING = {
    "AlgorithmSpecification": {
        "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
        "TrainingInputMode": "File",
    },
    "RoleArn": "arn:aws:iam::123456789012:role/sm",
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
    "ResourceConfig": {"VolumeSizeInGB": 100},
    "StoppingCondition": {"MaxRuntimeInSeconds": 7200},
}
PROCESSING = {
    "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/proc:1"},
    "RoleArn": "arn:aws:iam::123456789012:role/sm",
    "ProcessingResources": {"ClusterConfig": {"InstanceCount": 1, "VolumeSizeInGB": 30}},
}

with DAG("sm_prefs_golden", schedule=None, start_date=datetime(2026, 9, 15), catchup=False) as dag:
    train = SageMakerPreferenceTrainingOperator(
        task_id="train",
        config=TRAINING,
        instance_preferences=[
            {"instance_type": "ml.p5.48xlarge", "instance_count": 1},
            {"instance_type": "ml.g6.48xlarge", "instance_count": 2},
            {"instance_type": "ml.g5.48xlarge", "instance_count": 4, "accept_after": timedelta(minutes=30)},
        ],
        max_pending=timedelta(hours=2),
        max_cost_increase=0.5,
        requirements={"accelerator": "cuda"},
        retries=2,
    )
    process = SageMakerPreferenceProcessingOperator(
        task_id="process",
        config=PROCESSING,
        instance_preferences=["ml.c5.xlarge", "ml.m5.xlarge"],
        max_pending="{{ params.get('max_pending', 3600) }}",
        wait_for_completion=False,
    )
    mapped = SageMakerPreferenceTrainingOperator.partial(
        task_id="mapped", config=TRAINING, max_pending=3600, stop_job_on_kill=False
    ).expand(instance_preferences=[["ml.g6.48xlarge"], ["ml.g5.48xlarge"]])
    watch = SageMakerCapacitySensor(task_id="watch", job_name="{{ ti.xcom_pull('train', key='job_name') }}")
    train >> watch
