"""The capacity record: complete for successes and failures, versioned, tolerant when read back."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.record import (
    RECORD_VERSION,
    CapacityRecord,
    FailureKind,
    TaskInstanceRef,
)

TI = TaskInstanceRef("nightly", "train", "manual__2026-11-30", map_index=3, try_number=2)
NOW = datetime(2026, 11, 30, 2, 0, tzinfo=timezone.utc)
PREFS = [
    {"instance_type": "ml.g6.48xlarge", "instance_count": 2},
    {"instance_type": "ml.g5.48xlarge", "instance_count": 4},
]


def outcome(**overrides: Any) -> CapacityOutcome:
    base: dict[str, Any] = {
        "job_name": "nightly-1",
        "job_kind": "training",
        "job_arn": "arn:aws:sagemaker:eu-west-1:123456789012:training-job/nightly-1",
        "selected_instance_type": "ml.g5.48xlarge",
        "selected_instance_count": 4,
        "preference_rank": 2,
        "fell_back": True,
        "pending_seconds": 754.0,
        "capacity": "on-demand",
        "accelerators": None,
        "job_status": "Completed",
        "preferences": PREFS,
        "training_seconds": 1800,
        "billable_seconds": 1800,
        "created_at": "2026-11-30T01:00:00+00:00",
        "ended_at": "2026-11-30T01:45:00+00:00",
    }
    return CapacityOutcome(**{**base, **overrides})


def test_a_success_records_the_task_try_the_choice_the_wait_and_the_cost_basis() -> None:
    record = CapacityRecord.from_outcome(TI, outcome(), "eu-west-1", now=NOW)
    data = record.as_dict()
    assert data["version"] == RECORD_VERSION
    assert (data["dag_id"], data["task_id"], data["map_index"], data["try_number"]) == (
        "nightly",
        "train",
        3,
        2,
    )
    assert (data["selected_instance_type"], data["selected_instance_count"], data["preference_rank"]) == (
        "ml.g5.48xlarge",
        4,
        2,
    )
    assert (data["pending_seconds"], data["billable_seconds"], data["region"]) == (754.0, 1800, "eu-west-1")
    assert data["failure_kind"] is None and data["preferences"] == PREFS
    assert data["recorded_at"] == NOW.isoformat() and data["ended_at"] == "2026-11-30T01:45:00+00:00"
    assert CapacityRecord.from_dict(data) == record


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (errors.QuotaExceededError("j", "instance_preferences[1] lacks quota"), FailureKind.QUOTA),
        (
            errors.CapacityTimeoutError("j", "Stopped", "MaxPendingTimeInSeconds"),
            FailureKind.CAPACITY_TIMEOUT,
        ),
        (errors.CapacityUnavailableError("j", "Failed", "CapacityError"), FailureKind.NO_CAPACITY),
        (errors.JobFailedError("j", "Failed", "AlgorithmError"), FailureKind.FAILED),
        (errors.JobStoppedError("j", "Stopped", "by someone"), FailureKind.STOPPED),
        (errors.JobSubmissionError("j", "ValidationException", "bad"), FailureKind.REJECTED),
        (
            errors.InvalidInstancePreferencesError(["instance_preferences[0]: bad"]),
            FailureKind.INVALID_REQUEST,
        ),
        (RuntimeError("unexpected"), FailureKind.FAILED),
    ],
)
def test_every_failure_leaves_a_record_of_its_kind(error: BaseException, kind: FailureKind) -> None:
    record = CapacityRecord.from_error(TI, error, "training", "nightly-1", PREFS, "us-east-1", now=NOW)
    assert record.failure_kind == kind.value and record.reason
    assert record.job_name in ("j", "nightly-1") and record.preferences == PREFS
    assert CapacityRecord.from_dict(record.as_dict()) == record


@pytest.mark.parametrize(
    "junk", [None, "text", [], {}, {"version": 99, "dag_id": "d"}, {"version": 1, "nope": 1}]
)
def test_other_versions_and_junk_read_back_as_none(junk: Any) -> None:
    assert CapacityRecord.from_dict(junk) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("dag_id", ["a"]),
        ("preference_rank", "2"),
        ("preference_rank", True),
        ("pending_seconds", "754"),
        ("fell_back", 1),
        ("preferences", "ml.g5.48xlarge"),
        ("recorded_at", None),
    ],
)
def test_a_record_with_a_field_of_the_wrong_type_reads_back_as_none(field: str, value: Any) -> None:
    data = CapacityRecord.from_outcome(TI, outcome(), "eu-west-1", now=NOW).as_dict()
    assert CapacityRecord.from_dict(data) is not None
    assert CapacityRecord.from_dict({**data, field: value}) is None


def test_the_guardrail_fields_are_checked_when_read_back() -> None:
    data = CapacityRecord.from_outcome(TI, outcome(), "eu-west-1", now=NOW).as_dict()
    assert CapacityRecord.from_dict({**data, "hourly_cost": 81.5, "excluded": []}) is not None
    assert CapacityRecord.from_dict({**data, "hourly_cost": "81.5"}) is None
    assert CapacityRecord.from_dict({**data, "excluded": "quota"}) is None
