"""DAGs the end-to-end suite (tests/e2e) triggers through the REST API of a running Airflow.

Each is driven by ``conf`` (DAG params), like the dag.test() DAGs next to it. The poll cadence comes
from the environment at parse time, as in the example DAGs (the e2e deployment sets it).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, task

from airflow_provider_sm_prefs.domain.outcome import XComKey
from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator
from airflow_provider_sm_prefs.operators.hyperpod import OUTCOME_KEY, SageMakerHyperPodGroupOperator

POLL = float(os.environ.get("SM_PREFS_POLL_INTERVAL", "0.5"))
MAX_POLL = float(os.environ.get("SM_PREFS_MAX_POLL_INTERVAL", "2"))


@task
def plan_jobs(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``params.count`` Create requests: copies of ``params.config`` named ``<name_prefix>-000``, ``-001``."""
    assert params is not None
    base = dict(params["config"])
    return [
        {**base, "TrainingJobName": f"{params['name_prefix']}-{i:03d}"} for i in range(int(params["count"]))
    ]


@task
def consume(ti: Any = None) -> dict[str, Any]:
    """A downstream task reading what the job task pushed (it must not run when the job task fails)."""
    return {key.value: ti.xcom_pull(task_ids="job", key=key.value) for key in XComKey}


def fleet(dag_id: str, description: str, *, finish_in_triggerer: bool) -> DAG:
    """``params.count`` training jobs as mapped tasks, each waiting for capacity and completion."""
    with DAG(
        dag_id,
        description=description,
        schedule=None,
        start_date=datetime(2026, 9, 15),
        catchup=False,
        render_template_as_native_obj=True,
        max_active_tasks=64,
        params={"config": {}, "prefs": None, "max_pending": None, "count": 1, "name_prefix": "fleet"},
        default_args={"retries": 0},
    ) as dag:
        SageMakerPreferenceTrainingOperator.partial(
            task_id="job",
            instance_preferences="{{ params.prefs }}",
            max_pending="{{ params.max_pending }}",
            poll_interval=POLL,
            max_poll_interval=MAX_POLL,
            wait_for_completion=True,
            finish_in_triggerer=finish_in_triggerer,
            # Deferred tasks count towards this cap (not towards max_active_tasks): the triggerer HA
            # scenario has 200 waiting at once.
            max_active_tis_per_dagrun=256,
        ).expand(config=plan_jobs())
    return dag


e2e_fleet = fleet(
    "e2e_fleet",
    "params.count training jobs as mapped tasks, each waiting for capacity and completion",
    finish_in_triggerer=True,
)
# The same fleet with every wait resumed in a worker (no end in the triggerer): the path where a trigger
# that fires right after the deferral meets Airflow's scheduler race (apache/airflow#72716).
e2e_fleet_resume = fleet(
    "e2e_fleet_resume",
    "e2e_fleet with every wait resumed in a worker (finish_in_triggerer=False)",
    finish_in_triggerer=False,
)


with DAG(
    "e2e_retry",
    description="One training job with a retry: the retry must reattach to the first try's job",
    schedule=None,
    start_date=datetime(2026, 9, 15),
    catchup=False,
    render_template_as_native_obj=True,
    params={"config": {}, "prefs": None, "max_pending": None, "regions": None},
    default_args={"retries": 1, "retry_delay": timedelta(seconds=0)},
) as e2e_retry:
    (
        SageMakerPreferenceTrainingOperator(
            task_id="job",
            config="{{ params.config }}",
            instance_preferences="{{ params.prefs }}",
            max_pending="{{ params.max_pending }}",
            regions="{{ params.regions }}",
            poll_interval=POLL,
            max_poll_interval=MAX_POLL,
            wait_for_completion=True,
        )
        >> consume()
    )


@task
def size_from_group(ti: Any = None) -> dict[str, Any]:
    """A downstream task reading the group's outcome, as a training launcher sizes its ranks from it."""
    outcome = ti.xcom_pull(task_ids="scale", key=OUTCOME_KEY)
    return {"mix": outcome["mix"], "ranks": outcome["accelerators_total"]}


with DAG(
    "e2e_hyperpod",
    description="A HyperPod flexible group scaled to params.count nodes over [p5, p5e, p4d], with a retry",
    schedule=None,
    start_date=datetime(2026, 9, 15),
    catchup=False,
    render_template_as_native_obj=True,
    params={"cluster": "e2e", "count": 8},
    default_args={"retries": 1, "retry_delay": timedelta(seconds=0)},
) as e2e_hyperpod:
    (
        SageMakerHyperPodGroupOperator(
            task_id="scale",
            cluster_name="{{ params.cluster }}",
            group_name="gpu-workers",
            instance_types=["ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4d.24xlarge"],
            instance_count="{{ params.count }}",
            min_instance_count=4,
            # Four nodes are enough once the group has waited 20 minutes for the rest.
            accept_after=1200,
            execution_role="arn:aws:iam::123456789012:role/SageMakerHyperPodNodeRole",
            group_config={
                "LifeCycleConfig": {
                    "SourceS3Uri": "s3://sm-prefs-demo/hyperpod/lifecycle/",
                    "OnCreate": "on_create.sh",
                }
            },
            cluster_config={},
            poll_interval=POLL,
        )
        >> size_from_group()
    )
