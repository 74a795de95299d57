"""Scenario loading and validation, and every builtin scenario exercised over HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from offline_sagemaker import (
    BUILTIN_SCENARIOS,
    OfflineSageMaker,
    Scenario,
    ScenarioError,
    load_scenario,
)

G6, G5, P5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p5.48xlarge", "ml.p4d.24xlarge"


# --------------------------------------------------------------------------------------------- loading


@pytest.mark.parametrize("name", BUILTIN_SCENARIOS)
def test_every_builtin_loads_and_round_trips(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.name == name and scenario.description
    assert 60 <= scenario.time_scale <= 2400  # capacity-history: an emulated day in 36 real seconds
    assert load_scenario(scenario.as_dict()) == scenario


def test_yaml_and_json_files_load(tmp_path: Path) -> None:
    data = {"time_scale": 5, "capacity": {G6: [{"from": 0, "to": 10, "free": 0}, {"from": 10, "free": 3}]}}
    json_file = tmp_path / "mine.json"
    json_file.write_text(json.dumps(data))
    yaml_file = tmp_path / "mine.yaml"
    yaml_file.write_text(
        "time_scale: 5\ncapacity:\n  ml.g6.48xlarge: [{from: 0, to: 10, free: 0}, {from: 10, free: 3}]\n"
    )
    from_json, from_yaml = load_scenario(json_file), load_scenario(str(yaml_file))
    assert from_json.name == "mine" and from_json.capacity == from_yaml.capacity
    assert from_yaml.capacity_windows(G6) is not None and from_yaml.capacity_windows(G5) is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"time_scal": 5}, "time_scal: unknown key (did you mean 'time_scale'?)"),
        (
            {"capacity": {G6: [{"from": 0, "free": -1}]}},
            "capacity.ml.g6.48xlarge[0].free: must be an integer >= 0",
        ),
        (
            {"capacity": {"ml.g6.48xlarg": 1}},
            "capacity.ml.g6.48xlarg: not a SageMaker instance type (did you mean 'ml.g6.48xlarge'?)",
        ),
        (
            {"capacity": {G6: [{"from": 0, "to": 10, "free": 1}, {"from": 5, "free": 1}]}},
            "capacity.ml.g6.48xlarge: windows overlap",
        ),
        ({"quotas": {"trainng": {G6: 1}}}, "quotas.trainng: unknown key"),
        ({"pending_timeout_outcome": "exploded"}, "pending_timeout_outcome: must be one of stopped, failed"),
        ({"faults": {"throttle_rate": 2}}, "faults.throttle_rate: must be a probability"),
        ({"rate_limits": {"DescribeTrainingJobs": 5}}, "rate_limits.DescribeTrainingJobs: unknown key"),
        ({"training_plans": [{"arn": "nope", "instance_type": P5, "count": 1}]}, "training_plans[0].arn"),
        (
            {
                "training_plans": [
                    {"arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/x", "count": 1}
                ]
            },
            "training_plans[0].instance_type: required",
        ),
        ({"phase_seconds": {"starting": -5}}, "phase_seconds.starting"),
        ({"account_id": "12"}, "account_id: must be 12 digits"),
        (
            {"capacity_period": 600, "capacity": {G6: [{"from": 0, "to": 900, "free": 1}]}},
            "capacity.ml.g6.48xlarge[0].to: must be at most capacity_period (600)",
        ),
        ({"capacity_period": 0}, "capacity_period: must be a number >= 1"),
    ],
)
def test_invalid_scenarios_name_the_bad_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(data)
    assert message in str(info.value)


def test_unknown_builtin_name_suggests_the_closest() -> None:
    with pytest.raises(ScenarioError, match="Did you mean the builtin 'first-choice-scarce'"):
        load_scenario("first-choice-scare")


def test_scenario_objects_pass_through() -> None:
    scenario = Scenario(name="x", time_scale=1)
    assert load_scenario(scenario) is scenario


# -------------------------------------------------------------------------------- builtins over HTTP


def frozen(name: str) -> dict[str, Any]:
    """The builtin scenario ``name`` with its clock frozen: only advance() moves it."""
    return {**load_scenario(name).as_dict(), "time_scale": 0}


@pytest.fixture(scope="module")
def builtin() -> Any:
    with OfflineSageMaker(scenario="default") as server:
        yield server


@pytest.fixture(scope="module")
def sm_client(builtin: OfflineSageMaker) -> Any:
    return builtin.boto3_client(
        "sagemaker", config=Config(retries={"total_max_attempts": 1, "mode": "standard"})
    )


def test_default_completes_a_job_in_a_few_real_seconds(
    builtin: OfflineSageMaker, sm_client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    builtin.load_scenario("default")
    sm_client.create_training_job(**make_training("default-job", instance_type="ml.m5.xlarge", count=1))
    deadline = time.monotonic() + 15
    status = "InProgress"
    while status == "InProgress" and time.monotonic() < deadline:
        time.sleep(0.25)
        status = sm_client.describe_training_job(TrainingJobName="default-job")["TrainingJobStatus"]
    assert status == "Completed"


def test_first_choice_scarce(
    builtin: OfflineSageMaker, sm_client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    # The builtin's windows on a frozen clock: g6 is still scarce when the jobs are created and looked at,
    # however busy the host; only advance() moves time.
    builtin.load_scenario(frozen("first-choice-scarce"))
    sm_client.create_training_job(
        **make_training(
            "fcs-list", [{"InstanceType": G6, "InstanceCount": 2}, {"InstanceType": G5, "InstanceCount": 4}]
        )
    )
    sm_client.create_training_job(**make_training("fcs-only-g6", [{"InstanceType": G6}], count=2))
    builtin.advance(120)
    listed = builtin.job("fcs-list")
    assert (listed["selected_instance_type"], listed["selected_rank"]) == (G5, 2)
    assert builtin.job("fcs-only-g6")["secondary_status"] == "Pending"
    builtin.advance(1200)
    only = builtin.job("fcs-only-g6")
    assert only["selected_instance_type"] == G6 and only["waited_seconds"] > 1100


def test_all_scarce_past_deadline(
    builtin: OfflineSageMaker, sm_client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    # Frozen: the job cannot reach its 1800 s pending limit while the host is slow to look at it.
    builtin.load_scenario(frozen("all-scarce-past-deadline"))
    sm_client.create_training_job(
        **make_training(
            "scarce",
            [{"InstanceType": G6}, {"InstanceType": P4D}, {"InstanceType": "ml.trn1.32xlarge"}],
            count=1,
            stopping={"MaxPendingTimeInSeconds": 1800},
        )
    )
    builtin.advance(120)
    assert builtin.job("scarce")["secondary_status"] == "Pending"
    builtin.advance(1800)
    expired = sm_client.describe_training_job(TrainingJobName="scarce")
    assert expired["TrainingJobStatus"] == "Stopped"
    assert "MaxPendingTimeInSeconds" in expired["FailureReason"]


def test_cpu_only_no_capacity(
    builtin: OfflineSageMaker,
    sm_client: Any,
    make_training: Callable[..., dict[str, Any]],
    make_processing: Callable[..., dict[str, Any]],
) -> None:
    builtin.load_scenario("cpu-only-no-capacity")
    sm_client.create_training_job(
        **make_training(
            "cpu-none", [{"InstanceType": "ml.m5.xlarge"}, {"InstanceType": "ml.c5.2xlarge"}], count=1
        )
    )
    sm_client.create_processing_job(
        **make_processing("cpu-proc", [{"InstanceType": "ml.m5.xlarge"}], count=1)
    )
    builtin.advance(60)
    assert sm_client.describe_training_job(TrainingJobName="cpu-none")["FailureReason"].startswith(
        "CapacityError"
    )
    assert sm_client.describe_processing_job(ProcessingJobName="cpu-proc")["ProcessingJobStatus"] == "Failed"


def test_plan_no_capacity(
    builtin: OfflineSageMaker, sm_client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    builtin.load_scenario("plan-no-capacity")
    for name, plan in (("nightly", "nightly-p5"), ("empty", "empty-p5")):
        arn = f"arn:aws:sagemaker:us-east-1:123456789012:training-plan/{plan}"
        sm_client.create_training_job(
            **make_training(
                f"plan-{name}",
                [
                    {"InstanceType": P5, "InstanceCount": 2, "TrainingPlanArns": [arn]},
                    {"InstanceType": P4D, "InstanceCount": 1},
                ],
            )
        )
    builtin.advance(120)
    for name in ("plan-nightly", "plan-empty"):
        job = builtin.job(name)
        assert (job["selected_instance_type"], job["selected_rank"], job["capacity"]) == (P4D, 2, "on-demand")


def test_throttling_storm_is_survivable_with_retries(
    builtin: OfflineSageMaker, sm_client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    builtin.load_scenario("throttling-storm")
    transient = {"ThrottlingException", "InternalFailure", "ServiceUnavailable"}

    def retried(call: Callable[[], Any]) -> Any:
        # Immediate retries: botocore's own back-off is right for production but slow for a test.
        for _ in range(100):
            try:
                return call()
            except ClientError as error:
                if error.response["Error"]["Code"] not in transient:
                    raise
        raise AssertionError("no call got through in 100 attempts")

    request = make_training("storm", [{"InstanceType": G5}], count=1)
    retried(lambda: sm_client.create_training_job(**request))
    for _ in range(30):
        assert (
            retried(lambda: sm_client.describe_training_job(TrainingJobName="storm"))["TrainingJobName"]
            == "storm"
        )
    stats = builtin.stats()
    assert (
        stats["throttled"].get("DescribeTrainingJob", 0) + stats["throttled"].get("CreateTrainingJob", 0) > 0
    )
    assert stats["jobs"]["storm"]["CreateTrainingJob"] >= 1
    assert len(builtin.jobs()) == 1  # retried creates never made a second job


def test_local_airflow_falls_back_whenever_a_run_is_submitted(
    builtin: OfflineSageMaker, sm_client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    # Frozen: each run is created exactly at its point of the period, however long the calls take.
    builtin.load_scenario(frozen("local-airflow"))
    nightly = [
        {"InstanceType": G6, "InstanceCount": 2},
        {"InstanceType": G5, "InstanceCount": 4},
        {"InstanceType": P4D, "InstanceCount": 2},
    ]
    # Runs an hour apart, each at a different point of the repeating 30-minute period.
    waited = []
    for index, offset in enumerate((0, 3600 + 900, 7200 + 1000)):
        builtin.advance(max(0.0, offset - builtin.clock()["elapsed"]))
        sm_client.create_training_job(**make_training(f"local-{index}", nightly))
        builtin.advance(1500)
        job = builtin.job(f"local-{index}")
        assert (job["selected_instance_type"], job["selected_rank"]) == (G5, 2), job
        waited.append(job["waited_seconds"])
    # Early in a period the second choice is not free yet either: the job waits in Pending first
    # (waited_seconds counts from creation, so Starting's 600 s are in every figure).
    assert waited[0] > 850 and max(waited[1:]) < 630
