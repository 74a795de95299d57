"""Injected faults: counted, and without side effects; never applied to admin routes or S3."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError

from offline_sagemaker import OfflineSageMaker

pytestmark = pytest.mark.usefixtures("world")


def test_throttled_create_creates_nothing_and_is_counted(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    world.set_faults(throttle_rate=1.0)
    with pytest.raises(ClientError) as info:
        client.create_training_job(**make_training("throttled", instance_type="ml.m5.xlarge", count=1))
    assert info.value.response["Error"]["Code"] == "ThrottlingException"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    # Admin routes and other services are never faulted.
    stats = world.stats()
    assert stats["throttled"] == {"CreateTrainingJob": 1}
    assert stats["operations"] == {"CreateTrainingJob": 1}
    world.boto3_client("s3").list_buckets()
    world.clear_faults()
    assert world.jobs() == []
    with pytest.raises(ClientError):
        client.describe_training_job(TrainingJobName="throttled")


@pytest.mark.parametrize("_attempt", range(2))
def test_server_errors_are_500_or_503_and_have_no_side_effects(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]], _attempt: int
) -> None:
    world.set_faults(error_rate=1.0)
    codes = set()
    for _ in range(12):
        with pytest.raises(ClientError) as info:
            client.create_training_job(**make_training("errored", instance_type="ml.m5.xlarge", count=1))
        codes.add(
            (info.value.response["Error"]["Code"], info.value.response["ResponseMetadata"]["HTTPStatusCode"])
        )
    assert codes <= {("InternalFailure", 500), ("ServiceUnavailable", 503)} and codes
    assert world.stats()["errors"] == {"CreateTrainingJob": 12}
    world.clear_faults()
    assert world.jobs() == []


def test_dropped_connections_surface_as_connection_errors(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    world.set_faults(drop_rate=1.0)
    with pytest.raises((ConnectionClosedError, EndpointConnectionError)):
        client.create_training_job(**make_training("dropped", instance_type="ml.m5.xlarge", count=1))
    assert world.stats()["dropped"] == {"CreateTrainingJob": 1}
    world.clear_faults()
    assert world.jobs() == []


def until_accepted(call: Callable[[], Any]) -> Any:
    """Retry at once on ThrottlingException (botocore's own back-off would make the test slow)."""
    for _ in range(100):
        try:
            return call()
        except ClientError as error:
            if error.response["Error"]["Code"] != "ThrottlingException":
                raise
    raise AssertionError("still throttled after 100 attempts")


def test_retrying_client_gets_through_and_calls_are_counted_per_job(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    world.load_scenario({"time_scale": 0, "faults": {"throttle_rate": 0.5}, "seed": 7})
    create = make_training("patient", instance_type="ml.m5.xlarge", count=1)
    until_accepted(lambda: client.create_training_job(**create))
    for _ in range(10):
        until_accepted(lambda: client.describe_training_job(TrainingJobName="patient"))
    stats = world.stats()
    per_job = stats["jobs"]["patient"]
    assert per_job["DescribeTrainingJob"] == stats["operations"]["DescribeTrainingJob"]
    assert per_job["DescribeTrainingJob"] - stats["throttled"].get("DescribeTrainingJob", 0) == 10
    assert stats["throttled"]["DescribeTrainingJob"] > 0
    assert len(world.jobs()) == 1


def test_rate_limit_throttles_above_the_configured_rate(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(**make_training("limited", instance_type="ml.m5.xlarge", count=1))

    def describe() -> str:
        try:
            client.describe_training_job(TrainingJobName="limited")
        except ClientError as error:
            return str(error.response["Error"]["Code"])
        return "ok"

    world.set_faults(rate_limits={"DescribeTrainingJob": 5})
    assert [describe() for _ in range(5)] == ["ok"] * 5  # the bucket starts full: a second's worth at once
    # One call per 1000 s: the calls after the first come far sooner than that on any host.
    world.set_faults(rate_limits={"DescribeTrainingJob": 0.001})
    outcomes = [describe() for _ in range(10)]
    assert outcomes == ["ok"] + ["ThrottlingException"] * 9
    assert world.stats()["throttled"]["DescribeTrainingJob"] == 9
    client.create_training_job(**make_training("not-limited", instance_type="ml.m5.xlarge", count=1))


#: An added latency no call of this module takes on its own, however slow the host (milliseconds).
UNMISSABLE_MS = 60_000


def test_latency_is_added_to_sagemaker_calls_only(world: OfflineSageMaker, client: Any) -> None:
    world.set_faults(latency_ms=300)
    started = time.perf_counter()
    client.list_training_jobs()
    assert time.perf_counter() - started >= 0.3  # at least the latency: a lower bound, true on any host
    # Elsewhere: with a latency of a minute, an admin route and an S3 call (the first of its client, which
    # loads the S3 model) that answer within half of it cannot have waited for it.
    world.set_faults(latency_ms=UNMISSABLE_MS)
    started = time.perf_counter()
    world.stats()
    world.boto3_client("s3").list_buckets()
    assert time.perf_counter() - started < UNMISSABLE_MS / 1000 / 2
    assert world.set_faults(latency_ms=0)["latency_ms"] == 0


def test_invalid_fault_settings_are_rejected(world: OfflineSageMaker) -> None:
    with pytest.raises(ValueError, match="throttle_rate"):
        world.set_faults(throttle_rate=1.5)
    with pytest.raises(ValueError, match="rate_limits.Describe"):
        world.set_faults(rate_limits={"Describe": 3})
