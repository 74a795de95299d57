"""A reset is a fresh world: what callers created in the services moto answers goes with the jobs, over real
HTTP, and the event queues of ``create_event_queue`` come back empty at their URL, still fed."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from emulator_support import FROZEN

from offline_sagemaker import OfflineSageMaker
from offline_sagemaker.service import EmulatorService
from offline_sagemaker.wsgi import EmulatorApp

GROUP, QUEUE, RULE, BUCKET, ROLE_NAME = "/my-team/nightly", "my-queue", "my-rule", "my-bucket", "MyRole"
G5 = "ml.g5.48xlarge"
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}


def reset_over_http(world: OfflineSageMaker) -> None:
    OfflineSageMaker.attach(world.endpoint_url).reset()  # POST /_emulator/reset


def load_in_process(world: OfflineSageMaker) -> None:
    world.load_scenario(FROZEN)


def error_code(call: Callable[[], Any]) -> str:
    with pytest.raises(ClientError) as raised:
        call()
    return str(raised.value.response["Error"]["Code"])


def create_in_every_service(world: OfflineSageMaker, client: Any, make_training: Any) -> None:
    """A job, and in moto's services a log group with events, a queue with a message, a rule with a target,
    a bucket with an object, a role and a SageMaker model."""
    client.create_training_job(**make_training("before-reset", instance_type=G5, count=1))
    logs = world.boto3_client("logs")
    logs.create_log_group(logGroupName=GROUP)
    logs.create_log_stream(logGroupName=GROUP, logStreamName="run-1")
    logs.put_log_events(
        logGroupName=GROUP,
        logStreamName="run-1",
        logEvents=[{"timestamp": int(time.time() * 1000), "message": "retrain started"}],
    )
    sqs = world.boto3_client("sqs")
    url = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="left over")
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events = world.boto3_client("events")
    events.put_rule(Name=RULE, EventPattern=json.dumps({"source": ["my.app"]}), State="ENABLED")
    events.put_targets(Rule=RULE, Targets=[{"Id": "q", "Arn": arn}])
    s3 = world.boto3_client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="data.csv", Body=b"a,b\n")
    role = world.boto3_client("iam").create_role(
        RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(TRUST)
    )
    client.create_model(
        ModelName="my-model",
        ExecutionRoleArn=role["Role"]["Arn"],
        PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/serve:latest"},
    )


@pytest.mark.parametrize("reset", [reset_over_http, load_in_process], ids=["reset", "load_scenario"])
def test_a_reset_clears_what_callers_created_in_every_service_and_the_world_works_as_new(
    world: OfflineSageMaker, client: Any, make_training: Any, reset: Callable[[OfflineSageMaker], None]
) -> None:
    create_in_every_service(world, client, make_training)
    logs, sqs, events = (world.boto3_client(name) for name in ("logs", "sqs", "events"))
    s3, iam = world.boto3_client("s3"), world.boto3_client("iam")
    assert [g["logGroupName"] for g in logs.describe_log_groups(logGroupNamePrefix="/my-team/")["logGroups"]]

    reset(world)

    # SageMaker's world is fresh...
    assert world.jobs() == [] and world.stats()["operations"] == {}
    assert client.list_training_jobs()["TrainingJobSummaries"] == []
    assert client.list_models()["Models"] == []
    # ...and so is every other service's.
    assert logs.describe_log_groups(logGroupNamePrefix="/my-team/")["logGroups"] == []
    assert error_code(lambda: logs.get_log_events(logGroupName=GROUP, logStreamName="run-1")) == (
        "ResourceNotFoundException"
    )
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=QUEUE)
    assert "NonExistentQueue" in error_code(lambda: sqs.get_queue_url(QueueName=QUEUE))
    assert events.list_rules(NamePrefix=RULE)["Rules"] == []
    assert BUCKET not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
    assert error_code(lambda: s3.head_bucket(Bucket=BUCKET)) == "404"
    assert error_code(lambda: iam.get_role(RoleName=ROLE_NAME)) == "NoSuchEntity"

    # What the emulator guarantees is there, and every name is free again.
    assert events.describe_event_bus()["Name"] == "default"
    create_in_every_service(world, client, make_training)
    assert [j["name"] for j in world.jobs()] == ["before-reset"]
    assert s3.get_object(Bucket=BUCKET, Key="data.csv")["Body"].read() == b"a,b\n"
    url = sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in received] == ["left over"]  # this one's, not the one sent before the reset


def first_message(sqs: Any, url: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages")
        if messages:
            body: dict[str, Any] = json.loads(messages[0]["Body"])
            return body
    raise AssertionError(f"no message on {url} within {timeout} s")


def test_an_event_queue_comes_back_from_a_reset_empty_at_its_url_and_still_fed(
    world: OfflineSageMaker, client: Any, make_training: Any
) -> None:
    name = f"kept-events-{uuid.uuid4().hex[:8]}"
    sqs, events = world.boto3_client("sqs"), world.boto3_client("events")
    url = world.create_event_queue(name, job_name_prefix="kept-")
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rule = events.describe_rule(Name=name)
    sqs.send_message(QueueUrl=url, MessageBody="stale")
    try:
        reset_over_http(world)

        assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
        assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)  # "stale" went
        again = events.describe_rule(Name=name)
        assert (again["State"], json.loads(again["EventPattern"])) == (
            "ENABLED",
            json.loads(rule["EventPattern"]),
        )
        assert events.list_targets_by_rule(Rule=name)["Targets"] == [{"Id": "sm-prefs-queue", "Arn": arn}]
        client.create_training_job(**make_training("kept-job", instance_type=G5, count=1))
        world.advance(60)
        body = first_message(sqs, url)
        assert body["detail-type"] == "SageMaker Training Job State Change"
        assert body["detail"]["TrainingJobName"] == "kept-job"
    finally:
        world.remove_event_queue(name)
    assert world._call("GET", "event-queues") == {"event_queues": []}
    sqs.create_queue(QueueName=name)  # a queue of the same name, now the caller's own
    world.reset()
    assert "NonExistentQueue" in error_code(lambda: sqs.get_queue_url(QueueName=name))
    assert events.list_rules(NamePrefix=name)["Rules"] == []


def test_the_event_queue_routes_check_their_body(world: OfflineSageMaker) -> None:
    remote = OfflineSageMaker.attach(world.endpoint_url)
    queue = {"queue_arn": "arn:aws:sqs:us-east-1:123456789012:q", "rule": "q", "event_pattern": "{}"}
    with pytest.raises(ValueError, match="queue: unknown event queue field"):
        remote._call("POST", "event-queues", {**queue, "queue": "q"})
    with pytest.raises(ValueError, match="must be strings"):
        remote._call("POST", "event-queues", {**queue, "rule": 1})
    with pytest.raises(ValueError, match="queue_arn: not an SQS queue ARN"):
        remote._call("POST", "event-queues", {**queue, "queue_arn": "arn:aws:sns:us-east-1:123456789012:q"})
    with pytest.raises(ValueError, match="rule"):
        remote._call("DELETE", "event-queues", {})
    assert remote._call("GET", "event-queues") == {"event_queues": []}


def test_only_a_service_served_with_moto_resets_moto() -> None:
    service = EmulatorService("default")
    assert service.resets_moto is False
    EmulatorApp(service, fallback=lambda environ, start_response: [])
    assert service.resets_moto is False
    EmulatorApp(service)
    assert service.resets_moto is True
