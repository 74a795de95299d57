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
from benchmarks.capacity_records import FLEET_DAG, SeedRun, plan_runs

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
