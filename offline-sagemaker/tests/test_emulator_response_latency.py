"""Response latency: an operation takes effect, and its answer is held back; ``in_flight`` counts the wait.

What a harness needs to kill a client between "the job was created" and "the client learned it": the
held call is visible in ``stats()["in_flight"]`` while its effect already exists for every other client.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ReadTimeoutError
from emulator_support import frozen

from offline_sagemaker import OfflineSageMaker, ScenarioError, load_scenario

pytestmark = pytest.mark.usefixtures("world")

#: Seconds to wait for a condition that normally holds within milliseconds.
DEADLINE = 30.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; fail after :data:`DEADLINE` seconds."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not {what} after {DEADLINE:g} s")
        time.sleep(0.01)


def in_flight(sm: OfflineSageMaker) -> dict[str, int]:
    result: dict[str, int] = sm.stats()["in_flight"]
    return result


def other_client(sm: OfflineSageMaker, **config: Any) -> Any:
    """A second SageMaker client, one attempt per call (another worker, in the harness's terms)."""
    return sm.boto3_client(
        "sagemaker", config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, **config)
    )


def admin_http(sm: OfflineSageMaker, method: str, route: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    request = urllib.request.Request(
        f"{sm.endpoint_url}/_emulator/{route}", data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=DEADLINE) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def background() -> Iterator[ThreadPoolExecutor]:
    """A thread for the call whose answer is held."""
    with ThreadPoolExecutor(max_workers=1) as executor:
        yield executor


def held_create(
    sm: OfflineSageMaker, background: ThreadPoolExecutor, client: Any, request: dict[str, Any]
) -> Future[Any]:
    """Start CreateTrainingJob in the background and return once its answer is held."""
    future = background.submit(client.create_training_job, **request)
    wait_until(lambda: in_flight(sm).get("CreateTrainingJob") == 1, "in flight")
    return future


# ------------------------------------------------------------------------------------ held answers


def test_create_takes_effect_before_its_held_answer(
    world: OfflineSageMaker,
    client: Any,
    background: ThreadPoolExecutor,
    make_training: Callable[..., dict[str, Any]],
) -> None:
    assert in_flight(world) == {}
    world.set_faults(response_latency_ms={"CreateTrainingJob": 2000})
    future = held_create(
        world, background, client, make_training("held", instance_type="ml.m5.4xlarge", count=1)
    )
    # stats() takes the service lock: reading in_flight == 1 proves the held answer does not hold it.
    assert world.job("held")["name"] == "held"
    described = other_client(world).describe_training_job(TrainingJobName="held")
    assert described["TrainingJobName"] == "held"
    assert world.stats()["operations"]["CreateTrainingJob"] == 1

    answer = future.result(timeout=DEADLINE)
    assert answer["TrainingJobArn"] == described["TrainingJobArn"]
    # The count is released before the answer is written, so the client never sees its own call in flight.
    assert in_flight(world) == {}
    assert [job["name"] for job in world.jobs()] == ["held"]


def test_a_client_that_gives_up_leaves_the_created_job_behind(
    world: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    world.set_faults(response_latency_ms={"CreateTrainingJob": 3000})
    impatient = other_client(world, read_timeout=0.5)
    with pytest.raises(ReadTimeoutError):
        impatient.create_training_job(**make_training("orphan", instance_type="ml.m5.4xlarge", count=1))
    # The client never learned of it, yet the job exists: what a worker killed mid-call leaves behind.
    wait_until(lambda: [job["name"] for job in world.jobs()] == ["orphan"], "created")
    wait_until(lambda: in_flight(world) == {}, "released")
    world.set_faults(response_latency_ms={})
    # Its retry learns only that the name is taken.
    with pytest.raises(ClientError):
        other_client(world).create_training_job(
            **make_training("orphan", instance_type="ml.m5.4xlarge", count=1)
        )
    assert [job["name"] for job in world.jobs()] == ["orphan"]


def test_rejected_calls_are_held_too(
    world: OfflineSageMaker,
    client: Any,
    background: ThreadPoolExecutor,
    make_training: Callable[..., dict[str, Any]],
) -> None:
    request = make_training("twice", instance_type="ml.m5.4xlarge", count=1)
    client.create_training_job(**request)
    world.set_faults(response_latency_ms={"CreateTrainingJob": 2000})
    future = held_create(world, background, client, request)
    with pytest.raises(ClientError) as info:
        future.result(timeout=DEADLINE)
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert sum(world.stats()["rejected"]["CreateTrainingJob"].values()) == 1
    assert in_flight(world) == {}


def test_a_reset_while_held_forgets_the_count(
    world: OfflineSageMaker,
    client: Any,
    background: ThreadPoolExecutor,
    make_training: Callable[..., dict[str, Any]],
) -> None:
    world.set_faults(response_latency_ms={"CreateTrainingJob": 2000})
    future = held_create(
        world, background, client, make_training("forgotten", instance_type="ml.m5.4xlarge", count=1)
    )
    world.reset()
    assert in_flight(world) == {}
    future.result(timeout=DEADLINE)
    assert in_flight(world) == {}  # the late release counts against the old world, not this one


def test_only_the_named_operation_is_held_and_faulted_calls_are_not(
    world: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    quick = other_client(world, read_timeout=DEADLINE)
    quick.create_training_job(**make_training("quick", instance_type="ml.m5.4xlarge", count=1))
    # Ten minutes: a held call would time out the client.
    world.set_faults(response_latency_ms={"CreateTrainingJob": 600_000})
    assert quick.describe_training_job(TrainingJobName="quick")["TrainingJobName"] == "quick"
    assert len(quick.list_training_jobs()["TrainingJobSummaries"]) == 1
    world.set_faults(throttle_rate=1.0)
    with pytest.raises(ClientError) as info:
        quick.create_training_job(**make_training("throttled", instance_type="ml.m5.4xlarge", count=1))
    assert info.value.response["Error"]["Code"] == "ThrottlingException"
    assert in_flight(world) == {}
    world.clear_faults()
    assert [job["name"] for job in world.jobs()] == ["quick"]


# ---------------------------------------------------------------------------------------- settings


def test_response_latency_from_the_scenario_and_set_faults(world: OfflineSageMaker) -> None:
    loaded = world.load_scenario(frozen(faults={"response_latency_ms": {"CreateTrainingJob": 5000}}))
    assert loaded["faults"]["response_latency_ms"] == {"CreateTrainingJob": 5000}
    assert world.set_faults(latency_ms=1)["response_latency_ms"] == {"CreateTrainingJob": 5000}  # None keeps
    settings = world.set_faults(response_latency_ms={"DescribeTrainingJob": 10, "StopTrainingJob": 0})
    assert settings["response_latency_ms"] == {"DescribeTrainingJob": 10, "StopTrainingJob": 0}
    assert world.set_faults(response_latency_ms={})["response_latency_ms"] == {}
    world.reset()  # restores the scenario's faults
    assert admin_http(world, "GET", "faults")[1]["response_latency_ms"] == {"CreateTrainingJob": 5000}
    assert world.clear_faults()["response_latency_ms"] == {}


def test_response_latency_over_the_admin_routes(world: OfflineSageMaker) -> None:
    remote = OfflineSageMaker.attach(world.endpoint_url)
    assert remote.set_faults(response_latency_ms={"CreateProcessingJob": 250})["response_latency_ms"] == {
        "CreateProcessingJob": 250
    }
    status, settings = admin_http(world, "POST", "faults", {"response_latency_ms": {"GetProducts": 1.5}})
    assert status == 200 and settings["response_latency_ms"] == {"GetProducts": 1.5}
    assert world.service.fault_settings()["response_latency_ms"] == {"GetProducts": 1.5}
    assert remote.stats()["in_flight"] == {}


def test_scenario_with_response_latency_round_trips() -> None:
    scenario = load_scenario({"faults": {"response_latency_ms": {"CreateTrainingJob": 5000}}})
    assert scenario.faults.response_latency_ms == {"CreateTrainingJob": 5000.0}
    assert load_scenario(scenario.as_dict()) == scenario


@pytest.mark.parametrize(
    ("latencies", "message"),
    [
        (
            {"CreateTrainingJobs": 5000},
            "faults.response_latency_ms.CreateTrainingJobs: unknown key (did you mean 'CreateTrainingJob'?)",
        ),
        ({"CreateTrainingJob": -1}, "faults.response_latency_ms.CreateTrainingJob: must be a number >= 0"),
        ({"CreateTrainingJob": "soon"}, "faults.response_latency_ms.CreateTrainingJob: must be a number"),
        ([5000], "faults.response_latency_ms: must be a mapping"),
    ],
)
def test_invalid_response_latency_in_a_scenario_names_the_key(
    world: OfflineSageMaker, latencies: Any, message: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario({"faults": {"response_latency_ms": latencies}})
    assert message in str(info.value)
    with pytest.raises(ScenarioError, match="faults.response_latency_ms"):
        world.load_scenario(frozen(faults={"response_latency_ms": latencies}))


@pytest.mark.parametrize(
    ("latencies", "message"),
    [
        ({"Describe": 10}, "response_latency_ms.Describe: not an emulated operation"),
        ({"CreateTrainingJob": -5}, "response_latency_ms.CreateTrainingJob: must be a number"),
        ({"CreateTrainingJob": True}, "response_latency_ms.CreateTrainingJob: must be a number"),
        ({"CreateTrainingJob": float("inf")}, "response_latency_ms.CreateTrainingJob: must be a number"),
    ],
)
def test_invalid_response_latency_in_set_faults_changes_nothing(
    world: OfflineSageMaker, latencies: dict[str, Any], message: str
) -> None:
    world.set_faults(response_latency_ms={"CreateTrainingJob": 100})
    with pytest.raises(ValueError, match=message):
        world.set_faults(latency_ms=7, response_latency_ms=latencies)
    with pytest.raises(ValueError, match=message):
        OfflineSageMaker.attach(world.endpoint_url).set_faults(response_latency_ms=latencies)
    settings = world.service.fault_settings()
    assert settings["response_latency_ms"] == {"CreateTrainingJob": 100} and settings["latency_ms"] == 0


def test_a_response_latency_that_is_not_a_mapping_answers_400(world: OfflineSageMaker) -> None:
    status, payload = admin_http(world, "POST", "faults", {"response_latency_ms": [1, 2]})
    assert status == 400
    assert payload["error"].startswith("response_latency_ms: must be a mapping")
