"""Feature preparation on whichever CPU type has capacity, with a client-side deadline.

SageMaker evaluates a CPU-only list once and documents no pending limit for processing jobs, so
``max_pending`` here is enforced by the trigger: the job is stopped and the task fails with a
capacity timeout if no entry is selected in time.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, Param

from airflow_provider_sm_prefs.operators import SageMakerPreferenceProcessingOperator

POLL_INTERVAL = float(os.environ.get("SM_PREFS_POLL_INTERVAL", "30"))

with DAG(
    dag_id="sm_prefs_processing_cpu",
    description="Processing job on an ordered list of CPU types, bounded client-side",
    schedule=None,
    start_date=datetime(2026, 9, 15),
    catchup=False,
    tags=["sagemaker", "instance-preferences", "example"],
    # A retry reattaches to the job the failed try was waiting for (submit-once): it never starts a copy.
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    params={
        "role_arn": Param("arn:aws:iam::123456789012:role/SageMakerProcessingRole", type="string"),
        "image_uri": Param(
            "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3", type="string"
        ),
    },
) as dag:
    SageMakerPreferenceProcessingOperator(
        task_id="prepare_features",
        config={
            "AppSpecification": {
                "ImageUri": "{{ params.image_uri }}",
                "ContainerEntrypoint": ["python3", "prep.py"],
            },
            "RoleArn": "{{ params.role_arn }}",
            "ProcessingResources": {"ClusterConfig": {"InstanceCount": 2, "VolumeSizeInGB": 30}},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        },
        instance_preferences=["ml.c7i.4xlarge", "ml.c6i.4xlarge", "ml.m5.4xlarge"],
        max_pending=timedelta(minutes=20),
        poll_interval=POLL_INTERVAL,
    )
