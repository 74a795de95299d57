"""Event mode against the offline SageMaker's SQS: real aiobotocore HTTP, real queues.

The events here are put on the queue by the test in EventBridge's envelope (what a rule with an SQS
target delivers), so each test decides exactly which event arrives when; the emulator's own events are
tested end to end in offline-sagemaker/tests/test_emulator_events.py and tests/triggers/test_event_mode_emulated.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from aiobotocore.session import get_session

from airflow_provider_sm_prefs.domain.event_detail import EventOrigin
from airflow_provider_sm_prefs.domain.events import event_from_describe
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.domain.status import phase_of
from airflow_provider_sm_prefs.triggers import eventbridge_queue
from airflow_provider_sm_prefs.triggers import watcher as watcher_module
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger, creation_time_of
from airflow_provider_sm_prefs.triggers.eventbridge_messages import parse_event
from airflow_provider_sm_prefs.triggers.eventbridge_mode import (
    EventDetail,
    configured_queue_url,
    event_detail,
)
from airflow_provider_sm_prefs.triggers.eventbridge_queue import EventQueueConsumer
from harness.iam import recording_calls
from offline_sagemaker.jobs import training_config

G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"
PREFS = [{"instance_type": G6, "instance_count": 2}, {"instance_type": G5, "instance_count": 4}]
TRAINING = "SageMaker Training Job State Change"
G5_FREE_AT = 5000


def envelope(
    detail_type: str,
    detail: dict[str, Any],
    event_id: str | None = None,
    *,
    account: str = "123456789012",
    region: str = "us-east-1",
    resources: list[str] | None = None,
) -> str:
    """An EventBridge message as SageMaker's rule delivers it: ``resources`` names the job's ARN."""
    arns = [v for k, v in detail.items() if k.endswith("JobArn")]
    return json.dumps(
        {
            "version": "0",
            "id": event_id or str(uuid.uuid4()),
            "detail-type": detail_type,
            "source": "aws.sagemaker",
            "account": account,
            "time": "2026-12-01T02:00:00Z",
            "region": region,
            "resources": arns if resources is None else resources,
            "detail": detail,
        }
    )


def as_detail(describe: dict[str, Any]) -> dict[str, Any]:
    """A Describe response as an event's detail carries it (timestamps as epoch milliseconds)."""

    def plain(value: Any) -> Any:
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if k != "ResponseMetadata"}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    result: dict[str, Any] = plain(describe)
    return result


def new_queue(sm: Any) -> str:
    url: str = sm.boto3_client("sqs").create_queue(QueueName=f"sm-events-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    return url


def queue_counts(sqs: Any, url: str) -> tuple[int, int, int]:
    """Messages visible, delayed and in flight (received, not deleted)."""
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesDelayed",
        "ApproximateNumberOfMessagesNotVisible",
    ]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    visible, delayed, in_flight = (int(attributes[name]) for name in names)
    return visible, delayed, in_flight


def events_left(sm: Any, url: str) -> list[str]:
    """Job names of the events still on the queue, once nobody reads it.

    Reads until every message on the queue is one this reads and holds: none visible, none delayed, none
    held by a consumer that stopped before deleting it.
    """
    sqs = sm.boto3_client("sqs")
    left: list[str] = []
    held = 0
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        answer = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=int(DEADLINE) + 60
        )
        messages = answer.get("Messages", [])
        held += len(messages)
        events = [parse_event(m["Body"]) for m in messages]
        left.extend(e.job_name for e in events if e is not None)
        if not messages and queue_counts(sqs, url) == (0, 0, held):
            return left
    raise AssertionError(f"the queue never settled: {queue_counts(sqs, url)}, {held} held by the test")


def drained(sqs: Any, url: str) -> bool:
    """Nothing on the queue: the consumers' deletes are done (a consumer stopped in the middle of one
    would leave its messages to come back after their visibility timeout)."""
    return queue_counts(sqs, url) == (0, 0, 0)


