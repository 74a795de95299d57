"""The outcome record is read off AWS's own fields; capacity failures are told apart by facts."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.exceptions import (
    CapacityTimeoutError,
    CapacityUnavailableError,
    JobFailedError,
    JobStoppedError,
)
from airflow_provider_sm_prefs.domain.outcome import (
    CapacityOutcome,
    XComKey,
    format_duration,
    outcome_from_describe,
    pending_seconds,
    terminal_error,
)
from airflow_provider_sm_prefs.domain.preferences import JobKind
from airflow_provider_sm_prefs.domain.status import Phase, phase_of

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=timezone.utc)
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly"
PREFS = [
    {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "TrainingPlanArns": [PLAN]},
    {"InstanceType": "ml.g6e.48xlarge", "InstanceCount": 2},
    {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 4},
]


def training(
    status: str = "InProgress",
    secondary: str = "Pending",
    selected: tuple[str, int] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    resource: dict[str, Any] = {"InstancePreferences": PREFS, "VolumeSizeInGB": 50}
    if selected:
        resource["SelectedInstanceType"], resource["SelectedInstanceCount"] = selected
    return {
        "TrainingJobName": "nightly",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/nightly",
        "TrainingJobStatus": status,
        "SecondaryStatus": secondary,
        "CreationTime": T0,
        "ResourceConfig": resource,
        "StoppingCondition": {"MaxPendingTimeInSeconds": 3600},
        "SecondaryStatusTransitions": [
            {"Status": "Starting", "StartTime": T0, "EndTime": T0 + timedelta(seconds=60)},
            {
                "Status": "Pending",
                "StartTime": T0 + timedelta(seconds=60),
                "EndTime": T0 + timedelta(seconds=1260),
            },
            {"Status": "Downloading", "StartTime": T0 + timedelta(seconds=1260)},
        ],
        **extra,
    }


def test_outcome_of_a_fallback_to_the_third_entry() -> None:
    outcome = outcome_from_describe(
        JobKind.TRAINING, training(secondary="Downloading", selected=("ml.g5.48xlarge", 4))
    )
    assert outcome.selected_instance_type == "ml.g5.48xlarge"
    assert outcome.selected_instance_count == 4
    assert outcome.preference_rank == 3
    assert outcome.fell_back is True
    assert outcome.pending_seconds == 1200.0
    assert outcome.capacity == "on-demand"
    assert outcome.accelerators is not None
    assert outcome.accelerators["model"] == "A10G"
    assert outcome.accelerators["total"] == 32
    assert outcome.accelerators["memory_gib_total"] == 32 * 24


def test_outcome_of_a_plan_backed_first_entry() -> None:
    outcome = outcome_from_describe(
        JobKind.TRAINING, training(secondary="Training", selected=("ml.p5.48xlarge", 2))
    )
    assert (outcome.preference_rank, outcome.fell_back, outcome.capacity) == (1, False, "training-plan")


def test_outcome_is_json_safe_and_round_trips() -> None:
    outcome = outcome_from_describe(
        JobKind.TRAINING, training(secondary="Training", selected=("ml.g6e.48xlarge", 2))
    )
    data = json.loads(json.dumps(outcome.as_dict()))
    assert CapacityOutcome.from_dict(data) == outcome
    assert set(outcome.xcom_values()) == {k.value for k in XComKey}


def test_open_pending_transition_is_counted_until_the_service_clock() -> None:
    describe = training()
    describe["SecondaryStatusTransitions"] = [
        {"Status": "Starting", "StartTime": T0, "EndTime": T0 + timedelta(seconds=60)},
        {"Status": "Pending", "StartTime": T0 + timedelta(seconds=60)},
    ]
    assert pending_seconds(JobKind.TRAINING, describe, now=T0 + timedelta(seconds=660)) == 600.0


def test_processing_pending_is_creation_to_start() -> None:
    describe = {"CreationTime": T0, "ProcessingStartTime": T0 + timedelta(seconds=90)}
    assert pending_seconds(JobKind.PROCESSING, describe) == 90.0


@pytest.mark.parametrize(
    ("describe", "phase"),
    [
        (training(secondary="Starting"), Phase.WAITING),
        (training(secondary="Pending"), Phase.WAITING),
        (training(secondary="Downloading", selected=("ml.g5.48xlarge", 4)), Phase.RUNNING),
        (training(secondary="Pending", selected=("ml.g5.48xlarge", 4)), Phase.RUNNING),
        (training(status="Completed", secondary="Completed"), Phase.COMPLETED),
        (training(status="Stopping", secondary="Stopping"), Phase.STOPPING),
    ],
)
def test_training_phase(describe: dict[str, Any], phase: Phase) -> None:
    assert phase_of(JobKind.TRAINING, describe) is phase


def test_processing_waits_until_selected() -> None:
    waiting = {
        "ProcessingJobStatus": "InProgress",
        "ProcessingResources": {"ClusterConfig": {"InstancePreferences": PREFS}},
    }
    assert phase_of(JobKind.PROCESSING, waiting) is Phase.WAITING
    waiting["ProcessingResources"]["ClusterConfig"]["SelectedInstanceType"] = "ml.g5.48xlarge"
    assert phase_of(JobKind.PROCESSING, waiting) is Phase.RUNNING


def test_cpu_only_capacity_error_is_its_own_failure() -> None:
    describe = training(
        status="Failed",
        secondary="Failed",
        FailureReason="CapacityError: Unable to provision requested ML compute capacity.",
    )
    assert isinstance(terminal_error(JobKind.TRAINING, describe), CapacityUnavailableError)


def test_pending_expiry_as_failed_is_a_capacity_timeout() -> None:
    describe = training(
        status="Failed", secondary="Failed", FailureReason="InsufficientCapacityError: no capacity"
    )
    assert isinstance(terminal_error(JobKind.TRAINING, describe), CapacityTimeoutError)


def test_pending_expiry_as_stopped_is_a_capacity_timeout() -> None:
    describe = training(status="Stopped", secondary="Stopped")
    describe["SecondaryStatusTransitions"] = [
        {"Status": "Pending", "StartTime": T0, "EndTime": T0 + timedelta(seconds=3600)},
        {"Status": "Stopped", "StartTime": T0 + timedelta(seconds=3600)},
    ]
    assert isinstance(terminal_error(JobKind.TRAINING, describe), CapacityTimeoutError)


def test_stop_by_someone_else_while_pending_is_a_stop_not_a_timeout() -> None:
    describe = training(status="Stopped", secondary="Stopped")
    describe["SecondaryStatusTransitions"] = [
        {"Status": "Pending", "StartTime": T0, "EndTime": T0 + timedelta(seconds=300)},
        {"Status": "Stopped", "StartTime": T0 + timedelta(seconds=300)},
    ]
    error = terminal_error(JobKind.TRAINING, describe)
    assert isinstance(error, JobStoppedError)
    assert error.job_name == "nightly" and error.status == "Stopped"


def test_failure_after_start_is_a_job_failure_with_aws_reason() -> None:
    describe = training(
        status="Failed",
        secondary="Failed",
        selected=("ml.g5.48xlarge", 4),
        FailureReason="AlgorithmError: boom",
    )
    error = terminal_error(JobKind.TRAINING, describe)
    assert isinstance(error, JobFailedError)
    assert "AlgorithmError: boom" in str(error) and "nightly" in str(error)


def test_completed_is_no_error() -> None:
    assert (
        terminal_error(
            JobKind.TRAINING,
            training(status="Completed", secondary="Completed", selected=("ml.g5.48xlarge", 4)),
        )
        is None
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(5, "5s"), (60, "1m"), (754, "12m34s"), (3 * 3600 + 120, "3h02m")]
)
def test_format_duration(seconds: int, text: str) -> None:
    assert format_duration(seconds) == text


def test_completed_training_outcome_carries_the_model_artifact_sagemaker_reports() -> None:
    artifact = "s3://models/out/nightly/output/model.tar.gz"
    completed = training(
        status="Completed",
        secondary="Completed",
        selected=("ml.g5.48xlarge", 4),
        ModelArtifacts={"S3ModelArtifacts": artifact},
    )
    assert outcome_from_describe(JobKind.TRAINING, completed).model_artifacts == artifact
    running = training(secondary="Training", selected=("ml.g5.48xlarge", 4))
    assert outcome_from_describe(JobKind.TRAINING, running).model_artifacts is None
