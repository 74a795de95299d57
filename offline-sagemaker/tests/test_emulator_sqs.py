"""The emulator's SQS (moto's, made constant-time per call; see offline_sagemaker/moto_speedups.py) keeps SQS's
documented behaviour, through real boto3 calls at the emulator's endpoint.

SQS keeps real time (moto's clock, not the emulated one), so the tests wait on what SQS answers (a long
poll, the timestamps it stamps on each message) rather than on how fast the host is.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import moto
import pytest
import urllib3.util.connection
from botocore.exceptions import ClientError
from packaging.requirements import Requirement
from packaging.version import Version

from offline_sagemaker import moto_speedups
from offline_sagemaker.moto_speedups import COUNTS_TTL

#: SQS's longest long poll (seconds): a receive that waits this long did not return when a message came.
LONGEST_POLL = 20


@pytest.fixture
def queue(sm: Any) -> tuple[Any, str]:
    sqs = sm.boto3_client("sqs")
    url = sqs.create_queue(QueueName=f"sqs-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    return sqs, url


def _receive(
    sqs: Any, url: str, count: int = 10, wait: int = 0, visibility: int = 30
) -> list[dict[str, Any]]:
    answer = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=count,
        WaitTimeSeconds=wait,
        VisibilityTimeout=visibility,
        MessageSystemAttributeNames=["SentTimestamp", "ApproximateFirstReceiveTimestamp"],
    )
    messages: list[dict[str, Any]] = answer.get("Messages", [])
    return messages


def test_messages_come_oldest_first_and_a_received_one_is_hidden_until_its_timeout(
    queue: tuple[Any, str],
) -> None:
    sqs, url = queue
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    assert [m["Body"] for m in _receive(sqs, url, count=2)] == ["a", "b"]
    assert [m["Body"] for m in _receive(sqs, url)] == ["c"]
    assert _receive(sqs, url) == []  # all three in flight for 30 s (hidden: received moments ago)


def test_delete_takes_exactly_its_message_is_idempotent_and_rejects_an_unknown_handle(
    queue: tuple[Any, str],
) -> None:
    sqs, url = queue
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    first, second, third = _receive(sqs, url, visibility=1)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])  # again: accepted
    with pytest.raises(ClientError) as info:
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
    assert info.value.response["Error"]["Code"] in ("ReceiptHandleIsInvalid", "InvalidParameterValue")
    answer = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[{"Id": "x", "ReceiptHandle": third["ReceiptHandle"]}, {"Id": "y", "ReceiptHandle": "nope"}],
    )
    assert [e["Id"] for e in answer["Successful"]] == ["x"]
    assert [e["Id"] for e in answer["Failed"]] == ["y"]
    # A long poll returns once the visibility timeout has passed: only the one never deleted comes back.
    assert [m["Body"] for m in _receive(sqs, url, wait=LONGEST_POLL)] == [first["Body"]]


def test_a_delayed_message_is_received_only_after_its_delay(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)
    sqs.send_message(QueueUrl=url, MessageBody="now")
    received = {m["Body"]: m for m in _receive(sqs, url)}
    assert "now" in received  # not delayed: there at once ("later" too, if the host took a second)
    if "later" not in received:
        received.update((m["Body"], m) for m in _receive(sqs, url, wait=LONGEST_POLL))
    later = received["later"]["Attributes"]
    # Whenever it came, SQS's own stamps show it was first handed out no sooner than its delay.
    assert int(later["ApproximateFirstReceiveTimestamp"]) - int(later["SentTimestamp"]) >= 1000


def _long_poll_while(sqs: Any, url: str, action: Callable[[], Any]) -> tuple[list[dict[str, Any]], float]:
    """A receive of one message waiting up to :data:`LONGEST_POLL` while ``action`` runs 1 s in; what it
    got, and how long it took."""
    timer = threading.Timer(1.0, action)
    start = time.monotonic()
    timer.start()
    try:
        messages = _receive(sqs, url, count=1, wait=LONGEST_POLL)
    finally:
        timer.join()
    return messages, time.monotonic() - start


def test_a_long_poll_returns_when_a_message_arrives_not_at_the_end_of_its_wait(
    queue: tuple[Any, str],
) -> None:
    sqs, url = queue
    messages, took = _long_poll_while(sqs, url, lambda: sqs.send_message(QueueUrl=url, MessageBody="x"))
    assert [m["Body"] for m in messages] == ["x"]
    assert took < LONGEST_POLL  # a poll that ignored the arrival waits all of it


def test_a_long_poll_returns_a_message_another_consumer_releases_not_at_the_end_of_its_wait(
    queue: tuple[Any, str],
) -> None:
    """A consumer hands a message on to its peers with ``ChangeMessageVisibility`` 0 (event mode does): a
    peer's receive that is already waiting gets it then, as a new message."""
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody="handed-on")
    (taken,) = _receive(sqs, url, count=1)
    messages, took = _long_poll_while(
        sqs,
        url,
        lambda: sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=taken["ReceiptHandle"], VisibilityTimeout=0
        ),
    )
    assert [m["Body"] for m in messages] == ["handed-on"]
    assert took < LONGEST_POLL  # a poll blind to the release waits all of it


