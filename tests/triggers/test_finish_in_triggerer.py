"""A trigger with a finish plan ends its task itself, with what the worker's resume would have pushed.

Real aiobotocore HTTP to the offline SageMaker, real ``dag.test()`` runs for the worker's side. The trigger
stores its XComs with the provider's real ``store_xcoms`` and the Task SDK's real ``XCom``, through
Airflow's own ``TriggerCommsDecoder`` installed as ``SUPERVISOR_COMMS``, as a triggerer installs it; only
the supervisor at the channel's far end is a stand-in (``tests/triggers/conftest.py``), which records each
request decoded as the supervisor decodes it. The tests read the ``SetXCom`` messages it received: the key,
the value as the execution API would store it, and the task instance it is stored for. (The e2e suite
stores them through a real triggerer and reads them downstream.)
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.triggers.base import TaskFailedEvent, TaskSuccessEvent, TriggerEvent

from airflow_provider_sm_prefs.domain.identity import OwnerClaim
from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger
from airflow_provider_sm_prefs.triggers.finish import FinishPlan, ends_here
from offline_sagemaker.jobs import training_config as emulator_training_config
from tests.operators.test_dag_runs import NIGHTLY, logs, training_config
from tests.triggers.conftest import TriggererChannel

G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"
TI = {"dag_id": "nightly", "task_id": "train", "run_id": "manual__1", "map_index": -1, "try_number": 1}
#: Where every XCom of a trigger ending ``TI``'s task is stored: (dag_id, run_id, task_id, map_index).
WHERE = ("nightly", "manual__1", "train", -1)
#: Record fields that say when the record was made, not what it says.
WHEN = {"recorded_at"}
#: With them, the instant the emulator made the job (its real clock's): what a literal cannot name.
WHEN_MADE = WHEN | {"created_at"}
#: The keys a downstream task reads after a selection or a job's end (``XComKey``, the record, the return
#: value). Airflow 3.0's execution API refuses a None value: neither the worker nor the trigger pushes one.
OUTCOME_KEYS = {
    "job_name",
    "job_arn",
    "selected_instance_type",
    "selected_instance_count",
    "preference_rank",
    "fell_back",
    "pending_seconds",
    "capacity",
    "accelerators",
    "job_status",
    "region",
    "region_rank",
}
ALL_KEYS = OUTCOME_KEYS | {"capacity_outcome", "return_value"}


#: The preference list as a failure's record carries it (the list the job was submitted with).
NIGHTLY_AS_SUBMITTED = [
    {"instance_type": "ml.g6.48xlarge", "instance_count": 2},
    {"instance_type": "ml.g5.48xlarge", "instance_count": 4},
    {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
]
#: The preference list as a selection's record and outcome carry it (every field spelled out).
NIGHTLY_AS_STORED = [
    {"instance_count": 2, "instance_type": "ml.g6.48xlarge", "training_plan_arn": None},
    {"instance_count": 4, "instance_type": "ml.g5.48xlarge", "training_plan_arn": None},
    {"instance_count": 2, "instance_type": "ml.p4d.24xlarge", "training_plan_arn": None},
]
#: The ``accelerators`` XCom of a selection of 4 x ml.g5.48xlarge.
G5_X4 = {
    "description": "4 × ml.g5.48xlarge = 32 × A10G, 768 GiB accelerator memory",
    "memory_gib_per_device": 24,
    "memory_gib_total": 768,
    "memory_gib_total_host": 3072,
    "model": "A10G",
    "per_instance": 8,
    "total": 32,
    "vcpus_total": 768,
}
#: What a downstream task reads after the selection of job ``sel`` (``without_when``): one value per key.
SELECTION = {
    "job_name": "sel",
    "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/sel",
    "selected_instance_type": "ml.g5.48xlarge",
    "selected_instance_count": 4,
    "preference_rank": 2,
    "fell_back": True,
    "pending_seconds": 0.0,
    "capacity": "on-demand",
    "accelerators": G5_X4,
    "job_status": "InProgress",
    "region": "us-east-1",
    "region_rank": 1,
    "return_value": {
        "accelerators": G5_X4,
        "billable_seconds": None,
        "capacity": "on-demand",
        "cost_increase": None,
        "ended_at": None,
        "estimated_cost": None,
        "excluded": [],
        "failure_reason": None,
        "fell_back": True,
        "first_choice_hourly_cost": None,
        "hourly_cost": None,
        "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/sel",
        "job_kind": "training",
        "job_name": "sel",
        "job_status": "InProgress",
        "model_artifacts": None,
        "pending_seconds": 0.0,
        "preference_rank": 2,
        "preferences": NIGHTLY_AS_STORED,
        "region": "us-east-1",
        "region_rank": 1,
        "secondary_status": "Training",
        "selected_instance_count": 4,
        "selected_instance_type": "ml.g5.48xlarge",
        "stages": [],
        "training_seconds": None,
        "unchecked": [],
    },
    "capacity_outcome": {
        "accelerator_memory_gib_total": None,
        "accelerators_total": None,
        "billable_seconds": None,
        "capacity": "on-demand",
        "cluster_name": None,
        "cost_increase": None,
        "current_count": None,
        "dag_id": "nightly",
        "ended_at": None,
        "estimated_cost": None,
        "excluded": [],
        "failure_kind": None,
        "fell_back": True,
        "first_choice_hourly_cost": None,
        "group_name": None,
        "hourly_cost": None,
        "identity_tags": {"sm-prefs:dag-id": "n"},
        "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/sel",
        "job_kind": "training",
        "job_name": "sel",
        "job_status": "InProgress",
        "map_index": -1,
        "min_count": None,
        "nodes": [],
        "pending_seconds": 0.0,
        "phase": None,
        "preference_rank": 2,
        "preferences": NIGHTLY_AS_STORED,
        "reason": None,
        "region": "us-east-1",
        "run_id": "manual__1",
        "seconds_to_in_service": None,
        "selected_instance_count": 4,
        "selected_instance_type": "ml.g5.48xlarge",
        "stages": [],
        "target_count": None,
        "task_id": "train",
        "training_seconds": None,
        "try_number": 2,
        "unchecked": [],
        "version": 1,
    },
}


def stored(channel: TriggererChannel, where: tuple[str, str, str, int] = WHERE) -> dict[str, Any]:
    """The values the supervisor was asked to store, by key; each for the task instance ``where``."""
    sets = channel.sets
    for key, msg in sets.items():
        assert (msg.dag_id, msg.run_id, msg.task_id, msg.map_index) == where, key
    return {key: msg.value for key, msg in sets.items()}


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


def the_event(channel: TriggererChannel, t: SageMakerCapacityTrigger) -> TriggerEvent:
    """The trigger's first event, run as a triggerer runs it: its channel to the supervisor installed."""

    async def first() -> TriggerEvent:
        async for event in t.run():
            return event
        raise AssertionError("no event")

    return channel.run(first)


