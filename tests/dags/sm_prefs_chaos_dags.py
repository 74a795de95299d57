"""DAGs of the production-topology runs (harness/chaos.py, harness/latency.py), triggered through the REST
API of a running Airflow and driven by ``conf``. Apart from the e2e suite's DAGs: every task process parses
its DAG's whole file, and these have no business in the others' start-up.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, task, task_group

from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator

POLL = float(os.environ.get("SM_PREFS_POLL_INTERVAL", "0.5"))
MAX_POLL = float(os.environ.get("SM_PREFS_MAX_POLL_INTERVAL", "2"))


@task
def plan_chaos(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``params.tasks``: one ``{"config", "instance_preferences", "max_pending"}`` per mapped task."""
    assert params is not None
    return [dict(spec) for spec in params["tasks"]]


with DAG(
    "e2e_chaos",
    description="Mapped training tasks with retries, each with its own list and pending budget (harness.chaos)",
    schedule=None,
    start_date=datetime(2026, 9, 15),
    catchup=False,
    render_template_as_native_obj=True,
    max_active_tasks=128,
    params={"tasks": []},
    # A try killed with its worker (kill -9) fails by its heartbeat; the retry reattaches to the job.
    default_args={"retries": 3, "retry_delay": timedelta(seconds=2)},
) as e2e_chaos:
    SageMakerPreferenceTrainingOperator.partial(
        task_id="job",
        poll_interval=POLL,
        max_poll_interval=MAX_POLL,
        wait_for_completion=True,
        max_active_tis_per_dagrun=256,
    ).expand_kwargs(plan_chaos())


@task
def after_selection(record: dict[str, Any]) -> str:
    """The task downstream of a job's selection: what the next task of a pipeline would be."""
    return str(record["job_name"])


@task_group
def selection(config: dict[str, Any], instance_preferences: list[dict[str, Any]]) -> None:
    """One job and the task after it: the task after runs as soon as its own job is selected."""
    job = SageMakerPreferenceTrainingOperator(
        task_id="job",
        config=config,
        instance_preferences=instance_preferences,
        poll_interval=POLL,
        max_poll_interval=MAX_POLL,
        wait_for_completion=False,
    )
    after_selection(job.output)


# The latency from SageMaker selecting an entry to the downstream task running (harness.latency): one DAG
# per way of waiting, on its own connection (aws_sm_events carries the event queue, see harness.config),
# and per way of ending the task: by the triggerer (the default), or by a worker's resume ("_resume").
for _mode, _conn, _finish in (
    ("poll", "aws_default", True),
    ("events", "aws_sm_events", True),
    ("poll_resume", "aws_default", False),
    ("events_resume", "aws_sm_events", False),
):
    with DAG(
        f"e2e_latency_{_mode}",
        description=f"Mapped (job -> task after it) pairs, waiting in {_mode} mode",
        schedule=None,
        start_date=datetime(2026, 9, 15),
        catchup=False,
        render_template_as_native_obj=True,
        max_active_tasks=128,
        params={"tasks": []},
        default_args={"aws_conn_id": _conn, "finish_in_triggerer": _finish},
    ):
        selection.expand_kwargs(plan_chaos())