def test_a_release_wakes_a_waiting_receive_at_once(queue: tuple[Any, str]) -> None:
    """SQS hands a message made visible to a receive already waiting; moto looked again once a second
    only. Proven on the condition a waiting receive sleeps on (not on the host's speed): a release
    notifies it."""
    from moto.sqs.models import sqs_backends

    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody="handed-on")
    (taken,) = _receive(sqs, url, count=1)
    notified = threading.Event()
    account, name = url.rsplit("/", 2)[-2:]
    lock = sqs_backends[account][sqs.meta.region_name].get_queue(name)._messages_lock
    original = lock.notify_all

    def notify_all() -> None:
        notified.set()
        original()

    lock.notify_all = notify_all
    try:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=taken["ReceiptHandle"], VisibilityTimeout=0)
    finally:
        del lock.notify_all
    assert notified.is_set()


def test_a_long_poll_returns_a_message_whose_visibility_timeout_ends_during_its_wait(
    queue: tuple[Any, str],
) -> None:
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody="back")
    assert [m["Body"] for m in _receive(sqs, url, count=1, visibility=1)] == ["back"]
    start = time.monotonic()
    messages = _receive(sqs, url, count=1, wait=LONGEST_POLL)
    assert [m["Body"] for m in messages] == ["back"]
    assert time.monotonic() - start < LONGEST_POLL  # a poll blind to the timeout's end waits all of it


def test_the_approximate_counts_settle_within_a_second(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": str(i)} for i in range(5)])
    # The longest delay and a long visibility timeout: nothing changes state however slow the host.
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=900)
    _receive(sqs, url, count=2, visibility=3600)
    time.sleep(COUNTS_TTL + 0.2)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "3"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "2"  # in flight: the 2 received
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"


def test_sqs_calls_share_one_kept_alive_connection(
    queue: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on AWS: a client polling the queue does not open a connection per call."""
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody="first")  # the client's connection is open from here
    opened: list[Any] = []
    create = urllib3.util.connection.create_connection

    def counting(*args: Any, **kwargs: Any) -> Any:
        opened.append(args[0] if args else kwargs.get("address"))
        return create(*args, **kwargs)

    monkeypatch.setattr(urllib3.util.connection, "create_connection", counting)
    for _ in range(5):
        sqs.send_message(QueueUrl=url, MessageBody="x")
        for message in _receive(sqs, url):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert opened == []


def test_moto_is_capped_to_the_releases_the_speedups_are_written_for() -> None:
    (requirement,) = (
        Requirement(line)
        for line in importlib.metadata.requires("offline-sagemaker") or []
        if Requirement(line).name == "moto"
    )
    low, high = (Version(".".join(map(str, release))) for release in moto_speedups.PROVEN_MOTO)
    specifiers = {(spec.operator, Version(spec.version)) for spec in requirement.specifier}
    assert specifiers == {(">=", low), ("<", high)}
    assert moto_speedups.is_proven(moto.__version__)  # the installed moto gets the speedups


@pytest.mark.parametrize(
    ("version", "proven"),
    [
        ("5.2.5", True),
        ("5.2.9.dev3", True),
        ("5.2.4", False),
        ("5.3.0", False),
        ("6.0.0", False),
        ("x", False),
    ],
)
def test_only_the_proven_moto_releases_are_patched(version: str, proven: bool) -> None:
    assert moto_speedups.is_proven(version) is proven


def test_another_moto_keeps_its_own_sqs_and_is_warned_about_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from moto.sqs.models import Queue

    monkeypatch.setattr(moto_speedups, "_APPLIED", False)
    monkeypatch.setattr(moto_speedups, "_DECLINED", False)
    monkeypatch.setattr(moto, "__version__", "5.3.0")
    before = dict(Queue.__dict__)
    with caplog.at_level(logging.WARNING, logger=moto_speedups.__name__):
        assert moto_speedups.apply() is False
        assert moto_speedups.apply() is False
    assert dict(Queue.__dict__) == before
    assert [r.getMessage() for r in caplog.records].count(
        "moto 5.3.0 is outside the releases offline_sagemaker.moto_speedups is written for (5.2.5 to "
        "before 5.3.0): SQS runs on moto's own code, correct but slower the more messages a queue holds"
    ) == 1


def test_requests_are_routed_without_reading_motos_package_directory(
    sm: Any, queue: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto's dispatcher listed its package directory (about 200 ``isdir`` calls) for every request it
    routed; served here, SQS, EventBridge, CloudWatch Logs and IAM calls route as before and the
    directory is read at most once in the process."""
    import os

    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody="warm")  # every patch applied, every backend found once
    listed: list[str] = []
    listdir = os.listdir

    def counting(path: Any = ".") -> list[str]:
        listed.append(str(path))
        return listdir(path)

    monkeypatch.setattr(os, "listdir", counting)
    for _ in range(3):
        sqs.send_message(QueueUrl=url, MessageBody="x")
        for message in _receive(sqs, url):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    rule = f"rule-{uuid.uuid4().hex[:8]}"
    events = sm.boto3_client("events")
    events.put_rule(Name=rule, EventPattern='{"source": ["aws.sagemaker"]}')
    assert events.describe_rule(Name=rule)["Name"] == rule
    logs = sm.boto3_client("logs")
    group = f"/sqs-test/{uuid.uuid4().hex[:8]}"
    logs.create_log_group(logGroupName=group)  # moto's (the emulator answers only SageMaker's groups' reads)
    logs.create_log_stream(logGroupName=group, logStreamName="s")
    assert (
        logs.put_log_events(
            logGroupName=group, logStreamName="s", logEvents=[{"timestamp": 1, "message": "m"}]
        )["ResponseMetadata"]["HTTPStatusCode"]
        == 200
    )
    assert sm.boto3_client("iam").list_roles()["Roles"] is not None
    moto_dir = os.path.dirname(__import__("moto").__file__)
    assert len([path for path in listed if path == moto_dir]) <= 1  # moto listed it for each of 9 requests
