"""DAGs the test suite drives with dag.test(run_conf=...): one per operator shape, configured by params."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, task, task_group

from airflow_provider_sm_prefs.domain.identity import IDENTITY_XCOM_KEY
from airflow_provider_sm_prefs.domain.outcome import XComKey
from airflow_provider_sm_prefs.operators import (
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)
from airflow_provider_sm_prefs.sensors import SageMakerCapacitySensor

POLL = 0.2
PARAMS: dict[str, Any] = {
    "config": {},
    "prefs": None,
    "max_pending": None,
    "out": "",
    # t_train_lost_answer: the job is selected before its Create is sent again.
    "selected_before_retry": False,
    "job_name": "",
    # Guardrails before submit (the operators' defaults).
    "preflight": "prune",
    "requirements": None,
    "max_hourly_cost": None,
    "max_cost_increase": None,
    "prices": None,
    # The AWS connection the job task uses.
    "aws_conn_id": "aws_default",
    # The regions after the task's own.
    "regions": None,
}


class CrashAfterCreateTrainingOperator(SageMakerPreferenceTrainingOperator):
    """Dies right after CreateTrainingJob on its first try, as a killed worker would."""

    def _create(self, run, *args, **kwargs):  # type: ignore[no-untyped-def]
        describe = super()._create(run, *args, **kwargs)
        if run.ti.try_number == 1:
            raise RuntimeError("worker died right after CreateTrainingJob")
        return describe


class LostCreateAnswerTrainingOperator(SageMakerPreferenceTrainingOperator):
    """Its first Create's answer is lost, as when the connection drops after SageMaker ran the request: the
    job exists, the task never heard so, and the Create is sent again (ResourceInUse, then a reattach that
    must prove the job its own from its tags). With ``params.selected_before_retry`` the job is already
    selected when the Create is sent again (the test moves the clock once it sees the first Create)."""

    def _create(self, run, request, prefs, job_name, claim):  # type: ignore[no-untyped-def]
        import time

        from airflow_provider_sm_prefs.domain.status import Phase, phase_of

        self.hook.create_job(self.job_kind, request, prefs)  # SageMaker made the job; no answer came back
        if run.context["params"].get("selected_before_retry"):
            deadline = time.monotonic() + 120
            while (
                phase_of(self.job_kind, self.hook.describe_job(self.job_kind, job_name)) is not Phase.RUNNING
            ):
                assert time.monotonic() < deadline, "the job was never selected"
                time.sleep(0.1)
        return super()._create(run, request, prefs, job_name, claim)


class CrashAfterCompletionTrainingOperator(SageMakerPreferenceTrainingOperator):
    """Dies after its job completed, on its first try, before the task could succeed."""

    def execute_job_complete(self, context, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = super().execute_job_complete(context, *args, **kwargs)
        if context["ti"].try_number == 1:
            raise RuntimeError("worker died after the job completed")
        return result


class SelectedAtWindowTrainingOperator(SageMakerPreferenceTrainingOperator):
    """Capacity frees up right between the trigger's last look and the stop: the emulator's clock is
    moved forward (to the moment the first choice frees) just before the task looks again."""

    def _close_window(self, run):  # type: ignore[no-untyped-def]
        from offline_sagemaker.remote import RemoteSageMaker

        endpoint = self.hook.conn_config.get_service_endpoint_url("sagemaker")
        RemoteSageMaker(endpoint).advance(600)
        return super()._close_window(run)


class CrashBeforeNextStageTrainingOperator(SageMakerPreferenceTrainingOperator):
    """Dies after stopping a Pending stage and recording the next, before creating it (first try only)."""

    def _start_stage(self, run, job_name, limits):  # type: ignore[no-untyped-def]
        stages = self._windows.state if self._windows is not None else None
        if run.context["ti"].try_number == 1 and stages is not None and stages.stage > 1:
            raise RuntimeError("worker died between two stages")
        return super()._start_stage(run, job_name, limits)


#: The extra links' XCom keys, read back by ``consume`` with the outcome keys.
LINK_KEYS = ("sm_prefs_job_link", "sm_prefs_job_logs_link")


@task(multiple_outputs=False)  # one return_value: Airflow 3.0 refuses the None of a missing key as an XCom
def consume(params: dict[str, Any] | None = None, ti: Any = None) -> dict[str, Any]:
    """A downstream task: read every XCom key the job task pushed and write them where the test looks."""
    values = {key.value: ti.xcom_pull(task_ids="job", key=key.value) for key in XComKey}
    values["return_value"] = ti.xcom_pull(task_ids="job")
    values.update({key: ti.xcom_pull(task_ids="job", key=key) for key in LINK_KEYS})
    values[IDENTITY_XCOM_KEY] = ti.xcom_pull(task_ids="job", key=IDENTITY_XCOM_KEY)
    if params and params.get("out"):
        with open(params["out"], "w") as fh:
            json.dump(values, fh)
    return values


def _dag(dag_id: str, operator: type, retries: int = 0, **kwargs: Any) -> DAG:
    with DAG(
        dag_id,
        schedule=None,
        start_date=datetime(2026, 9, 15),
        catchup=False,
        render_template_as_native_obj=True,
        params=dict(PARAMS),
        default_args={"retries": retries, "retry_delay": timedelta(seconds=0)},
    ) as dag:
        job = operator(
            task_id="job",
            config="{{ params.config }}",
            instance_preferences="{{ params.prefs }}",
            max_pending="{{ params.max_pending }}",
            preflight="{{ params.preflight }}",
            requirements="{{ params.requirements }}",
            max_hourly_cost="{{ params.max_hourly_cost }}",
            max_cost_increase="{{ params.max_cost_increase }}",
            prices="{{ params.prices }}",
            aws_conn_id="{{ params.aws_conn_id }}",
            regions="{{ params.regions }}",
            poll_interval=POLL,
            **kwargs,
        )
        job >> consume()
    return dag


t_train_capacity = _dag("t_train_capacity", SageMakerPreferenceTrainingOperator, wait_for_completion=False)
t_train_complete = _dag("t_train_complete", SageMakerPreferenceTrainingOperator, wait_for_completion=True)
# t_train_capacity with the worker's resume: the path every wait took before finish_in_triggerer.
t_train_capacity_resume = _dag(
    "t_train_capacity_resume",
    SageMakerPreferenceTrainingOperator,
    wait_for_completion=False,
    finish_in_triggerer=False,
)
t_train_sync = _dag(
    "t_train_sync", SageMakerPreferenceTrainingOperator, wait_for_completion=True, deferrable=False
)
t_train_untagged = _dag(
    "t_train_untagged", SageMakerPreferenceTrainingOperator, wait_for_completion=False, identity_tags=False
)
t_train_lost_answer = _dag("t_train_lost_answer", LostCreateAnswerTrainingOperator, wait_for_completion=False)
# A hand-off that pushes no XCom at all: only the job's own hand-off tag says it was left running on purpose.
t_train_handoff_quiet = _dag(
    "t_train_handoff_quiet",
    SageMakerPreferenceTrainingOperator,
    wait_for_completion=False,
    do_xcom_push=False,
)
t_process = _dag("t_process", SageMakerPreferenceProcessingOperator, wait_for_completion=False)
t_process_complete = _dag(
    "t_process_complete", SageMakerPreferenceProcessingOperator, wait_for_completion=True
)
# Like t_train_complete, and the one DAG here that reports lineage when the deployment emits lineage
# only for the DAGs that ask for it ([openlineage] selective_enable): the e2e credentials scenario.
t_train_lineage = _dag("t_train_lineage", SageMakerPreferenceTrainingOperator, wait_for_completion=True)
try:
    from airflow.providers.openlineage.utils.selective_enable import enable_lineage
except ImportError:  # without the OpenLineage provider it runs the same and reports nothing
    pass
else:
    enable_lineage(t_train_lineage)
# The job's logs in the task log: a small cap, and none at all.
t_train_logs_cut = _dag(
    "t_train_logs_cut", SageMakerPreferenceTrainingOperator, wait_for_completion=True, max_log_lines=5
)
t_train_quiet = _dag(
    "t_train_quiet", SageMakerPreferenceTrainingOperator, wait_for_completion=True, print_log=False
)
t_train_crash = _dag("t_train_crash", CrashAfterCreateTrainingOperator, retries=1, wait_for_completion=False)
t_train_crash_done = _dag(
    "t_train_crash_done",
    CrashAfterCompletionTrainingOperator,
    retries=1,
    wait_for_completion=True,
    finish_in_triggerer=False,  # the crash is in the worker's resume
)
t_train_escalate_race = _dag(
    "t_train_escalate_race", SelectedAtWindowTrainingOperator, wait_for_completion=False
)
t_train_escalate_crash = _dag(
    "t_train_escalate_crash", CrashBeforeNextStageTrainingOperator, retries=1, wait_for_completion=False
)

with DAG(
    "t_sensor",
    schedule=None,
    start_date=datetime(2026, 9, 15),
    catchup=False,
    params=dict(PARAMS),
) as t_sensor:
    SageMakerCapacitySensor(task_id="job", job_name="{{ params.job_name }}", poll_interval=POLL) >> consume()

with DAG(
    "t_sensor_poke",
    schedule=None,
    start_date=datetime(2026, 9, 15),
    catchup=False,
    params=dict(PARAMS),
) as t_sensor_poke:
    (
        SageMakerCapacitySensor(
            task_id="job",
            job_name="{{ params.job_name }}",
            deferrable=False,
            poke_interval=0.2,
            max_pending=3600,
        )
        >> consume()
    )

# The capacity page's tests read back only the records of these two.
t_page_train = _dag("t_page_train", SageMakerPreferenceTrainingOperator, wait_for_completion=True)
t_page_process = _dag("t_page_process", SageMakerPreferenceProcessingOperator, wait_for_completion=False)


@task
def push_nothing(ti: Any = None) -> None:
    """An outcome key whose value is None, pushed as the recorder pushes every key."""
    from airflow_provider_sm_prefs.compat import xcom_push

    xcom_push(ti, "nothing", None)
    xcom_push(ti, "something", 0)


@task(multiple_outputs=False)
def pull_nothing(params: dict[str, Any] | None = None, ti: Any = None) -> None:
    values = {key: ti.xcom_pull(task_ids="push_nothing", key=key) for key in ("nothing", "something")}
    if params and params.get("out"):
        with open(params["out"], "w") as fh:
            json.dump(values, fh)


with DAG(
    "t_null_xcom", schedule=None, start_date=datetime(2026, 9, 15), catchup=False, params=dict(PARAMS)
) as t_null_xcom:
    push_nothing() >> pull_nothing()


@task
def group_args(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``params.tasks``: the arguments of each mapped task group."""
    assert params is not None
    return [dict(args) for args in params["tasks"]]


