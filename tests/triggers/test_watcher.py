"""The shared List loop's rules: its cadence, and which listed summaries wake a waiter."""

from __future__ import annotations

import pytest

from airflow_provider_sm_prefs.kinds import JobKind
from airflow_provider_sm_prefs.triggers.watcher import list_cadence, listed_change


@pytest.mark.parametrize(
    ("waiters", "pages", "expected"),
    [(1, 1, 30.0), (10, 1, 30.0), (100, 1, 18.0), (1000, 10, 18.0), (3000, 10, 10.0), (1000, 40, 30.0)],
)
def test_list_cadence_speeds_up_only_while_listing_stays_cheap(
    waiters: int, pages: int, expected: float
) -> None:
    interval = list_cadence(30.0, waiters, pages)
    assert interval == pytest.approx(expected)
    # Faster than the poll interval only while List calls stay under 1/60 of per-job Describes at 30 s.
    if interval < 30.0:
        assert pages / interval <= waiters / 30.0 / 60 + 1e-9


def test_a_listed_summary_wakes_a_capacity_waiter_once_the_job_leaves_starting_and_pending() -> None:
    changed = listed_change(JobKind.TRAINING, "capacity")
    summary = {"TrainingJobName": "j", "TrainingJobStatus": "InProgress"}
    assert not changed({**summary, "SecondaryStatus": "Starting"})
    assert not changed({**summary, "SecondaryStatus": "Pending"})
    assert changed({**summary, "SecondaryStatus": "Downloading"})
    assert changed({**summary, "TrainingJobStatus": "Stopping", "SecondaryStatus": "Stopping"})


def test_a_completion_waiter_is_woken_only_by_the_end() -> None:
    ended = listed_change(JobKind.PROCESSING, "completion")
    assert not ended({"ProcessingJobName": "p", "ProcessingJobStatus": "InProgress"})
    assert not ended({"ProcessingJobName": "p", "ProcessingJobStatus": "Stopping"})
    assert ended({"ProcessingJobName": "p", "ProcessingJobStatus": "Failed"})
