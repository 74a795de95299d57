"""The chaos run's plan and accounting (harness/chaos.py): the seeded schedules, what counts as a duplicate
job, and how a task's XCom record is compared with its job's Describe."""

from __future__ import annotations

from typing import Any

import pytest

from harness import chaos


def job(name: str, status: str, created: float, modified: float | None = None) -> dict[str, Any]:
    return {"name": name, "status": status, "created_at": created, "last_modified": modified or created}


OWNERS = {"chaos1-000": 0, "chaos1-001": 1}


def test_the_same_seed_plans_the_same_kills_and_fleet() -> None:
    assert chaos.plan_kills(20, 5) == chaos.plan_kills(20, 5)
    assert chaos.plan_kills(20, 5) != chaos.plan_kills(20, 6)
    assert chaos.plan_fleet(50, 5, "p") == chaos.plan_fleet(50, 5, "p")


@pytest.mark.parametrize("kills", [1, 9, 20, 40])
def test_the_plan_kills_every_kind_and_the_broker_and_database_once(kills: int) -> None:
    plan = chaos.plan_kills(kills, 1)
    targets = [k.target for k in plan]
    assert len(plan) >= max(kills, 8)
    for once in chaos.ONCE_TARGETS:
        assert targets.count(once) == 1, once
    # The in-flight Create is looked for first: tasks submit early in the run.
    assert targets[0] == "worker-mid-create"
    kinds = {t.rstrip("-0123456789") for t in targets}
    assert {"worker", "scheduler", "triggerer", "api-server", "redis", "postgres"} <= kinds
    assert all(2.0 <= k.gap <= 9.0 and 1.0 <= k.pause <= 6.0 for k in plan)


def test_the_fleet_has_every_kind_with_its_list_and_budget() -> None:
    fleet = chaos.plan_fleet(50, 1, "chaos1")
    kinds = [chaos._kind(spec) for spec in fleet]
    assert kinds.count("window") == kinds.count("timeout") == 10 and kinds.count("fallback") == 30
    assert [s["config"]["TrainingJobName"] for s in fleet[:2]] == ["chaos1-000", "chaos1-001"]
    for spec, kind in zip(fleet, kinds, strict=True):
        if kind == "timeout":
            assert spec["instance_preferences"] == [{"instance_type": chaos.P5, "instance_count": 1}]
            assert spec["max_pending"] == chaos.TIGHT_PENDING
        if kind == "window":
            assert spec["instance_preferences"][1]["accept_after"] == chaos.WINDOW
    # p5 never has capacity: the timeout tasks' failures are the scenario's.
    assert chaos.scenario()["capacity"][chaos.P5] == [{"from": 0, "free": 0}]


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("chaos1-000", "chaos1-000"),
        ("chaos1-000-r2", "chaos1-000"),
        ("chaos1-000-s2", "chaos1-000"),
        ("chaos1-000-r3-s2", "chaos1-000"),
        ("stray", None),
    ],
)
def test_a_jobs_task_is_its_name_without_resubmission_and_stage(name: str, base: str | None) -> None:
    assert chaos.lineage(name) == base


def test_stages_and_resubmissions_after_the_earlier_job_ended_are_no_duplicates() -> None:
    jobs = [
        job("chaos1-000", "Stopped", 1, 10),  # stage 1, stopped when stage 2's window opened
        job("chaos1-000-s2", "Failed", 10, 20),
        job("chaos1-000-r2-s2", "Completed", 21, 90),
        job("chaos1-001", "Completed", 1, 80),
    ]
    assert chaos.duplicates_of(jobs, OWNERS) == []


@pytest.mark.parametrize(
    ("first", "why"),
    [
        (job("chaos1-000", "InProgress", 1), "was InProgress"),
        (job("chaos1-000", "Completed", 1, 20), "was Completed"),
        (job("chaos1-000", "Stopped", 1, 40), "was Stopped"),  # ended after the second was created
    ],
)
def test_a_second_job_while_the_first_was_alive_or_done_is_a_duplicate(
    first: dict[str, Any], why: str
) -> None:
    found = chaos.duplicates_of([first, job("chaos1-000-r2", "InProgress", 35)], OWNERS)
    assert found == [f"chaos1-000-r2 (while chaos1-000 {why})"]


def test_a_job_no_task_owns_is_a_duplicate() -> None:
    assert chaos.duplicates_of([job("chaos1-077", "Completed", 1)], OWNERS) == [
        "chaos1-077 (no task owns it)"
    ]


DESCRIBE = {
    "TrainingJobName": "chaos1-000-s2",
    "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/chaos1-000-s2",
    "TrainingJobStatus": "Completed",
    "ResourceConfig": {
        "SelectedInstanceType": chaos.G5,
        "SelectedInstanceCount": 1,
        "InstancePreferences": [
            {"InstanceType": chaos.G6, "InstanceCount": 1},
            {"InstanceType": chaos.G5, "InstanceCount": 1},
        ],
    },
}
RECORD = {
    "job_name": "chaos1-000-s2",
    "job_arn": DESCRIBE["TrainingJobArn"],
    "selected_instance_type": chaos.G5,
    "selected_instance_count": 1,
    "preference_rank": 2,
    "job_status": "Completed",
}