def sqs_opener(sm: Any) -> Callable[[], Any]:
    async def opener() -> Any:
        return get_session().create_client(
            "sqs",
            endpoint_url=sm.endpoint_url,
            region_name=sm.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    return opener


def pending_job(sm: Any, name: str) -> dict[str, Any]:
    """A training job Pending on a frozen clock; G5 frees at G5_FREE_AT emulated seconds."""
    client = sm.boto3_client("sagemaker")
    request, _ = build_request("training", training_config(name, max_runtime_seconds=86400), PREFS, 86400)
    client.create_training_job(**request)
    sm.advance(120)
    describe: dict[str, Any] = client.describe_training_job(TrainingJobName=name)
    assert describe["SecondaryStatus"] == "Pending"
    return describe


FROZEN = {
    "time_scale": 0,
    "job_runtime_seconds": 86400,
    "phase_seconds": {"starting": 60, "downloading": 60, "uploading": 30, "stopping": 30},
    "capacity": {
        G6: [{"from": 0, "free": 0}],
        G5: [{"from": 0, "to": G5_FREE_AT, "free": 0}, {"from": G5_FREE_AT, "free": 8}],
    },
}


#: Real seconds a condition may take on a loaded host before a test gives up; never a measure.
DEADLINE = 180.0


async def wait_until(predicate: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.fixture(autouse=True)
def _fresh_consumers() -> Any:
    yield
    eventbridge_queue._CONSUMERS.clear()


# ----------------------------------------------------------------------------------------- parsing


def test_parse_event_reads_sagemaker_job_events_only() -> None:
    event = parse_event(
        envelope(TRAINING, {"TrainingJobName": "a", "TrainingJobStatus": "InProgress"}, "e-1")
    )
    assert event is not None
    assert (event.kind, event.job_name, event.event_id) == (JobKind.TRAINING, "a", "e-1")
    processing = parse_event(envelope("SageMaker Processing Job State Change", {"ProcessingJobName": "p"}))
    assert processing is not None and processing.kind is JobKind.PROCESSING
    assert parse_event("not json") is None
    assert parse_event(json.dumps({"source": "aws.ec2", "detail-type": TRAINING, "detail": {}})) is None
    assert parse_event(envelope("SageMaker Endpoint State Change", {"EndpointName": "e"})) is None
    assert parse_event(envelope(TRAINING, {"TrainingJobStatus": "InProgress"})) is None
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/a"
    found = parse_event(envelope(TRAINING, {"TrainingJobName": "a", "TrainingJobArn": arn}))
    assert found is not None and found.origin == EventOrigin("123456789012", "us-east-1", (arn,))
    bare = json.loads(envelope(TRAINING, {"TrainingJobName": "a"}))
    del bare["account"]
    found = parse_event(json.dumps(bare))
    assert found is not None and found.origin is None


def test_the_queue_comes_from_the_connection_extra_else_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_QUEUE_URL", "https://sqs/q-config")
    assert configured_queue_url(None) == "https://sqs/q-config"
    assert configured_queue_url({"endpoint_url": "x"}) == "https://sqs/q-config"
    assert configured_queue_url({"sm_prefs_event_queue_url": "https://sqs/q-conn"}) == "https://sqs/q-conn"
    assert configured_queue_url({"sm_prefs_event_queue_url": ""}) is None  # off for this connection
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_QUEUE_URL", "")
    assert configured_queue_url({}) is None


def test_a_queue_serves_the_waits_of_its_connections_region_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule feeding the queue sees its own region's events: a job moved to another region is polled."""
    from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings
    from airflow_provider_sm_prefs.triggers import eventbridge_mode

    conn = {
        "conn_type": "aws",
        "extra": {"region_name": "us-east-1", "sm_prefs_event_queue_url": "https://sqs/q"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_EVENTED_EAST", json.dumps(conn))
    home = AwsSettings(aws_conn_id="evented_east")
    moved = AwsSettings(aws_conn_id="evented_east", region_name="us-west-2")
    assert eventbridge_mode._connection(moved) == (
        {"region_name": "us-east-1", "sm_prefs_event_queue_url": "https://sqs/q"},
        "us-east-1",
    )
    assert eventbridge_mode.queue_serves(home, "us-east-1")
    assert eventbridge_mode.queue_serves(
        AwsSettings(aws_conn_id="evented_east", region_name="us-east-1"), "us-east-1"
    )
    assert not eventbridge_mode.queue_serves(moved, "us-east-1")
    assert eventbridge_mode.queue_serves(moved, None)  # a connection without a region: taken to match
    assert asyncio.run(eventbridge_mode.event_mode_for(moved)) is None


# ------------------------------------------------------------------------------ consumer, real SQS


def test_event_detail_is_data_unless_set_to_hint_and_a_wrong_value_names_the_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AIRFLOW__SM_PREFS__EVENT_DETAIL", raising=False)
    assert event_detail() is EventDetail.DATA
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_DETAIL", " Hint ")
    assert event_detail() is EventDetail.HINT
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_DETAIL", "trust")
    with pytest.raises(ValueError, match=r"\[sm_prefs\] event_detail: 'trust' is not one of data, hint"):
        event_detail()


def test_a_watched_jobs_event_wakes_it_and_is_deleted_a_duplicate_too(sm: Any) -> None:
    url = new_queue(sm)
    sqs = sm.boto3_client("sqs")

    async def main() -> tuple[list[dict[str, Any]], EventQueueConsumer]:
        consumer = EventQueueConsumer(("t", url), sqs_opener(sm), url)
        got: list[dict[str, Any]] = []
        unsubscribe = consumer.subscribe(JobKind.TRAINING, "job-a", lambda event: got.append(event.detail))
        await wait_until(lambda: consumer.healthy, "the first receive")
        body = envelope(TRAINING, {"TrainingJobName": "job-a", "SecondaryStatus": "Downloading"}, "dup-1")
        sqs.send_message(QueueUrl=url, MessageBody=body)
        sqs.send_message(QueueUrl=url, MessageBody=body)  # EventBridge may deliver an event twice
        # At least the second copy; on a loaded host SQS may hand a copy back again after its visibility
        # timeout, which is one more duplicate, never a second wake.
        await wait_until(lambda: consumer.stats.duplicates >= 1, "both copies")
        unsubscribe()
        await wait_until(lambda: drained(sqs, url), "every handled message deleted")
        return got, consumer

    got, consumer = asyncio.run(main())
    assert got == [{"TrainingJobName": "job-a", "SecondaryStatus": "Downloading"}]
    assert consumer.stats.woke == 1 and consumer.stats.passed == 0
    assert events_left(sm, url) == []


def heard_of_each_other(sqs: Any, url: str, consumers: list[EventQueueConsumer]) -> list[str]:
    """Send events nobody watches until every consumer has heard of a peer (a receive it did not make:
    each alone releases one every PROBE_EVERY); returns their job names."""
    warm: list[str] = []
    deadline = time.monotonic() + DEADLINE
    while not all(c.has_peers() for c in consumers):
        assert time.monotonic() < deadline, "the consumers never heard of each other"
        warm.append(f"warm-{len(warm)}")
        sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, {"TrainingJobName": warm[-1]}))
        time.sleep(0.5)
    return warm


def test_two_consumers_of_one_queue_each_get_the_events_of_their_own_jobs(sm: Any) -> None:
    """Two consumers, each in its own thread and event loop (as two triggerers), 10 jobs each.

    Once they have heard of each other (through the receive counts of events nobody watches), every
    event reaches the consumer watching its job, whichever consumer SQS hands it to first; the events
    nobody watches are dropped after VISITS receives.
    """
    url = new_queue(sm)
    sqs = sm.boto3_client("sqs")
    jobs = {"a": [f"a-{i}" for i in range(10)], "b": [f"b-{i}" for i in range(10)]}
    consumers = {side: EventQueueConsumer((side, url), sqs_opener(sm), url) for side in jobs}
    woke: dict[str, set[str]] = {side: set() for side in jobs}
    ready = threading.Barrier(3)

    def side(name: str) -> None:
        async def main() -> None:
            consumer = consumers[name]
            for job in jobs[name]:
                consumer.subscribe(
                    JobKind.TRAINING,
                    job,
                    lambda e: woke[name].add(e.detail["TrainingJobName"]),
                )
            await asyncio.to_thread(ready.wait, DEADLINE)
            await wait_until(lambda: len(woke[name]) == 10, f"{name}'s events")
            # The events of nobody's job ("x-*", "warm-*") go round until SQS handed them out VISITS times.
            await wait_until(
                lambda: sum(c.stats.expired for c in consumers.values()) >= 10 + len(warm), "x-* dropped"
            )
            await wait_until(lambda: drained(sqs, url), "every handled message deleted")
            consumer._task.cancel()  # type: ignore[union-attr]

        asyncio.run(main())

    threads = [threading.Thread(target=side, args=(name,)) for name in jobs]
    for thread in threads:
        thread.start()
    warm = heard_of_each_other(sqs, url, list(consumers.values()))
    ready.wait(DEADLINE)
    for a, b in zip(jobs["a"], jobs["b"], strict=True):
        for name in (b, a, f"x-{a}"):
            sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, {"TrainingJobName": name}))
    for thread in threads:
        thread.join(2 * DEADLINE)
    assert {s: sorted(w) for s, w in woke.items()} == {s: sorted(n) for s, n in jobs.items()}, {
        name: consumer.stats for name, consumer in consumers.items()
    }
    # Every watched event reached its watcher, and only nobody's events were dropped at the horizon:
    # none was left to the safety passes (an event goes round at most until HORIZON, then is dropped).
    stats = {name: consumer.stats for name, consumer in consumers.items()}
    assert sum(s.woke for s in stats.values()) == 20
    assert sum(s.expired for s in stats.values()) == 10 + len(warm)  # nobody's events, each dropped once
    assert events_left(sm, url) == []