@task(multiple_outputs=False)
def read_own_job(
    record: dict[str, Any], params: dict[str, Any] | None = None, ti: Any = None
) -> dict[str, Any]:
    """Inside a mapped task group: the record of the group's own job, as an argument and pulled by index."""
    pulled = ti.xcom_pull(task_ids="pair.job", map_indexes=ti.map_index)
    values = {"argument": record, "pulled": pulled, "map_index": ti.map_index}
    if params and params.get("out"):
        with open(f"{params['out']}.{ti.map_index}", "w") as fh:
            json.dump(values, fh)
    return values


@task_group
def pair(config: dict[str, Any], instance_preferences: list[dict[str, Any]]) -> None:
    """A job and the task that reads its outcome, once per mapped group."""
    job = SageMakerPreferenceTrainingOperator(
        task_id="job",
        config=config,
        instance_preferences=instance_preferences,
        max_pending=3600,  # literal: the operator checks what it can when the DAG is parsed
        poll_interval=POLL,
        wait_for_completion=False,
    )
    read_own_job(job.output)


with DAG(
    "t_group_mapped",
    schedule=None,
    start_date=datetime(2026, 9, 15),
    catchup=False,
    render_template_as_native_obj=True,
    params={**PARAMS, "tasks": []},
) as t_group_mapped:
    pair.expand_kwargs(group_args())
