"""A trigger with a finish plan ends its task itself, with what the worker's resume would have pushed.

Real aiobotocore HTTP to the offline SageMaker, real ``dag.test()`` runs for the worker's side. The XComs
the trigger stores are compared with those a worker's resume pushed for the very same job. Out of a
triggerer there is no channel to the execution API: the one step that uses it, storing the XComs through
the Task SDK, keeps them here instead (the e2e suite stores them for real and reads them downstream).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from airflow.triggers.base import TaskFailedEvent, TaskSuccessEvent, TriggerEvent

from airflow_provider_sm_prefs.compat import NULL_XCOM
from airflow_provider_sm_prefs.domain.identity import OwnerClaim
from airflow_provider_sm_prefs.domain.outcome import XComKey
from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.domain.record import RECORD_KEY
from airflow_provider_sm_prefs.triggers import finish
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger
from airflow_provider_sm_prefs.triggers.finish import FinishPlan, ends_here
from offline_sagemaker.jobs import training_config as emulator_training_config
from tests.operators.test_dag_runs import NIGHTLY, logs, training_config

G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"
TI = {"dag_id": "nightly", "task_id": "train", "run_id": "manual__1", "map_index": -1, "try_number": 1}
#: Record fields that say when the record was made, not what it says.
WHEN = {"recorded_at"}


@pytest.fixture
def stored(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The XComs the trigger stores for its task, by key."""
    kept: dict[str, Any] = {}

    async def keep(ref: Any, xcoms: dict[str, Any]) -> float:
        assert set(ref) == {"dag_id", "task_id", "run_id", "map_index", "try_number"}
        kept.update(xcoms)
        return 0.0

    monkeypatch.setattr(finish, "store_xcoms", keep)
    return kept


def trigger(name: str, wait_for: str, plan: FinishPlan | None, **kwargs: Any) -> SageMakerCapacityTrigger:
    # The jobs here are made by the test as the deferring task's own Create would make them.
    kwargs.setdefault("owner", OwnerClaim(created=True).as_dict())
    return SageMakerCapacityTrigger(
        job_name=name,
        wait_for=wait_for,
        preferences=kwargs.pop("preferences", NIGHTLY),
        poll_interval=0.2,
        finish=plan.as_dict() if plan else None,
        **kwargs,
    )


def the_event(t: SageMakerCapacityTrigger) -> TriggerEvent:
    async def first() -> TriggerEvent:
        async for event in t.run():
            return event
        raise AssertionError("no event")

    return asyncio.run(first())


