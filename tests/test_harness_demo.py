"""``make demo``'s cost lines: the outcome's own figures, "unpriced" and why where one is missing; and its
emulated night, held until the DAG submits its job.

The priced run of the nightly DAG itself is checked in ``tests/test_example_dag_runs.py``.
"""

from __future__ import annotations

import time
from typing import Any

from airflow_provider_sm_prefs.domain.guardrails import GuardrailReport
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.preferences import build_request
from harness.demo import EmulatedNight, cost_rows, table_lines
from offline_sagemaker.jobs import training_config

NIGHTLY = [
    {"instance_type": "ml.g6.48xlarge", "instance_count": 2, "training_plan_arn": None},
    {"instance_type": "ml.g5.48xlarge", "instance_count": 4, "training_plan_arn": None},
    {"instance_type": "ml.p4d.24xlarge", "instance_count": 2, "training_plan_arn": None},
]
PRICES = {"ml.g6.48xlarge": 13.35, "ml.g5.48xlarge": 16.29, "ml.p4d.24xlarge": 37.69}


def outcome(
    selected: str, unit_prices: dict[str, float], unchecked: list[str] | None = None
) -> dict[str, Any]:
    """The train task's outcome after the guardrails priced it (``GuardrailReport.apply``, as the operator)."""
    count = next(p["instance_count"] for p in NIGHTLY if p["instance_type"] == selected)
    selected_outcome = CapacityOutcome(
        job_name="sm-prefs-nightly-retrain-train-0a1b2c3d",
        job_kind="training",
        job_arn=None,
        selected_instance_type=selected,
        selected_instance_count=count,
        preference_rank=None,
        fell_back=False,
        pending_seconds=1227.0,
        capacity="on-demand",
        accelerators=None,
        job_status="Completed",
        billable_seconds=1980,
    )
    report = GuardrailReport(
        authored=NIGHTLY,
        kept=[1, 2, 3],
        counts={p["instance_type"]: p["instance_count"] for p in NIGHTLY},
        unit_prices=unit_prices,
        unchecked=list(unchecked or []),
    )
    return report.apply(selected_outcome).as_dict()


def test_a_dearer_fallback_shows_both_prices_the_premium_and_the_run_cost_from_the_outcome() -> None:
    priced = outcome("ml.g5.48xlarge", PRICES)
    hourly, first = priced["hourly_cost"], priced["first_choice_hourly_cost"]
    assert (hourly, first, priced["estimated_cost"]) == (65.16, 26.7, 35.84)
    assert dict(cost_rows(priced)) == {
        "selected price": "$65.16/h (ml.g5.48xlarge×4)",
        "first choice price": "$26.70/h (ml.g6.48xlarge×2)",
        "difference": "+$38.46/h premium (+144% vs first choice), +$21.15 this run",
        "estimated cost of run": "$35.84 (1980 billable s × $65.16/h)",
    }


def test_a_cheaper_fallback_is_a_saving() -> None:
    rows = dict(cost_rows(outcome("ml.g5.48xlarge", {**PRICES, "ml.g5.48xlarge": 5.0})))
    assert rows["difference"] == "-$6.70/h saving (-25% vs first choice), -$3.68 this run"


def test_the_first_choice_has_no_difference() -> None:
    rows = dict(cost_rows(outcome("ml.g6.48xlarge", PRICES)))
    assert rows["selected price"] == rows["first choice price"] == "$26.70/h (ml.g6.48xlarge×2)"
    assert rows["difference"] == "none: the first choice was selected"


def test_an_outcome_without_prices_says_unpriced_with_the_guardrails_reason_and_guesses_nothing() -> None:
    line = "price: ml.g5.48xlarge could not be priced (AccessDeniedException: pricing:GetProducts)"
    first_line = "price: ml.g6.48xlarge could not be priced (AccessDeniedException: pricing:GetProducts)"
    unpriced = outcome("ml.g5.48xlarge", {}, unchecked=[first_line, line])
    assert unpriced["hourly_cost"] is None and unpriced["estimated_cost"] is None
    rows = dict(cost_rows(unpriced))
    assert rows == {
        "selected price": f"unpriced: {line}",
        "first choice price": f"unpriced: {first_line}",
        "difference": "unpriced: needs the prices of both clusters",
        "estimated cost of run": f"unpriced: {line}",
    }
    assert not any("$" in value for value in rows.values())


def test_an_outcome_priced_by_nobody_says_why() -> None:
    rows = dict(cost_rows(outcome("ml.g5.48xlarge", {})))
    assert rows["selected price"].startswith("unpriced: the outcome has no price for ml.g5.48xlarge")
    assert "preflight='off'" in rows["selected price"]


def test_long_values_wrap_below_their_key_instead_of_being_cut() -> None:
    value = "unpriced: price: ml.g5.48xlarge could not be priced (AccessDeniedException: pricing:GetProducts)"
    lines = table_lines([("selected price", value), ("count", "4")])
    body = [line for line in lines if line.startswith("| ") and "|" in line[2:]][1:]
    assert len({len(line) for line in lines}) == 1
    assert body[0].startswith("| selected price | unpriced:") and body[1].startswith("|                | ")
    assert " ".join(line.split("|")[2].strip() for line in body[:-1]) == value


def test_the_night_starts_at_the_first_submission_and_runs_at_the_scenario_time_scale(sm: Any) -> None:
    sm.load_scenario({"time_scale": 0, "capacity": {"ml.g6.48xlarge": [{"from": 0, "free": 0}]}})
    start = sm.now()
    night = EmulatedNight(sm, time_scale=600, tick=0.05)
    night.start()
    try:
        # No job yet: the clock stays where the scenario started, tick after tick.
        time.sleep(0.5)
        assert night.is_alive() and sm.now() == start
        request, _ = build_request("training", training_config("night"), NIGHTLY[:1], 3600)
        sm.boto3_client("sagemaker").create_training_job(**request)
        deadline = time.monotonic() + 60
        while sm.now() < start + 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sm.now() >= start + 60
    finally:
        night.stop()
    assert not night.is_alive() and night.error is None
    stopped_at = sm.now()
    time.sleep(0.3)
    assert sm.now() == stopped_at
