"""Hourly maintenance: find the provider's running SageMaker jobs whose Airflow task is gone, and stop them.

Dry run unless the run's ``stop`` param is true: the task logs a table of every running job with its
owner, the decision and the reason, and returns it as its XCom. It only ever judges jobs carrying this
deployment's ``sm-prefs:`` identity tags, and stops only those whose task instance ended or no longer
exists (see docs/guides/reconciler.md). Nothing is read from the network or the database at parse time.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Param

from airflow_provider_sm_prefs.operators.reconciler import SageMakerJobReconcilerOperator

with DAG(
    dag_id="sm_prefs_job_reconciler",
    description="Stop running SageMaker jobs whose Airflow task is gone (dry run by default)",
    schedule="@hourly",
    start_date=datetime(2026, 9, 15),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["sagemaker", "instance-preferences", "maintenance", "example"],
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
    params={"stop": Param(False, type="boolean", description="stop the jobs decided STOP (else dry run)")},
) as dag:
    SageMakerJobReconcilerOperator(
        task_id="reconcile_jobs",
        dry_run="{{ not params.stop }}",
        max_calls_per_second=5,
        execution_timeout=timedelta(minutes=50),
    )
