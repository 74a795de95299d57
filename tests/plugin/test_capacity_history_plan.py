"""The seeded history's plan (pure): 60 runs over 30 nights, each placed at an hour with a known outcome."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from harness.history import HISTORY_DAGS, PERIOD, SCENARIO, plan
from offline_sagemaker.scenario import load_scenario

TODAY = datetime(2026, 11, 30, 15, 0, tzinfo=timezone.utc)


def test_sixty_runs_over_thirty_nights_oldest_first() -> None:
    runs = plan(60, TODAY)
    assert len(runs) == 60
    assert Counter(r.dag_id for r in runs) == {HISTORY_DAGS[0]: 30, HISTORY_DAGS[2]: 20, HISTORY_DAGS[1]: 10}
    dates = [r.run_after for r in runs]
    assert dates == sorted(dates) and len(set(dates)) == 60
    assert dates[0].startswith("2026-11-01T01:30") and dates[-1].startswith("2026-11-30T02:30")
    assert all(datetime.fromisoformat(d) > TODAY - timedelta(days=30) for d in dates)
    assert all(0 <= r.hour * 3600 < PERIOD for r in runs)


def test_the_outcomes_vary_and_get_worse_towards_the_end() -> None:
    nightly = [r.hour for r in plan(60, TODAY) if r.dag_id == HISTORY_DAGS[0]]
    first_choice = [h < 4 for h in nightly]  # ml.g6.48xlarge is free 00-04 h of each day
    timeouts = [h >= 18 for h in nightly]  # nothing for the nightly list 18-24 h
    assert sum(first_choice[:10]) > sum(first_choice[-10:])
    assert sum(timeouts[:10]) < sum(timeouts[-10:]) and any(timeouts)
    finetunes = [r.conf["finetune_count"] for r in plan(60, TODAY) if r.dag_id == HISTORY_DAGS[1]]
    assert finetunes.count(2) == 3  # over the ml.p5.48xlarge quota of 1: rejected


def test_fewer_runs_keep_the_newest_and_bad_counts_are_refused() -> None:
    assert [r.run_after for r in plan(5, TODAY)] == [r.run_after for r in plan(60, TODAY)][-5:]
    for bad in (0, 61):
        with pytest.raises(ValueError, match="runs: .* out of range"):
            plan(bad, TODAY)


def test_the_scenario_is_a_builtin_with_a_one_day_period() -> None:
    scenario = load_scenario(SCENARIO)
    assert scenario.capacity_period == PERIOD
