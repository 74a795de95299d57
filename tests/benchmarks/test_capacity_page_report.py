"""The capacity page benchmark's table: every API the page calls, the insights included, against its goal.

Only the report is checked (no deployment, no timing); ``make bench-page`` measures.
"""

from __future__ import annotations

from typing import Any

from benchmarks.capacity_page import API_GOAL_S, profile_rows, rows


def _series(median: float, p95: float) -> dict[str, Any]:
    return {"median_s": median, "p95_s": p95, "max_s": p95, "calls": 10, "all_s": []}


def result(insights: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "records_in_range": 10_000,
        "api": {
            "first_filters_s": 1.2,
            "cold_s": 0.9,
            "warm": _series(0.2, 0.3),
            "filtered": _series(0.1, 0.15),
            "filters_endpoint": _series(0.01, 0.02),
            "response_kb": 40.0,
            "response_transferred_kb": 8.0,
        },
        "insights": insights,
        "page": None,
        "seed": {"runs": 1180, "task_instances": 10_000, "xcoms": 10_000, "total_seconds": 30.0},
    }


INSIGHTS = {
    "cold_s": 1.5,
    "warm": _series(0.45, 0.6),
    "filtered": _series(0.4, 1.2),
    "response_kb": 70.0,
    "response_transferred_kb": 9.0,
}


def test_the_insights_rows_state_the_one_second_goal_and_whether_it_was_met() -> None:
    table = {row[0]: row[1:] for row in rows(result(INSIGHTS))}
    assert API_GOAL_S == 1.0
    assert table["API /api/insights, first call after a restart (10,000 records)"] == [
        "1500 ms",
        "< 1 s",
        "NO",
    ]
    assert table["API /api/insights, warm median"] == ["450 ms", "< 1 s", "yes"]
    assert table["API /api/insights, warm p95"] == ["600 ms", "< 1 s", "yes"]
    assert table["API insights dag_id=e2e_fleet, warm median"] == ["400 ms", "< 1 s", "yes"]
    assert table["API insights dag_id=e2e_fleet, warm p95"] == ["1200 ms", "< 1 s", "NO"]
    assert table["API insights size (raw / transferred)"] == ["70.0 KB / 9.0 KB", "", ""]
    # beside the capacity API's rows, under the same goal
    assert table["API /api/capacity, warm median"] == ["200 ms", "< 1 s", "yes"]


def test_a_run_without_the_insights_has_no_insights_rows() -> None:
    assert not [row for row in rows(result(None)) if "insights" in row[0]]


def test_the_profile_times_the_insights_step_in_process() -> None:
    profile = {
        "sql_text_s": 0.05,
        "fetch_s": 0.2,
        "records_s": 0.5,
        "summarize_s": 0.15,
        "links_s": 0.01,
        "total_s": 0.9,
        "cached_s": 0.3,
        "insights_s": 0.25,
        "insights_cached_s": 0.35,
        "keys_only_s": 0.04,
        "projection_s": 0.1,
        "projected_fields": 16,
    }
    steps = dict(profile_rows(profile))
    assert steps["insights (premium, entries, hours, windows)"] == "250 ms"
    assert steps["one insights request in-process, records cached"] == "350 ms"