def test_alone_an_event_nobody_watches_is_released_once_then_dropped(sm: Any) -> None:
    """Released once (a peer might watch it); back with no receive but this consumer's, it is dropped."""
    url = new_queue(sm)
    sqs = sm.boto3_client("sqs")

    async def main() -> EventQueueConsumer:
        consumer = EventQueueConsumer(("alone", url), sqs_opener(sm), url)
        consumer.subscribe(JobKind.TRAINING, "watched", lambda e: None)
        await wait_until(lambda: consumer.healthy, "the first receive")
        sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, {"TrainingJobName": "someone-elses"}))
        sqs.send_message(QueueUrl=url, MessageBody="not an event")
        await wait_until(lambda: consumer.stats.expired == 1 and consumer.stats.foreign == 1, "both")
        await wait_until(lambda: drained(sqs, url), "every handled message deleted")
        return consumer

    consumer = asyncio.run(main())
    assert consumer.stats.passed == 1 and consumer.stats.woke == 0 and consumer.stats.peers_heard == 0
    assert events_left(sm, url) == []


def test_an_event_another_consumer_received_too_is_released_until_the_horizon(
    sm: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A peer that received an event and then stopped reading: its receive is heard of (SQS's receive
    count), so the event goes round until HORIZON rather than being dropped at its first return."""
    monkeypatch.setattr(eventbridge_queue, "HORIZON", 4.0)
    monkeypatch.setattr(eventbridge_queue, "VISITS", 1000)
    url = new_queue(sm)
    sqs = sm.boto3_client("sqs")

    async def main() -> EventQueueConsumer:
        sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, {"TrainingJobName": "ghosts-job"}))
        # The ghost receives it and goes away without a word (its visibility timeout ends at once).
        ghost = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, VisibilityTimeout=0)
        assert len(ghost.get("Messages", [])) == 1
        consumer = EventQueueConsumer(("left", url), sqs_opener(sm), url)
        consumer.subscribe(JobKind.TRAINING, "watched", lambda e: None)
        await wait_until(lambda: consumer.stats.expired == 1, "the horizon")
        return consumer

    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger=eventbridge_queue.__name__):
        consumer = asyncio.run(main())
    assert consumer.stats.peers_heard == 1
    # Said once, when the peer was first heard of (an operator can tell the queue is shared).
    assert [r.getMessage() for r in caplog.records if "Another consumer" in r.getMessage()] == [
        f"Another consumer reads the event queue {url}: events about jobs not watched here are handed on to it"
    ]
    assert consumer.stats.passed >= 2  # at once, then again after each return, ... until HORIZON
    assert time.monotonic() - started >= 4.0


def test_no_consumer_sends_to_the_queue(sm: Any) -> None:
    """Only the EventBridge rule may send (docs/iam-event-queue-policy.json): two consumers that hand
    each other's events on release them instead."""
    url = new_queue(sm)
    sqs = sm.boto3_client("sqs")

    async def main() -> int:
        consumers = [EventQueueConsumer((name, url), sqs_opener(sm), url) for name in ("a", "b")]
        woke: dict[str, list[str]] = {"a": [], "b": []}
        for name, consumer in zip(("a", "b"), consumers, strict=True):
            consumer.subscribe(
                JobKind.TRAINING, f"{name}-job", lambda e, n=name: woke[n].append(e.detail["TrainingJobName"])
            )
        await wait_until(lambda: all(c.healthy for c in consumers), "both reading")
        warm = await asyncio.to_thread(heard_of_each_other, sqs, url, consumers)
        for name in ("a", "b", "a", "b"):
            sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, {"TrainingJobName": f"{name}-job"}))
        await wait_until(lambda: woke == {"a": ["a-job"] * 2, "b": ["b-job"] * 2}, "each its own events")
        for consumer in consumers:
            consumer._task.cancel()  # type: ignore[union-attr]
        return len(warm)

    # Every botocore and aiobotocore call of this process: the consumers' and the test's own sends.
    with recording_calls() as calls:
        warm = asyncio.run(main())
    made = Counter(call.operation for call in calls if call.service == "sqs")
    assert made["SendMessage"] == 4 + warm and made["SendMessageBatch"] == 0  # the test's own sends only
    assert made["ChangeMessageVisibilityBatch"] > 0 and made["DeleteMessageBatch"] > 0