def xcoms_of(dag_id: str, task_id: str = "job") -> tuple[str, dict[str, Any]]:
    """The latest run's id, and every XCom its task pushed, by key (as a downstream pull reads them)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        run_id = session.scalar(
            select(DagRun.run_id).where(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).limit(1)
        )
        assert run_id is not None
        rows = session.scalars(XComModel.get_many(run_id=run_id, dag_ids=dag_id, task_ids=task_id)).all()
        return run_id, {row.key: XComModel.deserialize_value(row) for row in rows}


def without_when(record: dict[str, Any], when: set[str] = WHEN) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in when}


@pytest.mark.usefixtures("airflow_db")
def test_the_triggers_end_pushes_what_the_workers_resume_pushed_for_the_same_job(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str], channel: TriggererChannel
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
    run_id, pushed = xcoms_of("t_train_complete")
    record = pushed["capacity_outcome"]
    ti = {k: record[k] for k in ("dag_id", "task_id", "run_id", "map_index", "try_number")}
    assert ti == {
        "dag_id": "t_train_complete",
        "task_id": "job",
        "run_id": run_id,
        "map_index": -1,
        "try_number": 1,
    }
    plan = FinishPlan(
        ti=ti,
        region=record["region"],
        selection=False,  # the job's end: the selection was reported when capacity came
        failures=True,
        guardrails=None,
        identity_tags=record["identity_tags"],
    )
    capfd.readouterr()
    event = the_event(channel, trigger("nightly", "completion", plan))
    text = logs(capfd)

    assert isinstance(event, TaskSuccessEvent), event
    assert not event.xcoms  # stored through the Task SDK, not by the event (see triggers/finish.py)
    sent = stored(channel, where=("t_train_complete", run_id, "job", -1))
    # The job's end has no None among the outcome's keys: every key is stored on every Airflow minor. (The
    # worker's try also pushed what the operator pushes before it defers: links, identity tags.)
    assert set(sent) == ALL_KEYS and set(pushed) >= ALL_KEYS
    assert without_when(sent.pop("capacity_outcome")) == without_when(record)
    for key, value in sent.items():
        assert value == pushed[key], key
    assert (sent["selected_instance_type"], sent["selected_instance_count"]) == (G5, 4)
    assert (sent["preference_rank"], sent["fell_back"], sent["job_status"]) == (2, True, "Completed")
    # The job's log lines went to the trigger's log, which is the task's log in a triggerer.
    assert "Logs of job nightly" in text and "Epoch 3/3" in text
    assert "Ending the task from the triggerer" in text


def submit(sm: Any, name: str, **tags: str) -> None:
    config = emulator_training_config(name, max_runtime_seconds=86400, tags=tags or None)
    request, _ = build_request("training", config, NIGHTLY, 3600)
    sm.boto3_client("sagemaker").create_training_job(**request)


def test_a_selection_ends_the_task_with_the_outcome_and_a_record_of_the_deferring_try(
    sm: Any, channel: TriggererChannel
) -> None:
    sm.load_scenario({"time_scale": 0, "capacity": {G6: [{"from": 0, "free": 0}]}})
    submit(sm, "sel")
    sm.advance(120)  # past Starting: SageMaker took the first entry with capacity
    plan = FinishPlan(ti={**TI, "try_number": 2}, region="us-east-1", identity_tags={"sm-prefs:dag-id": "n"})
    event = the_event(channel, trigger("sel", "capacity", plan))
    assert isinstance(event, TaskSuccessEvent)
    xcoms = stored(channel)
    assert set(xcoms) == ALL_KEYS
    assert {
        key: without_when(value, WHEN_MADE) if isinstance(value, dict) else value
        for key, value in xcoms.items()
    } == (SELECTION)


def test_without_do_xcom_push_no_return_value_is_pushed(sm: Any, channel: TriggererChannel) -> None:
    sm.load_scenario({"time_scale": 0})
    submit(sm, "quiet")
    sm.advance(120)
    event = the_event(channel, trigger("quiet", "capacity", FinishPlan(ti=TI, return_value=False)))
    assert isinstance(event, TaskSuccessEvent)
    assert set(stored(channel)) == ALL_KEYS - {"return_value"}


@pytest.mark.parametrize("failures", [True, False])
def test_a_failed_job_ends_the_task_failed_only_when_no_retry_remains(
    sm: Any, failures: bool, capfd: pytest.CaptureFixture[str], channel: TriggererChannel
) -> None:
    sm.load_scenario({"time_scale": 0, "job_runtime_seconds": 600})
    submit(sm, "broken", **{"emulator:outcome": "Failed"})
    sm.advance(3600)  # past Starting, the run and its failure
    event = the_event(channel, trigger("broken", "completion", FinishPlan(ti=TI, failures=failures)))
    text = logs(capfd)
    if not failures:
        # A retry remains: the plain event resumes the task in a worker, which raises and retries.
        assert type(event) is TriggerEvent and event.payload["status"] == "error"
        assert "Ending the task" not in text and stored(channel) == {}
        return
    assert isinstance(event, TaskFailedEvent)
    xcoms = stored(channel)
    assert set(xcoms) == {"capacity_outcome"}  # a failed task pushes its record only
    record = xcoms["capacity_outcome"]
    assert {k: v for k, v in record.items() if v not in (None, [])} == {
        "dag_id": "nightly",
        "task_id": "train",
        "run_id": "manual__1",
        "map_index": -1,
        "try_number": 1,
        "failure_kind": "failed",
        "job_kind": "training",
        "job_name": "broken",
        "job_status": "Failed",
        "identity_tags": {},
        "preferences": NIGHTLY_AS_SUBMITTED,
        "reason": "AlgorithmError: emulated failure",
        "recorded_at": record["recorded_at"],
        "version": 1,
    }
    # The failure's text, as the worker's exception would have said it, is in the task log.
    assert "Task failed with exception: JobFailedError" in text and "AlgorithmError" in text


def test_a_capacity_deadline_ends_the_task_failed_with_the_timeout_and_stops_the_job(
    sm: Any, channel: TriggererChannel
) -> None:
    sm.load_scenario({"time_scale": 0, "capacity": {"ml.*": [{"from": 0, "free": 0}]}})
    submit(sm, "late")
    sm.advance(1300)
    t = trigger("late", "capacity", FinishPlan(ti=TI, failures=True), deadline_seconds=1200.0)
    event = the_event(channel, t)
    assert isinstance(event, TaskFailedEvent)
    xcoms = stored(channel)
    assert set(xcoms) == {"capacity_outcome"}  # a failed task pushes its record only
    record = xcoms["capacity_outcome"]
    assert (record["dag_id"], record["run_id"], record["task_id"], record["try_number"]) == (
        "nightly",
        "manual__1",
        "train",
        1,
    )
    assert (record["failure_kind"], record["job_name"], record["job_status"]) == (
        "capacity_timeout",
        "late",
        "InProgress",
    )
    assert record["reason"].startswith("no entry of the preference list got capacity within max_pending=20m")
    assert record["selected_instance_type"] is None and record["preferences"] == NIGHTLY_AS_SUBMITTED
    assert sm.job("late")["status"] in ("Stopping", "Stopped")


def test_a_closed_acceptance_window_never_ends_the_task() -> None:
    from airflow_provider_sm_prefs.domain.events import CapacityEvent
    from airflow_provider_sm_prefs.domain.kinds import JobKind

    closed = CapacityEvent.window_closed(JobKind.TRAINING, "j", "InProgress", 600.0)
    assert not ends_here(FinishPlan(ti=TI, failures=True), closed)


def test_a_trigger_without_a_plan_yields_the_plain_event_as_earlier_releases(
    sm: Any, channel: TriggererChannel
) -> None:
    sm.load_scenario({"time_scale": 0})
    submit(sm, "plain")
    sm.advance(120)
    event = the_event(channel, trigger("plain", "capacity", None))
    assert type(event) is TriggerEvent and event.payload["status"] == "success"
    # Without a plan nothing is read or stored: no warm-up read, no store (the worker's resume pushes).
    assert channel.supervisor is not None
    assert [type(msg).__name__ for msg in channel.supervisor.messages if "XCom" in type(msg).__name__] == []
