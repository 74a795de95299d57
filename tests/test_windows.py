"""Acceptance windows (pure): parsing, the rules, stages and what remains of max_pending per stage."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import (
    InstancePreference,
    InstancePreferenceList,
    check_request,
)
from airflow_provider_sm_prefs.domain.windows import StageLimits, plan_stages, stage_limits, stage_suffix

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"
P5, G5, G6, P4D, C5 = "ml.p5.48xlarge", "ml.g5.48xlarge", "ml.g6.48xlarge", "ml.p4d.24xlarge", "ml.c5.xlarge"
HOUR = 3600.0


def prefs(*entries: dict[str, object], kind: str = "training") -> InstancePreferenceList:
    return InstancePreferenceList(list(entries), kind)


def problems_of(*entries: dict[str, object], max_pending: int | None = None) -> str:
    config = {"ResourceConfig": {"InstanceCount": 1}, "StoppingCondition": {}}
    with pytest.raises(InvalidInstancePreferencesError) as err:
        check_request("training", config, list(entries), max_pending)
    return str(err.value)


def test_windows_are_read_from_timedeltas_numbers_and_rendered_strings() -> None:
    parsed = prefs(
        {"instance_type": P5},
        {"instance_type": G5, "accept_after": timedelta(hours=2)},
        {"instance_type": P4D, "accept_after": "14400"},
        {"InstanceType": G6, "accept_after": 14400.0},
    )
    assert [e.accept_after for e in parsed] == [None, 7200.0, 14400.0, 14400.0]
    assert InstancePreference(G5, accept_after=timedelta(minutes=90)).accept_after == 5400.0


def test_windows_never_reach_aws_but_survive_the_round_trip_through_xcom() -> None:
    parsed = prefs({"instance_type": P5}, {"instance_type": G5, "accept_after": 7200})
    assert parsed.as_api() == [{"InstanceType": P5}, {"InstanceType": G5}]
    assert InstancePreferenceList(parsed.as_list(), "training") == parsed
    assert "accept_after" not in parsed.as_list()[0]
    assert parsed.describe(1) == f"{P5}×1 → {G5}×1 (after 2h)"


def test_an_entry_without_a_window_shares_the_one_above_it() -> None:
    parsed = prefs({"instance_type": P5}, {"instance_type": G5, "accept_after": 7200}, {"instance_type": G6})
    assert parsed.windows == [0.0, 7200.0, 7200.0]
    assert parsed.escalates
    assert not prefs({"instance_type": P5}, {"instance_type": G5}).escalates


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        (
            [{"instance_type": P5, "accept_after": 60}, {"instance_type": G5}],
            "instance_preferences[0].accept_after: the first entry is acceptable from the start",
        ),
        (
            [{"instance_type": P5}, {"instance_type": G5, "accept_after": -5}],
            "instance_preferences[1].accept_after: -5 is negative",
        ),
        (
            [
                {"instance_type": P5},
                {"instance_type": G5, "accept_after": 7200},
                {"instance_type": P4D, "accept_after": 3600},
            ],
            "instance_preferences[2].accept_after: 1h is earlier than instance_preferences[1]'s 2h",
        ),
        (
            [{"instance_type": P5}, {"instance_type": G5, "accept_after": "soon"}],
            "instance_preferences[1].accept_after: 'soon' is not a duration",
        ),
        (
            [{"instance_type": P5}, {"instance_type": G5, "accept_after": float("nan")}],
            "instance_preferences[1].accept_after: nan is not a duration",
        ),
        (
            [{"instance_type": P5}, {"instance_type": G5, "accept_after": True}],
            "instance_preferences[1].accept_after: True is not a duration",
        ),
    ],
)
def test_invalid_windows_fail_naming_the_entry(entries: list[dict[str, object]], expected: str) -> None:
    assert expected in problems_of(*entries)


def test_a_window_that_opens_after_max_pending_is_rejected() -> None:
    message = problems_of(
        {"instance_type": P5}, {"instance_type": G5, "accept_after": 7200}, max_pending=7200
    )
    assert "instance_preferences[1].accept_after: 2h is not before max_pending (2h)" in message


def test_stages_add_entries_as_their_windows_open_in_the_order_written() -> None:
    parsed = prefs(
        {"instance_type": P5, "instance_count": 2, "training_plan_arn": PLAN},
        {"instance_type": G6, "instance_count": 2, "accept_after": 7200},
        {"instance_type": G5, "instance_count": 4},
        {"instance_type": P4D, "instance_count": 2, "accept_after": 14400},
    )
    stages = plan_stages(parsed)
    assert [(s.number, s.opens_at, s.closes_at, s.ranks) for s in stages] == [
        (1, 0.0, 7200.0, (1,)),
        (2, 7200.0, 14400.0, (1, 2, 3)),
        (3, 14400.0, None, (1, 2, 3, 4)),
    ]
    second = stages[1].preferences(parsed)
    assert second.as_api() == [
        {"InstanceType": P5, "InstanceCount": 2, "TrainingPlanArns": [PLAN]},
        {"InstanceType": G6, "InstanceCount": 2},
        {"InstanceType": G5, "InstanceCount": 4},
    ]
    assert [s.is_last for s in stages] == [False, False, True]
    assert len(plan_stages(prefs({"instance_type": P5}, {"instance_type": G5}))) == 1


def test_stage_names_keep_the_first_stage_name_and_number_the_rest() -> None:
    assert [stage_suffix(n) for n in (1, 2, 5)] == ["", "-s2", "-s5"]


def test_left_out_entries_never_return_and_the_rest_keeps_its_windows() -> None:
    parsed = prefs(
        {"instance_type": P5},
        {"instance_type": G6, "accept_after": 7200},
        {"instance_type": G5},
        {"instance_type": P4D, "accept_after": 14400},
    )
    # Without the first entry, the job starts at once with what shared the next window.
    kept = parsed.keep([2, 3, 4])
    assert kept.instance_types == [G6, G5, P4D]
    assert kept.windows == [0.0, 0.0, 14400.0]
    # Without the second, the third keeps the window it inherited from it.
    kept = parsed.keep([1, 3, 4])
    assert kept.windows == [0.0, 7200.0, 14400.0]
    assert [s.ranks for s in plan_stages(kept)] == [(1,), (1, 2), (1, 2, 3)]


def accelerated(*types: str) -> InstancePreferenceList:
    return prefs(*({"instance_type": t} for t in types))


@pytest.mark.parametrize(
    ("kind", "types", "elapsed", "expected"),
    [
        # Enough left for SageMaker's minimum: SageMaker enforces the rest.
        (JobKind.TRAINING, (P5, G5), 3600.0, StageLimits(10800, None)),
        # Less than 30 minutes left: the minimum is sent and the provider enforces the rest.
        (JobKind.TRAINING, (P5, G5), 13800.0, StageLimits(1800, 600.0)),
        # SageMaker enforces nothing for CPU-only lists and processing jobs.
        (JobKind.TRAINING, (C5,), 3600.0, StageLimits(None, 10800.0)),
        (JobKind.PROCESSING, ("ml.g5.xlarge",), 3600.0, StageLimits(None, 10800.0)),
        (JobKind.TRAINING, (P5,), 14400.0, StageLimits(None, None, exhausted=True)),
    ],
)
def test_each_stage_gets_what_remains_of_max_pending(
    kind: JobKind, types: tuple[str, ...], elapsed: float, expected: StageLimits
) -> None:
    stage_list = InstancePreferenceList([{"instance_type": t} for t in types], kind)
    assert stage_limits(kind, stage_list, 4 * HOUR, elapsed) == expected


def test_without_max_pending_no_stage_is_bounded() -> None:
    assert stage_limits(JobKind.TRAINING, accelerated(P5), None, 99999.0) == StageLimits(None, None)
