"""The capacity page's seeded history (harness.history.plan) fits the page's default 30 days at any hour."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from harness.history import HISTORY_DAGS, plan

#: The capacity page's default range (airflow_provider_sm_prefs.plugin.api.DEFAULT_RANGE).
PAGE_RANGE = timedelta(days=30)


@pytest.mark.parametrize("minutes", range(0, 24 * 60, 10))
def test_every_run_is_past_and_within_the_default_range_whatever_the_hour(minutes: int) -> None:
    now = datetime(2026, 12, 1, tzinfo=timezone.utc) + timedelta(minutes=minutes)
    runs = plan(60, today=now)
    dates = [datetime.fromisoformat(r.run_after) for r in runs]
    assert len(runs) == 60 and {r.dag_id for r in runs} == set(HISTORY_DAGS)
    # Seeding and the page's checks take a few minutes: half an hour of margin at the old end.
    assert min(dates) >= now - PAGE_RANGE + timedelta(minutes=30), (now, min(dates))
    assert max(dates) <= now - timedelta(hours=1), (now, max(dates))
    assert dates == sorted(dates) and len(set(dates)) == len(dates)