def xcoms_of(dag_id: str, task_id: str = "job") -> dict[str, Any]:
    """Every XCom the latest run's task pushed, by key (as a downstream pull reads them)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        run_id = session.scalar(
            select(DagRun.run_id).where(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).limit(1)
        )
        rows = session.scalars(XComModel.get_many(run_id=run_id, dag_ids=dag_id, task_ids=task_id)).all()
        return {row.key: XComModel.deserialize_value(row) for row in rows}


def without_when(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in WHEN}


@pytest.mark.usefixtures("airflow_db")
def test_the_triggers_end_pushes_what_the_workers_resume_pushed_for_the_same_job(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str], stored: dict[str, Any]
) -> None:
    # dag.test() resumes in process (the worker's path); then a trigger with a plan ends the same try on the
    # same, now completed, job: every XCom it would push must be the one the worker pushed.
    sm.load_scenario(
        {"time_scale": 600, "job_runtime_seconds": 600, "capacity": {G6: [{"from": 0, "free": 0}]}}
    )
    # preflight off: the guardrail report the job was submitted with lives in the task's job state.
    states, _ = run_test_dag(
        "t_train_complete", config=training_config(), prefs=NIGHTLY, max_pending=3600, preflight="off"
    )
    assert states == {"job": "success", "consume": "success"}
    pushed = xcoms_of("t_train_complete")
    record = pushed[RECORD_KEY]
    ti = {k: record[k] for k in ("dag_id", "task_id", "run_id", "map_index", "try_number")}
    plan = FinishPlan(
        ti=ti,
        region=record["region"],
        selection=False,  # the job's end: the selection was reported when capacity came
        failures=True,
        guardrails=None,
        identity_tags=record["identity_tags"],
    )
    capfd.readouterr()
    event = the_event(trigger("nightly", "completion", plan))
    text = logs(capfd)

    assert isinstance(event, TaskSuccessEvent), event
    assert not event.xcoms  # stored through the Task SDK, not by the event (see triggers/finish.py)
    sent = dict(stored)
    expected_keys = {key.value for key in XComKey} | {RECORD_KEY, "return_value"}
    if not NULL_XCOM:  # Airflow 3.0 stores no None XCom: neither path pushes one
        expected_keys = {k for k in expected_keys if pushed.get(k) is not None}
    assert set(sent) == expected_keys
    assert without_when(sent.pop(RECORD_KEY)) == without_when(record)
    for key, value in sent.items():
        assert value == pushed[key], key
    assert sent["selected_instance_type"] == G5 and sent["preference_rank"] == 2
    assert sent["job_status"] == "Completed"
    # The job's log lines went to the trigger's log, which is the task's log in a triggerer.
    assert "Logs of job nightly" in text and "Epoch 3/3" in text
    assert "Ending the task from the triggerer" in text


def submit(sm: Any, name: str, **tags: str) -> None:
    config = emulator_training_config(name, max_runtime_seconds=86400, tags=tags or None)
    request, _ = build_request("training", config, NIGHTLY, 3600)
    sm.boto3_client("sagemaker").create_training_job(**request)


def test_a_selection_ends_the_task_with_the_outcome_and_a_record_of_the_deferring_try(
    sm: Any, stored: dict[str, Any]
) -> None:
    sm.load_scenario({"time_scale": 0, "capacity": {G6: [{"from": 0, "free": 0}]}})
    submit(sm, "sel")
    sm.advance(120)  # past Starting: SageMaker took the first entry with capacity
    plan = FinishPlan(ti={**TI, "try_number": 2}, region="us-east-1", identity_tags={"sm-prefs:dag-id": "n"})
    event = the_event(trigger("sel", "capacity", plan))
    assert isinstance(event, TaskSuccessEvent)
    xcoms = stored
    assert (xcoms["selected_instance_type"], xcoms["selected_instance_count"]) == (G5, 4)
    assert (xcoms["preference_rank"], xcoms["fell_back"]) == (2, True)
    assert xcoms["return_value"]["job_name"] == "sel"
    record = xcoms[RECORD_KEY]
    assert (record["dag_id"], record["task_id"], record["try_number"]) == ("nightly", "train", 2)
    assert record["selected_instance_type"] == G5 and record["identity_tags"] == {"sm-prefs:dag-id": "n"}
    assert record.get("failure_kind") is None


def test_without_do_xcom_push_no_return_value_is_pushed(sm: Any, stored: dict[str, Any]) -> None:
    sm.load_scenario({"time_scale": 0})
    submit(sm, "quiet")
    sm.advance(120)
    event = the_event(trigger("quiet", "capacity", FinishPlan(ti=TI, return_value=False)))
    assert isinstance(event, TaskSuccessEvent)
    assert "return_value" not in stored and "selected_instance_type" in stored


@pytest.mark.parametrize("failures", [True, False])
def test_a_failed_job_ends_the_task_failed_only_when_no_retry_remains(
    sm: Any, failures: bool, capfd: pytest.CaptureFixture[str], stored: dict[str, Any]
) -> None:
    sm.load_scenario({"time_scale": 0, "job_runtime_seconds": 600})
    submit(sm, "broken", **{"emulator:outcome": "Failed"})
    sm.advance(3600)  # past Starting, the run and its failure
    event = the_event(trigger("broken", "completion", FinishPlan(ti=TI, failures=failures)))
    text = logs(capfd)
    if not failures:
        # A retry remains: the plain event resumes the task in a worker, which raises and retries.
        assert type(event) is TriggerEvent and event.payload["status"] == "error"
        assert "Ending the task" not in text and stored == {}
        return
    assert isinstance(event, TaskFailedEvent)
    record = stored[RECORD_KEY]
    assert (record["failure_kind"], record["job_status"], record["job_name"]) == (
        "failed",
        "Failed",
        "broken",
    )
    assert record["try_number"] == 1 and record["preferences"][0]["instance_type"] == G6
    # The failure's text, as the worker's exception would have said it, is in the task log.
    assert "Task failed with exception: JobFailedError" in text and "AlgorithmError" in text


def test_a_capacity_deadline_ends_the_task_failed_with_the_timeout_and_stops_the_job(
    sm: Any, stored: dict[str, Any]
) -> None:
    sm.load_scenario({"time_scale": 0, "capacity": {"ml.*": [{"from": 0, "free": 0}]}})
    submit(sm, "late")
    sm.advance(1300)
    t = trigger("late", "capacity", FinishPlan(ti=TI, failures=True), deadline_seconds=1200.0)
    event = the_event(t)
    assert isinstance(event, TaskFailedEvent)
    record = stored[RECORD_KEY]
    assert record["failure_kind"] == "capacity_timeout"
    assert sm.job("late")["status"] in ("Stopping", "Stopped")


def test_a_closed_acceptance_window_never_ends_the_task() -> None:
    from airflow_provider_sm_prefs.domain.events import CapacityEvent
    from airflow_provider_sm_prefs.domain.kinds import JobKind

    closed = CapacityEvent.window_closed(JobKind.TRAINING, "j", "InProgress", 600.0)
    assert not ends_here(FinishPlan(ti=TI, failures=True), closed)


def test_a_trigger_without_a_plan_yields_the_plain_event_as_earlier_releases(sm: Any) -> None:
    sm.load_scenario({"time_scale": 0})
    submit(sm, "plain")
    sm.advance(120)
    event = the_event(trigger("plain", "capacity", None))
    assert type(event) is TriggerEvent and event.payload["status"] == "success"
