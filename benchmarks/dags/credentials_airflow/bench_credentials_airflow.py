"""Capacity waits on expiring credentials in a real triggerer (``make bench-credentials-airflow``).

``SageMakerCapacitySensor`` mapped over N jobs the benchmark submitted itself: the first half on a
connection that assumes a role with AssumeRole, the second half on one that assumes it with a web
identity token (both 15-minute sessions), plus one task that measures the triggerer's event loop from
inside it (:mod:`benchmarks.loop_probe`). Everything comes from the environment the benchmark gives
every Airflow process (:mod:`benchmarks.credentials_airflow`); without it the DAG has no waits.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_sm_prefs.sensors.capacity import SageMakerCapacitySensor
from benchmarks.loop_probe import LoopLagProbe

DAG_ID = "bench_credentials_airflow"
PREFIX = os.environ.get("SM_PREFS_CREDS_PREFIX", "creds-airflow")
WAITS = int(os.environ.get("SM_PREFS_CREDS_WAITS", "0"))
POLL_INTERVAL = float(os.environ.get("SM_PREFS_CREDS_POLL_INTERVAL", "10"))
STOP_FILE = os.environ.get("SM_PREFS_CREDS_STOP_FILE", "/nonexistent/stop")
CONNECTIONS = (
    os.environ.get("SM_PREFS_CREDS_CONN_ASSUME_ROLE", "aws_creds_assume_role"),
    os.environ.get("SM_PREFS_CREDS_CONN_WEB_IDENTITY", "aws_creds_web_identity"),
)
NAMES = [f"{PREFIX}-{k:05d}" for k in range(WAITS)]
HALF = (WAITS + 1) // 2

with DAG(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_tasks=4096,
    default_args={"retries": 0},
    tags=["benchmark"],
) as dag:
    # First in the queue: it must be measuring before the waits arrive in the triggerer.
    LoopLagProbe(task_id="loop_probe", stop_file=STOP_FILE, priority_weight=10_000)
    for task_id, conn_id, names in (
        ("wait_assume_role", CONNECTIONS[0], NAMES[:HALF]),
        ("wait_web_identity", CONNECTIONS[1], NAMES[HALF:]),
    ):
        if names:
            SageMakerCapacitySensor.partial(
                task_id=task_id, aws_conn_id=conn_id, poll_interval=POLL_INTERVAL, deferrable=True
            ).expand(job_name=names)
