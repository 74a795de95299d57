"""Real dag.test() runs against the offline SageMaker: a task never adopts, returns or stops a job that is
not provably its own, whatever its name."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.identity import AirflowIdentity, IdentityKey
from tests.operators.test_dag_runs import NIGHTLY, training_config

pytestmark = pytest.mark.usefixtures("airflow_db")


def stop_calls(sm: Any, name: str) -> int:
    return int(sm.stats()["jobs"].get(name, {}).get("StopTrainingJob", 0))


def running_job(sm: Any, name: str, tags: dict[str, str] | None) -> None:
    """A job of someone else, already running under ``name`` (created as any SageMaker client would)."""
    from airflow_provider_sm_prefs.domain.preferences import build_request

    request, _ = build_request(
        "training", training_config(name, tags=tags, InstanceCount=1), ["ml.g5.12xlarge"], 3600
    )
    sm.boto3_client("sagemaker").create_training_job(**request)


@pytest.mark.parametrize(
    "owner",
    [
        # Another deployment running the same DAG (the same compose defaults, the same run id format).
        {**AirflowIdentity("t_train_capacity", "job", "manual__x", -1, 1, "af-theirs").as_dict()},
        # Another team's job, no identity tags at all.
        {"team": "vision"},
    ],
    ids=["another-deployment", "untagged"],
)
def test_a_running_job_of_the_same_name_that_is_not_ours_is_never_adopted(
    sm: Any,
    run_test_dag: Any,
    owner: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", "af-ours")
    sm.load_scenario({"time_scale": 0})  # nothing ends by itself: the other job is InProgress throughout
    running_job(sm, "nightly", owner)
    states, _ = run_test_dag("t_train_capacity", config=training_config(), prefs=NIGHTLY, max_pending=3600)
    assert states["job"] == "failed"
    out = capfd.readouterr()
    log = out.out + out.err
    assert "Refusing to reattach to 'nightly'" in log
    if IdentityKey.DEPLOYMENT.value in owner:
        assert "'af-theirs'" in log  # the owner its tags claim
    # Left exactly as it was: never stopped (not by the task, its kill path, nor its failure callback).
    assert stop_calls(sm, "nightly") == 0 and sm.job("nightly")["status"] == "InProgress"
