"""SageMaker's EventBridge events: a user's rule with an SQS target, at the emulator's endpoint, receives
every job state change in AWS's envelope, without anybody calling SageMaker in between (the pump)."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from emulator_support import processing_request, training_request

from offline_sagemaker import OfflineSageMaker, ScenarioError, load_scenario
from offline_sagemaker.eventbridge import EventPublisher
from offline_sagemaker.service import EmulatorService

TRAINING = "SageMaker Training Job State Change"
PROCESSING = "SageMaker Processing Job State Change"
START = 1_800_000_000
ISO_SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

#: 300 emulated seconds per real second: Starting 0.2 s, Pending until 1 s, the whole job in about 2 s.
#: Tests that need the job to meet the scarcity load :data:`FROZEN` and run the clock with :func:`run_job`.
SCARCE: dict[str, Any] = {
    "name": "events",
    "time_scale": 300,
    "start_epoch": START,
    "job_runtime_seconds": 120,
    "processing_runtime_seconds": 60,
    "phase_seconds": {"starting": 60, "downloading": 60, "uploading": 30, "stopping": 30},
    "capacity": {
        "ml.g6.48xlarge": [{"from": 0, "to": 300, "free": 0}, {"from": 300, "free": 2}],
        "ml.m5.xlarge": [{"from": 0, "to": 300, "free": 0}, {"from": 300, "free": 2}],
    },
}
#: SCARCE on a frozen clock: a job created right after loading it waits in Pending however busy the host is.
FROZEN: dict[str, Any] = {**SCARCE, "time_scale": 0}
#: Emulated seconds from a job's creation to its end in SCARCE (Pending until 300, then 60 + 120 + 30).
JOB_SECONDS = 600
TRAINING_STATES = [
    ("InProgress", "Starting"),
    ("InProgress", "Pending"),
    ("InProgress", "Downloading"),
    ("InProgress", "Training"),
    ("InProgress", "Uploading"),
    ("Completed", "Completed"),
]
_names = itertools.count(1)


@pytest.fixture(scope="module")
def sm() -> Iterator[OfflineSageMaker]:
    with OfflineSageMaker(scenario=SCARCE) as server:
        yield server


@pytest.fixture(scope="module")
def clients(sm: OfflineSageMaker) -> dict[str, Any]:
    return {name: sm.boto3_client(name) for name in ("sagemaker", "sqs", "events")}


@pytest.fixture
def subscribe(clients: dict[str, Any]) -> Iterator[Callable[..., str]]:
    """``subscribe(detail_type, job_name, state="ENABLED")``: a queue and a rule sending ``detail_type``
    events of the job ``job_name`` to it; the queue URL. Rules a reset has not removed are removed afterwards
    (moto's backends outlive the module). Call it after loading the test's scenario: the reset clears moto.

    The rule names its job, as a rule in a shared account does: moto's EventBridge and SQS are process-wide,
    so the other emulators of this test process (the session's, with jobs of earlier tests still running)
    deliver to the same default bus."""
    events, sqs = clients["events"], clients["sqs"]
    rules: list[str] = []

    def make(detail_type: str, job_name: str, state: str = "ENABLED") -> str:
        name = f"sm-events-{next(_names)}-{uuid.uuid4().hex[:6]}"
        url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        pattern = {
            "source": ["aws.sagemaker"],
            "detail-type": [detail_type],
            # Either name field: only the detail-type keeps a processing job's events from a training rule.
            "detail": {"$or": [{"TrainingJobName": [job_name]}, {"ProcessingJobName": [job_name]}]},
        }
        events.put_rule(Name=name, EventPattern=json.dumps(pattern), State=state)
        events.put_targets(Rule=name, Targets=[{"Id": "queue", "Arn": arn}])
        rules.append(name)
        return url

    yield make
    for name in rules:
        with contextlib.suppress(events.exceptions.ResourceNotFoundException):
            events.remove_targets(Rule=name, Ids=["queue"])
        events.delete_rule(Name=name)


def receive(sqs: Any, url: str, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Long-poll ``url`` until ``count`` messages arrived (or ``timeout``); the parsed bodies in order."""
    bodies: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(bodies) < count and time.monotonic() < deadline:
        answer = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1, MaxNumberOfMessages=10)
        bodies.extend(json.loads(m["Body"]) for m in answer.get("Messages", []))
    return bodies


def nothing_more(sqs: Any, url: str) -> bool:
    return not sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages")


def states(bodies: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(b["detail"]["TrainingJobStatus"], b["detail"]["SecondaryStatus"]) for b in bodies]


def wait_done(sm: OfflineSageMaker, name: str, timeout: float = 10.0) -> None:
    """Until the job is terminal (admin view, not a SageMaker call)."""
    deadline = time.monotonic() + timeout
    while sm.job(name)["status"] not in ("Completed", "Failed", "Stopped"):
        assert time.monotonic() < deadline, sm.job(name)
        time.sleep(0.1)


def create_training(sm: OfflineSageMaker, clients: dict[str, Any], name: str) -> None:
    clients["sagemaker"].create_training_job(
        **training_request(name, instance_type="ml.g6.48xlarge", count=1)
    )


def run_job(sm: OfflineSageMaker, step: float = 30.0) -> None:
    """Move the frozen clock through a job's whole life, ``step`` emulated seconds per pump tick (as
    SCARCE's time scale would), with no SageMaker call: the pump advances the world and delivers."""
    for _ in range(int(JOB_SECONDS / step)):
        sm.advance(step)
        time.sleep(0.1)


# ------------------------------------------------------------------------------------------ delivery


def test_a_waiting_training_job_sends_every_change_to_the_rule_without_sagemaker_calls(
    sm: OfflineSageMaker, clients: dict[str, Any], subscribe: Callable[..., str]
) -> None:
    sm.load_scenario(FROZEN)
    url = subscribe(TRAINING, "evented")
    create_training(sm, clients, "evented")
    run_job(sm)

    bodies = receive(clients["sqs"], url, len(TRAINING_STATES))

    # Only the Create reached SageMaker: the pump advanced the world and delivered.
    assert sm.stats()["operations"] == {"CreateTrainingJob": 1}
    assert states(bodies) == TRAINING_STATES
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/evented"
    for body in bodies:
        assert set(body) == {
            "version",
            "id",
            "detail-type",
            "source",
            "account",
            "time",
            "region",
            "resources",
            "detail",
        }
        assert body["version"] == "0" and uuid.UUID(body["id"]).version == 4
        assert body["detail-type"] == TRAINING and body["source"] == "aws.sagemaker"
        assert (body["account"], body["region"], body["resources"]) == ("123456789012", "us-east-1", [arn])
        detail = body["detail"]
        assert detail["TrainingJobName"] == "evented" and detail["TrainingJobArn"] == arn
        assert detail["ResourceConfig"]["InstanceType"] == "ml.g6.48xlarge"
        # The envelope's time is the change's emulated time; the detail's timestamps are epoch ms.
        assert ISO_SECONDS.match(body["time"])
        modified = detail["LastModifiedTime"]
        assert isinstance(modified, int) and isinstance(detail["CreationTime"], int)
        assert body["time"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(modified // 1000))
        # Rendered at the change: the transitions end with the event's own secondary status.
        assert detail["SecondaryStatusTransitions"][-1]["Status"] == detail["SecondaryStatus"]
        assert detail["SecondaryStatusTransitions"][-1]["StartTime"] == modified
    assert len({b["id"] for b in bodies}) == len(bodies)
    assert "TrainingStartTime" not in bodies[1]["detail"] and "TrainingStartTime" in bodies[2]["detail"]
    assert bodies[-1]["detail"]["ModelArtifacts"]["S3ModelArtifacts"].endswith("/evented/output/model.tar.gz")
    assert nothing_more(clients["sqs"], url)
    counts = sm.stats()["events"]
    assert counts == {"emitted": 6, "delivered": 6, "lost": 0, "duplicated": 0, "pending": 0}


def test_processing_events_go_to_a_processing_rule_and_not_to_a_training_rule(
    sm: OfflineSageMaker, clients: dict[str, Any], subscribe: Callable[..., str]
) -> None:
    sm.load_scenario(FROZEN)
    training_url = subscribe(TRAINING, "evented-proc")
    processing_url = subscribe(PROCESSING, "evented-proc")
    clients["sagemaker"].create_processing_job(
        **processing_request("evented-proc", instance_type="ml.m5.xlarge", count=1)
    )
    run_job(sm)

    bodies = receive(clients["sqs"], processing_url, 4)

    assert [b["detail-type"] for b in bodies] == [PROCESSING] * 4
    assert [b["detail"]["ProcessingJobStatus"] for b in bodies] == ["InProgress"] * 3 + ["Completed"]
    # Starting, waiting for capacity, running, completed: the timeline, one event per entry.
    assert [e["message"] for e in sm.job("evented-proc")["timeline"]] == [
        "Starting the processing job",
        "Waiting for compute capacity",
        "Running on 1 x ml.m5.xlarge",
        "Processing job completed",
    ]
    assert ["ProcessingStartTime" in b["detail"] for b in bodies] == [False, False, True, True]
    assert bodies[0]["resources"] == [bodies[0]["detail"]["ProcessingJobArn"]]
    assert bodies[0]["detail"]["ProcessingResources"]["ClusterConfig"]["InstanceType"] == "ml.m5.xlarge"
    assert isinstance(bodies[-1]["detail"]["ProcessingEndTime"], int)
    assert nothing_more(clients["sqs"], training_url)


def test_a_disabled_rule_gets_nothing(
    sm: OfflineSageMaker, clients: dict[str, Any], subscribe: Callable[..., str]
) -> None:
    sm.load_scenario(FROZEN)
    disabled = subscribe(TRAINING, "evented-disabled", state="DISABLED")
    enabled = subscribe(TRAINING, "evented-disabled")
    create_training(sm, clients, "evented-disabled")
    run_job(sm)
    assert len(receive(clients["sqs"], enabled, len(TRAINING_STATES))) == len(TRAINING_STATES)
    assert nothing_more(clients["sqs"], disabled)


# ------------------------------------------------------------------------------------------- knobs


def test_loss_rate_one_delivers_nothing(
    sm: OfflineSageMaker, clients: dict[str, Any], subscribe: Callable[..., str]
) -> None:
    sm.load_scenario({**FROZEN, "events": {"loss_rate": 1}})
    url = subscribe(TRAINING, "evented-lost")
    create_training(sm, clients, "evented-lost")
    run_job(sm)
    wait_done(sm, "evented-lost")
    assert nothing_more(clients["sqs"], url)
    assert sm.stats()["events"] == {"emitted": 6, "delivered": 0, "lost": 6, "duplicated": 0, "pending": 0}


def test_duplicate_rate_one_delivers_each_event_twice_with_the_same_id(
    sm: OfflineSageMaker, clients: dict[str, Any], subscribe: Callable[..., str]
) -> None:
    sm.load_scenario(FROZEN)
    url = subscribe(TRAINING, "evented-twice")
    assert sm.set_events(duplicate_rate=1)["duplicate_rate"] == 1
    create_training(sm, clients, "evented-twice")
    run_job(sm)

    bodies = receive(clients["sqs"], url, 2 * len(TRAINING_STATES))

    assert states(bodies) == [state for state in TRAINING_STATES for _ in range(2)]
    assert all(first == second for first, second in zip(bodies[::2], bodies[1::2], strict=True))
    assert len({b["id"] for b in bodies}) == len(TRAINING_STATES)
    assert sm.stats()["events"]["duplicated"] == len(TRAINING_STATES)


def test_delay_seconds_holds_each_event_back(
    sm: OfflineSageMaker, clients: dict[str, Any], subscribe: Callable[..., str]
) -> None:
    sm.load_scenario({**SCARCE, "events": {"delay_seconds": 1.5}})
    url = subscribe(TRAINING, "evented-late")
    started = time.monotonic()
    create_training(sm, clients, "evented-late")

    first = receive(clients["sqs"], url, 1)
    waited = time.monotonic() - started

    assert states(first) == TRAINING_STATES[:1]
    assert waited >= 1.5


def test_events_can_be_turned_off_and_changed_over_http(
    sm: OfflineSageMaker, clients: dict[str, Any], subscribe: Callable[..., str]
) -> None:
    sm.load_scenario(SCARCE)
    url = subscribe(TRAINING, "evented-off")
    remote = OfflineSageMaker.attach(sm.endpoint_url)
    assert remote.set_events(enabled=False) == {
        "enabled": False,
        "delay_seconds": 0.0,
        "loss_rate": 0.0,
        "duplicate_rate": 0.0,
    }
    create_training(sm, clients, "evented-off")
    wait_done(sm, "evented-off")
    assert nothing_more(clients["sqs"], url)
    assert sm.stats()["events"]["emitted"] == 0
    with pytest.raises(ValueError, match="loss_rate: must be a probability between 0 and 1"):
        remote.set_events(loss_rate=2)
    with pytest.raises(ValueError, match="loss: unknown event setting"):
        remote._call("POST", "events", {"loss": 1})
    assert remote.event_settings()["enabled"] is False
    sm.reset()  # back to the scenario's settings
    assert sm.event_settings()["enabled"] is True


# ------------------------------------------------------------------------------------- scenario keys


def test_scenario_events_are_validated_and_round_trip() -> None:
    scenario = load_scenario(
        {"seed": 3, "events": {"delay_seconds": 2, "loss_rate": 0.1, "duplicate_rate": 0.5, "enabled": True}}
    )
    assert scenario.events.as_dict() == {
        "enabled": True,
        "delay_seconds": 2.0,
        "loss_rate": 0.1,
        "duplicate_rate": 0.5,
    }
    assert load_scenario(scenario.as_dict()) == scenario
    for bad, message in [
        ({"loss_rate": 1.5}, "events.loss_rate: must be a probability between 0 and 1"),
        ({"delay_seconds": -1}, "events.delay_seconds: must be a number >= 0"),
        ({"enabled": "yes"}, "events.enabled: must be true or false"),
        ({"dup_rate": 1}, "events.dup_rate: unknown key (did you mean 'duplicate_rate'?)"),
    ]:
        with pytest.raises(ScenarioError, match=re.escape(message)):
            load_scenario({"events": bad})


def test_loss_and_duplicates_follow_the_seed() -> None:
    def outcome(seed: int) -> tuple[list[str], dict[str, int]]:
        scenario = {
            **SCARCE,
            "time_scale": 0,
            "seed": seed,
            "events": {"loss_rate": 0.3, "duplicate_rate": 0.3},
        }
        service = EmulatorService(scenario, publish_events=True)
        for index in range(10):
            service.api.call(
                "CreateTrainingJob", training_request(f"s{index}", instance_type="ml.g5.48xlarge", count=1)
            )
        service.advance(600)
        with service.lock:
            taken = service.events.take_due()
        return [envelope["id"] for envelope, _ in taken], service.stats()["events"]

    assert outcome(7) == outcome(7)
    assert outcome(7)[0] != outcome(8)[0]


# ----------------------------------------------------------------------------------------- the pump


def test_the_pump_stays_cheap_with_ten_thousand_jobs_waiting() -> None:
    # An account of its own: rules other tests left on moto's default bus (shared by the process) must
    # not turn this into a measure of moto's SQS.
    scenario = {**SCARCE, "time_scale": 0, "capacity": {"ml.g6.48xlarge": 0}, "account_id": "000011112222"}
    service = EmulatorService(scenario, publish_events=True)
    with service.lock:
        for index in range(10_000):
            service.api.call(
                "CreateTrainingJob",
                training_request(f"wait-{index}", instance_type="ml.g6.48xlarge", count=1),
            )
        service.engine.advance(120)
    assert {job.secondary_status for job in service.engine.jobs()} == {"Pending"}
    assert service.pump_events() == 20_000  # Starting and Pending of each (no rules: nothing to send)

    # This thread's CPU time, not the wall clock: a busy host that leaves the thread waiting for a core
    # does not make a tick look expensive.
    started = time.thread_time()
    for _ in range(100):
        assert service.pump_events() == 0
    per_tick = (time.thread_time() - started) / 100
    assert per_tick < 0.002, f"{per_tick * 1000:.2f} ms per tick"


def test_a_stopped_server_stops_its_pump() -> None:
    server = OfflineSageMaker(scenario=SCARCE).start()
    pump = server._pump
    assert pump is not None
    server.stop()
    assert server._pump is None and pump._thread is None


def test_the_envelope_is_rendered_at_the_change() -> None:
    """A later change of the job does not alter an event already queued."""
    service = EmulatorService({**SCARCE, "time_scale": 0}, publish_events=True)
    service.api.call("CreateTrainingJob", training_request("snap", instance_type="ml.g5.48xlarge", count=1))
    service.advance(3600)
    with service.lock:
        taken = [envelope for envelope, _ in service.events.take_due()]
    assert [e["detail"]["SecondaryStatus"] for e in taken] == [
        s for _, s in TRAINING_STATES if s != "Pending"
    ]
    assert [len(e["detail"]["SecondaryStatusTransitions"]) for e in taken] == [1, 2, 3, 4, 5]
    assert taken[0]["time"] == "2027-01-15T08:00:00Z"
    assert isinstance(service.events, EventPublisher)
