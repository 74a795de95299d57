"""The one event of a capacity wait: payload round trip, exceptions both ways, events from a Describe."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.events import (
    ERROR_TYPES,
    CapacityEvent,
    EventStatus,
    deadline_event,
    deadline_passed,
    event_from_describe,
)
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.status import JobSnapshot, Phase, WaitFor

PREFS = [
    {"InstanceType": "ml.g6.48xlarge", "InstanceCount": 2},
    {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 4},
]


def describe(status: str, secondary: str, selected: str | None = None, **extra: Any) -> dict[str, Any]:
    cluster: dict[str, Any] = {"InstancePreferences": PREFS}
    if selected:
        cluster |= {"SelectedInstanceType": selected, "SelectedInstanceCount": 4}
    return {
        "TrainingJobName": "nightly",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/nightly",
        "TrainingJobStatus": status,
        "SecondaryStatus": secondary,
        "CreationTime": datetime(2026, 11, 30, tzinfo=timezone.utc),
        "ResourceConfig": cluster,
        **extra,
    }


def test_success_travels_as_a_json_payload_and_back() -> None:
    event = event_from_describe(
        JobKind.TRAINING,
        WaitFor.CAPACITY,
        describe("InProgress", "Downloading", "ml.g5.48xlarge"),
        Phase.RUNNING,
    )
    payload = event.as_payload()
    assert payload["status"] == "success" and payload["error_type"] is None
    assert set(payload) == {
        "status", "job_name", "job_kind", "wait_for", "phase", "outcome", "error_type", "job_status", "reason",
    }  # fmt: skip
    back = CapacityEvent.from_payload(payload)
    assert back == event and not back.job_ended
    outcome = back.outcome_or_raise()
    assert (outcome.selected_instance_type, outcome.preference_rank, outcome.fell_back) == (
        "ml.g5.48xlarge",
        2,
        True,
    )


@pytest.mark.parametrize("cls", list(ERROR_TYPES.values()))
def test_every_domain_error_survives_the_trip(cls: type[errors.SageMakerJobError]) -> None:
    if cls is errors.QuotaExceededError:
        error: errors.SageMakerJobError = errors.QuotaExceededError("nightly", "ml.p5 lacks quota")
    else:
        error = cls("nightly", "Failed", "AlgorithmError: boom")
    event = CapacityEvent.failure(JobKind.PROCESSING, WaitFor.COMPLETION, Phase.FAILED, error)
    back = CapacityEvent.from_payload(event.as_payload())
    assert back.status is EventStatus.ERROR
    with pytest.raises(cls) as raised:
        back.outcome_or_raise()
    assert str(raised.value) == str(error)


def test_a_failed_job_becomes_its_domain_error() -> None:
    failed = describe("Failed", "Failed", "ml.g5.48xlarge", FailureReason="AlgorithmError: exit 1")
    event = event_from_describe(JobKind.TRAINING, WaitFor.CAPACITY, failed, Phase.FAILED)
    assert event.error_type == "JobFailedError" and event.job_ended
    with pytest.raises(errors.JobFailedError, match="AlgorithmError: exit 1"):
        event.outcome_or_raise()


@pytest.mark.parametrize("payload", [None, {}, {"status": "weird"}, "text"])
def test_anything_else_is_a_clear_failure_naming_what_arrived(payload: Any) -> None:
    event = CapacityEvent.from_payload(payload, job_name="nightly")
    with pytest.raises(errors.JobFailedError, match="unexpected trigger event") as raised:
        event.outcome_or_raise()
    assert raised.value.job_name == "nightly"


def test_a_closed_window_says_how_long_the_job_waited_as_the_logs_do() -> None:
    event = CapacityEvent.window_closed(JobKind.TRAINING, "nightly", "InProgress", 3900.4)
    assert (event.status, event.phase) == (EventStatus.WINDOW_CLOSED, Phase.WAITING.value)
    assert event.reason == "still pending after 1h05m; the next acceptance window is open"


def test_a_closed_window_keeps_its_stored_value_and_its_earlier_names() -> None:
    event = CapacityEvent.escalation(JobKind.TRAINING, "nightly", "InProgress", 3900.4)
    assert event == CapacityEvent.window_closed(JobKind.TRAINING, "nightly", "InProgress", 3900.4)
    assert EventStatus.ESCALATE is EventStatus.WINDOW_CLOSED
    # The payload value is what rows and events of earlier releases carry.
    assert event.as_payload()["status"] == "escalate"
    assert CapacityEvent.from_payload(event.as_payload()).status is EventStatus.WINDOW_CLOSED


@pytest.mark.parametrize("stop_job", [True, False])
def test_a_passed_deadline_ends_the_wait_and_says_whether_the_job_is_stopped(stop_job: bool) -> None:
    pending = describe("InProgress", "Pending")
    created = pending["CreationTime"]
    early = JobSnapshot.of(JobKind.TRAINING, pending, created + timedelta(seconds=1199))
    assert deadline_passed(early, WaitFor.CAPACITY, "nightly", 1200, stop_job) is None
    late = JobSnapshot.of(JobKind.TRAINING, pending, created + timedelta(seconds=1200))
    passed = deadline_passed(late, WaitFor.CAPACITY, "nightly", 1200, stop_job)
    assert passed is not None and passed.stop_job is stop_job
    assert (passed.event.status, passed.event.error_type) == (EventStatus.ERROR, "CapacityTimeoutError")
    with pytest.raises(errors.CapacityTimeoutError) as raised:
        passed.event.outcome_or_raise()
    assert ("stopped" in str(raised.value)) is stop_job
    # The earlier form, still importable, gives the same event.
    assert (
        deadline_event(
            JobKind.TRAINING, WaitFor.CAPACITY, "nightly", pending, late.phase, late.now, 1200, stop_job
        )
        == passed.event
    )
