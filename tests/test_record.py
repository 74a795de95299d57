"""The capacity record: complete for successes and failures, versioned, tolerant when read back."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.hyperpod import FlexibleGroup, GroupPhase
from airflow_provider_sm_prefs.domain.hyperpod_outcome import (
    GROUP_KIND,
    group_outcome,
    node_mix,
    request_fields,
)
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


# -- HyperPod instance groups ------------------------------------------------------------------------------

GROUP = FlexibleGroup.parse(
    "gpu-workers", ["ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4d.24xlarge"], 8, min_instance_count=4
)
DETAILS = {
    "InstanceGroupName": "gpu-workers",
    "MinCount": 4,
    "InstanceTypeDetails": [
        {"InstanceType": "ml.p5.48xlarge", "CurrentCount": 2},
        {"InstanceType": "ml.p4d.24xlarge", "CurrentCount": 6},
    ],
}


def group_record() -> CapacityRecord:
    start = datetime(2026, 11, 30, 1, 0, tzinfo=timezone.utc)
    outcome = group_outcome(
        "nightly",
        GROUP,
        DETAILS,
        GroupPhase.REACHED_TARGET,
        start,
        start + timedelta(minutes=25),
        {"ml.p5.48xlarge": 55.04, "ml.p4d.24xlarge": 37.69},
    )
    return CapacityRecord.from_outcome(TI, outcome, "us-east-1", now=NOW)


def test_a_group_records_its_nodes_in_list_order_its_counts_wait_accelerators_and_cost() -> None:
    record = group_record()
    assert record.is_group and record.job_kind == GROUP_KIND == "hyperpod-group"
    assert (record.cluster_name, record.group_name, record.phase) == (
        "nightly",
        "gpu-workers",
        "reached-target",
    )
    assert [(n["instance_type"], n["rank"], n["count"]) for n in record.nodes] == [
        ("ml.p5.48xlarge", 1, 2),
        ("ml.p4d.24xlarge", 3, 6),
    ]
    assert (record.target_count, record.current_count, record.min_count) == (8, 8, 4)
    assert record.fell_back is True and record.seconds_to_in_service == 1500.0
    assert record.accelerators_total == 64 and record.accelerator_memory_gib_total == 16 * 80 + 48 * 40
    assert record.hourly_cost == pytest.approx(2 * 55.04 + 6 * 37.69)
    assert record.first_choice_hourly_cost == pytest.approx(8 * 55.04)
    assert record.preferences == list(GROUP.instance_types)
    # A job's fields stay empty: nothing of a group is mistaken for a job's selection.
    assert (
        record.job_name is None and record.selected_instance_type is None and record.preference_rank is None
    )
    assert node_mix(record.nodes) == "2 × ml.p5.48xlarge + 6 × ml.p4d.24xlarge"
    assert CapacityRecord.from_dict(record.as_dict()) == record


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            errors.GroupCapacityShortfallError("nightly", "gpu-workers", "InService", "2 of 8"),
            FailureKind.SHORTFALL,
        ),
        (
            errors.GroupRolledBackError("nightly", "gpu-workers", "RollingBack", "min"),
            FailureKind.ROLLED_BACK,
        ),
        (errors.ClusterConfigError("nightly", "gpu-workers", "NotFound", "no cluster"), FailureKind.REJECTED),
        (
            errors.ClusterQuotaError("nightly", "gpu-workers", "ResourceLimitExceeded", "p5"),
            FailureKind.QUOTA,
        ),
        (errors.ClusterFailedError("nightly", "gpu-workers", "Failed", None), FailureKind.FAILED),
        (errors.InvalidInstancePreferencesError(["instance_types: bad"]), FailureKind.INVALID_REQUEST),
    ],
)
def test_every_group_failure_leaves_a_record_of_its_kind_naming_the_group(
    error: BaseException, kind: FailureKind
) -> None:
    known = request_fields("nightly", "gpu-workers", GROUP)
    record = CapacityRecord.from_error(TI, error, GROUP_KIND, None, [], "us-east-1", now=NOW, group=known)
    assert record.is_group and record.failure_kind == kind.value and record.reason
    assert (record.cluster_name, record.group_name, record.target_count, record.min_count) == (
        "nightly",
        "gpu-workers",
        8,
        4,
    )
    assert record.preferences == list(GROUP.instance_types) and record.nodes == []
    if isinstance(error, errors.ClusterGroupError):
        assert record.job_status == error.status
    assert CapacityRecord.from_dict(record.as_dict()) == record


def test_a_group_failure_before_its_list_was_checked_names_the_cluster_and_group() -> None:
    error = errors.ClusterConfigError("other", "cpu", "NotFound", "no such cluster")
    record = CapacityRecord.from_error(TI, error, GROUP_KIND, None, [], None, now=NOW)
    assert (record.cluster_name, record.group_name, record.failure_kind) == ("other", "cpu", "rejected")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("nodes", {"ml.p5.48xlarge": 2}),
        ("target_count", "8"),
        ("seconds_to_in_service", "1500"),
        ("phase", 1),
    ],
)
def test_a_group_record_with_a_field_of_the_wrong_type_reads_back_as_none(field: str, value: Any) -> None:
    data = group_record().as_dict()
    assert CapacityRecord.from_dict({**data, field: value}) is None


def test_a_job_record_is_not_a_group_record() -> None:
    record = CapacityRecord.from_outcome(TI, outcome(), "eu-west-1", now=NOW)
    assert not record.is_group and record.nodes == [] and record.cluster_name is None
