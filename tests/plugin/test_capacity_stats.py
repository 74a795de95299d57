"""The capacity page's numbers, computed from records (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.record import CapacityRecord
from airflow_provider_sm_prefs.plugin.stats import WAIT_BINS, Entry, Filters, dedupe, percentile, summarize
from tests.plugin.records import GROUP_TYPES, group_record_fields, record_fields

DAY = datetime(2026, 11, 1, tzinfo=timezone.utc)
G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"
PREFS = [{"instance_type": t} for t in (G6, G5, P4D)]


def record(n: int, **fields: Any) -> CapacityRecord:
    base: dict[str, Any] = record_fields(n, DAY, PREFS)
    return CapacityRecord(**{**base, **fields})


def chose(n: int, rank: int, pending: float, count: int = 2, **fields: Any) -> Entry:
    chosen = {"instance_type": [G6, G5, P4D][rank - 1], "instance_count": count}
    r = record(
        n,
        selected_instance_type=chosen["instance_type"],
        selected_instance_count=count,
        preference_rank=rank,
        fell_back=rank > 1,
        pending_seconds=pending,
        training_seconds=1800,
        billable_seconds=1700,
        job_status="Completed",
        **fields,
    )
    return Entry(record=r, run_after=DAY + timedelta(days=n, hours=2))


def failed(n: int, kind: str, job_name: str | None = None) -> Entry:
    r = record(n, job_name=job_name, failure_kind=kind, reason=f"{kind} happened")
    return Entry(record=r, run_after=DAY + timedelta(days=n, hours=2))


FILTERS = Filters(since=DAY, until=DAY + timedelta(days=10))


def test_percentiles_interpolate_and_handle_no_values() -> None:
    assert percentile([], 50) is None
    assert percentile([10.0], 95) == 10.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile(list(map(float, range(101))), 95) == 95.0


def test_summary_counts_fallbacks_waits_and_failures_by_kind() -> None:
    entries = [
        chose(0, 1, 0.0),
        chose(1, 2, 600.0),
        chose(2, 2, 1200.0),
        chose(3, 3, 4000.0),
        failed(4, "capacity_timeout", job_name="job-4"),
        failed(5, "quota"),
        failed(6, "cpu_no_capacity", job_name="job-6"),
        failed(7, "stopped", job_name="job-7"),
    ]
    data = summarize(entries, FILTERS, skipped=3)
    summary = data["summary"]
    assert (summary["jobs"], summary["decisions"], summary["fell_back"]) == (8, 4, 3)
    assert summary["fallback_rate"] == 0.75
    assert summary["median_time_to_capacity"] == 900.0
    assert summary["failures"] == {"capacity_timeout": 1, "quota": 1, "cpu_no_capacity": 1, "other": 1}
    assert summary["skipped_records"] == 3
    # Failures land in the bucket of their run, one series per kind.
    failures = {s["name"]: s["counts"] for s in data["failures"]["series"]}
    buckets = data["failures"]["buckets"]
    assert len(buckets) == 10 and buckets[0] == "2026-11-01"
    assert failures["quota"][5] == 1 and sum(failures["quota"]) == 1
    assert failures["other"][7] == 1


def test_fallback_rate_per_bucket_and_per_dag_task() -> None:
    entries = [chose(0, 1, 0.0), chose(0, 2, 60.0, job_name="b"), chose(1, 2, 60.0)]
    entries.append(
        Entry(
            record(
                9,
                task_id="other",
                selected_instance_type=G6,
                selected_instance_count=1,
                preference_rank=1,
                pending_seconds=0.0,
            ),
            DAY + timedelta(days=1),
        )
    )
    data = summarize(entries, FILTERS)["fallback"]
    series = {s["name"]: s for s in data["series"]}
    assert series["nightly.train"]["rate"][:3] == [0.5, 1.0, None]
    assert series["nightly.train"]["jobs"][:3] == [2, 1, 0]
    assert series["nightly.other"]["rate"][1] == 0.0


def test_time_to_capacity_per_selected_entry_with_histogram() -> None:
    entries = [chose(0, 2, 30.0), chose(1, 2, 400.0), chose(2, 2, 20000.0), chose(3, 1, 0.0)]
    data = summarize(entries, FILTERS)["time_to_capacity"]
    assert data["bins"] == [*WAIT_BINS, None]
    by_type = {e["instance_type"]: e for e in data["entries"]}
    g5 = by_type[G5]
    assert (g5["jobs"], g5["median"], g5["max"], g5["ranks"]) == (3, 400.0, 20000.0, [2])
    assert g5["histogram"][0] == 1 and g5["histogram"][2] == 1 and g5["histogram"][-1] == 1
    assert sum(g5["histogram"]) == 3
    assert data["entries"][0]["instance_type"] == G5  # most jobs first


def test_configurations_split_by_type_and_count_with_runtime_and_cost() -> None:
    entries = [
        chose(0, 2, 60.0, count=4),
        chose(1, 2, 120.0, count=4),
        chose(2, 2, 120.0, count=2),
    ]
    rows = summarize(entries, FILTERS)["configurations"]
    assert [(r["instance_type"], r["instance_count"], r["jobs"]) for r in rows] == [(G5, 4, 2), (G5, 2, 1)]
    assert rows[0]["median_pending_seconds"] == 90.0 and rows[0]["median_billable_seconds"] == 1700.0
    assert rows[0]["billable_instance_hours"] == round(2 * 1700 * 4 / 3600, 2)


def test_one_job_reported_twice_counts_once_the_newest_record_wins() -> None:
    first = chose(1, 2, 60.0, job_name="same")
    retry = Entry(
        record=record(
            1,
            job_name="same",
            try_number=2,
            selected_instance_type=G5,
            selected_instance_count=2,
            preference_rank=2,
            pending_seconds=60.0,
            job_status="Completed",
            recorded_at=(DAY + timedelta(days=3)).isoformat(),
        ),
        run_after=first.run_after,
    )
    kept = dedupe([first, retry])
    assert kept == [retry]
    # Tries rejected before any job existed are each their own row.
    assert len(dedupe([failed(1, "quota"), failed(2, "quota")])) == 2


@pytest.mark.parametrize(
    ("page", "size", "names"), [(1, 2, ["job-4", "job-3"]), (3, 2, ["job-0"]), (4, 2, [])]
)
def test_jobs_are_newest_first_and_paginated(page: int, size: int, names: list[str]) -> None:
    entries = [chose(n, 1, 0.0) for n in range(5)]
    jobs = summarize(entries, Filters(since=DAY, until=DAY + timedelta(days=10), page=page, page_size=size))[
        "jobs"
    ]
    assert [row["job_name"] for row in jobs["rows"]] == names
    assert (jobs["pages"], jobs["total"]) == (3, 5)


def test_short_ranges_bucket_by_hour_and_long_reasons_are_cut() -> None:
    since = DAY
    entry = Entry(record(0, failure_kind="failed", reason="x" * 1000), DAY + timedelta(hours=5))
    data = summarize([entry], Filters(since=since, until=since + timedelta(days=1)))
    assert data["failures"]["buckets"][5] == "2026-11-01T05:00Z" and len(data["failures"]["buckets"]) == 24
    assert len(data["jobs"]["rows"][0]["reason"]) == 301


# -- HyperPod instance groups ---------------------------------------------------------------------------


def group(n: int, counts: dict[str, int]) -> Entry:
    r = CapacityRecord(**group_record_fields(n, DAY, counts))
    return Entry(record=r, run_after=DAY + timedelta(days=n, hours=3))


GROUPS = [
    group(0, {GROUP_TYPES[0]: 8}),
    group(1, {GROUP_TYPES[0]: 2, GROUP_TYPES[2]: 6}),
    group(2, {}),
]


def test_group_records_leave_every_job_figure_as_it_was() -> None:
    jobs = [chose(0, 1, 0.0), chose(1, 2, 600.0), failed(2, "quota")]
    alone = summarize(jobs, FILTERS)
    beside = summarize(jobs + GROUPS, FILTERS)
    assert {k: v for k, v in beside.items() if k != "groups"} == {
        k: v for k, v in alone.items() if k != "groups"
    }
    assert alone["groups"]["rows"] == [] and alone["groups"]["summary"]["tries"] == 0


def test_a_group_row_names_cluster_and_group_with_its_node_mix_and_fallback() -> None:
    data = summarize(GROUPS, FILTERS)["groups"]
    assert data["summary"] == {
        "records": 3,
        "tries": 3,
        "groups": 1,
        "reached": 2,
        "fell_back": 1,
        "fallback_rate": 0.5,
        "failures": 1,
    }
    shortfall, mixed, first = data["rows"]  # newest first
    assert (mixed["cluster_name"], mixed["group_name"]) == ("nightly", "gpu-workers")
    assert mixed["mix"] == "2 × ml.p5.48xlarge + 6 × ml.p4d.24xlarge"
    assert [(n["instance_type"], n["rank"], n["count"]) for n in mixed["nodes"]] == [
        ("ml.p5.48xlarge", 1, 2),
        ("ml.p4d.24xlarge", 3, 6),
    ]
    assert mixed["fell_back"] is True and first["fell_back"] is False and first["mix"] == "8 × ml.p5.48xlarge"
    assert (mixed["current_count"], mixed["target_count"], mixed["min_count"]) == (8, 8, 4)
    assert mixed["hourly_cost"] == 2 * 55.0 + 6 * 38.0 and mixed["first_choice_hourly_cost"] == 8 * 55.0
    assert (shortfall["failure_kind"], shortfall["mix"], shortfall["nodes"]) == ("shortfall", "", [])


def test_a_group_retried_counts_once_its_newest_try_wins() -> None:
    retried = CapacityRecord(
        **{**group_record_fields(1, DAY, {GROUP_TYPES[0]: 8}), "try_number": 2, "recorded_at": "2026-11-09"}
    )
    data = summarize([*GROUPS, Entry(record=retried, run_after=GROUPS[1].run_after)], FILTERS)["groups"]
    assert data["summary"]["tries"] == 3 and data["summary"]["fell_back"] == 0
    assert [row["try_number"] for row in data["rows"] if row["run_id"] == "group-run-1"] == [2]