# ------------------------------------------------------------------------------ triggers, event mode


#: The safety List cadence of event mode in the tests below: far longer than any test waits, so a
#: trigger that reports within :data:`DEADLINE` was woken by an event or by a pass at the usual cadence.
SAFETY_LIST_SECONDS = "3600"


def run_trigger(
    sm: Any, name: str, describe: dict[str, Any], steps: Callable[[SageMakerCapacityTrigger], Any]
) -> dict[str, Any]:
    """Run the trigger with ``steps(trigger)`` alongside; returns its event."""

    async def main() -> dict[str, Any]:
        trig = SageMakerCapacityTrigger(
            job_name=name, preferences=PREFS, poll_interval=0.2, creation_time=creation_time_of(describe)
        )

        async def first() -> dict[str, Any]:
            async for event in trig.run():
                return dict(event.payload)
            raise AssertionError("no event")

        task = asyncio.create_task(first())
        await steps(trig)
        return await asyncio.wait_for(task, DEADLINE)

    return asyncio.run(main())


def consumer_of(url: str) -> EventQueueConsumer:
    """The process's consumer of ``url`` (while its loop runs)."""
    found = [c for c in eventbridge_queue._CONSUMERS.values() if c.queue_url == url]
    assert len(found) == 1
    return found[0]


