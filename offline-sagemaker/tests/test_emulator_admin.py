"""Admin routes over HTTP, ``attach()``, the pytest fixtures, and the ``sm-prefs-emulator`` console script."""

from __future__ import annotations

import http.client as httpclient
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError

from offline_sagemaker import OfflineSageMaker, RemoteSageMaker

CONSOLE_SCRIPT = Path(sys.executable).with_name("sm-prefs-emulator")


def admin_http(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_admin_routes(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    base = world.endpoint_url + "/_emulator"
    client.create_training_job(**make_training("admin-job", [{"InstanceType": "ml.g5.48xlarge"}], count=1))
    client.describe_training_job(TrainingJobName="admin-job")

    assert admin_http(base + "/health") == (
        200,
        {"ok": True, "scenario": "frozen", "region": "us-east-1", "account_id": "123456789012"},
    )
    status, stats = admin_http(base + "/stats")
    assert status == 200
    assert stats["operations"] == {"CreateTrainingJob": 1, "DescribeTrainingJob": 1}
    assert stats["jobs"]["admin-job"] == {"CreateTrainingJob": 1, "DescribeTrainingJob": 1}
    status, jobs = admin_http(base + "/jobs")
    assert [j["name"] for j in jobs["jobs"]] == ["admin-job"]
    status, clock = admin_http(base + "/clock", "POST", {"advance": 60})
    assert status == 200 and clock["elapsed"] == 60
    status, job = admin_http(base + "/jobs/admin-job")
    assert job["selected_instance_type"] == "ml.g5.48xlarge" and job["kind"] == "training"
    assert [t["secondary_status"] for t in job["timeline"]] == ["Starting", "Downloading"]
    assert admin_http(base + "/jobs/nobody")[0] == 404
    status, faults = admin_http(
        base + "/faults", "POST", {"throttle_rate": 0.25, "rate_limits": {"DescribeTrainingJob": 10}}
    )
    assert faults["throttle_rate"] == 0.25 and faults["rate_limits"] == {"DescribeTrainingJob": 10}
    assert admin_http(base + "/faults", "POST", {"throttle": 1})[0] == 400
    assert admin_http(base + "/faults")[1]["throttle_rate"] == 0.25
    assert admin_http(base + "/stop-all-jobs", "POST", {}) == (200, {"stopped": 1})
    status, scenario = admin_http(base + "/scenario", "POST", {"scenario": "first-choice-scarce"})
    assert status == 200 and scenario["name"] == "first-choice-scarce"
    assert admin_http(base + "/jobs")[1] == {"jobs": []}  # loading a scenario resets the world
    assert admin_http(base + "/faults")[1]["throttle_rate"] == 0.0
    status, error = admin_http(
        base + "/scenario", "POST", {"scenario": {"capacity": {"ml.g6.48xlarge": [{"free": -1}]}}}
    )
    assert status == 400 and "capacity.ml.g6.48xlarge[0].free" in error["error"]
    assert admin_http(base + "/reset", "POST", {}) == (200, {"ok": True})
    assert admin_http(base + "/stats")[1]["operations"] == {}
    assert admin_http(base + "/nope")[0] == 404


def test_attach_controls_a_running_server(
    world: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    remote = OfflineSageMaker.attach(world.endpoint_url)
    assert isinstance(remote, RemoteSageMaker) and remote.region == "us-east-1"
    client = remote.boto3_client("sagemaker")
    client.create_training_job(**make_training("remote-job", [{"InstanceType": "ml.p5.48xlarge"}], count=1))
    before = remote.now()
    assert remote.advance(120) == before + 120
    assert remote.job("remote-job")["secondary_status"] == "Pending"
    assert remote.stats()["operations"]["CreateTrainingJob"] == 1
    assert remote.set_faults(latency_ms=1)["latency_ms"] == 1
    assert remote.stop_all_jobs() == 1
    with pytest.raises(KeyError):
        remote.job("nobody")
    remote.load_scenario("plan-no-capacity")
    assert remote.jobs() == [] and world.scenario.name == "plan-no-capacity"
    with pytest.raises(ValueError, match="time_scal"):
        remote.load_scenario({"time_scal": 1})


def test_airflow_env_describes_a_connection_to_the_endpoint(world: OfflineSageMaker) -> None:
    env = world.airflow_env(conn_id="aws_emulator")
    connection = json.loads(env["AIRFLOW_CONN_AWS_EMULATOR"])
    assert connection == {
        "conn_type": "aws",
        "login": "testing",
        "password": "testing",
        "extra": {"endpoint_url": world.endpoint_url, "region_name": "us-east-1"},
    }
    assert env["AWS_ACCESS_KEY_ID"] == env["AWS_SECRET_ACCESS_KEY"] == "testing"
    assert env["AWS_DEFAULT_REGION"] == "us-east-1"


def test_pytest_fixtures_start_servers(
    offline_sagemaker: OfflineSageMaker, offline_sagemaker_factory: Callable[..., OfflineSageMaker]
) -> None:
    assert offline_sagemaker.scenario.name == "default"
    other = offline_sagemaker_factory("cpu-only-no-capacity")
    assert other.port != offline_sagemaker.port
    assert other.boto3_client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


@pytest.fixture
def cli_process() -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(
        [str(CONSOLE_SCRIPT), "--port", "0", "--scenario", "first-choice-scarce"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    try:
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_console_script_serves_sagemaker_and_s3_until_sigterm(
    cli_process: tuple[subprocess.Popen[str], str], make_training: Callable[..., dict[str, Any]]
) -> None:
    process, url = cli_process
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), url
    remote = OfflineSageMaker.attach(url)
    # The scenario the command loaded, on a frozen clock: g6 is still scarce when the job is created,
    # however busy the host; only advance() moves time.
    assert remote.scenario_dict()["name"] == "first-choice-scarce"
    remote.load_scenario({**remote.scenario_dict(), "time_scale": 0})
    sagemaker = remote.boto3_client("sagemaker")
    sagemaker.create_training_job(
        **make_training(
            "cli-job", [{"InstanceType": "ml.g6.48xlarge"}, {"InstanceType": "ml.g5.48xlarge"}], count=1
        )
    )
    remote.advance(120)
    described = sagemaker.describe_training_job(TrainingJobName="cli-job")
    assert described["ResourceConfig"]["SelectedInstanceType"] == "ml.g5.48xlarge"
    assert remote.stats()["jobs"]["cli-job"] == {"CreateTrainingJob": 1, "DescribeTrainingJob": 1}
    s3 = remote.boto3_client("s3")
    s3.create_bucket(Bucket="cli-bucket")
    s3.put_object(Bucket="cli-bucket", Key="k", Body=b"payload")
    assert s3.get_object(Bucket="cli-bucket", Key="k")["Body"].read() == b"payload"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=15) == 0


def test_console_script_rejects_a_bad_scenario(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("capacity:\n  ml.g6.48xlarge: [{from: 0, free: lots}]\n")
    result = subprocess.run(
        [str(CONSOLE_SCRIPT), "--port", "0", "--scenario", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "capacity.ml.g6.48xlarge[0].free" in result.stderr


def test_sagemaker_calls_keep_the_connection_alive(world: OfflineSageMaker) -> None:
    connection = httpclient.HTTPConnection("127.0.0.1", world.port, timeout=10)
    headers = {"X-Amz-Target": "SageMaker.ListTrainingJobs", "Content-Type": "application/x-amz-json-1.1"}
    for _ in range(3):
        connection.request("POST", "/", body=b"{}", headers=headers)
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read()) == {"TrainingJobSummaries": []}
        assert response.getheader("Connection") is None
    connection.close()
    assert world.stats()["operations"] == {"ListTrainingJobs": 3}


def test_calls_are_counted_per_access_key_id_of_their_signature(world: OfflineSageMaker) -> None:
    import boto3

    def client(key_id: str, **extra: str) -> Any:
        return boto3.client(
            "sagemaker",
            endpoint_url=world.endpoint_url,
            region_name=world.region,
            aws_access_key_id=key_id,
            aws_secret_access_key="s" * 40,
            **extra,
        )

    client("AKIAFIRSTKEY0000TEST").list_training_jobs()
    second = client("ASIASECONDKEY000TEST", aws_session_token="token-not-counted")
    second.list_training_jobs()
    quotas = boto3.client(
        "service-quotas",
        endpoint_url=world.endpoint_url,
        region_name=world.region,
        aws_access_key_id="ASIASECONDKEY000TEST",
        aws_secret_access_key="s" * 40,
    )
    quotas.list_service_quotas(ServiceCode="sagemaker")
    # Unsigned: counted as a call, under no key.
    connection = httpclient.HTTPConnection("127.0.0.1", world.port, timeout=10)
    headers = {"X-Amz-Target": "SageMaker.ListTrainingJobs", "Content-Type": "application/x-amz-json-1.1"}
    connection.request("POST", "/", body=b"{}", headers=headers)
    assert connection.getresponse().status == 200
    connection.close()
    stats = world.stats()
    assert stats["operations"] == {"ListTrainingJobs": 3, "ListServiceQuotas": 1}
    assert stats["access_keys"] == {
        "AKIAFIRSTKEY0000TEST": {"ListTrainingJobs": 1},
        "ASIASECONDKEY000TEST": {"ListTrainingJobs": 1, "ListServiceQuotas": 1},
    }
    assert "token-not-counted" not in json.dumps(stats) and "s" * 40 not in json.dumps(stats)


def test_a_stopped_emulator_answers_nothing_even_on_kept_alive_connections() -> None:
    emulator = OfflineSageMaker().start()
    client = emulator.boto3_client(
        "sagemaker", config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=5)
    )
    client.list_training_jobs()
    emulator.stop()
    with pytest.raises((EndpointConnectionError, ConnectionClosedError)):
        client.list_training_jobs()


def test_job_page_shows_the_list_with_the_selected_entry_and_the_transitions(
    load_frozen: Callable[..., OfflineSageMaker], client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    world = load_frozen(capacity={"ml.g6.48xlarge": 0, "ml.g5.48xlarge": 8})
    name = "view-me"
    client.create_training_job(
        **make_training(
            name,
            [
                {"InstanceType": "ml.g6.48xlarge", "InstanceCount": 2},
                {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 4},
            ],
        )
    )
    world.advance(600)
    with urllib.request.urlopen(f"{world.endpoint_url}/_emulator/view/jobs/{name}", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/html")
        page = response.read().decode()
    selected = re.search(r"<tr class='selected'>(.*?)</tr>", page)
    assert selected and "<td>2</td><td>ml.g5.48xlarge</td>" in selected.group(1)
    assert "ml.g6.48xlarge" in page and "Waiting for compute capacity" not in page
    assert "Starting the training job" in page and world.job(name)["arn"] in page

    with urllib.request.urlopen(f"{world.endpoint_url}/_emulator/view", timeout=10) as response:
        assert f"/_emulator/view/jobs/{name}" in response.read().decode()
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{world.endpoint_url}/_emulator/view/jobs/no-such-job", timeout=10)
    assert missing.value.code == 404 and "no-such-job" in missing.value.read().decode()


# ------------------------------------------------------------------------------- cross-site requests


def raw_admin(
    sm: OfflineSageMaker, method: str, route: str, body: bytes, headers: dict[str, str]
) -> tuple[int, Any]:
    """One admin request with exactly these headers (http.client adds no Content-Type of its own)."""
    connection = httpclient.HTTPConnection("127.0.0.1", sm.port, timeout=10)
    try:
        connection.request(method, f"/_emulator/{route}", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def world_state(sm: OfflineSageMaker) -> tuple[Any, ...]:
    """Everything a state-changing admin route would change: jobs, clock, scenario, faults, events."""
    faults = admin_http(sm.endpoint_url + "/_emulator/faults")[1]
    return sm.jobs(), sm.clock(), sm.scenario_dict(), faults, sm.event_settings(), sm.credential_settings()


#: The state-changing admin routes with a body that would change the world if it were accepted.
CHANGING_ROUTES = [
    ("POST", "reset", {}),
    ("POST", "stop-all-jobs", {}),
    ("POST", "scenario", {"scenario": "plan-no-capacity"}),
    ("POST", "clock", {"advance": 3600}),
    ("POST", "faults", {"throttle_rate": 1}),
    ("POST", "events", {"enabled": False}),
    ("POST", "credentials", {"reject_unknown_tokens": True}),
    ("DELETE", "event-queues", {"rule": "sm-prefs-queue"}),
]
#: The content types a browser sends cross-site without asking the server first ("simple requests").
SIMPLE_CONTENT_TYPES = [
    "text/plain",
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    None,
]


@pytest.mark.parametrize("content_type", SIMPLE_CONTENT_TYPES)
@pytest.mark.parametrize(("method", "route", "body"), CHANGING_ROUTES, ids=[r[1] for r in CHANGING_ROUTES])
def test_a_state_changing_admin_request_that_is_not_json_is_refused_and_changes_nothing(
    world: OfflineSageMaker,
    client: Any,
    make_training: Callable[..., dict[str, Any]],
    method: str,
    route: str,
    body: dict[str, Any],
    content_type: str | None,
) -> None:
    # A job running, a clock that has moved: a reset, a stop or a new scenario would all show.
    client.create_training_job(**make_training("kept", [{"InstanceType": "ml.g5.48xlarge"}], count=1))
    world.advance(120)
    before = world_state(world)
    headers = {"Content-Type": content_type} if content_type is not None else {}
    status, answer = raw_admin(world, method, route, json.dumps(body).encode(), headers)
    assert status == 415
    assert "Content-Type: application/json" in answer["error"] and method in answer["error"]
    assert world_state(world) == before
    assert world.job("kept")["status"] == "InProgress"


def test_a_request_from_another_sites_page_is_refused_whatever_its_content_type(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(**make_training("kept", [{"InstanceType": "ml.g5.48xlarge"}], count=1))
    before = world_state(world)
    for origin in ("http://attacker.example", "null", f"http://attacker.example:{world.port}"):
        headers = {"Content-Type": "application/json", "Origin": origin}
        status, answer = raw_admin(world, "POST", "reset", b"{}", headers)
        assert status == 403 and repr(origin) in answer["error"], (origin, answer)
        # Reads too: a page that rebinds its name to 127.0.0.1 learns nothing of the jobs.
        assert raw_admin(world, "GET", "jobs", b"", {"Origin": origin})[0] == 403
    assert world_state(world) == before
    # The emulator's own origin (a page it serves) and no Origin (any client but a browser) pass.
    own = {"Content-Type": "application/json", "Origin": f"http://localhost:{world.port}"}
    assert raw_admin(world, "POST", "stop-all-jobs", b"{}", own) == (200, {"stopped": 1})
    assert raw_admin(world, "POST", "reset", b"", {"Content-Type": "application/json"}) == (200, {"ok": True})
    assert world.jobs() == []


def test_remote_controls_send_json_to_every_state_changing_route(world: OfflineSageMaker) -> None:
    remote = OfflineSageMaker.attach(world.endpoint_url)
    remote.advance(60)
    assert remote.stop_all_jobs() == 0
    remote.reset()  # no arguments: still sent as a JSON body
    assert remote.clock()["elapsed"] == 0
    remote.set_events(enabled=True)
    remote.load_scenario("plan-no-capacity")
    assert world.scenario.name == "plan-no-capacity"


def test_console_script_loads_scenario_files_only_from_its_command_line(tmp_path: Path) -> None:
    start, allowed = tmp_path / "start.yaml", tmp_path / "allowed"
    start.write_text("name: start\ntime_scale: 0\n")
    allowed.mkdir()
    (allowed / "night.json").write_text('{"name": "night", "time_scale": 0}')
    command = [str(CONSOLE_SCRIPT), "--port", "0", "--scenario", str(start), "--scenario-dir", str(allowed)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        base = process.stdout.readline().strip() + "/_emulator"
        assert admin_http(base + "/scenario", "POST", {"scenario": str(allowed / "night.json")})[0] == 200
        assert admin_http(base + "/scenario", "POST", {"scenario": str(start)})[1]["name"] == "start"
        status, answer = admin_http(base + "/scenario", "POST", {"scenario": "/etc/passwd"})
        assert status == 403 and "root" not in answer["error"]
        assert admin_http(base + "/health")[1]["scenario"] == "start"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
    missing = subprocess.run(
        [str(CONSOLE_SCRIPT), "--port", "0", "--scenario-dir", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (
        missing.returncode == 2
        and "nowhere" in missing.stderr
        and "not an existing directory" in missing.stderr
    )
