"""The HyperPod flexible-group domain: request rules, where a wait stands, and the outcome of a mix."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import botocore.session
import pytest
from botocore.model import Shape
from botocore.validate import ParamValidator

from airflow_provider_sm_prefs.domain import hyperpod_update
from airflow_provider_sm_prefs.domain.exceptions import ClusterConfigError, InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.hyperpod import (
    ANNOUNCED_TYPES,
    CONTINUOUS_MAX_PENDING_SECONDS,
    MIN_COUNT_DEADLINE_SECONDS,
    FlexibleGroup,
    GroupPhase,
    group_progress,
    pending_bound,
    provisions_continuously,
)
from airflow_provider_sm_prefs.domain.hyperpod_outcome import (
    GroupOutcome,
    describe_mix,
    group_outcome,
    type_counts,
)
from airflow_provider_sm_prefs.hooks.hyperpod import scale_specification

MODEL = botocore.session.get_session().get_service_model("sagemaker")
CLUSTER_TYPES = frozenset(MODEL.shape_for("ClusterInstanceType").enum)
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


# -- what a scale of an existing group carries -----------------------------------------------------------

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly"
VPC = {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}
TAINT = {"Key": "gpu", "Value": "yes", "Effect": "NoSchedule"}


def _existing(**fields: object) -> dict[str, Any]:
    """A DescribeCluster answer with the group as it stands: read-only fields, and ``fields``."""
    group: dict[str, Any] = {
        "InstanceGroupName": "gpu-workers",
        "CurrentCount": 2,
        "TargetCount": 2,
        "MinCount": 1,
        "Status": "InService",
        "InstanceRequirements": {"CurrentInstanceTypes": LIST, "DesiredInstanceTypes": LIST},
        "InstanceTypeDetails": [{"InstanceType": LIST[0], "CurrentCount": 2, "ThreadsPerCore": 1}],
        "ExecutionRole": "arn:aws:iam::123456789012:role/hyperpod",
        **fields,
    }
    return {"ClusterName": "night", "ClusterStatus": "InService", "InstanceGroups": [group]}


def _update_problems(spec: dict[str, Any]) -> str:
    """What botocore's own validation says of an UpdateCluster carrying ``spec`` ('' when valid)."""
    report = ParamValidator().validate(
        {"ClusterName": "night", "InstanceGroups": [spec]}, MODEL.operation_model("UpdateCluster").input_shape
    )
    return report.generate_report()


def test_a_scale_carries_each_field_the_group_has_and_changes_only_the_list_and_the_count() -> None:
    spec_members = set(MODEL.shape_for("ClusterInstanceGroupSpecification").members)
    # The fields named by the finding, as the installed botocore's specification has them.
    named = {
        "TrainingPlanArn",
        "OverrideVpcConfig",
        "OnStartDeepHealthChecks",
        "ImageId",
        "KubernetesConfig",
        "SlurmConfig",
        "CapacityRequirements",
        "NetworkInterface",
    }
    assert named <= spec_members
    cluster = _existing(
        TrainingPlanArn=PLAN,
        TrainingPlanStatus="Active",
        OverrideVpcConfig=VPC,
        OnStartDeepHealthChecks=["InstanceStress", "InstanceConnectivity"],
        CurrentImageId="ami-0aaaaaaaaaaaaaaa1",
        DesiredImageId="ami-0bbbbbbbbbbbbbbb2",
        ImageVersionStatus="Updating",
        KubernetesConfig={
            "CurrentLabels": {"team": "old"},
            "DesiredLabels": {"team": "ml"},
            "CurrentTaints": [TAINT],
        },
        SlurmConfig={"NodeType": "Compute", "PartitionNames": ["gpu"]},
        CapacityRequirements={"Spot": {}},
        NetworkInterface={"InterfaceType": "efa-only"},
        LifeCycleConfig={"SourceS3Uri": "s3://b/l", "OnCreate": "on_create.sh"},
        ThreadsPerCore=2,
        ActiveOperations={"Scaling": 1},
    )
    spec = scale_specification(_group(min_instance_count=None), cluster)
    assert spec == {
        "InstanceGroupName": "gpu-workers",
        "InstanceRequirements": {"InstanceTypes": LIST},  # the task's
        "InstanceCount": 8,  # the task's
        "ExecutionRole": "arn:aws:iam::123456789012:role/hyperpod",
        "TrainingPlanArn": PLAN,
        "OverrideVpcConfig": VPC,
        "OnStartDeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
        "ImageId": "ami-0bbbbbbbbbbbbbbb2",  # Describe's DesiredImageId: an image update under way goes on
        "KubernetesConfig": {"Labels": {"team": "ml"}, "Taints": [TAINT]},  # Desired..., else Current...
        "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["gpu"]},
        "CapacityRequirements": {"Spot": {}},
        "NetworkInterface": {"InterfaceType": "efa-only"},
        "LifeCycleConfig": {"SourceS3Uri": "s3://b/l", "OnCreate": "on_create.sh"},
        "ThreadsPerCore": 2,
    }
    assert _update_problems(spec) == ""