def test_in_event_mode_an_events_detail_ends_the_wait_without_a_describe_and_listing_slows_down(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm.load_scenario(FROZEN)
    url = new_queue(sm)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_QUEUE_URL", url)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_SAFETY_LIST_SECONDS", SAFETY_LIST_SECONDS)
    describe = pending_job(sm, "ev-1")
    sqs = sm.boto3_client("sqs")
    listed_before: list[int] = []

    async def steps(trig: SageMakerCapacityTrigger) -> None:
        await wait_until(lambda: any(c.healthy for c in eventbridge_queue._CONSUMERS.values()), "event mode")
        # The first (early) List pass, however long it takes on a busy host; then only safety passes.
        await wait_until(
            lambda: sm.stats()["operations"].get("ListTrainingJobs", 0) > 0, "the first List pass"
        )
        sm.advance(G5_FREE_AT)  # the job gets capacity: only an event can tell the trigger now
        listed_before.append(sm.stats()["operations"].get("ListTrainingJobs", 0))
        await asyncio.sleep(2.0)  # ten List passes at poll_interval=0.2, had it applied
        now = sm.boto3_client("sagemaker").describe_training_job(TrainingJobName="ev-1")
        details.append(now)
        described.append(sm.stats()["jobs"]["ev-1"]["DescribeTrainingJob"])
        consumers.append(consumer_of(url))
        sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, as_detail(now)))

    details: list[dict[str, Any]] = []
    described: list[int] = []
    consumers: list[EventQueueConsumer] = []
    event = run_trigger(sm, "ev-1", describe, steps)
    assert event["status"] == "success", event
    # The outcome a Describe gives, read off the event's detail.
    expected = event_from_describe(
        JobKind.TRAINING,
        "capacity",
        details[0],
        phase_of(JobKind.TRAINING, details[0]),
        now=details[0]["LastModifiedTime"],
    )
    assert event["outcome"] == expected.outcome
    assert event["outcome"]["selected_instance_type"] == G5
    # No List pass from the capacity to the event: the safety cadence applies, and the event woke it.
    assert sm.stats()["operations"]["ListTrainingJobs"] == listed_before[0]
    # The trigger did not Describe the job: the detail was newer than the listed summary and complete.
    assert sm.stats()["jobs"]["ev-1"]["DescribeTrainingJob"] == described[0]
    assert consumers[0].stats.woke == 1


def wait_in_event_mode(
    sm: Any, monkeypatch: pytest.MonkeyPatch, name: str
) -> tuple[str, dict[str, Any], Callable[[], int]]:
    """A Pending job and event mode on a new queue, safety passes far apart: the queue, the job's
    Describe, and the count of its Describes so far."""
    sm.load_scenario(FROZEN)
    url = new_queue(sm)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_QUEUE_URL", url)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_SAFETY_LIST_SECONDS", SAFETY_LIST_SECONDS)
    describe = pending_job(sm, name)
    return url, describe, lambda: int(sm.stats()["jobs"][name].get("DescribeTrainingJob", 0))


async def listed_and_reading(sm: Any, url: str) -> EventQueueConsumer:
    """The first List pass has seen the job (the wait knows where it stands) and the queue is read."""
    await wait_until(lambda: any(c.healthy for c in eventbridge_queue._CONSUMERS.values()), "event mode")
    await wait_until(lambda: sm.stats()["operations"].get("ListTrainingJobs", 0) > 0, "the first List pass")
    return consumer_of(url)


def selected_detail(describe: dict[str, Any], modified: datetime) -> dict[str, Any]:
    """``describe`` (Pending) as the detail of an event saying G5 was selected, last modified at ``modified``."""
    detail = as_detail(describe)
    detail["SecondaryStatus"] = "Downloading"
    detail["ResourceConfig"] = {
        **detail["ResourceConfig"],
        "SelectedInstanceType": G5,
        "SelectedInstanceCount": 4,
    }
    detail["LastModifiedTime"] = int(modified.timestamp() * 1000)
    return detail


