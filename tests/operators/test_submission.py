"""A clear is not a retry: how the operators tell them apart (the running-Airflow test is in tests/e2e)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.exceptions import CapacityTimeoutError
from airflow_provider_sm_prefs.domain.identity import AirflowIdentity, IdentityKey
from airflow_provider_sm_prefs.domain.job_state import STATE_KEY, JobState
from airflow_provider_sm_prefs.operators.submission import beyond_retries
from tests.operators.test_dag_runs import training_config


def test_a_clear_is_told_from_a_retry_by_max_tries() -> None:
    # Airflow raises max_tries on a clear (try_number + retries) and leaves it on a retry.
    assert cleared_since({"job_name": "j", "max_tries": 2}, 4)
    assert not cleared_since({"job_name": "j", "max_tries": 2}, 2)
    # A record written before max_tries was kept: a retry, as before.
    assert not cleared_since({"job_name": "j"}, 4)
    assert not cleared_since({"job_name": "j", "max_tries": 2}, None)


def cleared_since(stored: dict[str, Any], max_tries: int | None) -> bool:
    state = JobState.from_stored(stored)
    assert state is not None
    return state.cleared_since(max_tries)


@pytest.mark.usefixtures("airflow_db")
def test_a_retry_after_the_job_failed_submits_a_new_job(sm: Any, run_test_dag: Any) -> None:
    # A CPU-only list with nothing free fails at once; the first try dies right after Create, so the
    # retry finds the job Failed and submits the next one (-r2), which fails the same way.
    sm.load_scenario({"time_scale": 6000, "capacity": {"ml.c5.xlarge": [{"from": 0, "free": 0}]}})
    states, _ = run_test_dag(
        "t_train_crash",
        config=training_config(InstanceCount=1),
        prefs=["ml.c5.xlarge"],
        max_pending=None,
    )
    assert states["job"] == "failed"
    jobs = {j["name"]: j["status"] for j in sm.jobs()}
    assert jobs == {"nightly": "Failed", "nightly-r2": "Failed"}


class _Store:
    """The task state store's get/set, as a task sees it (the one Airflow gives survives tries)."""

    def __init__(self, value: dict[str, Any]) -> None:
        self.values = {STATE_KEY: value}

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


#: The identity tags task ``d.job`` run ``r`` recorded (and its Create carried) in this deployment.
OURS = AirflowIdentity("d", "job", "r", -1, 1, "tests").as_dict()


@pytest.fixture(autouse=True)
def deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", "tests")


def _try(try_number: int, max_tries: int, recorded_max_tries: int) -> dict[str, Any]:
    from types import SimpleNamespace

    record = {
        "job_name": "nightly",
        "submission": 1,
        "kind": "training",
        "max_tries": recorded_max_tries,
        "identity_tags": OURS,
    }
    ti = SimpleNamespace(
        dag_id="d", task_id="job", run_id="r", map_index=-1, try_number=try_number, max_tries=max_tries
    )
    return {"ti": ti, "task_state_store": _Store(record)}


def _operator() -> Any:
    from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator

    return SageMakerPreferenceTrainingOperator(
        task_id="job", config=training_config(InstanceCount=1), instance_preferences=["ml.g5.48xlarge"]
    )


def _name_this_try(context: dict[str, Any]) -> Any:
    """What the operator's submit-once decides for try ``context`` of job ``nightly``, as
    ``(name, describe)`` (describe None: the job is to be created)."""
    from airflow_provider_sm_prefs.operators.submission import Create, Reattach

    op = _operator()
    run, windows = op._begin_try(context)
    decision = op.submit_once.name_this_try(context, run.store, "nightly", windows.continues)
    if isinstance(decision, Create):
        return decision.job_name, None
    assert isinstance(decision, Reattach), decision
    return decision.job_name, decision.describe


