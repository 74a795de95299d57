"""Real dag.test() runs of the operators against the offline SageMaker.

Every run goes through botocore/aiobotocore HTTP to the emulator; counts of Create calls and of
jobs come from the emulator's own ledger.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.outcome import XComKey
from tests.clock import in_background

pytestmark = pytest.mark.usefixtures("airflow_db")

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"
G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"
NIGHTLY = [
    {"instance_type": G6, "instance_count": 2},
    {"instance_type": G5, "instance_count": 4},
    {"instance_type": P4D, "instance_count": 2},
]


def training_config(
    name: str = "nightly", tags: dict[str, str] | None = None, **resource: Any
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
            "TrainingInputMode": "File",
        },
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "OutputDataConfig": {"S3OutputPath": "s3://models/out"},
        "ResourceConfig": {"VolumeSizeInGB": 50, **resource},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
    }
    if tags:
        config["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    return config


def processing_config(name: str = "prep", **cluster: Any) -> dict[str, Any]:
    return {
        "ProcessingJobName": name,
        "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30, **cluster}},
    }


def scenario(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "time_scale": 600,
        "job_runtime_seconds": 600,
        "phase_seconds": {"starting": 60, "downloading": 60, "uploading": 30, "stopping": 30},
        "pending_timeout_outcome": "stopped",
        "processing_when_no_capacity": "wait",
    }
    base.update(overrides)
    return base


#: The first choice never has capacity; the others are free (not clock-dependent, unlike the builtin).
FIRST_CHOICE_SCARCE = {
    "time_scale": 600,
    "job_runtime_seconds": 600,
    "capacity": {G6: [{"from": 0, "free": 0}]},
}


def logs(capfd: pytest.CaptureFixture[str]) -> str:
    """What the task and trigger logged (Airflow's structlog writes to the process's stdout/stderr)."""
    captured = capfd.readouterr()
    return captured.out + captured.err


def creates(sm: Any, op: str = "CreateTrainingJob") -> int:
    return int(sm.stats()["operations"].get(op, 0))


@contextlib.contextmanager
def clock_from_first_look(sm: Any, job_name: str, step: float = 60.0, every: float = 0.05) -> Iterator[None]:
    """Hold a frozen emulated clock until the task has Described ``job_name`` once, then move it ``step``
    seconds every ``every`` real seconds until the block ends.

    The job is created at emulated 0 and seen Pending by the task, however long dag.test() takes to get
    there on a busy host; every window then falls at its own emulated time after the creation.
    """

    def run(done: threading.Event) -> None:
        deadline = time.monotonic() + 300
        while not sm.stats()["jobs"].get(job_name, {}).get("DescribeTrainingJob"):
            if done.wait(0.05) or time.monotonic() > deadline:
                return
        while not done.wait(every):
            sm.advance(step)

    with in_background(run):
        yield


# -- capacity outcomes ---------------------------------------------------------------------------------


def test_first_choice_available_runs_to_completion(sm: Any, run_test_dag: Any) -> None:
    states, xcom = run_test_dag("t_train_complete", config=training_config(), prefs=NIGHTLY, max_pending=3600)
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None
    assert xcom[XComKey.SELECTED_INSTANCE_TYPE.value] == G6
    assert xcom[XComKey.PREFERENCE_RANK.value] == 1
    assert xcom[XComKey.FELL_BACK.value] is False
    assert xcom[XComKey.PENDING_SECONDS.value] == 0
    assert xcom[XComKey.JOB_STATUS.value] == "Completed"
    assert xcom["return_value"]["training_seconds"] and xcom["return_value"]["billable_seconds"]
    assert creates(sm) == 1
    assert sm.job("nightly")["status"] == "Completed"


def test_fallback_to_second_entry_with_its_own_count(sm: Any, run_test_dag: Any) -> None:
    sm.load_scenario(FIRST_CHOICE_SCARCE)
    states, xcom = run_test_dag("t_train_capacity", config=training_config(), prefs=NIGHTLY, max_pending=3600)
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None
    assert (xcom["selected_instance_type"], xcom["selected_instance_count"]) == (G5, 4)
    assert (xcom["preference_rank"], xcom["fell_back"], xcom["capacity"]) == (2, True, "on-demand")
    assert xcom["accelerators"]["model"] == "A10G" and xcom["accelerators"]["total"] == 32
    assert xcom["job_name"] == "nightly" and xcom["job_arn"].endswith(":training-job/nightly")


def test_fallback_to_third_entry_after_waiting_reports_pending_from_aws_timestamps(
    sm: Any, run_test_dag: Any
) -> None:
    # A frozen clock until the task has looked at the job: it is created at emulated 0 and waits in
    # Pending until p4d frees 1800 s later, however long the task takes to start on a busy host.
    sm.load_scenario(
        scenario(
            time_scale=0,
            capacity={
                G6: [{"from": 0, "free": 0}],
                G5: [{"from": 0, "free": 0}],
                P4D: [{"from": 0, "to": 1800, "free": 0}, {"from": 1800, "free": 4}],
            },
        )
    )
    with clock_from_first_look(sm, "nightly"):
        states, xcom = run_test_dag(
            "t_train_capacity", config=training_config(), prefs=NIGHTLY, max_pending=3600
        )
    assert states["job"] == "success"
    assert xcom is not None
    assert (xcom["selected_instance_type"], xcom["preference_rank"]) == (P4D, 3)
    job = sm.job("nightly")
    timeline = job["timeline"]
    index = next(i for i, t in enumerate(timeline) if t["secondary_status"] == "Pending")
    expected = timeline[index + 1]["emulated_time"] - timeline[index]["emulated_time"]
    # The wait ends when p4d frees up, 1800 emulated seconds after the job (and the scenario) started.
    assert timeline[index + 1]["emulated_time"] - job["created_at"] == pytest.approx(1800)
    assert 0 < expected <= 1800
    assert xcom["pending_seconds"] == pytest.approx(expected, abs=1)


def test_uniform_job_level_count_is_reported(sm: Any, run_test_dag: Any) -> None:
    states, xcom = run_test_dag(
        "t_train_capacity",
        config=training_config(InstanceCount=3),
        prefs=[G5, P4D],
        max_pending=None,
    )
    assert states["job"] == "success"
    assert xcom is not None and (xcom["selected_instance_type"], xcom["selected_instance_count"]) == (G5, 3)


def test_plan_backed_first_entry_without_capacity_is_skipped(sm: Any, run_test_dag: Any) -> None:
    sm.load_scenario("plan-no-capacity")
    plan = sm.scenario_dict()["training_plans"][0]
    prefs = [
        {"instance_type": plan["instance_type"], "instance_count": 2, "training_plan_arn": plan["arn"]},
        {"instance_type": P4D, "instance_count": 2},
    ]
    states, xcom = run_test_dag("t_train_capacity", config=training_config(), prefs=prefs, max_pending=3600)
    assert states["job"] == "success"
    assert xcom is not None and (xcom["preference_rank"], xcom["capacity"]) == (2, "on-demand")


def test_plan_backed_first_entry_with_capacity_uses_the_plan(sm: Any, run_test_dag: Any) -> None:
    p5 = "ml.p5.48xlarge"
    sm.load_scenario(
        scenario(
            training_plans=[{"arn": PLAN, "instance_type": p5, "count": 2, "from": 0, "to": 86400}],
            capacity={p5: [{"from": 0, "free": 0}]},
        )
    )
    prefs = [
        {"instance_type": p5, "instance_count": 2, "training_plan_arn": PLAN},
        {"instance_type": P4D, "instance_count": 2},
    ]
    states, xcom = run_test_dag("t_train_capacity", config=training_config(), prefs=prefs, max_pending=3600)
    assert states["job"] == "success"
    assert xcom is not None and (
        xcom["selected_instance_type"],
        xcom["preference_rank"],
        xcom["capacity"],
    ) == (p5, 1, "training-plan")


# -- failures, each its own error -------------------------------------------------------------------


@pytest.mark.parametrize("expiry", ["stopped", "failed"])
def test_sagemaker_pending_expiry_fails_with_capacity_timeout_and_downstream_does_not_run(
    sm: Any, run_test_dag: Any, expiry: str, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(
        scenario(time_scale=1800, pending_timeout_outcome=expiry, capacity={"ml.*": [{"from": 0, "free": 0}]})
    )
    states, xcom = run_test_dag("t_train_capacity", config=training_config(), prefs=NIGHTLY, max_pending=1800)
    assert states["job"] == "failed"
    assert states["consume"] in ("upstream_failed", None)
    assert xcom is None
    assert sm.job("nightly")["status"] == expiry.capitalize()
    assert "CapacityTimeoutError" in logs(capfd) or "Timed out waiting for capacity" in logs(capfd)


def test_processing_client_deadline_stops_the_job(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(scenario(time_scale=1200, capacity={"ml.*": [{"from": 0, "free": 0}]}))
    states, _ = run_test_dag(
        "t_process",
        config=processing_config(InstanceCount=1),
        prefs=["ml.g5.xlarge", "ml.c5.xlarge"],
        max_pending=1200,
    )
    assert states["job"] == "failed"
    assert sm.job("prep")["status"] in ("Stopping", "Stopped")
    assert "Timed out waiting for capacity" in logs(capfd)


def test_cpu_only_list_without_capacity_fails_with_capacity_error(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario("cpu-only-no-capacity")
    cpu = [t for t in sm.scenario_dict()["capacity"] if not any(ch in t for ch in "*?")][:2]
    states, _ = run_test_dag(
        "t_train_capacity", config=training_config(InstanceCount=1), prefs=cpu, max_pending=None
    )
    assert states["job"] == "failed"
    assert sm.job("nightly")["status"] == "Failed"
    text = logs(capfd)
    assert "No capacity for any entry" in text and "CapacityError" in text


def test_quota_rejection_names_the_entry_and_creates_nothing(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(scenario(quotas={"training": {G5: 2}}))
    # Without the preflight quota check (preflight="prune" would drop the entry and run the job).
    states, _ = run_test_dag(
        "t_train_capacity", config=training_config(), prefs=NIGHTLY, max_pending=3600, preflight="off"
    )
    assert states["job"] == "failed"
    assert sm.jobs() == []
    assert f"instance_preferences[1] ({G5}) lacks quota" in logs(capfd)


def test_job_failure_carries_aws_reason(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    config = training_config(tags={"emulator:outcome": "Failed"})
    states, _ = run_test_dag("t_train_complete", config=config, prefs=NIGHTLY, max_pending=3600)
    assert states["job"] == "failed"
    text = logs(capfd)
    assert "SageMaker job failed" in text and "AlgorithmError" in text


def test_stop_by_someone_else_while_pending(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(scenario(time_scale=60, capacity={"ml.*": [{"from": 0, "free": 0}]}))
    client = sm.boto3_client("sagemaker")

    def stop_when_pending() -> None:
        deadline = time.monotonic() + 300  # dag.test() may take a while to submit on a busy host
        while time.monotonic() < deadline:
            jobs = sm.jobs()
            if jobs and jobs[0]["secondary_status"] == "Pending":
                client.stop_training_job(TrainingJobName=jobs[0]["name"])
                return
            time.sleep(0.1)

    stopper = threading.Thread(target=stop_when_pending, daemon=True)
    stopper.start()
    states, _ = run_test_dag("t_train_capacity", config=training_config(), prefs=NIGHTLY, max_pending=86400)
    stopper.join(5)
    assert states["job"] == "failed"
    assert "SageMaker job was stopped" in logs(capfd)


# -- submit once ---------------------------------------------------------------------------------------


def test_retry_after_a_crash_right_after_create_reattaches_without_a_second_job(
    sm: Any, run_test_dag: Any
) -> None:
    states, xcom = run_test_dag("t_train_crash", config=training_config(), prefs=NIGHTLY, max_pending=3600)
    assert states == {"job": "success", "consume": "success"}
    assert creates(sm) == 1
    assert [j["name"] for j in sm.jobs()] == ["nightly"]
    assert xcom is not None and xcom["job_name"] == "nightly"


def test_without_a_job_name_every_try_of_a_task_instance_uses_one_derived_name(
    sm: Any, run_test_dag: Any
) -> None:
    config = training_config()
    del config["TrainingJobName"]
    states, xcom = run_test_dag("t_train_crash", config=config, prefs=NIGHTLY, max_pending=3600)
    assert states == {"job": "success", "consume": "success"}
    assert creates(sm) == 1  # the retry found the job by its derived name and reattached
    (job,) = sm.jobs()
    assert re.fullmatch(r"t-train-crash-job-[0-9a-f]{10}", job["name"])
    assert xcom is not None and xcom["job_name"] == job["name"]


def test_a_retry_returning_a_completed_outcome_keeps_the_job_links(sm: Any, run_test_dag: Any) -> None:
    states, xcom = run_test_dag(
        "t_train_crash_done", config=training_config(), prefs=NIGHTLY, max_pending=3600
    )
    assert states == {"job": "success", "consume": "success"}
    assert creates(sm) == 1 and xcom is not None and xcom["job_status"] == "Completed"
    # The connection points at the offline SageMaker: the links open its page for the job.
    assert xcom["sm_prefs_job_link"] == f"{sm.endpoint_url}/_emulator/view/jobs/nightly"
    assert xcom["sm_prefs_job_logs_link"] == f"{sm.endpoint_url}/_emulator/view/jobs/nightly#logs"


def test_a_create_whose_answer_was_lost_reattaches_to_the_job_it_made(sm: Any, run_test_dag: Any) -> None:
    """SageMaker ran the Create, its answer never came back: the Create sent again meets ResourceInUse, and
    the job's identity tags prove it this task instance's (a same-name job of anyone else is refused:
    tests/operators/test_ownership_runs.py)."""
    sm.load_scenario({"time_scale": 10, "job_runtime_seconds": 3600, "phase_seconds": {"starting": 100}})
    states, xcom = run_test_dag(
        "t_train_lost_answer", config=training_config(), prefs=NIGHTLY, max_pending=3600
    )
    assert states["job"] == "success" and xcom is not None and xcom["job_name"] == "nightly"
    assert creates(sm) == 2  # the second was refused with ResourceInUse ...
    assert len(sm.jobs()) == 1  # ... and reattached to the job the first made


def test_a_job_already_past_the_wait_is_answered_from_the_look_before_deferring(
    sm: Any, run_test_dag: Any
) -> None:
    from tests.clock import in_background

    # A frozen clock, moved once the first Create is in: the job is selected and training (for a day) when
    # its Create is sent again, so the task reattaches to a job that needs no waiting.
    sm.load_scenario({**FIRST_CHOICE_SCARCE, "time_scale": 0, "job_runtime_seconds": 86400})
    at_retry: dict[str, int] = {}

    def watch(done: Any) -> None:
        moved = False
        while not done.wait(0.02):
            operations = dict(sm.stats()["operations"])
            if not moved and operations.get("CreateTrainingJob", 0) >= 1:
                sm.advance(300)
                moved = True
            if operations.get("CreateTrainingJob", 0) >= 2 and not at_retry:
                at_retry.update(operations)

    with in_background(watch):
        states, xcom = run_test_dag(
            "t_train_lost_answer",
            config=training_config(),
            prefs=NIGHTLY,
            max_pending=3600,
            selected_before_retry=True,
        )
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None and xcom["preference_rank"] == 2
    calls = {op: n - at_retry.get(op, 0) for op, n in sm.stats()["operations"].items()}
    # After the Create sent again: the Describe that reattaches, the one before deferring; no trigger.
    assert calls.get("ListTrainingJobs", 0) == 0
    assert calls.get("DescribeTrainingJob", 0) <= 2, calls


@pytest.mark.parametrize(
    ("prefs", "resource"),
    [
        ([G6, G6], {"InstanceCount": 1}),
        ([G6, G5, P4D, "ml.p5.48xlarge", "ml.g6e.48xlarge", "ml.g4dn.12xlarge"], {"InstanceCount": 1}),
        ([{"instance_type": G6, "instance_count": 2}, G5], {}),
        ([{"instance_type": G6, "instance_count": 2}], {"InstanceCount": 2}),
        ([G6], {}),
        ([G6], {"InstanceCount": 1, "InstanceType": G5}),
        ([{"instance_type": G6, "instance_count": "two"}], {}),
        (["ml.g6.48xlarg"], {"InstanceCount": 1}),
        ([{"instance_type": "ml.p5.48xlarge", "instance_count": 1, "training_plan_arn": "not-an-arn"}], {}),
    ],
)
def test_invalid_list_fails_before_any_create_call(
    sm: Any, run_test_dag: Any, prefs: list[Any], resource: dict[str, Any]
) -> None:
    states, _ = run_test_dag(
        "t_train_capacity", config=training_config(**resource), prefs=prefs, max_pending=3600
    )
    assert states["job"] == "failed"
    assert sm.stats()["operations"] == {}


def test_pending_time_below_sagemaker_minimum_fails_before_any_call(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    states, _ = run_test_dag("t_train_capacity", config=training_config(), prefs=NIGHTLY, max_pending=600)
    assert states["job"] == "failed"
    assert sm.stats()["operations"] == {}
    assert "below SageMaker's minimum MaxPendingTimeInSeconds of 1800s" in logs(capfd)


# -- non-deferrable ---------------------------------------------------------------------------


def test_non_deferrable_mode_has_the_same_outcome(sm: Any, run_test_dag: Any) -> None:
    sm.load_scenario(FIRST_CHOICE_SCARCE)
    states, xcom = run_test_dag("t_train_sync", config=training_config(), prefs=NIGHTLY, max_pending=3600)
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None and (xcom["preference_rank"], xcom["job_status"]) == (2, "Completed")


# -- mapped task groups --------------------------------------------------------------------------------


def test_in_a_mapped_task_group_each_job_runs_on_its_own_list_and_hands_its_record_on(
    sm: Any, run_test_dag: Any, tmp_path: Any
) -> None:
    """The operator inside ``@task_group ... .expand_kwargs()``: its config and list are the group's mapped
    arguments (MappedArgument at parse time), resolved per map index when the task runs."""
    import json

    sm.load_scenario(FIRST_CHOICE_SCARCE)
    tasks = [
        {"config": training_config("grouped-0"), "instance_preferences": NIGHTLY},
        {"config": training_config("grouped-1"), "instance_preferences": NIGHTLY[1:]},
    ]
    states, _ = run_test_dag("t_group_mapped", tasks=tasks)
    assert states["pair.job"] == "success" and states["pair.read_own_job"] == "success", states
    out = sorted(tmp_path.glob("t_group_mapped-out.json.*"))
    read = [json.loads(path.read_text()) for path in out]
    assert [r["map_index"] for r in read] == [0, 1]
    for r, name in zip(read, ("grouped-0", "grouped-1"), strict=True):
        assert r["argument"]["job_name"] == r["pulled"]["job_name"] == name
        assert (r["argument"]["selected_instance_type"], r["argument"]["selected_instance_count"]) == (G5, 4)
    # The first group's list starts with the scarce g6 (rank 2); the second's starts at g5 (rank 1).
    assert [r["argument"]["preference_rank"] for r in read] == [2, 1]
    assert creates(sm) == 2