def test_in_event_mode_a_late_event_older_than_what_the_wait_saw_is_described_not_trusted(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event claiming a selection, older than the summary the wait listed, and one about another job:
    neither ends the wait. The late one costs a Describe (which shows the job still Pending); then the
    real selection's event ends it from its detail."""
    url, describe, describes = wait_in_event_mode(sm, monkeypatch, "ev-late")
    sqs = sm.boto3_client("sqs")
    counts: list[int] = []

    async def steps(trig: SageMakerCapacityTrigger) -> None:
        await listed_and_reading(sm, url)
        before = describes()
        late = selected_detail(describe, describe["LastModifiedTime"] - timedelta(seconds=30))
        other = selected_detail(describe, describe["LastModifiedTime"] + timedelta(hours=1))
        sqs.send_message(
            QueueUrl=url, MessageBody=envelope(TRAINING, {**other, "TrainingJobName": "ev-other"})
        )
        sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, late))
        # Had the wait trusted the late event, it would have ended without this Describe.
        await wait_until(lambda: describes() > before, "the Describe the late event asks for")
        await wait_until(lambda: subscribed("ev-late"), "the wait to listen again")
        counts.append(describes())
        sm.advance(G5_FREE_AT)
        now = sm.boto3_client("sagemaker").describe_training_job(TrainingJobName="ev-late")
        counts.append(describes())
        sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, as_detail(now)))

    event = run_trigger(sm, "ev-late", describe, steps)
    assert event["status"] == "success" and event["outcome"]["selected_instance_type"] == G5
    # The selection's own event cost no Describe.
    assert describes() == counts[1]


@pytest.mark.parametrize(
    "forged",
    [
        {"account": "999988887777"},
        {"region": "eu-west-1"},
        {"resources": []},
        {"resources": ["arn:aws:sagemaker:us-east-1:123456789012:training-job/ev-other"]},
    ],
    ids=["account", "region", "no-resource", "another-resource"],
)
def test_in_event_mode_a_forged_complete_newer_event_is_only_a_hint_and_the_describe_wins(
    sm: Any, monkeypatch: pytest.MonkeyPatch, forged: dict[str, Any]
) -> None:
    """What a DAG allowed to send to the queue could do: a message with a complete detail, newer than
    anything the wait saw, saying the job got its capacity, but from another account or region, or about
    another resource. The wait Describes the job once instead of ending, the Describe (still Pending)
    wins, and the job's real selection ends the wait later."""
    name = f"ev-forged-{len(forged.get('resources', ['x']))}-{next(iter(forged))}"
    url, describe, describes = wait_in_event_mode(sm, monkeypatch, name)
    sqs = sm.boto3_client("sqs")
    counts: list[int] = []
    still_waiting: list[bool] = []

    async def steps(trig: SageMakerCapacityTrigger) -> None:
        consumer = await listed_and_reading(sm, url)
        before = describes()
        detail = selected_detail(describe, describe["LastModifiedTime"] + timedelta(hours=1))
        sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, detail, **forged))
        # Had the wait trusted the forged detail, it would have ended without this Describe.
        await wait_until(lambda: describes() > before, "the Describe the forged event asks for")
        await wait_until(lambda: subscribed(name), "the wait to listen again")
        still_waiting.append(consumer.stats.woke == 1)
        counts.append(describes() - before)
        sm.advance(G5_FREE_AT)
        now = sm.boto3_client("sagemaker").describe_training_job(TrainingJobName=name)
        counts.append(describes())
        sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, as_detail(now)))

    event = run_trigger(sm, name, describe, steps)
    assert still_waiting == [True]
    assert counts[0] == 1  # exactly one Describe for the forged message
    assert event["status"] == "success" and event["outcome"]["selected_instance_type"] == G5
    # The real selection happened G5_FREE_AT after creation, not an hour after the Pending Describe.
    assert event["outcome"]["pending_seconds"] == pytest.approx(G5_FREE_AT - 60, abs=5)
    # SageMaker's own event (its account, region and ARN) ended the wait alone: no further Describe.
    assert describes() == counts[1]


