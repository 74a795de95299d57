"""Watch a SageMaker job started elsewhere (another team, a notebook, Step Functions) until it gets capacity."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_sm_prefs.sensors import SageMakerCapacitySensor

POLL_INTERVAL = float(os.environ.get("SM_PREFS_POLL_INTERVAL", "30"))

with DAG(
    dag_id="sm_prefs_watch_external_job",
    description="Wait for an externally submitted job to leave Pending, then use what it got",
    schedule=None,
    start_date=datetime(2026, 9, 15),
    catchup=False,
    tags=["sagemaker", "instance-preferences", "example"],
    # A retry looks at the same job again (it never submits anything).
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    params={
        "job_name": Param("external-training-job", type="string"),
        "job_kind": Param("training", enum=["training", "processing"]),
    },
) as dag:
    watch = SageMakerCapacitySensor(
        task_id="wait_for_capacity",
        job_name="{{ params.job_name }}",
        job_kind="{{ params.job_kind }}",
        max_pending=timedelta(hours=6),
        poll_interval=POLL_INTERVAL,
    )

    @task
    def announce(outcome: dict[str, Any]) -> str:
        message = (
            f"{outcome['job_name']} got {outcome['selected_instance_count']} × {outcome['selected_instance_type']} "
            f"(choice #{outcome['preference_rank']}) after {outcome['pending_seconds']:.0f}s"
        )
        print(message)
        return message

    announce(watch.output)
