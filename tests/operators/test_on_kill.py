"""The operator's on_kill stops its job only when the task ends: not when Airflow merely reruns it.

Airflow 3.3 sends SIGTERM to a task process (and so runs ``on_kill``) for a user's mark or clear, for an
execution timeout, and also when a scheduler reset the task after losing track of its process: then the
next try reattaches to the job, which must keep running. The task's state comes from the Task SDK's
supervisor channel; here the answer is given, and the job and its Stop go to the offline SageMaker.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.identity import AirflowIdentity
from airflow_provider_sm_prefs.domain.job_state import STATE_KEY, JobStateStore
from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator
from airflow_provider_sm_prefs.operators.task_try import TaskTry
from tests.operators.test_dag_runs import training_config

G5 = "ml.g5.48xlarge"


class _Store:
    def __init__(self, value: dict[str, Any] | None) -> None:
        self.values = {STATE_KEY: value} if value else {}

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


def _killed(
    sm: Any,
    monkeypatch: pytest.MonkeyPatch,
    state: Any,
    owner_try: int | None,
    deployment: str = "tests",
) -> str:
    """Run on_kill of try 1 of job ``nightly`` while the task is ``state``; returns the job's status.

    The job carries the identity tags of task ``d.job`` run ``r`` in ``deployment`` (this one: ``tests``)."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    if isinstance(state, Exception):
        error = state

        def get_task_states(**criteria: Any) -> dict[str, Any]:
            raise error
    else:

        def get_task_states(**criteria: Any) -> dict[str, Any]:
            assert criteria == {"dag_id": "d", "task_ids": ["job"], "run_ids": ["r"], "map_index": -1}
            return {"r": {"job": state}}

    monkeypatch.setattr(RuntimeTaskInstance, "get_task_states", staticmethod(get_task_states))
    monkeypatch.setenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", "tests")
    sm.load_scenario({"time_scale": 0, "capacity": {G5: [{"from": 0, "free": 0}]}})
    tags = AirflowIdentity("d", "job", "r", -1, 1, deployment).as_dict()
    request, _ = build_request("training", training_config(tags=tags, InstanceCount=1), [G5], 3600)
    sm.boto3_client("sagemaker").create_training_job(**request)
    op = SageMakerPreferenceTrainingOperator(
        task_id="job", config=training_config(InstanceCount=1), instance_preferences=[G5]
    )
    op._progress.job_name = "nightly"
    ti = SimpleNamespace(dag_id="d", task_id="job", run_id="r", map_index=-1, try_number=1)
    ours = AirflowIdentity("d", "job", "r", -1, 1, "tests").as_dict()  # what this task recorded at Create
    record = {"job_name": "nightly", "try_number": owner_try, "identity_tags": ours} if owner_try else None
    op._try = TaskTry({"ti": ti}, JobStateStore(_Store(record)))
    op.on_kill()
    return str(sm.job("nightly")["status"])


@pytest.mark.parametrize("state", [None, "scheduled", "queued", "up_for_retry", "deferred"])
def test_a_task_that_runs_again_keeps_its_job(
    sm: Any, monkeypatch: pytest.MonkeyPatch, state: str | None
) -> None:
    # None: a scheduler's orphan reset; the next try reattaches to the job.
    assert _killed(sm, monkeypatch, state, owner_try=1) == "InProgress"


def test_a_later_try_already_running_keeps_the_job(sm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Try 2 started (and recorded itself as the job's owner) before try 1's SIGTERM came.
    assert _killed(sm, monkeypatch, "running", owner_try=2) == "InProgress"


@pytest.mark.parametrize(
    ("state", "owner_try"),
    [
        ("failed", 1),  # marked failed
        ("success", 1),  # marked success
        ("restarting", 1),  # cleared while running: the clear stops the job, as documented
        ("running", 1),  # this try itself: an execution timeout or a worker shutting down
        ("running", None),  # a record of an earlier release (no try_number)
        (RuntimeError("no supervisor channel"), 1),  # unreadable: stop, the documented meaning
    ],
)
def test_a_task_that_ends_stops_its_job(
    sm: Any, monkeypatch: pytest.MonkeyPatch, state: Any, owner_try: int | None
) -> None:
    assert _killed(sm, monkeypatch, state, owner_try) in ("Stopping", "Stopped")


def test_stop_job_on_kill_false_never_stops(sm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    monkeypatch.setattr(
        RuntimeTaskInstance, "get_task_states", staticmethod(lambda **_: {"r": {"job": "failed"}})
    )
    sm.load_scenario({"time_scale": 0, "capacity": {G5: [{"from": 0, "free": 0}]}})
    request, _ = build_request("training", training_config(InstanceCount=1), [G5], 3600)
    sm.boto3_client("sagemaker").create_training_job(**request)
    op = SageMakerPreferenceTrainingOperator(
        task_id="job",
        config=training_config(InstanceCount=1),
        instance_preferences=[G5],
        stop_job_on_kill=False,
    )
    op._progress.job_name = "nightly"
    op.on_kill()
    assert sm.job("nightly")["status"] == "InProgress"


@pytest.mark.parametrize("owner_try", [1, None], ids=["recorded", "nothing-recorded"])
def test_a_job_of_the_same_name_tagged_by_another_deployment_is_never_stopped(
    sm: Any, monkeypatch: pytest.MonkeyPatch, owner_try: int | None
) -> None:
    # The task ended (failed): on_kill would stop its job, but the job's tags, read right before the stop,
    # name another deployment's task instance.
    assert _killed(sm, monkeypatch, "failed", owner_try=owner_try, deployment="af-theirs") == "InProgress"
    assert sm.stats()["jobs"]["nightly"].get("StopTrainingJob", 0) == 0
