"""The emulator's SQS (moto's, made constant-time per call; see offline_sagemaker/moto_speedups.py) keeps SQS's
documented behaviour, through real boto3 calls at the emulator's endpoint."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
import urllib3.util.connection
from botocore.exceptions import ClientError

from offline_sagemaker.moto_speedups import COUNTS_TTL


@pytest.fixture
def queue(sm: Any) -> tuple[Any, str]:
    sqs = sm.boto3_client("sqs")
    url = sqs.create_queue(QueueName=f"sqs-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    return sqs, url


def _receive(
    sqs: Any, url: str, count: int = 10, wait: int = 0, visibility: int = 30
) -> list[dict[str, Any]]:
    answer = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=count, WaitTimeSeconds=wait, VisibilityTimeout=visibility
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
    assert _receive(sqs, url) == []  # all three in flight for 30 s


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
    time.sleep(1.2)  # the visibility timeout passes: only the one never deleted comes back
    assert [m["Body"] for m in _receive(sqs, url)] == [first["Body"]]


def test_a_delayed_message_is_received_only_after_its_delay(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)
    sqs.send_message(QueueUrl=url, MessageBody="now")
    assert [m["Body"] for m in _receive(sqs, url)] == ["now"]
    time.sleep(1.2)
    assert [m["Body"] for m in _receive(sqs, url)] == ["later"]


def test_a_long_poll_returns_as_soon_as_a_message_arrives(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    timer = threading.Timer(1.0, lambda: sqs.send_message(QueueUrl=url, MessageBody="x"))
    start = time.monotonic()
    timer.start()
    try:
        messages = _receive(sqs, url, count=1, wait=10)
    finally:
        timer.join()
    assert [m["Body"] for m in messages] == ["x"]
    assert time.monotonic() - start < 8  # not the full 10 s wait


def test_the_approximate_counts_settle_within_a_second(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": str(i)} for i in range(5)])
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=30)
    _receive(sqs, url, count=2)
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
