"""The offline SageMaker's HTTP endpoint under hostile requests: AWS-shaped errors, no crash, no state change.

Raw HTTP (no botocore) so malformed bodies, wrong content types, oversized bodies and unknown operations
reach the server as a careless or hostile client would send them.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offline_sagemaker.server import OfflineSageMaker

JSON = "application/x-amz-json-1.1"


def post(sm: OfflineSageMaker, body: bytes, target: str | None, content_type: str = JSON) -> tuple[int, Any]:
    headers = {"Content-Type": content_type}
    if target:
        headers["X-Amz-Target"] = target
    request = urllib.request.Request(sm.endpoint_url + "/", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def aws_error(status: int, body: bytes) -> str:
    """The ``__type`` of an AWS JSON error answer (fails the test for anything else)."""
    assert 400 <= status < 500, (status, body[:200])
    payload = json.loads(body)
    assert set(payload) >= {"__type", "message"}, payload
    return str(payload["__type"])


@pytest.mark.parametrize(
    ("body", "target", "content_type", "expected"),
    [
        (b"{not json", "SageMaker.CreateTrainingJob", JSON, "SerializationException"),
        (b"[1, 2]", "SageMaker.CreateTrainingJob", JSON, "SerializationException"),
        (b"\xff\xfe\x00", "SageMaker.DescribeTrainingJob", JSON, "SerializationException"),
        (b'{"TrainingJobName": 5}', "SageMaker.CreateTrainingJob", JSON, "ValidationException"),
        (b"{}", "SageMaker.CreateTrainingJob", "text/plain", "ValidationException"),
        (b"{}", "SageMaker.NoSuchOperation", JSON, "UnknownOperationException"),
        (b"{}", "SageMaker.", JSON, "UnknownOperationException"),
    ],
)
def test_malformed_requests_get_aws_shaped_errors_and_change_nothing(
    world: OfflineSageMaker, body: bytes, target: str, content_type: str, expected: str
) -> None:
    before = world.jobs()
    status, answer = post(world, body, target, content_type)
    assert aws_error(status, answer) == expected
    assert world.jobs() == before
    # Still serving: a well-formed call right after works.
    status, answer = post(world, b'{"MaxResults": 1}', "SageMaker.ListTrainingJobs")
    assert status == 200 and "TrainingJobSummaries" in json.loads(answer)


def test_an_oversized_body_is_answered_and_the_server_keeps_serving(world: OfflineSageMaker) -> None:
    body = b'{"TrainingJobName": "' + b"x" * (8 * 1024 * 1024) + b'"}'
    status, answer = post(world, body, "SageMaker.CreateTrainingJob")
    assert aws_error(status, answer) == "ValidationException"
    assert world.jobs() == []
    status, _ = post(world, b"{}", "SageMaker.ListTrainingJobs")
    assert status == 200


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.binary(max_size=300) | st.text(max_size=300).map(str.encode),
    operation=st.sampled_from(
        [
            "CreateTrainingJob",
            "DescribeTrainingJob",
            "StopTrainingJob",
            "CreateProcessingJob",
            "ListTrainingJobs",
        ]
    ),
)
def test_arbitrary_bodies_never_crash_the_server_or_create_a_job(
    world: OfflineSageMaker, body: bytes, operation: str
) -> None:
    status, answer = post(world, body, f"SageMaker.{operation}")
    if status != 200:
        aws_error(status, answer)
    assert world.jobs() == []


def admin_post(sm: OfflineSageMaker, route: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    request = urllib.request.Request(f"{sm.endpoint_url}/_emulator/{route}", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content_type=st.text(
        st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=60
    ).filter(lambda value: value.partition(";")[0].strip().lower() != "application/json"),
    route=st.sampled_from(["reset", "stop-all-jobs", "scenario", "clock", "faults"]),
    origin=st.none()
    | st.sampled_from(["http://attacker.example", "null", "http://127.0.0.1.attacker.example"]),
)
def test_admin_posts_that_are_not_json_or_come_from_another_site_change_nothing(
    world: OfflineSageMaker, content_type: str, route: str, origin: str | None
) -> None:
    world.advance(60)
    before = (world.clock(), world.scenario_dict(), world.stats())
    headers = {"Content-Type": content_type}
    if origin is not None:
        headers["Origin"] = origin
    body = b'{"scenario": "plan-no-capacity", "advance": 60, "throttle_rate": 1}'
    status, answer = admin_post(world, route, body, headers)
    assert status == (403 if origin is not None else 415), answer
    assert (world.clock(), world.scenario_dict(), world.stats()) == before
