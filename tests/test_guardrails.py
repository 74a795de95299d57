"""The guardrails' decisions from given facts (pure: no AWS, no Airflow)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError, PreflightError
from airflow_provider_sm_prefs.domain.guardrails import (
    Facts,
    GuardrailReport,
    Guardrails,
    PlanFacts,
    Preflight,
    evaluate,
)
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList

P5, P4D, G5 = "ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g5.48xlarge"
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
PRICES: dict[str, float | None] = {P5: 55.0, P4D: 37.5, G5: 20.0}


def prefs(*entries: Any) -> InstancePreferenceList:
    return InstancePreferenceList(
        [e if isinstance(e, dict) else {"instance_type": e, "instance_count": 2} for e in entries], "training"
    )


def facts(**kwargs: Any) -> Facts:
    return Facts(region="us-east-1", **{"prices": dict(PRICES), **kwargs})


def plan(status: str = "Active", available: int = 2, ends_in: float = 3600) -> PlanFacts:
    return PlanFacts(
        "nightly-p5", status, 2, available, NOW - timedelta(hours=1), NOW + timedelta(seconds=ends_in), NOW
    )


def test_an_entry_without_quota_for_its_count_is_pruned_and_the_rest_kept() -> None:
    report = evaluate(prefs(P5, P4D, G5), None, Guardrails(), facts(quotas={P5: 0.0, P4D: 4.0, G5: 1.0}))
    assert report.kept == [2]
    assert [(x["instance_type"], x["rank"], x["kind"]) for x in report.excluded] == [
        (P5, 1, "quota"),
        (G5, 3, "quota"),
    ]
    assert report.excluded[0]["reason"].startswith(
        f"service quota '{P5} for training job usage' is 0 instances"
    )


def test_preflight_fail_raises_with_one_line_per_entry() -> None:
    with pytest.raises(PreflightError) as info:
        evaluate(prefs(P5, P4D), None, Guardrails(preflight=Preflight.FAIL), facts(quotas={P5: 0.0}))
    assert info.value.lines == [
        f"instance_preferences[0] {P5} (quota): service quota '{P5} for training job usage' is 0 instances; "
        "the entry needs 2 (SageMaker would reject the whole request)"
    ]


def test_preflight_warn_keeps_every_entry_and_off_does_not_check() -> None:
    found = facts(quotas={P5: 0.0})
    warned = evaluate(prefs(P5, P4D), None, Guardrails(preflight=Preflight.WARN), found)
    assert warned.kept == [1, 2] and warned.excluded == [] and len(warned.warnings) == 1
    off = evaluate(prefs(P5, P4D), None, Guardrails(preflight=Preflight.OFF), found)
    assert off.kept == [1, 2] and off.warnings == []


@pytest.mark.parametrize(
    ("plan_facts", "reason"),
    [
        (plan(status="Scheduled"), "is Scheduled, not Active"),
        (plan(ends_in=-60), "has ended"),
        (plan(available=1), "has 1 of 2 instances available; the entry needs 2"),
    ],
)
def test_a_plan_that_cannot_serve_the_entry_is_pruned_with_its_window(
    plan_facts: PlanFacts, reason: str
) -> None:
    listed = prefs({"instance_type": P5, "instance_count": 2, "training_plan_arn": PLAN}, P4D)
    report = evaluate(listed, None, Guardrails(), facts(plans={PLAN: plan_facts}))
    (excluded,) = report.excluded
    assert (excluded["rank"], excluded["kind"]) == (1, "plan")
    assert "training plan nightly-p5 (window 2026-11-30 11:00 UTC – " in excluded["reason"]
    assert reason in excluded["reason"]


def test_a_type_without_a_price_in_the_region_is_not_offered_there() -> None:
    report = evaluate(prefs(P5, P4D), None, Guardrails(), facts(prices={P5: None, P4D: 37.5}))
    assert [(x["rank"], x["kind"]) for x in report.excluded] == [(1, "region")]
    assert (
        "no training price for ml.p5.48xlarge in us-east-1: not offered in that region"
        in report.excluded[0]["reason"]
    )


def test_a_price_list_that_prices_no_entry_leaves_the_region_unchecked() -> None:
    report = evaluate(prefs(P5, P4D), None, Guardrails(), facts(prices={P5: None, P4D: None}))
    assert report.kept == [1, 2]
    assert report.unchecked == [
        "region: the price list has no training price in us-east-1 for any entry; region availability not checked"
    ]


def test_max_hourly_cost_excludes_dearer_clusters_and_entries_it_cannot_price() -> None:
    guard = Guardrails(max_hourly_cost=100.0)
    report = evaluate(prefs(P5, P4D, G5), None, guard, facts(prices={P5: 55.0, P4D: 37.5}))
    assert report.kept == [2]
    assert report.excluded[0]["reason"] == (
        "cluster costs $110.00/h (2 × $55/h), above max_hourly_cost=$100.00"
    )
    assert report.excluded[1]["reason"] == "no price available, so the price cap cannot be checked"


def test_max_cost_increase_compares_with_the_first_remaining_entry() -> None:
    guard = Guardrails(max_cost_increase=0.5)
    # P5 is dropped for quota, so P4D (75/h) is the reference: G5 (40/h) is cheaper; P5 never counts.
    report = evaluate(prefs(P5, G5, P4D), None, guard, facts(quotas={P5: 0.0}))
    assert report.kept == [2]
    assert [(x["rank"], x["kind"]) for x in report.excluded] == [(1, "quota"), (3, "cost")]
    assert (
        "+88% over ml.g5.48xlarge×2 ($40.00/h), above max_cost_increase=50%" in report.excluded[1]["reason"]
    )


def test_a_plan_backed_entry_is_prepaid_and_never_excluded_for_cost() -> None:
    listed = prefs({"instance_type": P5, "instance_count": 2, "training_plan_arn": PLAN}, P4D)
    report = evaluate(listed, None, Guardrails(max_hourly_cost=1.0), facts(plans={PLAN: plan()}))
    assert report.kept == [1]


def test_nothing_left_fails_with_every_reason() -> None:
    with pytest.raises(PreflightError) as info:
        evaluate(prefs(P5, P4D), None, Guardrails(max_hourly_cost=10.0), facts(quotas={P5: 0.0}))
    assert [line.split(" (")[1].split(")")[0] for line in info.value.lines] == ["quota", "cost"]
    assert "no entry of the preference list remains" in str(info.value)


def test_uniform_counts_use_the_job_level_count() -> None:
    listed = InstancePreferenceList([P4D, G5], "training")
    report = evaluate(listed, 3, Guardrails(max_hourly_cost=100.0), facts())
    assert report.kept == [2] and "3 × $37.5/h" in report.excluded[0]["reason"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"preflight": "sometimes"}, "preflight: 'sometimes' is not one of prune, fail, warn, off"),
        ({"max_hourly_cost": "a lot"}, "max_hourly_cost: 'a lot' is not a number"),
        ({"max_cost_increase": -0.1}, "max_cost_increase: -0.1 must be a number >= 0"),
        ({"prices": [1]}, "prices: expected {instance_type: USD per instance-hour}, got list"),
        ({"prices": {P5: "free"}}, "prices['ml.p5.48xlarge']: 'free' is not a number"),
    ],
)
def test_guardrail_arguments_are_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInstancePreferencesError, match=None) as info:
        Guardrails.of(**kwargs)
    assert message in str(info.value)


def test_rendered_strings_are_accepted() -> None:
    assert Guardrails.of("120", "0.25", "WARN", {P5: "55.0"}) == Guardrails(
        120.0, 0.25, Preflight.WARN, {P5: 55.0}
    )


# -- the outcome, as written ---------------------------------------------------------------------------


def outcome(
    instance_type: str, count: int, billable: int | None = None, capacity: str = "on-demand"
) -> CapacityOutcome:
    return CapacityOutcome(
        job_name="nightly",
        job_kind="training",
        job_arn=None,
        selected_instance_type=instance_type,
        selected_instance_count=count,
        preference_rank=1,  # rank in the submitted (pruned) list
        fell_back=False,
        pending_seconds=0.0,
        capacity=capacity,
        accelerators=None,
        job_status="Completed",
        preferences=[{"instance_type": instance_type, "instance_count": count, "training_plan_arn": None}],
        billable_seconds=billable,
    )


def test_the_outcome_reports_ranks_of_the_list_as_written_and_its_cost() -> None:
    report = evaluate(prefs(P5, P4D, G5), None, Guardrails(), facts(quotas={P5: 0.0}))
    applied = GuardrailReport.from_dict(report.as_dict()).apply(outcome(P4D, 2, billable=1800))  # type: ignore[union-attr]
    assert (applied.preference_rank, applied.fell_back) == (2, True)
    assert [p["instance_type"] for p in applied.preferences] == [P5, P4D, G5]
    assert (applied.hourly_cost, applied.first_choice_hourly_cost) == (75.0, 110.0)
    assert applied.cost_increase == pytest.approx(75 / 110 - 1, abs=1e-4)
    assert applied.estimated_cost == 37.5
    assert applied.excluded == report.excluded


def test_a_fall_from_a_training_plan_to_on_demand_is_said_plainly_with_its_cost() -> None:
    listed = prefs({"instance_type": P5, "instance_count": 2, "training_plan_arn": PLAN}, P4D)
    report = evaluate(listed, None, Guardrails(), facts(plans={PLAN: plan()}))
    applied = report.apply(outcome(P4D, 2))
    assert report.selection_note(applied) == (
        f"Fell back from training plan {PLAN} ({P5}) to On-Demand {P4D}×2: $75.00/h at On-Demand rates"
    )
