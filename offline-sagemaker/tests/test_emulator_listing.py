"""ListTrainingJobs / ListProcessingJobs over real HTTP with boto3: AWS's order of operations.

ListTrainingJobs' API reference: "When StatusEquals and MaxResults are set at the same time, the
MaxResults number of training jobs are first retrieved ignoring the StatusEquals parameter and then they
are filtered by the StatusEquals parameter". A page is cut from the jobs that meet the query conditions
(the time filters), in sort order, and then filtered (StatusEquals, NameContains, TrainingPlanArnEquals):
it holds anything from none to MaxResults summaries, and only NextToken says whether jobs remain.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from botocore.exceptions import ClientError

from offline_sagemaker import OfflineSageMaker

G5, P5 = "ml.g5.48xlarge", "ml.p5.48xlarge"
WAITS, RUNS = "ml.m5.xlarge", "ml.m5.4xlarge"  # processing in the frozen scenario: 0 free (waits), 2 free
START = 1_800_000_000  # the frozen scenario's start_epoch
OLD = [f"old-{i}" for i in range(7)]  # created first, one second apart; InProgress
NEW = [f"new-{i}" for i in range(3)]  # the newest three; Completed

pytestmark = pytest.mark.usefixtures("world")

Pages = Callable[..., list[list[str]]]


def pages_of(call: Callable[..., dict[str, Any]], summaries: str, name: str) -> Pages:
    """A function that follows NextToken by hand until there is none, returning every page's names."""

    def pages(**kwargs: Any) -> list[list[str]]:
        out: list[list[str]] = []
        token = None
        while True:
            page = call(**kwargs, **({"NextToken": token} if token else {}))
            out.append([s[name] for s in page[summaries]])
            token = page.get("NextToken")
            if not token:
                return out
            assert len(out) < 100, "NextToken never ran out"

    return pages


def training_pages(client: Any) -> Pages:
    return pages_of(client.list_training_jobs, "TrainingJobSummaries", "TrainingJobName")


def processing_pages(client: Any) -> Pages:
    return pages_of(client.list_processing_jobs, "ProcessingJobSummaries", "ProcessingJobName")


def statuses(client: Any, kind: str) -> dict[str, str]:
    noun = "TrainingJob" if kind == "training" else "ProcessingJob"
    return {
        s[f"{noun}Name"]: s[f"{noun}Status"]
        for page in client.get_paginator(f"list_{kind}_jobs").paginate()
        for s in page[f"{noun}Summaries"]
    }


