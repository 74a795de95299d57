"""When an event's detail ends a wait without a Describe, and when it asks for one (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.event_detail import (
    Confirm,
    EventOrigin,
    EventWeight,
    NoNews,
    Settled,
    describe_of_detail,
    missing_fields,
    weigh_event,
)
from airflow_provider_sm_prefs.domain.events import event_from_describe
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.status import JobStamp, Order, Phase, WaitFor

TRAINING, PROCESSING = JobKind.TRAINING, JobKind.PROCESSING
CREATED = datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc)
G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"
ACCOUNT, REGION = "123456789012", "us-east-1"
JOB_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/job-1"
#: The envelope of SageMaker's own event about job-1.
GENUINE = EventOrigin(ACCOUNT, REGION, (JOB_ARN,))


def millis(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def training_detail(
    secondary: str, at: float, selected: bool = True, status: str = "InProgress"
) -> dict[str, Any]:
    """A training job's event detail ``at`` seconds after its creation, as SageMaker sends it
    (timestamps in epoch milliseconds)."""
    pending_end = CREATED + timedelta(seconds=at)
    cluster: dict[str, Any] = {
        "InstancePreferences": [
            {"InstanceType": G6, "InstanceCount": 2},
            {"InstanceType": G5, "InstanceCount": 4},
        ],
        "VolumeSizeInGB": 100,
    }
    transitions = [
        {
            "Status": "Starting",
            "StartTime": millis(CREATED),
            "EndTime": millis(CREATED + timedelta(seconds=60)),
        },
        {"Status": "Pending", "StartTime": millis(CREATED + timedelta(seconds=60))},
    ]
    if selected:
        cluster.update(SelectedInstanceType=G5, SelectedInstanceCount=4)
        transitions[1]["EndTime"] = millis(pending_end)
        transitions.append({"Status": secondary, "StartTime": millis(pending_end)})
    return {
        "TrainingJobName": "job-1",
        "TrainingJobArn": JOB_ARN,
        "TrainingJobStatus": status,
        "SecondaryStatus": secondary,
        "ResourceConfig": cluster,
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "CreationTime": millis(CREATED),
        "LastModifiedTime": millis(CREATED + timedelta(seconds=at)),
        "SecondaryStatusTransitions": transitions,
    }


def weigh(
    wait_for: WaitFor, detail: dict[str, Any], seen: JobStamp | None, origin: EventOrigin | None = GENUINE
) -> EventWeight:
    """``weigh_event`` for job-1, whose ARN the wait knows from SageMaker."""
    return weigh_event(TRAINING, wait_for, detail, seen, origin=origin, job_arn=JOB_ARN)


def stamp_of(detail: dict[str, Any]) -> JobStamp:
    return JobStamp.of(TRAINING, describe_of_detail(detail))


PENDING = training_detail("Pending", 120, selected=False)
SELECTED = training_detail("Downloading", 3600)


def test_a_newer_detail_that_ends_the_wait_settles_it_with_the_outcome_a_describe_gives() -> None:
    weight = weigh(WaitFor.CAPACITY, SELECTED, stamp_of(PENDING))
    assert isinstance(weight, Settled)
    assert weight.job.phase is Phase.RUNNING
    assert weight.job.now == CREATED + timedelta(seconds=3600)
    outcome = event_from_describe(
        TRAINING, WaitFor.CAPACITY, weight.job.describe, weight.job.phase, now=weight.job.now
    )
    assert outcome.outcome is not None
    assert outcome.outcome["selected_instance_type"] == G5
    assert outcome.outcome["selected_instance_count"] == 4
    assert outcome.outcome["preference_rank"] == 2
    # Pending from 60 s to 3600 s after creation, read from the millisecond timestamps.
    assert outcome.outcome["pending_seconds"] == 3540.0
    assert outcome.outcome["created_at"] == CREATED.isoformat()


def test_a_detail_that_shows_no_change_wakes_nobody_and_moves_what_the_wait_saw() -> None:
    starting = training_detail("Starting", 10, selected=False)
    weight = weigh(WaitFor.CAPACITY, PENDING, stamp_of(starting))
    assert weight == NoNews(stamp_of(PENDING))
    # An older one leaves it where it was.
    assert weigh(WaitFor.CAPACITY, starting, stamp_of(PENDING)) == NoNews(stamp_of(PENDING))


def test_a_job_the_wait_has_not_seen_is_described() -> None:
    weight = weigh(WaitFor.CAPACITY, SELECTED, None)
    assert isinstance(weight, Confirm) and "not seen" in weight.reason


def test_a_late_event_older_than_what_the_wait_saw_is_described() -> None:
    stopping = training_detail("Stopping", 4000, status="Stopping")
    weight = weigh(WaitFor.CAPACITY, SELECTED, stamp_of(stopping))
    assert isinstance(weight, Confirm) and "older" in weight.reason


def test_a_duplicate_of_what_the_wait_saw_is_described() -> None:
    weight = weigh(WaitFor.CAPACITY, SELECTED, stamp_of(SELECTED))
    assert isinstance(weight, Confirm) and "same" in weight.reason


def test_a_later_detail_that_steps_back_in_the_order_of_progress_is_described() -> None:
    running_late = training_detail("Downloading", 5000)
    stopping_earlier = training_detail("Stopping", 4000, status="Stopping")
    assert stamp_of(running_late).against(stamp_of(stopping_earlier)) is Order.UNCLEAR
    weight = weigh(WaitFor.CAPACITY, running_late, stamp_of(stopping_earlier))
    assert isinstance(weight, Confirm) and "unclear" in weight.reason


def test_same_timestamp_and_a_step_forward_is_newer() -> None:
    same_moment = training_detail("Downloading", 120)
    assert stamp_of(same_moment).against(stamp_of(PENDING)) is Order.NEWER


def test_a_change_that_does_not_end_the_wait_is_described() -> None:
    stopping = training_detail("Stopping", 4000, status="Stopping", selected=False)
    weight = weigh(WaitFor.CAPACITY, stopping, stamp_of(PENDING))
    assert isinstance(weight, Confirm) and "stopping" in weight.reason


@pytest.mark.parametrize(
    ("path", "named"),
    [
        (("ResourceConfig", "SelectedInstanceCount"), "ResourceConfig.SelectedInstanceCount"),
        (("SecondaryStatusTransitions",), "SecondaryStatusTransitions"),
        (("TrainingJobArn",), "TrainingJobArn"),
        (("LastModifiedTime",), "LastModifiedTime"),
    ],
)
def test_a_detail_missing_a_field_the_outcome_needs_is_described(path: tuple[str, ...], named: str) -> None:
    detail = training_detail("Downloading", 3600)
    holder: dict[str, Any] = detail
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    weight = weigh(WaitFor.CAPACITY, detail, stamp_of(PENDING))
    assert isinstance(weight, Confirm)
    assert named in weight.reason


def test_a_job_with_preferences_that_ended_without_a_selection_is_described() -> None:
    """A detail that merely left the selection out would read as "never got capacity"."""
    failed = training_detail("Failed", 4000, status="Failed", selected=False)
    failed["FailureReason"] = "CapacityError: no capacity"
    weight = weigh(WaitFor.CAPACITY, failed, stamp_of(PENDING))
    assert isinstance(weight, Confirm) and "SelectedInstanceType" in weight.reason


def test_an_ended_job_settles_a_completion_wait() -> None:
    completed = training_detail("Completed", 7200, status="Completed")
    weight = weigh(WaitFor.COMPLETION, completed, stamp_of(SELECTED))
    assert isinstance(weight, Settled) and weight.job.phase is Phase.COMPLETED
    # A running job is no news to a completion wait.
    assert isinstance(weigh(WaitFor.COMPLETION, SELECTED, stamp_of(PENDING)), NoNews)


def test_a_detail_without_a_status_is_described() -> None:
    detail = dict(SELECTED)
    del detail["TrainingJobStatus"]
    assert isinstance(weigh(WaitFor.CAPACITY, detail, stamp_of(PENDING)), Confirm)


def test_a_processing_job_needs_its_start_time_while_running() -> None:
    describe = {
        "ProcessingJobName": "p-1",
        "ProcessingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:processing-job/p-1",
        "ProcessingJobStatus": "InProgress",
        "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}},
        "CreationTime": CREATED,
        "LastModifiedTime": CREATED,
    }
    assert missing_fields(PROCESSING, describe, Phase.RUNNING) == ["ProcessingStartTime"]


def test_describe_of_detail_reads_millisecond_timestamps() -> None:
    describe = describe_of_detail(SELECTED)
    assert describe["CreationTime"] == CREATED
    assert describe["SecondaryStatusTransitions"][0]["EndTime"] == CREATED + timedelta(seconds=60)
    assert describe["ResourceConfig"] is SELECTED["ResourceConfig"]


@pytest.mark.parametrize(
    ("origin", "named"),
    [
        (EventOrigin("999988887777", REGION, (JOB_ARN,)), "account"),
        (EventOrigin(ACCOUNT, "eu-west-1", (JOB_ARN,)), "region"),
        (EventOrigin(ACCOUNT, REGION, ()), "resources"),
        (EventOrigin(ACCOUNT, REGION, (JOB_ARN.replace("job-1", "job-2"),)), "resources"),
        (None, "names no account"),
    ],
)
def test_a_complete_newer_detail_from_elsewhere_is_only_a_hint(
    origin: EventOrigin | None, named: str
) -> None:
    """A message anyone could have put on the queue, or another account's or region's job of the same
    name: its detail would end the wait, but only a Describe may."""
    weight = weigh(WaitFor.CAPACITY, SELECTED, stamp_of(PENDING), origin)
    assert isinstance(weight, Confirm) and named in weight.reason


def test_a_detail_whose_own_arn_is_another_jobs_is_only_a_hint() -> None:
    forged = {**SELECTED, "TrainingJobArn": JOB_ARN.replace(ACCOUNT, "999988887777")}
    weight = weigh(WaitFor.CAPACITY, forged, stamp_of(PENDING))
    assert isinstance(weight, Confirm) and "TrainingJobArn" in weight.reason


def test_without_the_jobs_arn_from_sagemaker_no_detail_settles_a_wait() -> None:
    weight = weigh_event(
        TRAINING, WaitFor.CAPACITY, SELECTED, stamp_of(PENDING), origin=GENUINE, job_arn=None
    )
    assert isinstance(weight, Confirm) and "ARN is not known" in weight.reason


def test_an_event_from_elsewhere_does_not_move_what_the_wait_saw() -> None:
    """A forged "still pending, much later" would make SageMaker's real next event look old."""
    later_pending = training_detail("Pending", 86400, selected=False)
    elsewhere = EventOrigin("999988887777", REGION, (JOB_ARN,))
    assert weigh(WaitFor.CAPACITY, later_pending, stamp_of(PENDING), elsewhere) == NoNews(stamp_of(PENDING))
    assert weigh(WaitFor.CAPACITY, later_pending, stamp_of(PENDING)) == NoNews(stamp_of(later_pending))