def test_what_the_task_gives_wins_over_what_the_group_has() -> None:
    cluster = _existing(TrainingPlanArn=PLAN, ThreadsPerCore=2, MinCount=6)
    group = _group(extra={"ThreadsPerCore": 1}, execution_role="arn:aws:iam::123456789012:role/other")
    spec = scale_specification(group, cluster, count=3)
    assert (spec["ThreadsPerCore"], spec["ExecutionRole"]) == (1, "arn:aws:iam::123456789012:role/other")
    assert spec["InstanceCount"] == 3 and "MinInstanceCount" not in spec  # the old MinCount is not carried
    assert spec["TrainingPlanArn"] == PLAN


def _example(shape: Shape, depth: int = 0) -> Any:
    """A value of ``shape`` with every member set (what a DescribeCluster answer may hold)."""
    if shape.type_name == "structure":
        members = list(shape.members.items())
        if getattr(shape, "is_tagged_union", False):
            members = members[:1]  # a union takes one member
        return {} if depth > 6 else {n: _example(m, depth + 1) for n, m in members}
    if shape.type_name == "list":
        return [_example(shape.member, depth + 1)]  # type: ignore[attr-defined]
    if shape.type_name == "map":
        return {"key": _example(shape.value, depth + 1)}  # type: ignore[attr-defined]
    if shape.type_name == "string":
        if shape.enum:  # type: ignore[attr-defined]
            return shape.enum[0]  # type: ignore[attr-defined]
        low, high = int(shape.metadata.get("min", 0)), int(shape.metadata.get("max", 2048))
        return f"{shape.name}-value".ljust(low, "x")[:high]
    if shape.type_name == "boolean":
        return True
    if shape.type_name == "timestamp":
        return datetime(2026, 12, 3, tzinfo=timezone.utc)
    if shape.type_name in ("integer", "long"):
        return max(1, int(shape.metadata.get("min", 1)))
    return 1.5


def test_every_field_the_specification_and_describe_share_is_carried_from_botocore_s_model() -> None:
    """Driven by the installed botocore: a field a later botocore adds to both shapes is carried as well."""
    details_shape = MODEL.shape_for("ClusterInstanceGroupDetails")
    spec_shape = MODEL.shape_for("ClusterInstanceGroupSpecification")
    details = _example(details_shape)
    details["InstanceGroupName"] = "gpu-workers"
    details.pop("InstanceType")  # a flexible group has a list, not one type
    cluster = {"ClusterName": "night", "InstanceGroups": [details]}
    spec = scale_specification(_group(execution_role=None), cluster)
    shared = [
        name
        for name, member in spec_shape.members.items()
        if name not in hyperpod_update.TASK_FIELDS
        and name in details_shape.members
        and details_shape.members[name].name == member.name  # the same shape under the same name
    ]
    assert shared  # the test proves something only if the two shapes share fields
    for name in shared:
        assert spec.get(name) == details[name], name
    # Every specification field the task does not own is sent, the renamed ones included...
    owned = hyperpod_update.TASK_FIELDS
    assert sorted(n for n in spec_shape.members if n not in owned and n not in spec) == []
    # ...and nothing that only Describe has: botocore itself accepts the update.
    assert _update_problems(spec) == ""


def test_every_specification_field_has_a_describe_source_in_the_installed_botocore() -> None:
    assert hyperpod_update.uncarried_members() == []


def test_a_renamed_field_without_a_source_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = dict(hyperpod_update.DESCRIBE_SOURCES)
    del sources[("KubernetesConfig", "Labels")]
    monkeypatch.setattr(hyperpod_update, "DESCRIBE_SOURCES", sources)
    assert hyperpod_update.uncarried_members() == ["KubernetesConfig.Labels"]


def test_a_list_is_never_put_on_a_group_of_one_fixed_instance_type() -> None:
    cluster = _existing(InstanceType="ml.p5.48xlarge")
    group = cluster["InstanceGroups"][0]
    del group["InstanceRequirements"], group["InstanceTypeDetails"]
    with pytest.raises(ClusterConfigError) as caught:
        scale_specification(_group(), cluster)
    message = str(caught.value)
    assert (caught.value.cluster_name, caught.value.group_name) == ("night", "gpu-workers")
    assert "fixed InstanceType (ml.p5.48xlarge)" in message and "AWS documents no conversion" in message
    assert "Give group_name a new group" in message


def test_continuous_mode_bounds_a_wait_without_max_pending_by_three_hours() -> None:
    assert provisions_continuously({"NodeProvisioningMode": "Continuous"})
    assert not provisions_continuously({}) and not provisions_continuously(None)
    assert CONTINUOUS_MAX_PENDING_SECONDS == MIN_COUNT_DEADLINE_SECONDS == 10800
    assert pending_bound(None, continuous=True) == 10800.0
    assert pending_bound(None, continuous=False) is None  # HyperPod's own rule bounds it
    assert pending_bound(600.0, continuous=True) == 600.0
