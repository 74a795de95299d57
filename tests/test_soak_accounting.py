"""The soak's accounting (harness/soak.py): what counts as a duplicate job, and the plan of faults."""

from __future__ import annotations

from typing import Any

import pytest

from harness import soak


def job(name: str, status: str, created: float, ended: float | None = None) -> dict[str, Any]:
    return {"name": name, "status": status, "created_at": created, "end_time": ended}


def owned(base: str) -> bool:
    return base.startswith("fleet-")


def test_one_job_per_task_is_no_duplicate() -> None:
    jobs = [job("fleet-000", "Completed", 1, 50), job("fleet-001", "Stopped", 1, 30)]
    assert soak.duplicates_of(jobs, owned) == []


def test_a_resubmission_after_the_job_stopped_is_no_duplicate() -> None:
    jobs = [job("fleet-000", "Stopped", 1, 30), job("fleet-000-r2", "Completed", 31, 90)]
    assert soak.duplicates_of(jobs, owned) == []


@pytest.mark.parametrize(
    ("first", "why"),
    [
        (job("fleet-000", "InProgress", 1), "was InProgress"),
        (job("fleet-000", "Completed", 1, 20), "was Completed"),
        (job("fleet-000", "Stopped", 1, 40), "was Stopped"),  # ended only after the second was created
    ],
)
def test_a_second_job_of_one_task_while_the_first_was_not_over_is_a_duplicate(
    first: dict[str, Any], why: str
) -> None:
    found = soak.duplicates_of([first, job("fleet-000-r2", "InProgress", 35)], owned)
    assert found == [f"fleet-000-r2 (while fleet-000 {why})"]


def test_a_job_no_task_owns_is_a_duplicate() -> None:
    assert soak.duplicates_of([job("stray-000", "InProgress", 1)], owned) == [
        "stray-000 (no task of the night owns it)"
    ]


def test_unattended_jobs_are_running_jobs_whose_task_ended() -> None:
    owners = soak.owners_of([job("p-n1-000", "InProgress", 1), job("p-n1-001", "InProgress", 1)], "p-n1")
    states = {("e2e_fleet", "job", 0): "deferred", ("e2e_fleet", "job", 1): "failed"}
    jobs = [job("p-n1-000", "InProgress", 1), job("p-n1-001", "InProgress", 1)]
    assert soak.unattended_of(jobs, owners, states) == ["p-n1-001 (task is failed)"]


@pytest.mark.parametrize(("nights", "seed"), [(1, 1), (2, 7), (7, 1), (7, 3)])
def test_every_week_has_a_capacity_timeout_night_and_both_kills(nights: int, seed: int) -> None:
    plans = soak.plan_week(nights, 50, seed)
    assert len(plans) == nights
    assert sum(p.kind == "capacity-timeout" for p in plans) >= 1
    assert sum(p.kill_triggerer_step is not None for p in plans) == 1
    assert sum(p.kill_scheduler_step is not None for p in plans) == 1
    assert plans == soak.plan_week(nights, 50, seed), "the plan is a function of the seed"


def test_the_capacity_timeout_night_frees_nothing_before_the_deadline() -> None:
    [plan] = soak.plan_week(1, 50, 1)
    scenario, pending = soak.night_scenario(plan, 50)
    assert plan.kind == "capacity-timeout" and pending == soak.TIGHT_PENDING
    # A job that got capacity frees it only after Starting, Downloading, training and Uploading.
    assert sum(soak.PHASES[p] for p in ("starting", "downloading", "uploading")) + soak.JOB_RUNTIME > pending
    assert scenario["capacity"][soak.G6] == [{"from": 0, "free": 0}]
    # 60 % of the fleet at most: the example, when its G5×4 gets there first, leaves fewer (never more).
    assert scenario["capacity"][soak.G5] == [{"from": 0, "free": 30}]
