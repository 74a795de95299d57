"""The HyperPod flexible-group domain: request rules, where a wait stands, and the outcome of a mix."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import botocore.session
import pytest

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.hyperpod import (
    ANNOUNCED_TYPES,
    FlexibleGroup,
    GroupPhase,
    group_progress,
)
from airflow_provider_sm_prefs.domain.hyperpod_outcome import (
    GroupOutcome,
    describe_mix,
    group_outcome,
    type_counts,
)

CLUSTER_TYPES = frozenset(
    botocore.session.get_session().get_service_model("sagemaker").shape_for("ClusterInstanceType").enum
)
LIST = ["ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4d.24xlarge"]


def _group(**overrides: object) -> FlexibleGroup:
    args: dict[str, object] = {
        "group_name": "gpu-workers",
        "instance_types": LIST,
        "instance_count": 8,
        "min_instance_count": 4,
        "execution_role": "arn:aws:iam::123456789012:role/hyperpod",
        "allowed_types": CLUSTER_TYPES,
    }
    args.update(overrides)
    return FlexibleGroup.parse(**args)  # type: ignore[arg-type]


def _problems(**overrides: object) -> list[str]:
    with pytest.raises(InvalidInstancePreferencesError) as caught:
        _group(**overrides)
    return caught.value.problems


def test_the_announced_types_are_cluster_types_of_the_installed_botocore() -> None:
    assert set(ANNOUNCED_TYPES) <= CLUSTER_TYPES


def test_a_valid_group_builds_the_cluster_api_specification() -> None:
    group = _group(
        extra={"ThreadsPerCore": 1, "LifeCycleConfig": {"SourceS3Uri": "s3://b/l", "OnCreate": "x.sh"}}
    )
    spec = group.specification()
    assert spec["InstanceRequirements"] == {"InstanceTypes": LIST}
    assert "InstanceType" not in spec  # mutually exclusive with InstanceRequirements
    assert spec["InstanceCount"] == 8 and spec["MinInstanceCount"] == 4
    assert spec["ExecutionRole"].endswith("role/hyperpod") and spec["ThreadsPerCore"] == 1
    assert FlexibleGroup.from_dict(group.as_dict()) == group


def test_twenty_one_types_are_refused_naming_the_limit() -> None:
    types = sorted(t for t in CLUSTER_TYPES if t.startswith("ml.c"))[:21]
    (problem,) = _problems(instance_types=types)
    assert problem.startswith("instance_types: 21 types") and "at most 20" in problem


def test_every_broken_rule_is_named_in_one_error() -> None:
    problems = _problems(
        group_name="-bad",
        instance_types=["ml.p5.48xlarge", "ml.p5.48xlarge", "ml.p9.huge"],
        instance_count=7000,
        min_instance_count=3,
    )
    assert any(p.startswith("group_name:") for p in problems)
    assert any(p.startswith("instance_types[1]: ml.p5.48xlarge appears twice") for p in problems)
    assert any(p.startswith("instance_types[2]: ml.p9.huge is not a HyperPod") for p in problems)
    assert any(p.startswith("instance_count: 7000 must be") for p in problems)


def test_a_minimum_above_the_target_is_refused() -> None:
    (problem,) = _problems(instance_count=2, min_instance_count=3)
    assert problem.startswith("min_instance_count: 3 is more than instance_count 2")


def test_fields_the_operator_owns_cannot_be_set_twice() -> None:
    (problem,) = _problems(extra={"InstanceType": "ml.p5.48xlarge"})
    assert problem.startswith("group_config.InstanceType:")


def test_a_rendered_count_is_read_as_a_number() -> None:
    assert _group(instance_count="8", min_instance_count="4").instance_count == 8


def _cluster(
    status: str, group_status: str, current: int, target: int, scaling: bool, **extra: object
) -> dict:
    group: dict[str, object] = {
        "InstanceGroupName": "gpu-workers",
        "Status": group_status,
        "CurrentCount": current,
        "TargetCount": target,
        "MinCount": 4,
    }
    if scaling:
        group["ActiveOperations"] = {"Scaling": 1}
    group.update(extra)
    return {"ClusterName": "night", "ClusterStatus": status, "InstanceGroups": [group]}


@pytest.mark.parametrize(
    ("cluster", "accept_minimum", "phase"),
    [
        (_cluster("Updating", "Updating", 2, 8, True), False, GroupPhase.WAITING),
        (_cluster("InService", "InService", 5, 8, True), False, GroupPhase.WAITING),
        (_cluster("InService", "InService", 5, 8, True), True, GroupPhase.REACHED_MINIMUM),
        (_cluster("InService", "InService", 3, 8, True), True, GroupPhase.WAITING),
        (_cluster("InService", "InService", 8, 8, False), False, GroupPhase.REACHED_TARGET),
        (_cluster("RollingBack", "Updating", 0, 8, False), False, GroupPhase.ROLLED_BACK),
        (_cluster("InService", "InService", 0, 0, False), False, GroupPhase.ROLLED_BACK),
        (_cluster("Failed", "Failed", 0, 8, False), False, GroupPhase.FAILED),
        (
            {"ClusterName": "night", "ClusterStatus": "InService", "InstanceGroups": []},
            False,
            GroupPhase.GONE,
        ),
    ],
)
def test_where_a_scale_up_stands(cluster: dict, accept_minimum: bool, phase: GroupPhase) -> None:
    assert group_progress(cluster, "gpu-workers", 8, 0, accept_minimum) is phase


def test_a_scale_down_to_zero_has_reached_its_target() -> None:
    cluster = _cluster("InService", "InService", 0, 0, False)
    assert group_progress(cluster, "gpu-workers", 0, 8, False) is GroupPhase.REACHED_TARGET


def test_the_mix_is_listed_in_preference_order_with_ranks_and_accelerators() -> None:
    details = [
        {"InstanceType": "ml.p4d.24xlarge", "CurrentCount": 4, "ThreadsPerCore": 1},
        {"InstanceType": "ml.p5.48xlarge", "CurrentCount": 2, "ThreadsPerCore": 1},
        {"InstanceType": "ml.p5e.48xlarge", "CurrentCount": 0, "ThreadsPerCore": 1},
    ]
    counts = type_counts(_group(), details)
    assert [(c.instance_type, c.rank, c.count) for c in counts] == [
        ("ml.p5.48xlarge", 1, 2),
        ("ml.p4d.24xlarge", 3, 4),
    ]
    assert describe_mix(counts) == "2 × ml.p5.48xlarge + 4 × ml.p4d.24xlarge = 16 × H100 + 32 × A100"


def test_the_outcome_prices_the_mix_next_to_the_all_first_choice_cost() -> None:
    group = _group()
    details = {
        "InstanceGroupName": "gpu-workers",
        "CurrentCount": 6,
        "MinCount": 4,
        "InstanceTypeDetails": [
            {"InstanceType": "ml.p5.48xlarge", "CurrentCount": 2},
            {"InstanceType": "ml.p4d.24xlarge", "CurrentCount": 4},
        ],
    }
    start = datetime(2026, 12, 3, 2, 0, tzinfo=timezone.utc)
    prices = {"ml.p5.48xlarge": 100.0, "ml.p4d.24xlarge": 40.0}
    outcome = group_outcome(
        "night", group, details, GroupPhase.REACHED_MINIMUM, start, start + timedelta(minutes=50), prices
    )
    assert outcome.fell_back and outcome.current_count == 6 and outcome.min_count == 4
    assert outcome.accelerators_total == 48
    assert outcome.seconds_to_in_service == 3000.0
    assert outcome.hourly_cost == 360.0 and outcome.first_choice_hourly_cost == 600.0
    assert GroupOutcome.from_dict(outcome.as_dict()) == outcome
    assert "6 of 8 nodes (reached-minimum) after 3000 s" in outcome.summary()


def test_an_unpriced_type_leaves_the_mix_cost_unknown() -> None:
    details = {"InstanceTypeDetails": [{"InstanceType": "ml.p4d.24xlarge", "CurrentCount": 1}]}
    outcome = group_outcome("night", _group(), details, GroupPhase.REACHED_TARGET, None, None, {})
    assert outcome.hourly_cost is None and outcome.seconds_to_in_service is None
