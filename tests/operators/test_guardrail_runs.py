"""Guardrails before submit in real dag.test() runs against the offline SageMaker (HTTP, no mocks).

Quotas, training plans and prices come from the scenario through Service Quotas, DescribeTrainingPlan
and the Price List API at the same endpoint; Create calls are counted by the emulator.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.operators.test_dag_runs import FIRST_CHOICE_SCARCE, logs, processing_config, training_config

pytestmark = pytest.mark.usefixtures("airflow_db")

P5, P4D, G5 = "ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g5.48xlarge"
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"
LIST = [
    {"instance_type": P5, "instance_count": 2},
    {"instance_type": P4D, "instance_count": 2},
    {"instance_type": G5, "instance_count": 4},
]
PRICES = {P5: 55.04, P4D: 37.69, G5: 20.36}
BASE: dict[str, Any] = {"time_scale": 600, "job_runtime_seconds": 600, "prices": PRICES}


def run(
    sm: Any, run_test_dag: Any, scenario: dict[str, Any], dag: str = "t_train_capacity", **conf: Any
) -> Any:
    sm.load_scenario({**BASE, **scenario})
    conf.setdefault("config", training_config())
    conf.setdefault("prefs", LIST)
    conf.setdefault("max_pending", 3600)
    return run_test_dag(dag, **conf)


def creates(sm: Any) -> int:
    ops = sm.stats()["operations"]
    return int(ops.get("CreateTrainingJob", 0)) + int(ops.get("CreateProcessingJob", 0))


def excluded(xcom: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(x["instance_type"], x["rank"], x["kind"]) for x in xcom["return_value"]["excluded"]]


def test_no_quota_for_the_first_entry_prunes_it_and_the_job_runs_on_the_second(
    sm: Any, run_test_dag: Any, capacity_record: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    states, xcom = run(sm, run_test_dag, {"quotas": {"training": {P5: 0}}})
    assert states["job"] == "success" and xcom is not None
    assert (xcom["selected_instance_type"], xcom["preference_rank"], xcom["fell_back"]) == (P4D, 2, True)
    assert excluded(xcom) == [(P5, 1, "quota")]
    # SageMaker got the pruned list; the outcome speaks of the list as written.
    assert [p["instance_type"] for p in sm.job("nightly")["preferences"]] == [P4D, G5]
    assert [p["instance_type"] for p in xcom["return_value"]["preferences"]] == [P5, P4D, G5]
    reason = xcom["return_value"]["excluded"][0]["reason"]
    assert f"service quota '{P5} for training job usage' is 0 instances; the entry needs 2" in reason
    assert reason in logs(capfd)
    record = capacity_record("t_train_capacity")
    assert record is not None and record["excluded"] == xcom["return_value"]["excluded"]
    assert (record["hourly_cost"], record["first_choice_hourly_cost"]) == (75.38, 110.08)
    assert record["cost_increase"] == pytest.approx(75.38 / 110.08 - 1, abs=1e-4)


def test_preflight_fail_fails_the_task_without_a_create_and_leaves_a_record(
    sm: Any, run_test_dag: Any, capacity_record: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    states, _ = run(sm, run_test_dag, {"quotas": {"training": {P5: 0}}}, preflight="fail")
    assert states["job"] == "failed"
    assert creates(sm) == 0 and sm.jobs() == []
    assert "preflight='fail' found entries that cannot run now" in logs(capfd)
    record = capacity_record("t_train_capacity")
    assert record is not None and record["failure_kind"] == "preflight"
    assert [(x["instance_type"], x["kind"]) for x in record["excluded"]] == [(P5, "quota")]


def test_a_plan_not_active_is_pruned_with_its_window_and_the_fall_to_on_demand_is_logged_with_its_cost(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    plans = [{"arn": PLAN, "instance_type": P5, "count": 2, "from": 864000, "to": 950400}]  # in 10 days
    prefs = [{"instance_type": P5, "instance_count": 2, "training_plan_arn": PLAN}, *LIST[1:]]
    states, xcom = run(sm, run_test_dag, {"training_plans": plans}, prefs=prefs)
    assert states["job"] == "success" and xcom is not None
    assert excluded(xcom) == [(P5, 1, "plan")]
    reason = xcom["return_value"]["excluded"][0]["reason"]
    assert "training plan nightly-p5 (window " in reason and reason.endswith("is Scheduled, not Active")
    text = logs(capfd)
    assert reason in text
    assert (
        f"Fell back from training plan {PLAN} ({P5}) to On-Demand {P4D}×2: $75.38/h at On-Demand rates"
        in text
    )


def test_max_hourly_cost_excludes_the_p5_entry(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    states, xcom = run(sm, run_test_dag, {}, max_hourly_cost=100)
    assert states["job"] == "success" and xcom is not None
    assert (xcom["selected_instance_type"], xcom["preference_rank"]) == (P4D, 2)
    assert excluded(xcom) == [(P5, 1, "cost")]
    reason = xcom["return_value"]["excluded"][0]["reason"]
    assert reason == "cluster costs $110.08/h (2 × $55.04/h), above max_hourly_cost=$100.00"
    assert reason in logs(capfd)


def test_max_cost_increase_keeps_the_fallbacks_within_the_fraction(sm: Any, run_test_dag: Any) -> None:
    # First choice G5×4 ($81.44/h); P4D×2 ($75.38/h) is cheaper; P5×2 ($110.08/h) is +35 %.
    prefs = [LIST[2], LIST[0], LIST[1]]
    states, xcom = run(
        sm, run_test_dag, {"capacity": {G5: [{"from": 0, "free": 0}]}}, prefs=prefs, max_cost_increase=0.25
    )
    assert states["job"] == "success" and xcom is not None
    assert excluded(xcom) == [(P5, 2, "cost")]
    assert (xcom["selected_instance_type"], xcom["preference_rank"]) == (P4D, 3)
    assert (
        "+35% over ml.g5.48xlarge×4 ($81.44/h), above max_cost_increase=25%"
        in (xcom["return_value"]["excluded"][0]["reason"])
    )


def test_a_type_not_offered_in_the_region_is_pruned(sm: Any, run_test_dag: Any) -> None:
    prices = {**PRICES, P5: {"eu-west-1": 61.0}}
    states, xcom = run(sm, run_test_dag, {"prices": prices})
    assert states["job"] == "success" and xcom is not None
    assert excluded(xcom) == [(P5, 1, "region")]
    assert (
        "no training price for ml.p5.48xlarge in us-east-1" in xcom["return_value"]["excluded"][0]["reason"]
    )


def test_pricing_denied_is_unchecked_and_the_job_runs(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    states, xcom = run(
        sm, run_test_dag, {**FIRST_CHOICE_SCARCE, "prices": PRICES, "access_denied": ["GetProducts"]}
    )
    assert states["job"] == "success" and xcom is not None
    unchecked = xcom["return_value"]["unchecked"]
    assert unchecked and all(
        line.startswith("price:") and "AccessDeniedException" in line for line in unchecked
    )
    assert excluded(xcom) == [] and xcom["return_value"]["hourly_cost"] is None
    assert "Guardrail unchecked (never blocks the job): price:" in logs(capfd)


def test_pricing_denied_with_a_price_cap_excludes_what_it_cannot_price(sm: Any, run_test_dag: Any) -> None:
    states, xcom = run(
        sm,
        run_test_dag,
        {"access_denied": ["GetProducts"]},
        max_hourly_cost=100,
        prices={P4D: 37.69},  # the DAG's own figure for one type
    )
    assert states["job"] == "success" and xcom is not None
    assert excluded(xcom) == [(P5, 1, "cost"), (G5, 3, "cost")]
    assert xcom["selected_instance_type"] == P4D


def test_nothing_left_fails_with_every_reason_and_no_create(
    sm: Any, run_test_dag: Any, capacity_record: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    states, _ = run(sm, run_test_dag, {"quotas": {"training": {P5: 0}}}, max_hourly_cost=50)
    assert states["job"] == "failed" and creates(sm) == 0
    record = capacity_record("t_train_capacity")
    assert record is not None and record["failure_kind"] == "preflight"
    assert [(x["rank"], x["kind"]) for x in record["excluded"]] == [(1, "quota"), (2, "cost"), (3, "cost")]
    text = logs(capfd)
    for item in record["excluded"]:
        assert item["reason"] in text and item["reason"] in record["reason"]


def test_templated_requirements_that_reject_an_entry_fail_before_any_aws_call(
    sm: Any, run_test_dag: Any
) -> None:
    states, _ = run(sm, run_test_dag, {}, requirements={"min_accelerator_memory_gib": 40})
    assert states["job"] == "failed"
    # Nothing from the task: only the failure callback's look for a job to stop.
    assert set(sm.stats()["operations"]) <= {"DescribeTrainingJob"}


def test_processing_quotas_are_looked_up_by_their_own_name(sm: Any, run_test_dag: Any) -> None:
    prefs = [
        {"instance_type": "ml.m5.4xlarge", "instance_count": 2},
        {"instance_type": "ml.c5.xlarge", "instance_count": 2},
    ]
    states, xcom = run(
        sm,
        run_test_dag,
        {
            "quotas": {"processing": {"ml.m5.4xlarge": 1}},
            "prices": {"ml.m5.4xlarge": 0.922, "ml.c5.xlarge": 0.204},
        },
        dag="t_process",
        config=processing_config(),
        prefs=prefs,
        max_pending=1800,
    )
    assert states["job"] == "success" and xcom is not None
    assert excluded(xcom) == [("ml.m5.4xlarge", 1, "quota")]
    assert (
        "'ml.m5.4xlarge for processing job usage' is 1 instances"
        in xcom["return_value"]["excluded"][0]["reason"]
    )


def test_the_estimated_cost_is_known_once_the_job_ended(sm: Any, run_test_dag: Any) -> None:
    states, xcom = run(sm, run_test_dag, {"quotas": {"training": {P5: 0}}}, dag="t_train_complete")
    assert states["job"] == "success" and xcom is not None
    outcome = xcom["return_value"]
    assert outcome["billable_seconds"] and outcome["preference_rank"] == 2
    assert outcome["estimated_cost"] == pytest.approx(75.38 * outcome["billable_seconds"] / 3600, abs=0.01)