def test_a_record_equal_to_describe_has_no_mismatch() -> None:
    assert chaos.record_mismatches(RECORD, DESCRIBE) == []


def test_every_field_that_differs_from_describe_is_named() -> None:
    record = {**RECORD, "preference_rank": 1, "job_status": "InProgress"}
    assert chaos.record_mismatches(record, DESCRIBE) == [
        "preference_rank: XCom 1, Describe 2",
        "job_status: XCom 'InProgress', Describe 'Completed'",
    ]


def test_the_run_passes_only_with_every_invariant_and_checked_records() -> None:
    clean = {"duplicates": [], "unattended": [], "foreign_failures": [], "record_mismatches": []}
    assert chaos.passed({**clean, "records_checked": 3})
    assert not chaos.passed({**clean, "records_checked": 0})
    for key in clean:
        assert not chaos.passed({**clean, key: ["x"], "records_checked": 3}), key


# -- two deployments sharing one offline SageMaker --------------------------------------------------------

A, B = "sm-prefs-aaaaaaaaaaaa", "sm-prefs-bbbbbbbbbbbb"


def test_a_derived_names_task_is_its_name_without_resubmission_and_stage() -> None:
    base = "e2e-chaos-job-3-0a1b2c3d4e"
    for name in (base, f"{base}-r2", f"{base}-s2", f"{base}-r3-s2"):
        assert chaos.lineage(name) == base


def test_without_a_prefix_the_fleet_names_no_job_and_each_deployment_derives_its_own() -> None:
    fleet = chaos.plan_fleet(6, 4, None)
    assert all("TrainingJobName" not in spec["config"] for spec in fleet)
    owners_a = chaos.fleet_owners(fleet, "chaos-4-1", A)
    owners_b = chaos.fleet_owners(fleet, "chaos-4-1", B)
    # Same DAG, run id and map indexes: the two deployments' names differ, each maps back to its task.
    assert sorted(owners_a.values()) == sorted(owners_b.values()) == list(range(6))
    assert not set(owners_a) & set(owners_b)
    assert all(chaos.lineage(name) == name for name in owners_a)
    assert chaos.fleet_owners(fleet, "chaos-4-1", A) == owners_a
    # Named in the config: the names are the config's, whatever the deployment.
    named = chaos.plan_fleet(6, 4, "chaos4")
    assert (
        chaos.fleet_owners(named, "r", A)
        == chaos.fleet_owners(named, "r", B)
        == {f"chaos4-{i:03d}": i for i in range(6)}
    )


def stops(
    stopped_by: dict[str, list[str]] | None = None,
    stop_calls: dict[str, int] | None = None,
    sent: dict[str, int] | None = None,
    total: int | None = None,
) -> dict[str, Any]:
    owner_of = {"a-job-1": A, "a-job-2": A, "b-job-1": B, "stray": None}
    calls = stop_calls if stop_calls is not None else {"a-job-1": 1, "b-job-1": 2}
    signed = sent if sent is not None else {A: 1, B: 2}
    return chaos.foreign_stops(
        owner_of,
        stopped_by if stopped_by is not None else {A: ["a-job-1"], B: ["b-job-1"]},
        calls,
        signed,
        total if total is not None else sum(calls.values()),
    )


def test_each_deployment_stopping_its_own_jobs_is_no_foreign_stop() -> None:
    found = stops()
    assert found["count"] == 0 and found["items"] == []
    assert found["sent"] == found["received"] == {A: 1, B: 2}


def test_a_job_stopped_by_the_other_deployments_reconciler_is_a_foreign_stop() -> None:
    found = stops(stopped_by={A: ["a-job-1"], B: ["b-job-1", "a-job-2"]})
    assert found["count"] == 1
    assert found["items"] == [f"a-job-2 (of {A}) stopped by the reconciler of {B}"]


def test_stop_calls_reaching_a_deployments_jobs_beyond_what_it_sent_are_foreign_stops() -> None:
    # A's job received 3 stops; A's key sent 1 of them, B's key 2 more than B's own job received.
    found = stops(stop_calls={"a-job-1": 3, "b-job-1": 2}, sent={A: 1, B: 4})
    assert found["count"] == 2
    assert found["items"] == [f"2 StopTrainingJob calls reached the jobs of {A} beyond the 1 it sent"]


def test_a_stop_of_a_job_no_deployment_owns_and_unsigned_stops_are_foreign_stops() -> None:
    found = stops(stop_calls={"a-job-1": 1, "stray": 1}, sent={A: 1, B: 0})
    assert found["count"] == 2
    assert found["items"] == [
        "stray (owned by no deployment: tag None) received 1 StopTrainingJob",
        "1 StopTrainingJob calls signed by no deployment's access key",
    ]