def test_in_event_mode_a_duplicate_of_what_the_wait_saw_is_described(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopping job (a change that does not end a capacity wait) and the same event again under another
    id (what the consumer cannot drop by id): each costs a Describe, neither is trusted; the job's end
    (no selection: the detail cannot tell that from a missing field) is Described too."""
    url, describe, describes = wait_in_event_mode(sm, monkeypatch, "ev-dup")
    sqs = sm.boto3_client("sqs")
    client = sm.boto3_client("sagemaker")
    counts: list[int] = []

    async def steps(trig: SageMakerCapacityTrigger) -> None:
        await listed_and_reading(sm, url)
        client.stop_training_job(TrainingJobName="ev-dup")
        stopping = as_detail(client.describe_training_job(TrainingJobName="ev-dup"))
        assert stopping["TrainingJobStatus"] == "Stopping"
        counts.append(describes())
        for round_ in (1, 2):
            sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, stopping))
            await wait_until(lambda r=round_: describes() == counts[0] + r, f"Describe {round_}")
            await wait_until(lambda: subscribed("ev-dup"), "the wait to listen again")
        sm.advance(120)
        stopped = client.describe_training_job(TrainingJobName="ev-dup")
        counts.append(describes())
        sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, as_detail(stopped)))

    event = run_trigger(sm, "ev-dup", describe, steps)
    assert event["status"] == "error" and event["job_status"] == "Stopped", event
    assert describes() == counts[1] + 1


@pytest.mark.parametrize("field", ["SelectedInstanceType", "SelectedInstanceCount"])
def test_in_event_mode_a_detail_missing_the_selection_is_described(
    sm: Any, monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    name = f"ev-miss-{field[8:].lower()}"
    url, describe, describes = wait_in_event_mode(sm, monkeypatch, name)
    sqs = sm.boto3_client("sqs")
    counts: list[int] = []

    async def steps(trig: SageMakerCapacityTrigger) -> None:
        await listed_and_reading(sm, url)
        sm.advance(G5_FREE_AT)
        now = sm.boto3_client("sagemaker").describe_training_job(TrainingJobName=name)
        counts.append(describes())
        detail = as_detail(now)
        del detail["ResourceConfig"][field]
        sqs.send_message(QueueUrl=url, MessageBody=envelope(TRAINING, detail))

    event = run_trigger(sm, name, describe, steps)
    # The outcome comes from the Describe the incomplete detail asked for.
    assert event["status"] == "success"
    assert (
        event["outcome"]["selected_instance_type"] == G5 and event["outcome"]["selected_instance_count"] == 4
    )
    assert describes() == counts[0] + 1


def subscribed(name: str) -> bool:
    """A wait for ``name`` listens to the queue (between two looks it is briefly not subscribed)."""
    return any(
        w.unsubscribe is not None and not w.future.done()
        for watcher in list(watcher_module._WATCHERS.values())
        for w in list(watcher._waiters.get(name, []))
    )


def test_in_event_mode_a_lost_event_costs_one_safety_pass_not_the_wait(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm.load_scenario(FROZEN)
    url = new_queue(sm)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_QUEUE_URL", url)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_SAFETY_LIST_SECONDS", "3")
    describe = pending_job(sm, "ev-lost")
    listed_before: list[int] = []

    async def steps(trig: SageMakerCapacityTrigger) -> None:
        await wait_until(lambda: any(c.healthy for c in eventbridge_queue._CONSUMERS.values()), "event mode")
        consumers.append(consumer_of(url))
        listed_before.append(sm.stats()["operations"].get("ListTrainingJobs", 0))
        sm.advance(G5_FREE_AT)  # and no event ever comes

    consumers: list[EventQueueConsumer] = []
    # The clock stands still and no event comes: only a List pass can end this wait, within DEADLINE.
    event = run_trigger(sm, "ev-lost", describe, steps)
    assert event["status"] == "success" and event["outcome"]["selected_instance_type"] == G5
    assert sm.stats()["operations"]["ListTrainingJobs"] > listed_before[0]
    assert consumers[0].stats.woke == 0


def test_an_unreadable_queue_falls_back_to_the_usual_list_cadence(
    sm: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sm.load_scenario(FROZEN)
    missing = sm.boto3_client("sqs").create_queue(QueueName=f"gone-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sm.boto3_client("sqs").delete_queue(QueueUrl=missing)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_QUEUE_URL", missing)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_SAFETY_LIST_SECONDS", SAFETY_LIST_SECONDS)
    describe = pending_job(sm, "ev-gone")

    async def steps(trig: SageMakerCapacityTrigger) -> None:
        await wait_until(
            lambda: any(c.stats.errors for c in eventbridge_queue._CONSUMERS.values()), "the error"
        )
        sm.advance(G5_FREE_AT)

    with caplog.at_level("WARNING"):
        # Within DEADLINE, far short of the safety cadence: listed at poll_interval.
        event = run_trigger(sm, "ev-gone", describe, steps)
    assert event["status"] == "success" and event["outcome"]["selected_instance_type"] == G5
    assert "cannot be read" in caplog.text and "fall back to the List loop" in caplog.text


def test_a_backlog_is_read_by_several_receives_at_once_and_nothing_is_lost(sm: Any) -> None:
    """300 events for watched jobs and 300 for others wait on the queue (a triggerer that was down)."""
    url = new_queue(sm)
    sqs = sm.boto3_client("sqs")
    names = [f"job-{i:03d}" for i in range(300)]
    bodies = [
        envelope(TRAINING, {"TrainingJobName": n, "SecondaryStatus": "Pending"}, f"e-{n}") for n in names
    ]
    bodies += [envelope(TRAINING, {"TrainingJobName": f"other-{i}"}, f"o-{i}") for i in range(300)]
    for start in range(0, len(bodies), 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies[start : start + 10])],
        )
    time.sleep(eventbridge_queue.BACKLOG_AGE + 0.5)  # they have waited: the consumer is behind
    in_flight = {"now": 0, "most": 0}
    plain = sqs_opener(sm)

    async def opener() -> Any:
        return _CountingContext(await plain(), in_flight)

    async def main() -> tuple[set[str], EventQueueConsumer]:
        consumer = EventQueueConsumer(("t", url), opener, url)
        woken: set[str] = set()
        for name in names:
            consumer.subscribe(
                JobKind.TRAINING, name, lambda event: woken.add(event.detail["TrainingJobName"])
            )
        await wait_until(lambda: len(woken) == len(names), "every watched job's event")
        await wait_until(lambda: consumer.stats.expired == 300, "the others' events dropped")
        await wait_until(lambda: drained(sqs, url), "every handled message deleted")
        return woken, consumer

    woken, consumer = asyncio.run(main())
    assert woken == set(names)
    # Alone, the others' events are dropped at once, but for one released to look for a peer.
    assert consumer.stats.woke == 300 and consumer.stats.passed <= 1 and consumer.stats.errors == 0
    assert in_flight["most"] == eventbridge_queue.RECEIVERS
    # Full batches make 60 receives; on a busy host concurrent receives come back part-full, so the bound is
    # twice that: a consumer reading message by message (600) still fails it.
    assert consumer.stats.receives <= 2 * 600 / eventbridge_queue.BATCH + 2 * eventbridge_queue.RECEIVERS
    assert events_left(sm, url) == []


class _CountingClient:
    """An SQS client that counts its receives in flight (``counts["now"]``, the most at once)."""

    def __init__(self, client: Any, counts: dict[str, int]) -> None:
        self._client, self._counts = client, counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def receive_message(self, **kwargs: Any) -> Any:
        self._counts["now"] += 1
        self._counts["most"] = max(self._counts["most"], self._counts["now"])
        try:
            return await self._client.receive_message(**kwargs)
        finally:
            self._counts["now"] -= 1


class _CountingContext:
    def __init__(self, context: Any, counts: dict[str, int]) -> None:
        self._context, self._counts = context, counts

    async def __aenter__(self) -> _CountingClient:
        return _CountingClient(await self._context.__aenter__(), self._counts)

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._context.__aexit__(*exc)


def test_a_stream_the_consumer_keeps_up_with_is_read_by_the_long_poll_alone(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Keeping up means reading each batch within BACKLOG_AGE of its sending; a busy host may take a while
    # to get round to a receive, so the bound here is generous: only a backlog may widen.
    monkeypatch.setattr(eventbridge_queue, "BACKLOG_AGE", DEADLINE)
    url = new_queue(sm)
    sqs = sm.boto3_client("sqs")
    names = [f"fresh-{i:02d}" for i in range(50)]
    in_flight = {"now": 0, "most": 0}
    plain = sqs_opener(sm)

    async def opener() -> Any:
        return _CountingContext(await plain(), in_flight)

    async def main() -> set[str]:
        consumer = EventQueueConsumer(("t", url), opener, url)
        woken: set[str] = set()
        for name in names:
            consumer.subscribe(
                JobKind.TRAINING, name, lambda event: woken.add(event.detail["TrainingJobName"])
            )
        await wait_until(lambda: consumer.healthy, "the first receive")
        for start in range(0, len(names), 10):  # full batches, but fresh ones
            entries = [
                {"Id": str(i), "MessageBody": envelope(TRAINING, {"TrainingJobName": n}, f"f-{n}")}
                for i, n in enumerate(names[start : start + 10])
            ]
            await asyncio.to_thread(sqs.send_message_batch, QueueUrl=url, Entries=entries)
        await wait_until(lambda: len(woken) == len(names), "every event")
        return woken

    assert asyncio.run(main()) == set(names)
    assert in_flight["most"] == 1


def test_an_event_it_dropped_coming_back_late_is_its_own_receive_not_a_peers() -> None:
    """On a loaded host a delete can land after the visibility timeout: SQS hands the message out again
    with a higher receive count. That return is this consumer's own receive: it hears of no peer from it,
    and goes on dropping what it does not watch instead of passing it around."""
    consumer = EventQueueConsumer(("alone", "q"), lambda: None, "q")
    consumer._probed_at = time.monotonic()  # its one probe is spent: alone, it drops what it does not watch
    now = time.time()
    body = envelope(TRAINING, {"TrainingJobName": "someone-elses"}, "e-late")

    def received(count: int) -> dict[str, Any]:
        attributes = {"ApproximateReceiveCount": str(count), "SentTimestamp": str(int(now * 1000))}
        return {"MessageId": "m-late", "Body": body, "Attributes": attributes}

    assert consumer._route(received(1), now) == (False, 0)  # dropped
    assert consumer._route(received(2), now) == (False, 0)  # back after a late delete: dropped again
    assert not consumer.has_peers() and consumer.stats.passed == 0 and consumer.stats.expired == 2
