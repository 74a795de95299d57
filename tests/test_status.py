"""Where a job stands, from a Describe response or a List summary, and when a wait is over."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.status import (
    JobSnapshot,
    Phase,
    WaitFor,
    client_deadline_passed,
    client_timer_passed,
    is_done,
    phase_of,
    worth_a_look,
)

T, P = JobKind.TRAINING, JobKind.PROCESSING
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def training(status: str = "InProgress", secondary: str | None = None, **cluster: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"TrainingJobName": "j", "TrainingJobStatus": status, "ResourceConfig": cluster}
    if secondary:
        out["SecondaryStatus"] = secondary
    return out


@pytest.mark.parametrize(
    ("response", "phase"),
    [
        (training(secondary="Starting"), Phase.WAITING),
        (training(secondary="Pending"), Phase.WAITING),
        (training(secondary="Downloading"), Phase.RUNNING),
        (training(secondary="Pending", SelectedInstanceType="ml.g5.48xlarge"), Phase.RUNNING),
        (training("Stopping", "Stopping"), Phase.STOPPING),
        (training("Completed", "Completed"), Phase.COMPLETED),
        (training("Failed", "Failed"), Phase.FAILED),
        (training("Stopped", "Stopped"), Phase.STOPPED),
        # A ListTrainingJobs summary: status and secondary status, no cluster.
        (
            {"TrainingJobName": "j", "TrainingJobStatus": "InProgress", "SecondaryStatus": "Training"},
            Phase.RUNNING,
        ),
        (
            {"TrainingJobName": "j", "TrainingJobStatus": "InProgress", "SecondaryStatus": "Pending"},
            Phase.WAITING,
        ),
    ],
)
def test_training_phase_from_describe_or_summary(response: dict[str, Any], phase: Phase) -> None:
    assert phase_of(T, response) is phase


def test_processing_shows_a_selection_only_through_selected_instance_type() -> None:
    waiting = {"ProcessingJobStatus": "InProgress", "SecondaryStatus": "Training"}  # ignored for processing
    assert phase_of(P, waiting) is Phase.WAITING
    selected = {
        "ProcessingJobStatus": "InProgress",
        "ProcessingResources": {"ClusterConfig": {"SelectedInstanceType": "ml.c6i.4xlarge"}},
    }
    assert phase_of(P, selected) is Phase.RUNNING
    assert phase_of(P, {"ProcessingJobStatus": "Completed"}) is Phase.COMPLETED


@pytest.mark.parametrize("phase", list(Phase))
def test_a_wait_is_over_when_the_job_ended_or_for_capacity_when_it_runs(phase: Phase) -> None:
    assert is_done(phase, WaitFor.COMPLETION) is phase.is_terminal()
    assert is_done(phase, "capacity") is (phase.is_terminal() or phase is Phase.RUNNING)
    # The List loop wakes a waiter for anything a Describe must confirm.
    assert worth_a_look(phase, WaitFor.CAPACITY) is (phase is not Phase.WAITING)
    assert worth_a_look(phase, WaitFor.COMPLETION) is phase.is_terminal()


def test_a_client_timer_counts_from_creation_on_the_service_clock() -> None:
    created = {"CreationTime": NOW - timedelta(seconds=1200)}
    assert client_timer_passed(Phase.WAITING, created, NOW, 1800) is None
    assert client_timer_passed(Phase.WAITING, created, NOW, 1200) == pytest.approx(1200)
    assert client_timer_passed(Phase.RUNNING, created, NOW, 60) is None  # capacity was acquired
    assert client_timer_passed(Phase.WAITING, created, NOW, None) is None
    assert client_deadline_passed is client_timer_passed  # the earlier name


def test_a_job_snapshot_reads_one_describe_on_its_service_clock() -> None:
    describe = {
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Pending",
        "CreationTime": NOW - timedelta(seconds=1200),
    }
    job = JobSnapshot.of(T, describe, NOW)
    assert (job.phase, job.status, job.waited) == (Phase.WAITING, "InProgress", pytest.approx(1200))
    assert job.created == NOW - timedelta(seconds=1200)
    assert job.timer_passed(1800) is None and job.timer_passed(1200) == pytest.approx(1200)
    assert JobSnapshot.of(T, {"TrainingJobStatus": "InProgress"}, NOW).created == NOW
