"""Nightly on HyperPod: scale a flexible instance group for the run, size the run from the mix, scale down.

The group takes 8 nodes over an ordered list of types; HyperPod puts each node on the first type with
capacity, so the night may run on a mix (2 × ml.p5.48xlarge + 6 × ml.p4d.24xlarge). The run starts once
at least 4 nodes are up and the 20-minute acceptance window has closed, or at once when all 8 are.

Runs unchanged against real AWS or the offline SageMaker (point ``aws_default``'s extra at
``{"endpoint_url": "http://127.0.0.1:PORT"}``). Set the DAG params for your account.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_sm_prefs.operators.hyperpod import SageMakerHyperPodGroupOperator

# Parse-time settings come from the environment only: no Variable, connection or network lookups here.
POLL_INTERVAL = float(os.environ.get("SM_PREFS_POLL_INTERVAL", "30"))

GPU_TYPES = ["ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4d.24xlarge"]

with DAG(
    dag_id="sm_prefs_hyperpod_nightly",
    description="Scale a HyperPod flexible instance group for the nightly run, then back down",
    schedule="0 1 * * *",
    start_date=datetime(2026, 9, 15),
    catchup=False,
    max_active_runs=1,
    tags=["sagemaker", "hyperpod", "instance-preferences", "example"],
    params={
        "cluster": Param("nightly-training", type="string"),
        "role_arn": Param("arn:aws:iam::123456789012:role/SageMakerHyperPodNodeRole", type="string"),
        "lifecycle_uri": Param("s3://sm-prefs-demo/hyperpod/lifecycle/", type="string"),
    },
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
) as dag:
    scale_up = SageMakerHyperPodGroupOperator(
        task_id="scale_up",
        cluster_name="{{ params.cluster }}",
        group_name="gpu-workers",
        instance_types=GPU_TYPES,
        instance_count=8,
        min_instance_count=4,
        accept_after=timedelta(minutes=20),
        max_pending=timedelta(hours=2),
        execution_role="{{ params.role_arn }}",
        group_config={
            "LifeCycleConfig": {"SourceS3Uri": "{{ params.lifecycle_uri }}", "OnCreate": "on_create.sh"},
            "ThreadsPerCore": 1,
        },
        # A missing cluster is created with the group in it (Slurm orchestration by default).
        cluster_config={"Tags": [{"Key": "team", "Value": "ml-platform"}]},
        poll_interval=POLL_INTERVAL,
    )

    @task
    def plan_run(outcome: dict[str, Any]) -> dict[str, Any]:
        """Size the run from what the group got: one rank per accelerator, the batch per device."""
        ranks = outcome["accelerators_total"]
        print(f"Running on {outcome['mix']} ({ranks} ranks); fell back: {outcome['fell_back']}")
        for node in outcome["nodes"]:
            print(f"  {node['count']} × {node['instance_type']} (choice #{node['rank']})")
        return {"ranks": ranks, "global_batch": 4096, "per_device_batch": max(1, 4096 // max(ranks, 1))}

    scale_down = SageMakerHyperPodGroupOperator(
        task_id="scale_down",
        cluster_name="{{ params.cluster }}",
        group_name="gpu-workers",
        instance_types=GPU_TYPES,
        instance_count=0,
        poll_interval=POLL_INTERVAL,
        trigger_rule="all_done",  # scale down even when the run failed
    )

    plan_run(scale_up.output) >> scale_down
