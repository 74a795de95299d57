"""The shared List loop's rules: its cadence, and which listed summaries wake a waiter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_sm_prefs.kinds import JobKind
from airflow_provider_sm_prefs.triggers.watcher import (
    MAX_WINDOWS,
    WINDOW_MARGIN,
    cohort_windows,
    list_cadence,
    listed_change,
)


@pytest.mark.parametrize(
    ("waiters", "pages", "expected"),
    [(1, 1, 30.0), (10, 1, 30.0), (100, 1, 12.0), (1000, 10, 12.0), (3000, 10, 10.0), (1000, 40, 30.0)],
)
def test_list_cadence_speeds_up_only_while_listing_stays_cheap(
    waiters: int, pages: int, expected: float
) -> None:
    interval = list_cadence(30.0, waiters, pages)
    assert interval == pytest.approx(expected)
    # Faster than the poll interval only while List calls stay under 1/40 of per-job Describes at 30 s.
    if interval < 30.0:
        assert pages / interval <= waiters / 30.0 / 40 + 1e-9


def test_cohort_windows_skip_the_jobs_created_between_and_after_the_waiters() -> None:
    t0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    margin = WINDOW_MARGIN
    # One nightly cohort over 10 minutes, another three hours later: two windows, nothing in between.
    nightly = [t0 + timedelta(minutes=m) for m in range(0, 11, 2)]
    later = [t0 + timedelta(hours=3), t0 + timedelta(hours=3, minutes=14)]
    assert cohort_windows([*later, *nightly]) == [
        (t0 - margin, t0 + timedelta(minutes=10) + margin),
        (later[0] - margin, later[1] + margin),
    ]
    assert cohort_windows([]) == []
    assert cohort_windows([t0]) == [(t0 - margin, t0 + margin)]


def test_cohort_windows_merge_the_closest_beyond_the_limit() -> None:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    # MAX_WINDOWS + 2 lone waiters an hour apart, except two pairs only 20 minutes apart: those merge.
    hours = [t0 + timedelta(hours=h) for h in range(MAX_WINDOWS + 2)]
    created = [*hours, hours[1] + timedelta(minutes=20), hours[4] + timedelta(minutes=20)]
    windows = cohort_windows(created)
    assert len(windows) == MAX_WINDOWS
    assert all(any(a <= c <= b for a, b in windows) for c in created)
    covered = [(a, b) for a, b in windows if a <= hours[1] <= b]
    assert covered and covered[0][1] >= hours[1] + timedelta(minutes=20)


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