def _create_and_stop(sm: Any, pending_limit: int) -> None:
    """Job ``nightly`` that never gets capacity; stopped at ``pending_limit`` as a capacity deadline does."""
    from airflow_provider_sm_prefs.domain.preferences import build_request

    sm.load_scenario({"time_scale": 0, "capacity": {"ml.g5.48xlarge": [{"from": 0, "free": 0}]}})
    request, _ = build_request(
        "training", training_config(tags=OURS, InstanceCount=1), ["ml.g5.48xlarge"], pending_limit
    )
    client = sm.boto3_client("sagemaker")
    client.create_training_job(**request)
    sm.advance(pending_limit + 1)
    client.stop_training_job(TrainingJobName="nightly")


def test_beyond_retries_is_try_past_max_tries_plus_one() -> None:
    from types import SimpleNamespace

    def ctx(try_number: Any, max_tries: Any) -> Any:
        return {"ti": SimpleNamespace(try_number=try_number, max_tries=max_tries)}

    assert beyond_retries(ctx(2, 0))  # retries=0: a second try only comes from an orphan reset
    assert not beyond_retries(ctx(2, 1))  # the retry it is allowed
    assert not beyond_retries(ctx(1, 0))
    assert not beyond_retries(ctx(None, 0)) and not beyond_retries({})


def test_a_try_past_the_retries_fails_like_the_lost_try_and_submits_nothing(sm: Any) -> None:
    # retries=0, and Airflow started try 2 after a scheduler reset the task whose try 1 had stopped its
    # job at the capacity deadline: try 2 fails with that timeout instead of submitting nightly-r2.
    _create_and_stop(sm, pending_limit=1800)
    context = _try(try_number=2, max_tries=0, recorded_max_tries=0)
    with pytest.raises(CapacityTimeoutError, match="nightly"):
        _name_this_try(context)
    assert [j["name"] for j in sm.jobs()] == ["nightly"]
    assert context["task_state_store"].values[STATE_KEY]["job_name"] == "nightly"


def test_a_retry_within_the_retries_still_submits_the_next_job(sm: Any) -> None:
    _create_and_stop(sm, pending_limit=1800)
    context = _try(try_number=2, max_tries=1, recorded_max_tries=1)
    name, describe = _name_this_try(context)
    assert (name, describe) == ("nightly-r2", None)
    assert context["task_state_store"].values[STATE_KEY]["submission"] == 2


def test_a_try_past_the_retries_reattaches_to_a_running_job(sm: Any) -> None:
    from airflow_provider_sm_prefs.domain.preferences import build_request

    sm.load_scenario({"time_scale": 0, "capacity": {"ml.g5.48xlarge": [{"from": 0, "free": 0}]}})
    request, _ = build_request(
        "training", training_config(tags=OURS, InstanceCount=1), ["ml.g5.48xlarge"], 3600
    )
    sm.boto3_client("sagemaker").create_training_job(**request)
    name, describe = _name_this_try(_try(2, 0, 0))
    assert name == "nightly" and describe is not None and describe["TrainingJobStatus"] == "InProgress"


@pytest.mark.parametrize("cleared", [False, True], ids=["retry", "clear"])
def test_a_retry_never_takes_over_or_stops_a_recorded_name_now_held_by_another_owner(
    sm: Any, cleared: bool
) -> None:
    """Try 1 recorded ``nightly``, but its Create lost to another deployment's job of that name: try 2 neither
    reattaches to that job nor, after a clear, stops it."""
    from airflow_provider_sm_prefs.compat import AirflowFailException
    from airflow_provider_sm_prefs.domain.preferences import build_request

    theirs = {**OURS, IdentityKey.DEPLOYMENT.value: "af-theirs"}
    sm.load_scenario({"time_scale": 0, "capacity": {"ml.g5.48xlarge": [{"from": 0, "free": 0}]}})
    request, _ = build_request(
        "training", training_config(tags=theirs, InstanceCount=1), ["ml.g5.48xlarge"], 3600
    )
    sm.boto3_client("sagemaker").create_training_job(**request)
    context = _try(try_number=2, max_tries=2 if cleared else 1, recorded_max_tries=1)
    with pytest.raises(AirflowFailException, match="Refusing to take over 'nightly'.*af-theirs"):
        _name_this_try(context)
    assert sm.job("nightly")["status"] == "InProgress"
    assert sm.stats()["jobs"]["nightly"].get("StopTrainingJob", 0) == 0
