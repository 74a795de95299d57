"""The capacity page benchmark's seed: every planned task instance carries a record the page can read.

Only the shape of the plan is checked (no deployment, no timing); ``make bench-page`` runs the rest.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_sm_prefs.domain.record import CapacityRecord
from benchmarks.capacity_records import FLEET_DAG, PRICES, SeedRun, plan_runs

NOW = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def plan() -> list[SeedRun]:
    return plan_runs(1000, now=NOW, days=60, width=50)


def test_exactly_n_task_instances_each_with_a_readable_record_of_its_own_try(plan: list[SeedRun]) -> None:
    tasks = [(run, task) for run in plan for task in run.tasks]
    assert len(tasks) == 1000
    for run, task in tasks:
        record = CapacityRecord.from_dict(task.record)
        assert record is not None, task.record
        assert (record.dag_id, record.task_id, record.run_id) == (run.dag_id, run.task_id, run.run_id)
        assert (record.map_index, record.try_number) == (task.map_index, task.try_number)
        assert (task.state == "failed") is (record.failure_kind is not None)
        assert (record.preference_rank is None) is (record.failure_kind is not None)


def test_runs_spread_over_the_period_with_unique_ids_and_dates(plan: list[SeedRun]) -> None:
    after = [datetime.fromisoformat(run.run_after) for run in plan]
    assert all(NOW - timedelta(days=60) <= a < NOW for a in after)
    assert max(after) - min(after) > timedelta(days=50)
    assert len({(r.dag_id, r.run_id) for r in plan}) == len(plan)
    assert len({(r.dag_id, r.run_after) for r in plan}) == len(plan)  # dag_run's (dag_id, logical_date)


def test_a_mix_of_fleet_and_single_job_runs_outcomes_and_failures(plan: list[SeedRun]) -> None:
    fleet = [r for r in plan if r.dag_id == FLEET_DAG]
    assert fleet and all(sorted(t.map_index for t in r.tasks) == list(range(50)) for r in fleet)
    singles = [r for r in plan if r.dag_id != FLEET_DAG]
    assert len({r.dag_id for r in singles}) == 4 and all(
        [t.map_index for t in r.tasks] == [-1] for r in singles
    )
    records = [t.record for r in plan for t in r.tasks]
    assert set(Counter(r["preference_rank"] for r in records)) == {None, 1, 2, 3}
    assert {"capacity_timeout", "quota", "failed", "stopped", "cpu_no_capacity"} <= {
        r["failure_kind"] for r in records
    }
    assert {r["job_kind"] for r in records} == {"training", "processing"}
    assert any(r["try_number"] == 2 for r in records)


def test_the_plan_is_deterministic_and_json_safe(plan: list[SeedRun]) -> None:
    again = plan_runs(1000, now=NOW, days=60, width=50)
    assert json.dumps([asdict(r) for r in again]) == json.dumps([asdict(r) for r in plan])
    assert plan_runs(0, now=NOW) == []


def test_records_are_priced_by_the_guardrails_some_not_with_exclusions_and_stages(
    plan: list[SeedRun],
) -> None:
    """What the insights read: costs, entries left out, acceptance windows and unpriced tries."""
    records = [CapacityRecord.from_dict(t.record) for r in plan for t in r.tasks]
    ran = [r for r in records if r is not None and r.selected_instance_type is not None]
    priced = [r for r in ran if r.hourly_cost is not None]
    assert priced and all(r.first_choice_hourly_cost is not None for r in priced)
    for r in priced:
        price = PRICES[r.selected_instance_type or ""] * (r.selected_instance_count or 1)
        assert r.hourly_cost == pytest.approx(price)
        if r.billable_seconds is not None:
            assert r.estimated_cost == pytest.approx(r.hourly_cost * r.billable_seconds / 3600, abs=0.01)
    fallbacks = [r for r in priced if r.fell_back and r.billable_seconds is not None]
    assert {r.hourly_cost > r.first_choice_hourly_cost for r in fallbacks} == {True, False}  # type: ignore[operator]
    unpriced = [r for r in ran if r.hourly_cost is None and r.job_kind == "training"]
    assert unpriced and all(line.startswith("price: ") for r in unpriced for line in r.unchecked)
    kinds = {x["kind"] for r in records if r is not None for x in r.excluded}
    assert kinds == {"quota", "cost"}
    for r in ran:  # an entry left out is never the one selected
        assert r.preference_rank not in {x["rank"] for x in r.excluded}
    staged = [r for r in records if r is not None and r.stages]
    assert {r.dag_id for r in staged} == {FLEET_DAG, "t_train_complete"}
    assert {tuple(s["ended"] for s in r.stages) for r in staged} >= {
        ("selected",),
        ("escalated", "selected"),
    }
    assert {datetime.fromisoformat(r.created_at or "").hour for r in ran} == set(range(24))
