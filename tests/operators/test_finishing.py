"""Which waits the triggerer ends, and why the others resume in a worker (the task log says which)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.status import WaitFor
from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator
from airflow_provider_sm_prefs.operators.finishing import decide_finish
from airflow_provider_sm_prefs.triggers.finish import FinishPlan
from tests.operators.test_dag_runs import NIGHTLY, training_config


def forget_lineage_config() -> None:
    """The OpenLineage provider caches what its config said (which functions, depends on its version)."""
    from airflow.providers.openlineage import conf

    for name in ("is_disabled", "transport", "config_path", "selective_enable"):
        getattr(getattr(conf, name), "cache_clear", lambda: None)()


def operator(**kwargs: Any) -> SageMakerPreferenceTrainingOperator:
    return SageMakerPreferenceTrainingOperator(
        task_id="train", config=training_config(), instance_preferences=NIGHTLY, **kwargs
    )


def try_of(try_number: int = 1, max_tries: int | None = None) -> Any:
    """The deferring try as the operator reads it (the Task SDK's RuntimeTaskInstance's fields)."""
    return SimpleNamespace(
        dag_id="nightly",
        task_id="train",
        run_id="r1",
        map_index=-1,
        try_number=try_number,
        max_tries=max_tries,
    )


def decide(task: Any, ti: Any = None, wait_for: WaitFor = WaitFor.CAPACITY, windows: bool = False) -> Any:
    return decide_finish(
        task,
        ti or try_of(max_tries=task.retries),
        wait_for,
        windows=windows,
        region="us-east-1",
        guardrails={"unchecked": []},
        identity_tags={"sm-prefs:dag-id": "nightly"},
    )


@pytest.fixture
def lineage_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AIRFLOW__OPENLINEAGE__TRANSPORT", "OPENLINEAGE_URL", "AIRFLOW__OPENLINEAGE__CONFIG_PATH"):
        monkeypatch.delenv(name, raising=False)
    forget_lineage_config()
    yield
    forget_lineage_config()


@pytest.mark.usefixtures("lineage_off")
def test_a_capacity_wait_without_completion_is_ended_in_the_triggerer_with_the_tasks_settings() -> None:
    decision = decide(operator(wait_for_completion=False, max_log_lines=7, do_xcom_push=False))
    assert decision.plan is not None
    plan = FinishPlan.from_dict(decision.plan)
    assert plan.ti == {
        "dag_id": "nightly",
        "task_id": "train",
        "run_id": "r1",
        "map_index": -1,
        "try_number": 1,
    }
    assert (plan.region, plan.selection, plan.failures) == ("us-east-1", True, True)
    assert (plan.print_log, plan.max_log_lines, plan.return_value) == (True, 7, False)
    assert plan.guardrails == {"unchecked": []} and plan.identity_tags == {"sm-prefs:dag-id": "nightly"}
    assert "The triggerer ends this task" in decision.reason


@pytest.mark.usefixtures("lineage_off")
def test_the_wait_for_the_jobs_end_is_ended_in_the_triggerer_without_reporting_the_selection_again() -> None:
    decision = decide(operator(wait_for_completion=True), wait_for=WaitFor.COMPLETION)
    assert decision.plan is not None and FinishPlan.from_dict(decision.plan).selection is False


@pytest.mark.usefixtures("lineage_off")
@pytest.mark.parametrize(
    ("ti", "failures"),
    [(try_of(1, max_tries=2), False), (try_of(2, max_tries=2), False), (try_of(3, max_tries=2), True)],
)
def test_a_failure_is_ended_in_the_triggerer_only_when_no_retry_remains(ti: Any, failures: bool) -> None:
    decision = decide(operator(wait_for_completion=False, retries=2), ti=ti)
    assert decision.plan is not None and FinishPlan.from_dict(decision.plan).failures is failures


@pytest.mark.usefixtures("lineage_off")
@pytest.mark.parametrize(
    ("task", "wait_for", "windows", "why"),
    [
        (operator(finish_in_triggerer=False), WaitFor.COMPLETION, False, "finish_in_triggerer=False"),
        (operator(wait_for_completion=False), WaitFor.CAPACITY, True, "acceptance windows"),
        (operator(wait_for_completion=True), WaitFor.CAPACITY, False, "to record the selection"),
    ],
)
def test_waits_that_need_a_worker_resume_there_and_say_why(
    task: Any, wait_for: WaitFor, windows: bool, why: str
) -> None:
    decision = decide(task, wait_for=wait_for, windows=windows)
    assert decision.plan is None and why in decision.reason


def test_a_task_openlineage_reports_on_resumes_in_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", '{"type": "console"}')
    forget_lineage_config()
    try:
        decision = decide(operator(wait_for_completion=False))
    finally:
        monkeypatch.delenv("AIRFLOW__OPENLINEAGE__TRANSPORT")
        forget_lineage_config()
    assert decision.plan is None and "OpenLineage" in decision.reason


def test_dag_test_runs_the_trigger_inline_so_the_task_resumes_in_process(sm: Any, run_test_dag: Any) -> None:
    # An end event under dag.test() would resume the task with the bare word "success" (its XComs lost),
    # which the task would fail as an unexpected event: the task succeeding with its outcome is the proof.
    sm.load_scenario(
        {
            "time_scale": 600,
            "job_runtime_seconds": 600,
            "capacity": {"ml.g6.48xlarge": [{"from": 0, "free": 0}]},
        }
    )
    states, xcom = run_test_dag("t_train_capacity", config=training_config(), prefs=NIGHTLY, max_pending=3600)
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None and xcom["preference_rank"] == 2 and xcom["return_value"]["job_name"] == "nightly"


@pytest.mark.usefixtures("lineage_off")
def test_the_sensors_wait_is_ended_in_the_triggerer_reporting_the_selection_as_its_own_push_does() -> None:
    from airflow_provider_sm_prefs.sensors import SageMakerCapacitySensor

    sensor = SageMakerCapacitySensor(task_id="watch", job_name="elsewhere", wait_for="completion")
    decision = decide_finish(
        sensor, try_of(max_tries=0), WaitFor.COMPLETION, windows=False, region=None, selection=True
    )
    assert decision.plan is not None
    plan = FinishPlan.from_dict(decision.plan)
    assert (plan.selection, plan.print_log, plan.failures, plan.identity_tags) == (True, False, True, None)
    off = SageMakerCapacitySensor(task_id="watch", job_name="elsewhere", finish_in_triggerer=False)
    assert decide_finish(off, try_of(), WaitFor.CAPACITY, windows=False, region=None).plan is None