@pytest.fixture
def training_jobs(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> OfflineSageMaker:
    """7 older training jobs Pending for p5 (none free: InProgress), then the 3 newest, Completed."""
    for name in OLD:
        client.create_training_job(**make_training(name, [{"InstanceType": P5}], count=1))
        world.advance(1)
    for name in NEW:
        client.create_training_job(**make_training(name, [{"InstanceType": G5}], count=1))
        world.advance(1)
    world.advance(1000)
    assert statuses(client, "training") == {
        **dict.fromkeys(OLD, "InProgress"),
        **dict.fromkeys(NEW, "Completed"),
    }
    return world


@pytest.fixture
def processing_jobs(
    world: OfflineSageMaker, client: Any, make_processing: Callable[..., dict[str, Any]]
) -> OfflineSageMaker:
    """7 older processing jobs waiting for capacity (InProgress), then the 3 newest, Completed."""
    for name in OLD:
        client.create_processing_job(**make_processing(name, [{"InstanceType": WAITS}], count=1))
        world.advance(1)
    for name in NEW:
        client.create_processing_job(**make_processing(name, [{"InstanceType": RUNS}], count=1))
        world.advance(1)
    world.advance(3000)
    assert statuses(client, "processing") == {
        **dict.fromkeys(OLD, "InProgress"),
        **dict.fromkeys(NEW, "Completed"),
    }
    return world


# -- the page is cut before StatusEquals filters it ---------------------------------------------------


@pytest.mark.usefixtures("training_jobs")
def test_a_training_page_of_the_newest_completed_jobs_is_empty_for_in_progress_and_says_more_remain(
    client: Any,
) -> None:
    # Fails with filter-then-page: that page would hold the three newest InProgress jobs.
    page = client.list_training_jobs(MaxResults=3, StatusEquals="InProgress", SortOrder="Descending")
    assert page["TrainingJobSummaries"] == []
    assert page["NextToken"]


@pytest.mark.usefixtures("training_jobs")
def test_paging_training_jobs_to_the_end_returns_every_in_progress_job_exactly_once(client: Any) -> None:
    pages = training_pages(client)(MaxResults=3, StatusEquals="InProgress", SortOrder="Descending")
    # 10 jobs newest first, 3 a page: [new-2 new-1 new-0] [old-6 old-5 old-4] [old-3 old-2 old-1] [old-0]
    assert pages == [[], ["old-6", "old-5", "old-4"], ["old-3", "old-2", "old-1"], ["old-0"]]
    ascending = training_pages(client)(MaxResults=4, StatusEquals="InProgress")
    # Oldest first: [old-0..old-3] [old-4 old-5 old-6 (new-0)] [(new-1 new-2)]
    assert ascending == [["old-0", "old-1", "old-2", "old-3"], ["old-4", "old-5", "old-6"], []]
    completed = training_pages(client)(MaxResults=4, StatusEquals="Completed", SortOrder="Descending")
    assert completed == [["new-2", "new-1", "new-0"], [], []]


@pytest.mark.usefixtures("training_jobs")
def test_botocores_paginator_collects_every_in_progress_training_job(client: Any) -> None:
    paginator = client.get_paginator("list_training_jobs")
    pages = list(
        paginator.paginate(
            StatusEquals="InProgress", SortOrder="Descending", PaginationConfig={"PageSize": 3}
        )
    )
    assert [len(p["TrainingJobSummaries"]) for p in pages] == [0, 3, 3, 1]
    names = [s["TrainingJobName"] for p in pages for s in p["TrainingJobSummaries"]]
    assert sorted(names) == OLD and len(names) == len(set(names))
    everything = paginator.paginate(StatusEquals="InProgress").build_full_result()
    assert [s["TrainingJobName"] for s in everything["TrainingJobSummaries"]] == OLD


@pytest.mark.usefixtures("processing_jobs")
def test_processing_pages_are_cut_before_status_filtering_too(client: Any) -> None:
    page = client.list_processing_jobs(MaxResults=3, StatusEquals="InProgress", SortOrder="Descending")
    assert page["ProcessingJobSummaries"] == [] and page["NextToken"]
    pages = processing_pages(client)(MaxResults=3, StatusEquals="InProgress", SortOrder="Descending")
    assert pages == [[], ["old-6", "old-5", "old-4"], ["old-3", "old-2", "old-1"], ["old-0"]]
    everything = (
        client.get_paginator("list_processing_jobs")
        .paginate(StatusEquals="InProgress", SortOrder="Descending", PaginationConfig={"PageSize": 2})
        .build_full_result()
    )
    assert [s["ProcessingJobName"] for s in everything["ProcessingJobSummaries"]] == OLD[::-1]


# -- defaults -----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("training_jobs")
def test_defaults_are_ten_a_page_oldest_first_by_creation_time(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(**make_training("newest", [{"InstanceType": P5}], count=1))
    first = client.list_training_jobs()
    # SortBy CreationTime, SortOrder Ascending ("The default is Ascending."), MaxResults 10.
    assert [s["TrainingJobName"] for s in first["TrainingJobSummaries"]] == OLD + NEW
    assert first["NextToken"]
    rest = client.list_training_jobs(NextToken=first["NextToken"])
    assert [s["TrainingJobName"] for s in rest["TrainingJobSummaries"]] == ["newest"]
    assert "NextToken" not in rest
    # With StatusEquals the default page is still the 10 oldest, filtered; "newest" is on the next.
    pages = training_pages(client)(StatusEquals="InProgress")
    assert pages == [OLD, ["newest"]]


@pytest.mark.usefixtures("processing_jobs")
def test_processing_defaults_are_the_same(client: Any) -> None:
    first = client.list_processing_jobs(StatusEquals="Completed")
    assert [s["ProcessingJobName"] for s in first["ProcessingJobSummaries"]] == NEW
    assert "NextToken" not in first  # exactly 10 jobs: one default page holds them all


# -- which filters come before the cut and which after ------------------------------------------------


@pytest.mark.usefixtures("training_jobs")
def test_name_contains_filters_the_page_after_the_cut(client: Any) -> None:
    page = client.list_training_jobs(MaxResults=3, NameContains="old", SortOrder="Descending")
    assert page["TrainingJobSummaries"] == [] and page["NextToken"]
    pages = training_pages(client)(MaxResults=3, NameContains="OLD-", SortOrder="Descending")
    assert [n for p in pages for n in p] == OLD[::-1]


@pytest.mark.usefixtures("training_jobs")
def test_time_filters_are_query_conditions_applied_before_the_cut(client: Any) -> None:
    # new-0..new-2 were created at START+7..+9: after START+6.5 only they remain, and fill the page.
    after = datetime.fromtimestamp(START + 6.5, tz=timezone.utc)
    page = client.list_training_jobs(CreationTimeAfter=after, MaxResults=3)
    assert [s["TrainingJobName"] for s in page["TrainingJobSummaries"]] == NEW
    assert "NextToken" not in page
    before = datetime.fromtimestamp(START + 2.5, tz=timezone.utc)
    page = client.list_training_jobs(CreationTimeBefore=before, MaxResults=3, SortOrder="Descending")
    assert [s["TrainingJobName"] for s in page["TrainingJobSummaries"]] == ["old-2", "old-1", "old-0"]
    assert "NextToken" not in page
    # ... and StatusEquals still filters their page after the cut.
    page = client.list_training_jobs(CreationTimeAfter=after, MaxResults=3, StatusEquals="InProgress")
    assert page["TrainingJobSummaries"] == [] and "NextToken" not in page


def test_training_plan_filter_applies_after_the_cut(
    world: OfflineSageMaker,
    client: Any,
    make_training: Callable[..., dict[str, Any]],
    plans: dict[str, str],
) -> None:
    client.create_training_job(
        **make_training(
            "on-plan", [{"InstanceType": P5, "InstanceCount": 1, "TrainingPlanArns": [plans["p5"]]}]
        )
    )
    world.advance(1)
    for i in range(3):
        client.create_training_job(**make_training(f"off-plan-{i}", [{"InstanceType": G5}], count=1))
        world.advance(1)
    world.advance(60)
    kwargs = {"TrainingPlanArnEquals": plans["p5"], "MaxResults": 2, "SortOrder": "Descending"}
    assert training_pages(client)(**kwargs) == [[], ["on-plan"]]


# -- tokens -------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("training_jobs")
def test_tokens_stay_opaque_and_validated(client: Any, raw_client: Any) -> None:
    token = client.list_training_jobs(MaxResults=3, StatusEquals="InProgress")["NextToken"]
    assert isinstance(token, str) and "old" not in token
    for forged in ("!!!", "eyJvZmZzZXQiOiAtMX0=", "bm90IGpzb24="):  # garbage, {"offset": -1}, not JSON
        with pytest.raises(ClientError) as info:
            client.list_training_jobs(NextToken=forged)
        assert info.value.response["Error"]["Code"] == "ValidationException"
    for bad in (0, 101):
        with pytest.raises(ClientError) as info:
            raw_client.list_training_jobs(MaxResults=bad)
        assert info.value.response["Error"]["Code"] == "ValidationException"
    # A token past the end: an empty last page, no further token.
    last = client.list_training_jobs(NextToken="eyJvZmZzZXQiOiAxMDB9")  # {"offset": 100}
    assert last["TrainingJobSummaries"] == [] and "NextToken" not in last
