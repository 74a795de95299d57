"""Scenario loading and validation, and every builtin scenario exercised over HTTP."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
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


# ------------------------------------------------------------------------ scenario files over HTTP

#: What the tests' files hold that no error may quote (a stand-in for a secret in a file of the machine).
SECRET = "hunter2-not-for-your-eyes"


def post_scenario(sm: OfflineSageMaker, source: Any) -> tuple[int, dict[str, Any]]:
    """``POST /_emulator/scenario`` as any client of the port would send it."""
    request = urllib.request.Request(
        f"{sm.endpoint_url}/_emulator/scenario",
        data=json.dumps({"scenario": source}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    """The one directory the server below may load scenario files from."""
    directory = tmp_path / "allowed"
    directory.mkdir()
    (directory / "mine.yaml").write_text("name: mine\ntime_scale: 0\ncapacity:\n  ml.g6.48xlarge: 3\n")
    return directory


@pytest.fixture
def files_server(
    offline_sagemaker_factory: Callable[..., OfflineSageMaker], allowed: Path
) -> OfflineSageMaker:
    return offline_sagemaker_factory({"name": "before", "time_scale": 0}, scenario_dirs=[allowed])


def test_a_file_under_an_allowed_directory_and_a_builtin_load_over_http(
    files_server: OfflineSageMaker, allowed: Path
) -> None:
    status, loaded = post_scenario(files_server, str(allowed / "mine.yaml"))
    assert status == 200 and loaded["name"] == "mine" and files_server.scenario.name == "mine"
    assert post_scenario(files_server, "first-choice-scarce")[1]["name"] == "first-choice-scarce"
    remote = OfflineSageMaker.attach(files_server.endpoint_url)
    assert remote.load_scenario(str(allowed / "mine.yaml"))["name"] == "mine"  # read by the server
    # A Path is the client's own file, sent as its content: it needs no allowed directory.
    outside = allowed.parent / "client-side.yaml"
    outside.write_text("name: client-side\ntime_scale: 0\n")
    assert remote.load_scenario(outside)["name"] == "client-side"


def test_a_file_outside_the_allowed_directories_is_refused_unread(files_server: OfflineSageMaker) -> None:
    status, answer = post_scenario(files_server, "/etc/passwd")
    assert status == 403
    assert "--scenario-dir" in answer["error"]
    # Nothing of the file: not its first key, not any line, not a word of it.
    passwd = Path("/etc/passwd").read_text()
    assert "root" not in answer["error"] and not any(
        line and line in answer["error"] for line in passwd.splitlines()
    )
    assert files_server.scenario.name == "before"
    # Refused before it is opened: a missing file outside is refused in the same words (no oracle).
    missing = post_scenario(files_server, "/etc/no-such-file")[1]["error"]
    assert missing.replace("/etc/no-such-file", "/etc/passwd") == answer["error"]
    with pytest.raises(ValueError, match="neither a builtin scenario"):
        OfflineSageMaker.attach(files_server.endpoint_url).load_scenario("/etc/passwd")


def test_dot_dot_and_symlinks_cannot_leave_an_allowed_directory(
    files_server: OfflineSageMaker, allowed: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(f"name: {SECRET}\n")  # a valid scenario: only where it lies refuses it
    (allowed / "link.yaml").symlink_to(outside)
    (allowed / "sub").mkdir()
    for source in (
        str(allowed / "link.yaml"),
        str(allowed / ".." / "outside.yaml"),
        str(allowed / "sub" / ".." / "mine.yaml"),
        str(outside),
    ):
        status, answer = post_scenario(files_server, source)
        assert status == 403 and SECRET not in answer["error"], (source, answer)
    assert files_server.scenario.name == "before"


@pytest.mark.parametrize(
    ("file_name", "content", "problem"),
    [
        ("broken.yaml", f"password: [{SECRET}\n  other: 1\n", "not valid YAML/JSON at line"),
        ("list.json", json.dumps([SECRET]), "a scenario must be a mapping of keys, got a list"),
        ("keys.yaml", f"aws_secret_access_key: {SECRET}\n", "a top-level key is not a scenario key"),
        (
            "values.yaml",
            f"capacity:\n  ml.g6.48xlarge: [{{from: 0, free: {SECRET}}}]\n",
            "invalid value under the scenario key 'capacity'",
        ),
        ("numbers.yaml", f"1: {SECRET}\n", "a top-level key is not a scenario key"),
        ("binary.yaml", None, "cannot be read (UnicodeDecodeError)"),
    ],
)
def test_a_malformed_file_in_an_allowed_directory_is_named_with_its_problem_not_its_content(
    files_server: OfflineSageMaker, allowed: Path, file_name: str, content: str | None, problem: str
) -> None:
    path = allowed / file_name
    if content is None:
        path.write_bytes(b"\xff\xfe" + SECRET.encode("utf-16-le"))
    else:
        path.write_text(content)
    status, answer = post_scenario(files_server, str(path))
    assert status == 400
    assert answer["error"].startswith(f"scenario file {str(path)!r}: {problem}"), answer
    for leaked in (SECRET, "password", "aws_secret_access_key", "free"):
        assert leaked not in answer["error"]
    assert files_server.scenario.name == "before"


def test_only_scenario_file_kinds_load_from_an_allowed_directory(
    files_server: OfflineSageMaker, allowed: Path
) -> None:
    (allowed / ".env").write_text(f"TOKEN={SECRET}\n")
    status, answer = post_scenario(files_server, str(allowed / ".env"))
    assert status == 403 and "ends in .yaml, .yml, .json" in answer["error"] and SECRET not in answer["error"]
    status, answer = post_scenario(files_server, str(allowed / "gone.yaml"))
    assert (status, answer["error"]) == (400, f"scenario file {str(allowed / 'gone.yaml')!r}: no such file")


def test_the_file_a_server_started_from_loads_again_and_its_neighbours_do_not(
    offline_sagemaker_factory: Callable[..., OfflineSageMaker], tmp_path: Path
) -> None:
    start = tmp_path / "start.yaml"
    start.write_text("name: start\ntime_scale: 0\n")
    (tmp_path / "neighbour.yaml").write_text("name: neighbour\n")
    server = offline_sagemaker_factory(str(start))
    assert post_scenario(server, str(start)) == (200, server.scenario_dict())
    assert post_scenario(server, str(tmp_path / "neighbour.yaml"))[0] == 403
    with pytest.raises(ScenarioError, match="not an existing directory"):
        OfflineSageMaker(scenario_dirs=[tmp_path / "nowhere"])


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
