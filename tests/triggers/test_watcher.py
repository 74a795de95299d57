"""The shared List loop's rules: its cadence, and which listed summaries wake a waiter."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_sm_prefs.domain.cadence import (
    CREDIT_WINDOW,
    LIST_COST_SHARE,
    MAX_WINDOWS,
    WINDOW_MARGIN,
    ListBudget,
    cohort_windows,
    earn_rate,
    list_cadence,
)
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.triggers.watcher import listed_change


@pytest.mark.parametrize(
    ("waiters", "pages", "expected"),
    [
        (1, 1, 30.0),
        (10, 1, 30.0),
        (50, 1, 15.0),
        (100, 1, 10.0),
        (1000, 10, 10.0),
        (1000, 20, 15.0),
        (1000, 40, 30.0),
    ],
)
def test_list_cadence_speeds_up_only_while_listing_stays_cheap(
    waiters: int, pages: int, expected: float
) -> None:
    interval = list_cadence(30.0, waiters, pages)
    assert interval == pytest.approx(expected)
    # Faster than the poll interval only while List calls stay under 1/25 of per-job Describes at 30 s.
    if interval < 30.0:
        assert pages / interval <= waiters / 30.0 * LIST_COST_SHARE + 1e-9


def _drain(*, with_credit: bool) -> tuple[list[tuple[int, float]], float, float]:
    """1,000 waiters on a 30 s poll interval, 40 leaving per 10 s; pages = waiters / 100, rounded up.

    Returns (waiters, cadence) per pass, the pages spent and the calls the budget earned.
    """
    budget = ListBudget()
    now, waiters, spent, earned = 0.0, 1000, 0.0, 0.0
    passes = []
    while waiters > 0:
        pages = -(-waiters // 100)
        budget.spend(now, 30.0, waiters, pages)
        spent += pages
        cadence = list_cadence(30.0, waiters, pages, budget.credit if with_credit else 0.0)
        passes.append((waiters, cadence))
        earned += earn_rate(30.0, waiters) * cadence
        now += cadence
        waiters -= round(4 * cadence)
    return passes, spent, earned


def test_saved_list_credit_keeps_the_pace_while_a_wave_drains_within_the_budget() -> None:
    paced, spent, earned = _drain(with_credit=True)
    unpaced, _, _ = _drain(with_credit=False)
    # Without carried credit the passes slow as the wave thins (fewer waiters per page) ...
    assert max(c for w, c in unpaced if w >= 50) > 10.0
    # ... with it, every pass down to the last 50 waiters comes at the fastest cadence (poll / 3) ...
    assert all(c == pytest.approx(10.0) for w, c in paced if w >= 50), paced
    # ... and the calls spent stay within what the budget earned plus the credit cap at the peak.
    assert spent <= earned + earn_rate(30.0, 1000) * CREDIT_WINDOW


def test_the_credit_is_capped_and_a_debt_delays_the_next_pass() -> None:
    budget = ListBudget()
    budget.spend(0.0, 30.0, 100, 1)
    # A day of waiting saves no more than CREDIT_WINDOW seconds of earnings.
    budget.spend(86400.0, 30.0, 100, 1)
    assert budget.credit == pytest.approx(earn_rate(30.0, 100) * CREDIT_WINDOW)
    # A pass of 100 pages right after: in debt, so the next pass waits for the full poll interval.
    budget.spend(86401.0, 30.0, 100, 100)
    assert budget.credit < 0
    assert list_cadence(30.0, 100, 1, budget.credit) == 30.0


def test_cohort_windows_skip_the_jobs_created_between_and_after_the_waiters() -> None:
    t0 = datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc)
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
    t0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
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
