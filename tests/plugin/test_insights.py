"""Capacity insights, computed from records (pure): every figure against numbers worked out by hand."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.record import CapacityRecord
from airflow_provider_sm_prefs.plugin.insights import MIN_RECORDS, figure, insights, is_utc, resolve_timezone
from airflow_provider_sm_prefs.plugin.stats import Entry, Filters
from tests.plugin.records import GROUP_TYPES, group_record_fields, record_fields

DAY = datetime(2026, 11, 1, tzinfo=timezone.utc)
FILTERS = Filters(since=DAY - timedelta(days=60), until=DAY + timedelta(days=30))
G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"
PREFS = [
    {"instance_type": G6, "instance_count": 2},
    {"instance_type": G5, "instance_count": 4},
    {"instance_type": P4D, "instance_count": 2},
]
NOTE_3 = "3 records; at least 5 are needed to draw a conclusion"


def job(n: int, rank: int | None = None, run_after: datetime | None = None, **fields: Any) -> Entry:
    """Job ``n``, run on day ``n``: selected at ``rank`` of PREFS (None: nothing selected)."""
    values: dict[str, Any] = record_fields(n, DAY, PREFS)
    if rank is not None:
        chosen = PREFS[rank - 1]
        values.update(
            selected_instance_type=chosen["instance_type"],
            selected_instance_count=chosen["instance_count"],
            preference_rank=rank,
            fell_back=rank > 1,
            pending_seconds=0.0,
            job_status="Completed",
        )
    values.update(fields)
    return Entry(CapacityRecord(**values), run_after or DAY + timedelta(days=n, hours=2))


def priced(n: int, rank: int, hourly: float | None, billable: int | None, **fields: Any) -> Entry:
    return job(
        n, rank, hourly_cost=hourly, first_choice_hourly_cost=30.0, billable_seconds=billable, **fields
    )


# -- fallback premium -----------------------------------------------------------------------------------


def premium_jobs() -> list[Entry]:
    return [
        priced(0, 2, 40.0, 5400),  # (40 - 30) × 1.5 h = +15.00; spend 60.00
        priced(1, 3, 20.0, 1800, task_id="finetune"),  # (20 - 30) × 0.5 h = -5.00; spend 10.00
        priced(2, 1, 30.0, 3600),  # first choice: no premium; spend 30.00
        priced(3, 2, None, 3600),  # no price: unpriced for both
        priced(4, 2, 40.0, None),  # still running, no billable time: unpriced for both
        priced(5, 2, 40.0, 900, run_after=DAY - timedelta(days=20)),  # October: +2.50; spend 10.00
        job(6, failure_kind="capacity_timeout", reason="no capacity"),  # never ran: not in the figures
    ]


def test_the_premium_is_the_price_difference_times_billable_hours_cheaper_fallbacks_negative() -> None:
    total = insights(premium_jobs(), FILTERS)["fallback_premium_usd"]["total"]
    assert total["jobs"] == 6
    assert total["premium"] == {
        "usd": 12.5,  # 15 - 5 + 2.5
        "fallback_jobs": 5,
        "unpriced_jobs": 2,
        "records": 3,
        "enough": False,
        "note": NOTE_3,
    }
    assert total["spend"] == {
        "usd": 110.0,  # 60 + 10 + 30 + 10
        "unpriced_jobs": 2,
        "records": 4,
        "enough": False,
        "note": "4 records; at least 5 are needed to draw a conclusion",
    }


def test_the_premium_per_task_per_selected_entry_and_per_month() -> None:
    premium = insights(premium_jobs(), FILTERS)["fallback_premium_usd"]
    by_task = {(r["dag_id"], r["task_id"]): r for r in premium["by_task"]}
    assert by_task[("nightly", "finetune")]["premium"]["usd"] == -5.0
    assert by_task[("nightly", "train")]["premium"]["usd"] == 17.5
    assert by_task[("nightly", "train")]["premium"]["unpriced_jobs"] == 2
    by_entry = {(r["instance_type"], r["instance_count"]): r for r in premium["by_entry"]}
    assert set(by_entry) == {(G6, 2), (G5, 4), (P4D, 2)}
    assert (by_entry[(G5, 4)]["premium"]["usd"], by_entry[(G5, 4)]["premium"]["records"]) == (17.5, 2)
    assert by_entry[(G5, 4)]["spend"]["usd"] == 70.0
    assert by_entry[(G6, 2)]["premium"] == {**figure(0), "usd": None, "fallback_jobs": 0, "unpriced_jobs": 0}
    assert by_entry[(G6, 2)]["spend"]["usd"] == 30.0
    months = [(r["month"], r["premium"]["usd"], r["spend"]["usd"]) for r in premium["by_month"]]
    assert months == [("2026-10", 2.5, 10.0), ("2026-11", 10.0, 100.0)]


def test_only_unpriced_fallbacks_give_no_premium_rather_than_zero() -> None:
    total = insights([priced(0, 2, None, 600), priced(1, 2, 40.0, None)], FILTERS)["fallback_premium_usd"]
    assert total["total"]["premium"]["usd"] is None and total["total"]["premium"]["unpriced_jobs"] == 2
    assert total["total"]["spend"]["usd"] is None


def test_five_priced_fallbacks_are_enough_and_a_job_reported_twice_counts_once() -> None:
    entries = [priced(n, 2, 40.0, 3600) for n in range(5)]
    retry = priced(0, 2, 40.0, 3600, try_number=2, recorded_at=(DAY + timedelta(days=9)).isoformat())
    premium = insights([*entries, retry], FILTERS)["fallback_premium_usd"]["total"]["premium"]
    assert (premium["usd"], premium["records"], premium["enough"], premium["note"]) == (50.0, 5, True, None)


# -- entries --------------------------------------------------------------------------------------------


def offered_jobs() -> list[Entry]:
    quota = {"instance_type": G6, "rank": 1, "kind": "quota", "reason": "quota 0"}
    cost = {"instance_type": G6, "rank": 1, "kind": "cost", "reason": "over max_hourly_cost"}
    return [
        job(0, 1, pending_seconds=0.0),
        job(1, 2, pending_seconds=60.0),
        job(2, 2, pending_seconds=120.0, excluded=[quota]),
        job(3, 2, pending_seconds=600.0, excluded=[cost]),
        job(4, failure_kind="capacity_timeout", reason="timed out"),
    ]


def test_each_position_offered_selected_excluded_and_its_wait() -> None:
    rows = {r["position"]: r for r in insights(offered_jobs(), FILTERS)["entries"]}
    assert [(r["instance_type"], r["instance_count"]) for r in rows.values()] == [(G6, 2), (G5, 4), (P4D, 2)]
    g6, g5 = rows[1], rows[2]
    assert (g6["offered"], g6["decided"], g6["selected"]) == (5, 4, 1)
    assert g6["excluded"] == {"quota": 1, "plan": 0, "region": 0, "cost": 1} and g6["excluded_total"] == 2
    assert (g5["selected"], g5["never_selected"]) == (3, False)
    # Three waits: median 120; p95 at position 1.9 of [60, 120, 600] = 120 + 0.9 × 480.
    assert g5["wait"] == {"median": 120.0, "p95": 552.0, **figure(3)}
    assert g5["wait"]["note"] == NOTE_3
    assert (g5["records"], g5["enough"]) == (5, True)


def test_an_entry_never_selected_is_flagged_only_with_enough_runs() -> None:
    p4d = insights(offered_jobs(), FILTERS)["entries"][2]
    assert (p4d["position"], p4d["selected"], p4d["never_selected"], p4d["runs"]) == (3, 0, True, 5)
    assert (p4d["enough"], p4d["note"]) == (True, None)
    fewer = insights(offered_jobs()[:4], FILTERS)["entries"][2]
    assert (fewer["selected"], fewer["never_selected"], fewer["runs"]) == (0, None, 4)
    assert fewer["note"] == "4 records; at least 5 are needed to draw a conclusion"


def test_a_changed_list_counts_each_version_of_a_position_apart() -> None:
    other = [{"instance_type": G5, "instance_count": 4}, {"instance_type": G6, "instance_count": 2}]
    moved = job(1, 1, preferences=other, selected_instance_type=G5, selected_instance_count=4)
    rows = insights([job(0, 1), moved], FILTERS)["entries"]
    keys = [(r["position"], r["instance_type"], r["offered"], r["selected"]) for r in rows]
    assert keys == [(1, G5, 1, 1), (1, G6, 1, 1), (2, G5, 1, 0), (2, G6, 1, 0), (3, P4D, 1, 0)]


# -- hour of day ----------------------------------------------------------------------------------------


def dated_jobs() -> list[Entry]:
    return [
        job(1, 2, pending_seconds=60.0, created_at="2026-11-02T01:30:00+00:00"),
        job(2, 2, pending_seconds=120.0, created_at="2026-11-03T01:10:00Z"),
        job(3, 2, pending_seconds=30.0, created_at="2026-11-04T13:00:00+00:00"),
        job(4, 1, pending_seconds=5.0, created_at="2026-11-05T01:00:00+00:00"),
        job(5, 1),  # no creation time: counted apart
    ]


def test_hour_of_day_cells_per_selected_type_in_utc() -> None:
    hours = insights(dated_jobs(), FILTERS)["hour_of_day"]
    assert hours["local"] is None and hours["undated_jobs"] == 1
    rows = {r["instance_type"]: r for r in hours["utc"]["rows"]}
    assert [r["instance_type"] for r in hours["utc"]["rows"]] == [G5, G6]  # most selections first
    g5 = rows[G5]
    assert g5["selections"] == 3 and len(g5["hours"]) == 24
    assert g5["hours"][1] == {"hour": 1, "selections": 2, "median_wait": 90.0, **figure(2)}
    assert g5["hours"][13]["selections"] == 1 and g5["hours"][0]["selections"] == 0
    assert g5["hours"][0]["median_wait"] is None
    assert rows[G6]["hours"][1]["selections"] == 1


@pytest.mark.parametrize("tz", ["UTC", "utc", "Etc/UTC", "+00:00"])
def test_utc_under_any_name_adds_no_second_heatmap(tz: str) -> None:
    assert insights(dated_jobs(), FILTERS, tz=tz)["hour_of_day"]["local"] is None
    assert is_utc(tz)


def test_a_deployment_time_zone_shifts_the_hours() -> None:
    # Asia/Kolkata is UTC+05:30: 01:30Z is 07:00, 01:10Z is 06:40, 13:00Z is 18:30, 01:00Z is 06:30.
    local = insights(dated_jobs(), FILTERS, tz="Asia/Kolkata")["hour_of_day"]["local"]
    assert local["timezone"] == "Asia/Kolkata"
    g5 = {r["instance_type"]: r for r in local["rows"]}[G5]["hours"]
    assert [h["hour"] for h in g5 if h["selections"]] == [6, 7, 18]
    assert (g5[6]["median_wait"], g5[7]["median_wait"], g5[18]["median_wait"]) == (120.0, 60.0, 30.0)
    # New York left daylight time on 2026-11-01: 01:30Z on 11-02 is 20:30 the evening before.
    york = insights(dated_jobs(), FILTERS, tz="America/New_York")["hour_of_day"]["local"]
    assert {r["instance_type"]: r for r in york["rows"]}[G5]["hours"][20]["selections"] == 2
    assert not is_utc("Europe/London")  # UTC in winter only


def test_an_unknown_time_zone_is_refused() -> None:
    with pytest.raises(ValueError, match="tz: unknown time zone 'Mars/Olympus'"):
        resolve_timezone("Mars/Olympus")
    assert resolve_timezone("-03:00").utcoffset(None) == timedelta(hours=-3)


# -- acceptance windows ---------------------------------------------------------------------------------


def stage(number: int, pending: float, ended: str) -> dict[str, Any]:
    return {
        "stage": number,
        "entries": [G6],
        "job_name": f"s{number}",
        "pending_seconds": pending,
        "ended": ended,
    }


def staged_jobs() -> list[Entry]:
    won = [job(n, 1, stages=[stage(1, p, "selected")]) for n, p in ((0, 100.0), (1, 200.0), (2, 300.0))]
    escalated = [
        job(n, 2, stages=[stage(1, 1800.0, "escalated"), stage(2, p, "selected")])
        for n, p in ((3, 50.0), (4, 150.0))
    ]
    timed_out = job(
        5,
        failure_kind="capacity_timeout",
        stages=[stage(1, 1800.0, "escalated"), stage(2, 400.0, "timed-out")],
    )
    return [*won, *escalated, timed_out, job(6, 1)]  # job 6: a list without windows


def test_acceptance_windows_stage_one_wins_escalations_and_each_stages_wait() -> None:
    (row,) = insights(staged_jobs(), FILTERS)["acceptance_windows"]
    assert (row["dag_id"], row["task_id"], row["jobs"], row["enough"]) == ("nightly", "train", 6, True)
    assert (row["stage1_won"], row["stage1_won_share"], row["escalated"], row["escalated_share"]) == (
        3,
        0.5,
        3,
        0.5,
    )
    assert (row["won_at_stage"], row["without_capacity"], row["other"]) == ({"1": 3, "2": 2}, 1, 0)
    # Stage 1: [100, 200, 300, 1800, 1800, 1800] → 1050; stage 2: [50, 150, 400] → 150.
    assert row["stages"] == [
        {"stage": 1, "wait": {"median": 1050.0, **figure(6)}},
        {"stage": 2, "wait": {"median": 150.0, **figure(3)}},
    ]


def test_too_few_staged_jobs_give_counts_and_no_shares() -> None:
    (row,) = insights(staged_jobs()[3:5], FILTERS)["acceptance_windows"]
    assert (row["jobs"], row["escalated"], row["escalated_share"], row["stage1_won_share"]) == (
        2,
        2,
        None,
        None,
    )
    assert row["note"] == "2 records; at least 5 are needed to draw a conclusion"


def test_the_minimum_and_its_note() -> None:
    assert MIN_RECORDS == 5
    assert figure(1)["note"] == "1 record; at least 5 are needed to draw a conclusion"
    assert figure(5) == {"records": 5, "enough": True, "note": None}
    data = insights([], FILTERS, skipped=2)
    assert data["summary"] == {"records": 0, "jobs": 0, "skipped_records": 2}
    assert data["entries"] == [] and data["acceptance_windows"] == []
    assert data["fallback_premium_usd"]["by_month"] == []


# -- HyperPod instance groups ---------------------------------------------------------------------------

P5, P5E, P4 = GROUP_TYPES


def group(n: int, counts: dict[str, int], **fields: Any) -> Entry:
    values = {**group_record_fields(n, DAY, counts), **fields}
    return Entry(CapacityRecord(**values), DAY + timedelta(days=n, hours=3))


def group_tries() -> list[Entry]:
    return [
        group(0, {P5: 8}),
        group(1, {P5: 2, P4: 6}),  # fell back: 6 of 8 nodes on the third choice
        group(2, {}),  # a shortfall: no nodes, not in the fallback share
        group(3, {P5: 1, P5E: 1, P4: 6}),  # fell back
        group(4, {P5: 8}),
        group(5, {P4: 5}),  # the minimum: fell back
        group(6, {P5: 8}),
    ]


def test_group_records_leave_every_job_insight_as_it_was() -> None:
    jobs = [*premium_jobs(), job(7, 1, created_at="2026-11-08T02:10:00+00:00")]
    alone = insights(jobs, FILTERS)
    beside = insights(jobs + group_tries(), FILTERS)
    assert {k: v for k, v in beside.items() if k != "cluster_groups"} == {
        k: v for k, v in alone.items() if k != "cluster_groups"
    }
    assert alone["cluster_groups"] == []


def test_the_fallback_share_per_group_is_how_often_its_nodes_were_not_all_the_first_choice() -> None:
    (found,) = insights(group_tries(), FILTERS)["cluster_groups"]
    assert (found["dag_id"], found["task_id"], found["cluster_name"], found["group_name"]) == (
        "nightly",
        "scale",
        "nightly",
        "gpu-workers",
    )
    assert (found["tries"], found["reached"], found["fell_back"]) == (7, 6, 3)
    assert found["fallback_share"] == 0.5 and found["enough"] is True and found["records"] == 6
    # Nodes: 8 + 8 + 8 + 8 + 5 + 8 = 45, of which 6 + 7 + 5 = 18 not on the first choice.
    assert (found["nodes"], found["fallback_nodes"], found["fallback_node_share"]) == (45, 18, 0.4)
    assert found["failures"] == {"shortfall": 1}
    assert found["instance_types"] == [P5, P5E, P4]
    # Seconds to InService of the tries that reached their count: 600 × (n + 1).
    assert found["to_in_service"]["median"] == 600.0 * 4.5


def test_the_node_mix_over_time_gives_each_runs_counts_per_type_oldest_first() -> None:
    (found,) = insights(list(reversed(group_tries())), FILTERS)["cluster_groups"]
    mixes = [(run["run_id"], run["counts"]) for run in found["mix_over_time"]]
    assert mixes[:4] == [
        ("group-run-0", {P5: 8}),
        ("group-run-1", {P5: 2, P4: 6}),
        ("group-run-2", {}),
        ("group-run-3", {P5: 1, P5E: 1, P4: 6}),
    ]
    assert list(mixes[3][1]) == [P5, P5E, P4]  # in list order
    assert found["mix_over_time"][2]["failure_kind"] == "shortfall"
    assert found["mix_over_time"][5]["phase"] == "reached-minimum"


def test_too_few_group_tries_give_counts_and_no_share() -> None:
    (found,) = insights(group_tries()[:3], FILTERS)["cluster_groups"]
    assert (found["reached"], found["fell_back"]) == (2, 1)
    assert found["fallback_share"] is None and found["fallback_node_share"] is None
    assert (
        found["enough"] is False and found["note"] == "2 records; at least 5 are needed to draw a conclusion"
    )
