"""HyperPod clusters with flexible instance groups, driven with boto3 over HTTP on a frozen clock.

Nodes draw from the same scenario capacity as jobs: each node lands on the first listed type with a free
instance. Only ``advance()`` moves emulated time, so every status below is seen exactly when asserted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from emulator_support import ROLE, frozen
from test_emulator_conformance import conforms, output_shape, raw

from offline_sagemaker import OfflineSageMaker

P5, P4D, P5E, G5 = "ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.p5e.48xlarge", "ml.g5.48xlarge"
PROVISION, SHUTDOWN = 600, 60
EKS = {"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/hp"}}

#: Two ml.p5.48xlarge and four ml.p4d.24xlarge exist; ml.p5e.48xlarge none at first, three from 1 h on.
SCENARIO = frozen(
    capacity={
        P5: [{"from": 0, "free": 2}],
        P4D: [{"from": 0, "free": 4}],
        P5E: [{"from": 0, "to": 3600, "free": 0}, {"from": 3600, "free": 3}],
        G5: [{"from": 0, "free": 8}],
    },
    quotas={"cluster": {"ml.trn2.48xlarge": 1}},
    clusters={"node_provisioning_seconds": PROVISION, "node_shutdown_seconds": SHUTDOWN},
)


def group(name: str, count: int, types: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "InstanceGroupName": name,
        "InstanceCount": count,
        "ExecutionRole": ROLE,
        "LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lifecycle", "OnCreate": "on_create.sh"},
    }
    if types is not None:
        spec["InstanceRequirements"] = {"InstanceTypes": types}
    spec.update(extra)
    return spec


@pytest.fixture
def hp(emulator: OfflineSageMaker) -> OfflineSageMaker:
    emulator.load_scenario(SCENARIO)
    return emulator


@pytest.fixture
def load(emulator: OfflineSageMaker) -> Callable[..., OfflineSageMaker]:
    def load_with(**clusters: Any) -> OfflineSageMaker:
        emulator.load_scenario({**SCENARIO, "clusters": {**SCENARIO["clusters"], **clusters}})
        return emulator

    return load_with


def error(call: Callable[..., Any], **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


def groups_of(client: Any, name: str) -> dict[str, dict[str, Any]]:
    return {g["InstanceGroupName"]: g for g in client.describe_cluster(ClusterName=name)["InstanceGroups"]}


def type_counts(group_details: dict[str, Any]) -> dict[str, int]:
    return {
        d["InstanceType"]: d["CurrentCount"]
        for d in group_details["InstanceTypeDetails"]
        if d["CurrentCount"]
    }


def nodes(client: Any, name: str, **kwargs: Any) -> list[dict[str, Any]]:
    pages = client.get_paginator("list_cluster_nodes").paginate(ClusterName=name, **kwargs)
    return [n for p in pages for n in p["ClusterNodeSummaries"]]


# -- the fallback mix ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("hp")
def test_a_flexible_group_falls_back_node_by_node_in_priority_order(
    hp: OfflineSageMaker, client: Any
) -> None:
    arn = client.create_cluster(ClusterName="mix", InstanceGroups=[group("workers", 6, [P5, P4D])])[
        "ClusterArn"
    ]
    assert arn.startswith("arn:aws:sagemaker:us-east-1:123456789012:cluster/")
    described = client.describe_cluster(ClusterName="mix")
    assert described["ClusterStatus"] == "Creating"
    (workers,) = described["InstanceGroups"]
    assert workers["Status"] == "Creating" and workers["ActiveOperations"] == {"Scaling": 1}
    assert workers["TargetCount"] == 6 and workers["CurrentCount"] == 0
    assert {n["InstanceType"] for n in nodes(client, "mix")} == {P5, P4D}
    assert [n["InstanceStatus"]["Status"] for n in nodes(client, "mix")] == ["Pending"] * 6

    hp.advance(PROVISION)
    described = client.describe_cluster(ClusterName="mix")
    (workers,) = described["InstanceGroups"]
    assert described["ClusterStatus"] == "InService" and workers["Status"] == "InService"
    assert "ActiveOperations" not in workers
    assert workers["CurrentCount"] == 6
    assert type_counts(workers) == {P5: 2, P4D: 4}
    assert workers["InstanceRequirements"] == {
        "CurrentInstanceTypes": [P5, P4D],
        "DesiredInstanceTypes": [P5, P4D],
    }
    assert [d["ThreadsPerCore"] for d in workers["InstanceTypeDetails"]] == [1, 1]
    conforms(
        raw(hp, "DescribeCluster", {"ClusterName": "mix"}), output_shape("DescribeCluster"), "DescribeCluster"
    )


@pytest.mark.usefixtures("hp")
def test_nodes_and_jobs_share_capacity_and_a_deleted_cluster_returns_it(
    hp: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_cluster(ClusterName="hog", InstanceGroups=[group("all", 2, [P5])])
    client.create_training_job(**make_training("after", [{"InstanceType": P5}], count=1))
    hp.advance(60)  # the job's Starting ends: every ml.p5.48xlarge is a node's
    assert client.describe_training_job(TrainingJobName="after")["SecondaryStatus"] == "Pending"

    hp.advance(PROVISION)
    client.delete_cluster(ClusterName="hog")
    assert client.describe_cluster(ClusterName="hog")["ClusterStatus"] == "Deleting"
    assert {n["InstanceStatus"]["Status"] for n in nodes(client, "hog")} == {"ShuttingDown"}
    hp.advance(SHUTDOWN)
    assert client.describe_training_job(TrainingJobName="after")["SecondaryStatus"] == "Downloading"
    code, message = error(client.describe_cluster, ClusterName="hog")
    assert code == "ResourceNotFound" and "hog" in message


@pytest.mark.usefixtures("hp")
def test_a_waiting_group_gets_nodes_as_the_scenario_frees_capacity(hp: OfflineSageMaker, client: Any) -> None:
    client.create_cluster(ClusterName="late", InstanceGroups=[group("g", 3, [P5E])])
    assert nodes(client, "late") == []
    events = client.list_cluster_events(ClusterName="late", ResourceType="InstanceGroup")["Events"]
    assert any(e["EventLevel"] == "Warn" and "waiting for capacity" in e["Description"] for e in events)
    hp.advance(3600)  # the ml.p5e.48xlarge window opens
    assert [n["InstanceType"] for n in nodes(client, "late")] == [P5E] * 3
    hp.advance(PROVISION)
    assert groups_of(client, "late")["g"]["Status"] == "InService"


# -- MinInstanceCount ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("hp")
def test_min_instance_count_makes_a_partial_group_in_service(hp: OfflineSageMaker, client: Any) -> None:
    client.create_cluster(ClusterName="part", InstanceGroups=[group("g", 4, [P5], MinInstanceCount=2)])
    hp.advance(PROVISION)
    described = client.describe_cluster(ClusterName="part")
    (g,) = described["InstanceGroups"]
    assert described["ClusterStatus"] == "InService"
    assert (g["Status"], g["CurrentCount"], g["TargetCount"], g["MinCount"]) == ("InService", 2, 4, 2)
    assert g["ActiveOperations"] == {"Scaling": 1}
    hp.advance(4 * 3600)  # no rollback once InService: MinInstanceCount governs the first transition only
    assert groups_of(client, "part")["g"]["CurrentCount"] == 2


def test_a_partial_group_is_degraded_when_the_scenario_says_so(
    load: Callable[..., OfflineSageMaker], client: Any
) -> None:
    world = load(partial_group_status="degraded")
    client.create_cluster(ClusterName="deg", InstanceGroups=[group("g", 4, [P5], MinInstanceCount=2)])
    world.advance(PROVISION)
    assert groups_of(client, "deg")["g"]["Status"] == "Degraded"
    assert client.describe_cluster(ClusterName="deg")["ClusterStatus"] == "InService"


@pytest.mark.usefixtures("hp")
def test_a_new_group_below_its_minimum_rolls_back_to_zero_after_three_hours(
    hp: OfflineSageMaker, client: Any
) -> None:
    client.create_cluster(ClusterName="rb", InstanceGroups=[group("g", 4, [P5], MinInstanceCount=3)])
    hp.advance(3 * 3600 - 1)
    assert client.describe_cluster(ClusterName="rb")["ClusterStatus"] == "Creating"
    assert groups_of(client, "rb")["g"]["CurrentCount"] == 2
    hp.advance(1)
    described = client.describe_cluster(ClusterName="rb")
    assert described["ClusterStatus"] == "RollingBack"
    assert groups_of(client, "rb")["g"]["TargetCount"] == 0
    assert "within 3 hours" in described["FailureMessage"]
    hp.advance(SHUTDOWN)
    assert client.describe_cluster(ClusterName="rb")["ClusterStatus"] == "Failed"
    assert nodes(client, "rb") == []
    # The two ml.p5.48xlarge are free again.
    client.create_cluster(ClusterName="next", InstanceGroups=[group("g", 2, [P5])])
    assert [n["InstanceType"] for n in nodes(client, "next")] == [P5, P5]


@pytest.mark.usefixtures("hp")
def test_a_group_added_by_an_update_rolls_back_alone(hp: OfflineSageMaker, client: Any) -> None:
    client.create_cluster(ClusterName="upd", InstanceGroups=[group("base", 1, [G5])])
    hp.advance(PROVISION)
    client.update_cluster(ClusterName="upd", InstanceGroups=[group("big", 5, [P5], MinInstanceCount=3)])
    assert client.describe_cluster(ClusterName="upd")["ClusterStatus"] == "Updating"
    hp.advance(3 * 3600)
    assert client.describe_cluster(ClusterName="upd")["ClusterStatus"] == "RollingBack"
    hp.advance(SHUTDOWN)
    described = client.describe_cluster(ClusterName="upd")
    assert described["ClusterStatus"] == "InService"
    big = groups_of(client, "upd")["big"]
    assert (big["TargetCount"], big["CurrentCount"]) == (0, 0)


# -- scaling -------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("hp")
def test_scaling_down_and_deleting_nodes_return_capacity(hp: OfflineSageMaker, client: Any) -> None:
    client.create_cluster(ClusterName="sc", InstanceGroups=[group("g", 6, [P5, P4D])])
    hp.advance(PROVISION)
    client.update_cluster(ClusterName="sc", InstanceGroups=[group("g", 4, [P5, P4D])])
    g = groups_of(client, "sc")["g"]
    assert g["ActiveOperations"] == {"Scaling": 1} and g["Status"] == "Updating"
    hp.advance(SHUTDOWN)
    assert type_counts(groups_of(client, "sc")["g"]) == {P5: 2, P4D: 2}  # the last type goes first

    doomed = next(n["InstanceId"] for n in nodes(client, "sc") if n["InstanceType"] == P5)
    deleted = client.batch_delete_cluster_nodes(ClusterName="sc", NodeIds=[doomed, "i-0123456789abcdef0"])
    assert deleted["Successful"] == [doomed]
    assert deleted["Failed"] == [
        {
            "Code": "NodeIdNotFound",
            "Message": "The node does not exist in the cluster.",
            "NodeId": "i-0123456789abcdef0",
        }
    ]
    assert (
        client.describe_cluster_node(ClusterName="sc", NodeId=doomed)["NodeDetails"]["InstanceStatus"][
            "Status"
        ]
        == "ShuttingDown"
    )
    hp.advance(SHUTDOWN)
    assert groups_of(client, "sc")["g"]["TargetCount"] == 3
    # Freed: one ml.p5.48xlarge and two ml.p4d.24xlarge; a scale-up takes ml.p5.48xlarge first.
    client.update_cluster(ClusterName="sc", InstanceGroups=[group("g", 6, [P5, P4D])])
    hp.advance(PROVISION)
    assert type_counts(groups_of(client, "sc")["g"]) == {P5: 2, P4D: 4}


@pytest.mark.usefixtures("hp")
def test_deleting_an_instance_group_returns_its_capacity(hp: OfflineSageMaker, client: Any) -> None:
    client.create_cluster(ClusterName="dg", InstanceGroups=[group("a", 2, [P5]), group("b", 1, [G5])])
    hp.advance(PROVISION)
    client.update_cluster(
        ClusterName="dg", InstanceGroups=[group("b", 1, [G5])], InstanceGroupsToDelete=["a"]
    )
    assert groups_of(client, "dg")["a"]["Status"] == "Deleting"
    hp.advance(SHUTDOWN)
    assert set(groups_of(client, "dg")) == {"b"}
    client.create_cluster(ClusterName="again", InstanceGroups=[group("a", 2, [P5])])
    assert [n["InstanceType"] for n in nodes(client, "again")] == [P5, P5]


def test_a_scale_up_may_add_only_running_types_when_the_scenario_says_so(
    load: Callable[..., OfflineSageMaker], client: Any
) -> None:
    world = load(scale_up_types="running")
    client.create_cluster(ClusterName="run", InstanceGroups=[group("g", 2, [P4D, P5])])
    world.advance(PROVISION)
    client.update_cluster(ClusterName="run", InstanceGroups=[group("g", 6, [P4D, P5])])
    world.advance(PROVISION)
    g = groups_of(client, "run")["g"]
    assert type_counts(g) == {P4D: 4}  # ml.p5.48xlarge is free, but the group runs ml.p4d.24xlarge only
    assert g["Status"] == "Updating" and g["ActiveOperations"] == {"Scaling": 1}


def test_continuous_mode_provisions_partially_and_stays_in_service(hp: OfflineSageMaker, client: Any) -> None:
    client.create_cluster(
        ClusterName="cont",
        InstanceGroups=[group("g", 3, [P5])],
        Orchestrator=EKS,
        NodeProvisioningMode="Continuous",
    )
    hp.advance(PROVISION)
    described = client.describe_cluster(ClusterName="cont")
    assert described["NodeProvisioningMode"] == "Continuous" and described["ClusterStatus"] == "InService"
    (g,) = described["InstanceGroups"]
    assert (g["Status"], g["CurrentCount"], g["ActiveOperations"]) == ("InService", 2, {"Scaling": 1})
    hp.advance(4 * 3600)  # continuous retries: no rollback
    assert groups_of(client, "cont")["g"]["TargetCount"] == 3


# -- listing -------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("hp")
def test_list_cluster_nodes_filters_sorts_and_pages(hp: OfflineSageMaker, client: Any) -> None:
    client.create_cluster(ClusterName="ls", InstanceGroups=[group("zeta", 2, [G5]), group("alpha", 1, [G5])])
    hp.advance(PROVISION)  # outside Continuous mode an update waits for InService
    client.update_cluster(ClusterName="ls", InstanceGroups=[group("zeta", 3, [G5])])
    later = hp.clock()["now"]
    first = client.list_cluster_nodes(ClusterName="ls", MaxResults=2)
    assert len(first["ClusterNodeSummaries"]) == 2 and first["NextToken"]
    every = nodes(client, "ls")
    assert [n["InstanceGroupName"] for n in every] == ["zeta", "zeta", "alpha", "zeta"]
    assert [n["InstanceGroupName"] for n in nodes(client, "ls", SortBy="NAME")] == [
        "alpha",
        "zeta",
        "zeta",
        "zeta",
    ]
    assert nodes(client, "ls", SortOrder="Descending") == every[::-1]
    assert [n["InstanceGroupName"] for n in nodes(client, "ls", InstanceGroupNameContains="alp")] == ["alpha"]
    assert len(nodes(client, "ls", CreationTimeAfter=later - 1)) == 1
    assert len(nodes(client, "ls", CreationTimeBefore=later - 1)) == 3
    conforms(
        raw(hp, "ListClusterNodes", {"ClusterName": "ls"}),
        output_shape("ListClusterNodes"),
        "ListClusterNodes",
    )


@pytest.mark.usefixtures("hp")
def test_list_clusters_and_cluster_events(hp: OfflineSageMaker, client: Any) -> None:
    for name in ("b-cluster", "a-cluster"):
        client.create_cluster(ClusterName=name, InstanceGroups=[group("g", 1, [G5])])
        hp.advance(10)
    listed = client.list_clusters()["ClusterSummaries"]
    assert [c["ClusterName"] for c in listed] == ["b-cluster", "a-cluster"]
    assert [c["ClusterName"] for c in client.list_clusters(SortBy="NAME")["ClusterSummaries"]] == [
        "a-cluster",
        "b-cluster",
    ]
    assert [c["ClusterName"] for c in client.list_clusters(NameContains="a-c")["ClusterSummaries"]] == [
        "a-cluster"
    ]
    conforms(raw(hp, "ListClusters", {}), output_shape("ListClusters"), "ListClusters")

    events = client.list_cluster_events(ClusterName="a-cluster")["Events"]
    times = [e["EventTime"] for e in events]
    assert times == sorted(times, reverse=True)  # Descending is the documented default
    node_id = nodes(client, "a-cluster")[0]["InstanceId"]
    for_node = client.list_cluster_events(ClusterName="a-cluster", NodeId=node_id)["Events"]
    assert for_node and {e["ResourceType"] for e in for_node} == {"Instance"}
    one = client.describe_cluster_event(ClusterName="a-cluster", EventId=events[0]["EventId"])["EventDetails"]
    assert one["EventId"] == events[0]["EventId"]
    conforms(
        raw(hp, "ListClusterEvents", {"ClusterName": "a-cluster"}),
        output_shape("ListClusterEvents"),
        "ListClusterEvents",
    )


PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly"
VPC = {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}
#: A group's optional fields as CreateCluster takes them, and as DescribeCluster reports them.
GROUP_FIELDS: dict[str, Any] = {
    "TrainingPlanArn": PLAN,
    "OverrideVpcConfig": VPC,
    "OnStartDeepHealthChecks": ["InstanceStress"],
    "ImageId": "ami-0123456789abcdef0",
    "KubernetesConfig": {
        "Labels": {"team": "ml"},
        "Taints": [{"Key": "gpu", "Value": "yes", "Effect": "NoSchedule"}],
    },
    "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["gpu"]},
    "CapacityRequirements": {"OnDemand": {}},
    "NetworkInterface": {"InterfaceType": "efa"},
}
DESCRIBED_FIELDS: dict[str, Any] = {
    "TrainingPlanArn": PLAN,
    "OverrideVpcConfig": VPC,
    "OnStartDeepHealthChecks": ["InstanceStress"],
    "CurrentImageId": "ami-0123456789abcdef0",
    "DesiredImageId": "ami-0123456789abcdef0",
    "KubernetesConfig": {
        "CurrentLabels": {"team": "ml"},
        "DesiredLabels": {"team": "ml"},
        "CurrentTaints": [{"Key": "gpu", "Value": "yes", "Effect": "NoSchedule"}],
        "DesiredTaints": [{"Key": "gpu", "Value": "yes", "Effect": "NoSchedule"}],
    },
    "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["gpu"]},
    "CapacityRequirements": {"OnDemand": {}},
    "NetworkInterface": {"InterfaceType": "efa"},
}


def test_a_groups_fields_are_kept_and_described_in_describes_shape(hp: OfflineSageMaker, client: Any) -> None:
    client.create_cluster(ClusterName="kept", InstanceGroups=[group("g", 1, [G5], **GROUP_FIELDS)])
    described = groups_of(client, "kept")["g"]
    assert {k: described.get(k) for k in DESCRIBED_FIELDS} == DESCRIBED_FIELDS
    conforms(
        raw(hp, "DescribeCluster", {"ClusterName": "kept"}),
        output_shape("DescribeCluster"),
        "DescribeCluster",
    )
    # ListClusters' TrainingPlanArn filter finds the clusters with a group on the plan.
    client.create_cluster(ClusterName="other", InstanceGroups=[group("g", 1, [G5])])
    on_plan = client.list_clusters(TrainingPlanArn=PLAN)["ClusterSummaries"]
    assert [c["ClusterName"] for c in on_plan] == ["kept"]
    hp.advance(PROVISION)
    # An update that sends the fields again keeps them.
    client.update_cluster(ClusterName="kept", InstanceGroups=[group("g", 2, [G5], **GROUP_FIELDS)])
    assert {k: groups_of(client, "kept")["g"].get(k) for k in DESCRIBED_FIELDS} == DESCRIBED_FIELDS


def test_an_update_that_leaves_a_field_out_drops_it(hp: OfflineSageMaker, client: Any) -> None:
    """AWS does not document what an update without a group's field does; the emulator drops it, the
    reading under which a client that forgets a field is seen to."""
    client.create_cluster(ClusterName="drop", InstanceGroups=[group("g", 1, [G5], **GROUP_FIELDS)])
    hp.advance(PROVISION)
    client.update_cluster(ClusterName="drop", InstanceGroups=[group("g", 2, [G5])])
    described = groups_of(client, "drop")["g"]
    assert [k for k in DESCRIBED_FIELDS if k in described] == []


@pytest.mark.usefixtures("hp")
def test_tags_on_a_cluster_arn(client: Any) -> None:
    arn = client.create_cluster(
        ClusterName="tg", InstanceGroups=[group("g", 1, [G5])], Tags=[{"Key": "a", "Value": "1"}]
    )["ClusterArn"]
    client.add_tags(ResourceArn=arn, Tags=[{"Key": "b", "Value": "2"}])
    client.delete_tags(ResourceArn=arn, TagKeys=["a"])
    assert client.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "b", "Value": "2"}]


# -- rules ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("hp")
@pytest.mark.parametrize(
    ("groups", "extra", "code", "fragment"),
    [
        ([group("g", 1, [P5], InstanceType=P5)], {}, "ValidationException", "mutually exclusive"),
        ([group("g", 1)], {}, "ValidationException", "give the instance type in InstanceType"),
        (
            [group("g", 1, [P5, P4D, P5])],
            {},
            "ValidationException",
            "InstanceTypes[2]: ml.p5.48xlarge appears more",
        ),
        (
            [group("g", 1, [P5] + [f"ml.g5.{s}xlarge" for s in (2, 4, 8, 12, 16, 24, 48)] * 3)],
            {},
            "ValidationException",
            "Member must have length less than or equal to 20",
        ),
        (
            [group("g", 1, ["ml.nope.xlarge"])],
            {},
            "ValidationException",
            "Member must satisfy constraint: [Member must satisfy enum value set",
        ),
        (
            [group("g", 1, InstanceType="ml.nope.xlarge")],
            {},
            "ValidationException",
            "at 'instanceGroups.1.member.instanceType'",
        ),
        ([group("bad_name", 1, [P5])], {}, "ValidationException", "pattern: [a-zA-Z0-9](-*[a-zA-Z0-9])*"),
        ([group("x" * 64, 1, [P5])], {}, "ValidationException", "length less than or equal to 63"),
        ([group("g", 1, [P5]), group("g", 1, [P4D])], {}, "ValidationException", "names must be unique"),
        ([group("g", 6759, [P5])], {}, "ValidationException", "value less than or equal to 6758"),
        ([group("g", 2, [P5], MinInstanceCount=3)], {}, "ValidationException", "greater than InstanceCount"),
        ([group("g", 1, [P5])], {"NodeProvisioningMode": "Continuous"}, "ValidationException", "Amazon EKS"),
        (
            [group("g", 2, ["ml.trn2.48xlarge"])],
            {},
            "ResourceLimitExceeded",
            "'ml.trn2.48xlarge for cluster usage' is 1",
        ),
    ],
)
def test_cluster_rules(
    raw_client: Any, groups: list[dict[str, Any]], extra: dict[str, Any], code: str, fragment: str
) -> None:
    got, message = error(raw_client.create_cluster, ClusterName="rules", InstanceGroups=groups, **extra)
    assert (got, fragment in message) == (code, True), message


@pytest.mark.usefixtures("hp")
def test_cluster_names_execution_roles_and_unknown_clusters(raw_client: Any) -> None:
    code, message = error(
        raw_client.create_cluster, ClusterName="no_underscores", InstanceGroups=[group("g", 1, [P5])]
    )
    assert code == "ValidationException" and "at 'clusterName'" in message
    no_role = group("g", 1, [P5])
    del no_role["ExecutionRole"]
    code, message = error(raw_client.create_cluster, ClusterName="c", InstanceGroups=[no_role])
    assert code == "ValidationException" and "ExecutionRole" in message
    for call in (raw_client.describe_cluster, raw_client.delete_cluster, raw_client.list_cluster_nodes):
        assert error(call, ClusterName="missing")[0] == "ResourceNotFound"
    raw_client.create_cluster(ClusterName="twice", InstanceGroups=[group("g", 1, [G5])])
    assert (
        error(raw_client.create_cluster, ClusterName="twice", InstanceGroups=[group("g", 1, [G5])])[0]
        == "ResourceInUse"
    )


# -- operations the emulator does not serve ------------------------------------------------------------


def test_an_operation_nobody_serves_is_a_4xx_naming_it(sm: OfflineSageMaker) -> None:
    client = sm.boto3_client("sagemaker", config=Config(parameter_validation=False))
    code, message = error(
        client.start_cluster_health_check, ClusterName="c", DeepHealthCheckConfigurations=[]
    )
    assert code == "UnknownOperationException" and "StartClusterHealthCheck" in message


def test_a_moto_failure_on_a_sagemaker_call_is_a_4xx_naming_it(sm: OfflineSageMaker) -> None:
    client = sm.boto3_client("sagemaker")
    code, message = error(
        client.list_tags, ResourceArn="arn:aws:sagemaker:us-east-1:123456789012:transform-job/x"
    )
    assert code == "ValidationException" and "ListTags" in message
