"""Job lifecycles over real HTTP with boto3, on a frozen clock moved by ``advance()``."""

from __future__ import annotations

import email.utils
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from botocore.exceptions import ClientError

from offline_sagemaker import OfflineSageMaker

G6, G5, P5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p5.48xlarge", "ml.p4d.24xlarge"
START = 1_800_000_000  # the frozen scenario's start_epoch

pytestmark = pytest.mark.usefixtures("world")


def describe(client: Any, name: str) -> dict[str, Any]:
    result: dict[str, Any] = client.describe_training_job(TrainingJobName=name)
    return result


def epoch(value: datetime) -> float:
    return value.timestamp()


def test_full_lifecycle_starting_pending_selection_downloading_training_uploading_completed(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    # ml.g6.48xlarge has 0 free until 1200 s, then 2.
    client.create_training_job(**make_training("life", [{"InstanceType": G6, "InstanceCount": 2}]))
    first = describe(client, "life")
    assert (first["TrainingJobStatus"], first["SecondaryStatus"]) == ("InProgress", "Starting")
    assert "SelectedInstanceType" not in first["ResourceConfig"]
    assert "InstanceType" not in first["ResourceConfig"]
    assert epoch(first["CreationTime"]) == START

    world.advance(60)
    pending = describe(client, "life")
    assert pending["SecondaryStatus"] == "Pending"
    assert pending["SecondaryStatusTransitions"][-1]["StatusMessage"] == "Waiting for compute capacity"
    assert "EndTime" not in pending["SecondaryStatusTransitions"][-1]
    assert "SelectedInstanceType" not in pending["ResourceConfig"]

    world.advance(1140)  # 1200 s: g6 frees up
    downloading = describe(client, "life")
    assert downloading["SecondaryStatus"] == "Downloading"
    assert downloading["ResourceConfig"]["SelectedInstanceType"] == G6
    assert downloading["ResourceConfig"]["SelectedInstanceCount"] == 2
    assert epoch(downloading["TrainingStartTime"]) == START + 1200

    world.advance(60)
    assert describe(client, "life")["SecondaryStatus"] == "Training"
    world.advance(600)
    assert describe(client, "life")["SecondaryStatus"] == "Uploading"
    world.advance(30)
    done = describe(client, "life")
    assert (done["TrainingJobStatus"], done["SecondaryStatus"]) == ("Completed", "Completed")
    assert [t["Status"] for t in done["SecondaryStatusTransitions"]] == [
        "Starting",
        "Pending",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
    ]
    assert all("EndTime" in t for t in done["SecondaryStatusTransitions"])
    assert epoch(done["TrainingEndTime"]) == START + 1200 + 60 + 600 + 30
    assert done["TrainingTimeInSeconds"] == done["BillableTimeInSeconds"] == 690
    assert done["ModelArtifacts"]["S3ModelArtifacts"] == "s3://models/out/life/output/model.tar.gz"
    job = world.job("life")
    assert (job["selected_rank"], job["capacity"], job["waited_seconds"]) == (1, "on-demand", 1200)


def test_selection_takes_the_first_entry_with_capacity_in_list_order(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(
        **make_training("order", [{"InstanceType": G6}, {"InstanceType": G5}, {"InstanceType": P4D}], count=1)
    )
    client.create_training_job(
        **make_training("order-both-free", [{"InstanceType": P4D}, {"InstanceType": G5}], count=1)
    )
    world.advance(60)
    assert describe(client, "order")["ResourceConfig"]["SelectedInstanceType"] == G5
    assert world.job("order")["selected_rank"] == 2
    assert describe(client, "order-both-free")["ResourceConfig"]["SelectedInstanceType"] == P4D


def test_per_entry_counts_are_reported_for_the_selected_entry(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    # g5 has 4 free: 5 do not fit, so the p4d entry (2 free) is selected with its own count.
    client.create_training_job(
        **make_training(
            "counts", [{"InstanceType": G5, "InstanceCount": 5}, {"InstanceType": P4D, "InstanceCount": 2}]
        )
    )
    world.advance(60)
    config = describe(client, "counts")["ResourceConfig"]
    assert (config["SelectedInstanceType"], config["SelectedInstanceCount"]) == (P4D, 2)


def test_concurrent_jobs_compete_for_the_same_pool(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    for name in ("c1", "c2"):
        client.create_training_job(**make_training(name, [{"InstanceType": G5, "InstanceCount": 3}]))
    world.advance(60)
    assert describe(client, "c1")["SecondaryStatus"] == "Downloading"
    assert describe(client, "c2")["SecondaryStatus"] == "Pending"
    world.advance(60 + 600 + 30)  # c1 completes and releases 3 of the 4 instances
    assert describe(client, "c1")["TrainingJobStatus"] == "Completed"
    c2 = describe(client, "c2")
    assert c2["SecondaryStatus"] == "Downloading"
    assert epoch(c2["TrainingStartTime"]) == START + 60 + 60 + 600 + 30


@pytest.mark.parametrize(
    ("outcome", "status", "reason"),
    [
        ("stopped", "Stopped", "MaxPendingTimeInSeconds exceeded while waiting for capacity"),
        (
            "failed",
            "Failed",
            "InsufficientCapacityError: Unable to provision requested ML compute capacity within "
            "MaxPendingTimeInSeconds",
        ),
    ],
)
def test_pending_expiry_follows_the_scenario_outcome(
    load_frozen: Callable[..., OfflineSageMaker],
    client: Any,
    make_training: Callable[..., dict[str, Any]],
    outcome: str,
    status: str,
    reason: str,
) -> None:
    world = load_frozen(pending_timeout_outcome=outcome)
    client.create_training_job(
        **make_training("expire", [{"InstanceType": P5}], count=1, stopping={"MaxPendingTimeInSeconds": 1800})
    )
    world.advance(60 + 1799)
    assert describe(client, "expire")["SecondaryStatus"] == "Pending"
    world.advance(1)
    expired = describe(client, "expire")
    assert (expired["TrainingJobStatus"], expired["SecondaryStatus"]) == (status, status)
    assert expired["FailureReason"] == reason
    assert "TrainingStartTime" not in expired and "SelectedInstanceType" not in expired["ResourceConfig"]


def test_without_max_pending_time_the_documented_default_applies(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(**make_training("forever", [{"InstanceType": P5}], count=1))
    world.advance(60 + 2_419_199)
    assert describe(client, "forever")["SecondaryStatus"] == "Pending"
    world.advance(1)
    assert describe(client, "forever")["TrainingJobStatus"] == "Stopped"


def test_cpu_only_list_without_capacity_fails_with_capacity_error(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(
        **make_training(
            "cpu",
            [{"InstanceType": "ml.m5.xlarge"}, {"InstanceType": "ml.c5.xlarge"}],
            count=1,
            stopping={"MaxPendingTimeInSeconds": 7200},
        )
    )
    client.create_training_job(
        **make_training(
            "cpu-ok", [{"InstanceType": "ml.m5.xlarge"}, {"InstanceType": "ml.m5.4xlarge"}], count=2
        )
    )
    world.advance(60)
    failed = describe(client, "cpu")
    assert (failed["TrainingJobStatus"], failed["SecondaryStatus"]) == ("Failed", "Failed")
    assert failed["FailureReason"] == (
        "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML "
        "instance type."
    )
    assert describe(client, "cpu-ok")["ResourceConfig"]["SelectedInstanceType"] == "ml.m5.4xlarge"


def test_plan_backed_entry_without_reservation_is_skipped_for_the_next(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]], plans: dict[str, str]
) -> None:
    client.create_training_job(
        **make_training(
            "skip-plan",
            [
                {"InstanceType": P5, "InstanceCount": 2, "TrainingPlanArns": [plans["p5_later"]]},
                {"InstanceType": P4D, "InstanceCount": 1},
            ],
        )
    )
    world.advance(60)
    job = world.job("skip-plan")
    assert (job["selected_instance_type"], job["selected_rank"], job["capacity"]) == (P4D, 2, "on-demand")


def test_plan_backed_entry_with_reservation_uses_the_plan(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]], plans: dict[str, str]
) -> None:
    client.create_training_job(
        **make_training(
            "use-plan",
            [
                {"InstanceType": P5, "InstanceCount": 2, "TrainingPlanArns": [plans["p5"]]},
                {"InstanceType": G5, "InstanceCount": 1},
            ],
        )
    )
    client.create_training_job(
        **make_training(
            "plan-full",
            [
                {"InstanceType": P5, "InstanceCount": 1, "TrainingPlanArns": [plans["p5"]]},
                {"InstanceType": G5, "InstanceCount": 1},
            ],
        )
    )
    world.advance(60)
    job = world.job("use-plan")
    assert (job["selected_instance_type"], job["selected_rank"], job["capacity"]) == (P5, 1, "training-plan")
    assert world.job("plan-full")["selected_instance_type"] == G5  # the plan's 2 instances are taken
    listed = client.list_training_jobs(TrainingPlanArnEquals=plans["p5"])["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in listed] == ["use-plan"]


def test_stop_from_pending(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(**make_training("stop-pending", [{"InstanceType": P5}], count=1))
    world.advance(60)
    client.stop_training_job(TrainingJobName="stop-pending")
    stopping = describe(client, "stop-pending")
    assert (stopping["TrainingJobStatus"], stopping["SecondaryStatus"]) == ("Stopping", "Stopping")
    world.advance(30)
    stopped = describe(client, "stop-pending")
    assert (stopped["TrainingJobStatus"], stopped["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert "TrainingStartTime" not in stopped


def test_stop_from_training_releases_instances(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(**make_training("stop-run", [{"InstanceType": G5, "InstanceCount": 4}]))
    client.create_training_job(**make_training("stop-next", [{"InstanceType": G5, "InstanceCount": 4}]))
    world.advance(120)
    assert describe(client, "stop-run")["SecondaryStatus"] == "Training"
    client.stop_training_job(TrainingJobName="stop-run")
    client.stop_training_job(TrainingJobName="stop-run")  # idempotent while Stopping
    world.advance(30)
    stopped = describe(client, "stop-run")
    assert stopped["TrainingJobStatus"] == "Stopped"
    assert epoch(stopped["TrainingEndTime"]) == START + 150
    assert describe(client, "stop-next")["ResourceConfig"]["SelectedInstanceType"] == G5
    with pytest.raises(ClientError) as info:
        client.stop_training_job(TrainingJobName="stop-run")
    assert info.value.response["Error"]["Code"] == "ValidationException"


def test_processing_waits_without_selection_then_stops(
    world: OfflineSageMaker, client: Any, make_processing: Callable[..., dict[str, Any]]
) -> None:
    client.create_processing_job(**make_processing("p-wait", [{"InstanceType": "ml.m5.xlarge"}], count=1))
    world.advance(100_000)
    waiting = client.describe_processing_job(ProcessingJobName="p-wait")
    assert waiting["ProcessingJobStatus"] == "InProgress"
    assert "SelectedInstanceType" not in waiting["ProcessingResources"]["ClusterConfig"]
    assert "ProcessingStartTime" not in waiting
    client.stop_processing_job(ProcessingJobName="p-wait")
    assert client.describe_processing_job(ProcessingJobName="p-wait")["ProcessingJobStatus"] == "Stopping"
    world.advance(30)
    stopped = client.describe_processing_job(ProcessingJobName="p-wait")
    assert stopped["ProcessingJobStatus"] == "Stopped" and "ProcessingEndTime" in stopped


def test_processing_fails_when_the_scenario_says_so(
    load_frozen: Callable[..., OfflineSageMaker], client: Any, make_processing: Callable[..., dict[str, Any]]
) -> None:
    world = load_frozen(processing_when_no_capacity="fail")
    client.create_processing_job(**make_processing("p-fail", [{"InstanceType": "ml.m5.xlarge"}], count=1))
    world.advance(60)
    failed = client.describe_processing_job(ProcessingJobName="p-fail")
    assert failed["ProcessingJobStatus"] == "Failed"
    assert failed["FailureReason"].startswith(
        "CapacityError: Unable to provision requested ML compute capacity"
    )


def test_processing_selects_then_completes(
    world: OfflineSageMaker, client: Any, make_processing: Callable[..., dict[str, Any]]
) -> None:
    client.create_processing_job(
        **make_processing(
            "p-run",
            [
                {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
                {"InstanceType": "ml.m5.4xlarge", "InstanceCount": 2},
            ],
        )
    )
    world.advance(60)
    running = client.describe_processing_job(ProcessingJobName="p-run")
    cluster = running["ProcessingResources"]["ClusterConfig"]
    assert (cluster["SelectedInstanceType"], cluster["SelectedInstanceCount"]) == ("ml.m5.4xlarge", 2)
    assert "InstanceType" not in cluster
    assert epoch(running["ProcessingStartTime"]) == START + 60
    world.advance(600)
    done = client.describe_processing_job(ProcessingJobName="p-run")
    assert done["ProcessingJobStatus"] == "Completed"
    assert epoch(done["ProcessingEndTime"]) == START + 660


def test_tags_override_runtime_and_outcome(
    world: OfflineSageMaker,
    client: Any,
    make_training: Callable[..., dict[str, Any]],
    make_processing: Callable[..., dict[str, Any]],
) -> None:
    client.create_training_job(
        **make_training("quick", [{"InstanceType": G5}], count=1, tags={"emulator:runtime-seconds": "100"})
    )
    client.create_training_job(
        **make_training("doomed", [{"InstanceType": G5}], count=1, tags={"emulator:outcome": "Failed"})
    )
    client.create_processing_job(
        **make_processing(
            "p-doomed", [{"InstanceType": "ml.m5.4xlarge"}], count=1, tags={"emulator:outcome": "Failed"}
        )
    )
    world.advance(60 + 60 + 100 + 30)
    assert describe(client, "quick")["TrainingJobStatus"] == "Completed"
    assert describe(client, "doomed")["SecondaryStatus"] == "Training"
    world.advance(500)
    doomed = describe(client, "doomed")
    assert (doomed["TrainingJobStatus"], doomed["FailureReason"]) == (
        "Failed",
        "AlgorithmError: emulated failure",
    )
    assert doomed["SecondaryStatusTransitions"][-2]["Status"] == "Training"
    p_doomed = client.describe_processing_job(ProcessingJobName="p-doomed")
    assert p_doomed["ProcessingJobStatus"] == "Failed" and p_doomed["ExitMessage"]


def test_list_filters_sorts_and_paginates(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    for i in range(12):
        client.create_training_job(**make_training(f"list-{i:02d}", [{"InstanceType": G5}], count=1))
        world.advance(1)
    client.create_training_job(**make_training("other", [{"InstanceType": P5}], count=1))
    first_page = client.list_training_jobs(NameContains="LIST")
    assert len(first_page["TrainingJobSummaries"]) == 10 and "NextToken" in first_page
    assert first_page["TrainingJobSummaries"][0]["TrainingJobName"] == "list-00"  # oldest first by default
    names = [
        s["TrainingJobName"]
        for page in client.get_paginator("list_training_jobs").paginate(
            NameContains="list", SortBy="Name", SortOrder="Ascending", PaginationConfig={"PageSize": 5}
        )
        for s in page["TrainingJobSummaries"]
    ]
    assert names == [f"list-{i:02d}" for i in range(12)]
    after = datetime.fromtimestamp(START + 5.5, tz=timezone.utc)
    recent = client.list_training_jobs(CreationTimeAfter=after, NameContains="list", MaxResults=100)
    assert len(recent["TrainingJobSummaries"]) == 6
    world.advance(60)
    # Filters apply to the page after it is cut: "other", the newest job, is on the newest page.
    pending = client.list_training_jobs(
        StatusEquals="InProgress", NameContains="other", SortOrder="Descending"
    )["TrainingJobSummaries"]
    assert pending[0]["SecondaryStatus"] == "Pending"


def test_date_header_is_emulated_time(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    world.advance(3600)
    response = client.list_training_jobs()
    date = response["ResponseMetadata"]["HTTPHeaders"]["date"]
    assert email.utils.parsedate_to_datetime(date).timestamp() == START + 3600 == world.now()
    with pytest.raises(ClientError) as info:
        client.describe_training_job(TrainingJobName="nobody")
    error_date = info.value.response["ResponseMetadata"]["HTTPHeaders"]["date"]
    assert email.utils.parsedate_to_datetime(error_date).timestamp() == START + 3600


def test_stop_all_jobs_helper(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(**make_training("sa-1", [{"InstanceType": G5}], count=1))
    client.create_training_job(**make_training("sa-2", [{"InstanceType": P5}], count=1))
    assert world.stop_all_jobs() == 2
    world.advance(30)
    assert {j["status"] for j in world.jobs()} == {"Stopped"}
