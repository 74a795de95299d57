"""The HyperPod group operator and sensor in real dag.test() runs against the offline SageMaker.

The emulated clock is frozen; a background thread moves it a fixed step each time the task has looked
at the cluster, so every run sees the same emulated times however slow the host is.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest

from airflow_provider_sm_prefs.domain.hyperpod import GROUP_STATE_KEY, FlexibleGroup, GroupRequest
from airflow_provider_sm_prefs.domain.record import RECORD_KEY, CapacityRecord
from airflow_provider_sm_prefs.operators.hyperpod import SageMakerHyperPodGroupOperator
from tests.clock import in_background

P5, P5E, P4D = "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4d.24xlarge"
ROLE = "arn:aws:iam::123456789012:role/HyperPodNodeRole"
LIFECYCLE = {"SourceS3Uri": "s3://sm-prefs-demo/hyperpod/lifecycle/", "OnCreate": "on_create.sh"}


def _scenario(p5: int, p5e: int, p4d: int) -> dict[str, Any]:
    return {
        "name": "hyperpod-p5-scarce",
        "time_scale": 0,
        "start_epoch": 1_800_000_000,
        "capacity": {
            P5: [{"from": 0, "free": p5}],
            P5E: [{"from": 0, "free": p5e}],
            P4D: [{"from": 0, "free": p4d}],
        },
        "prices": {P5: 55.04, P5E: 60.0, P4D: 37.69},
        "clusters": {"node_provisioning_seconds": 600, "node_shutdown_seconds": 60},
    }


def _dags() -> Any:
    path = Path(__file__).resolve().parent.parent / "dags" / "sm_prefs_hyperpod_dags.py"
    spec = importlib.util.spec_from_file_location("sm_prefs_hyperpod_dags", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def stepping(sm: Any, seconds: float) -> Iterator[None]:
    """Move the frozen clock ``seconds`` on after every DescribeCluster the task makes."""

    def step(done: threading.Event) -> None:
        seen = 0
        while not done.wait(0.02):
            described = sm.stats()["operations"].get("DescribeCluster", 0)
            if described > seen:
                seen = described
                sm.advance(seconds)

    with in_background(step):
        yield


def _client(sm: Any) -> Any:
    return boto3.client("sagemaker", endpoint_url=sm.endpoint_url, region_name="us-east-1")


def _xcom(dagrun: Any, task_id: str, key: str = "return_value") -> Any:
    (ti,) = [ti for ti in dagrun.get_task_instances() if ti.task_id == task_id]
    return ti.xcom_pull(task_ids=task_id, key=key)


def _record(dagrun: Any, task_id: str) -> CapacityRecord:
    record = CapacityRecord.from_dict(_xcom(dagrun, task_id, RECORD_KEY))
    assert record is not None
    return record


def _group_details(sm: Any) -> dict[str, Any]:
    cluster = _client(sm).describe_cluster(ClusterName="nightly")
    (group,) = [g for g in cluster["InstanceGroups"] if g["InstanceGroupName"] == "gpu-workers"]
    return group


def _listed_types(sm: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    pages = _client(sm).get_paginator("list_cluster_nodes").paginate(ClusterName="nightly")
    for page in pages:
        for node in page["ClusterNodeSummaries"]:
            if node["InstanceStatus"]["Status"] == "Running":
                counts[node["InstanceType"]] = counts.get(node["InstanceType"], 0) + 1
    return counts


def test_eight_nodes_over_three_types_with_p5_scarce_hand_the_mix_to_the_next_task(
    sm: Any, airflow_db: None
) -> None:
    sm.load_scenario(_scenario(p5=2, p5e=0, p4d=8))
    with stepping(sm, 300):
        dagrun = _dags().hp_target.test()
    states = {ti.task_id: ti.state for ti in dagrun.get_task_instances()}
    assert states == {"scale": "success", "consume": "success"}, states
    outcome = _xcom(dagrun, "scale", "hyperpod_outcome")
    assert outcome == _xcom(dagrun, "scale")
    assert [(n["instance_type"], n["rank"], n["count"]) for n in outcome["nodes"]] == [
        (P5, 1, 2),
        (P4D, 3, 6),
    ]
    assert outcome["phase"] == "reached-target" and outcome["fell_back"] is True
    # The outcome is what DescribeCluster and ListClusterNodes say.
    details = _group_details(sm)
    described = {
        d["InstanceType"]: d["CurrentCount"] for d in details["InstanceTypeDetails"] if d["CurrentCount"]
    }
    assert {n["instance_type"]: n["count"] for n in outcome["nodes"]} == described == _listed_types(sm)
    assert outcome["mix"] == "2 × ml.p5.48xlarge + 6 × ml.p4d.24xlarge = 16 × H100 + 48 × A100"
    assert outcome["accelerators_total"] == 64
    assert outcome["hourly_cost"] == pytest.approx(2 * 55.04 + 6 * 37.69)
    assert outcome["first_choice_hourly_cost"] == pytest.approx(8 * 55.04)
    assert outcome["seconds_to_in_service"] >= 600  # one node provisioning time at least
    assert _xcom(dagrun, "consume") == {"mix": outcome["mix"], "ranks": 64}
    # The try leaves its capacity record: the outcome's fields under the same names.
    record = _record(dagrun, "scale")
    assert record.is_group and record.failure_kind is None and record.region == "us-east-1"
    assert (record.cluster_name, record.group_name, record.phase) == (
        "nightly",
        "gpu-workers",
        "reached-target",
    )
    assert record.nodes == outcome["nodes"] and record.fell_back is True
    assert (record.target_count, record.current_count, record.min_count) == (8, 8, 4)
    assert record.seconds_to_in_service == outcome["seconds_to_in_service"]
    assert record.accelerators_total == 64 and record.hourly_cost == outcome["hourly_cost"]
    assert record.first_choice_hourly_cost == outcome["first_choice_hourly_cost"]


def test_the_minimum_is_accepted_once_the_window_has_closed(sm: Any, airflow_db: None) -> None:
    sm.load_scenario(_scenario(p5=0, p5e=0, p4d=5))
    with stepping(sm, 300):
        dagrun = _dags().hp_window.test()
    outcome = _xcom(dagrun, "scale", "hyperpod_outcome")
    assert outcome["phase"] == "reached-minimum"
    assert outcome["current_count"] == 5 and outcome["target_count"] == 8 and outcome["min_count"] == 4
    assert outcome["seconds_to_in_service"] >= 1200  # not before the window closed
    assert [(n["instance_type"], n["rank"]) for n in outcome["nodes"]] == [(P4D, 3)]


def test_a_shortfall_fails_the_task_and_scales_the_group_back(sm: Any, airflow_db: None) -> None:
    sm.load_scenario(_scenario(p5=0, p5e=0, p4d=4))
    client = _client(sm)
    client.create_cluster(
        ClusterName="nightly",
        InstanceGroups=[
            {
                "InstanceGroupName": "gpu-workers",
                "InstanceRequirements": {"InstanceTypes": [P5, P5E, P4D]},
                "InstanceCount": 2,
                "ExecutionRole": ROLE,
                "LifeCycleConfig": LIFECYCLE,
            }
        ],
    )
    sm.advance(900)
    assert _group_details(sm)["CurrentCount"] == 2
    with stepping(sm, 300):
        dagrun = _dags().hp_shortfall.test()
    (ti,) = dagrun.get_task_instances()
    assert ti.state == "failed"
    record = _record(dagrun, "scale")
    assert (record.failure_kind, record.cluster_name, record.group_name) == (
        "shortfall",
        "nightly",
        "gpu-workers",
    )
    assert record.target_count == 8 and record.preferences == [P5, P5E, P4D] and record.reason
    # Back where the task found it. The cluster refused updates while the scale-up ran, so the trigger
    # waited until it was InService again (here after HyperPod's own three-hour rollback).
    assert _group_details(sm)["TargetCount"] == 2


def test_a_list_that_breaks_a_rule_fails_before_any_call(sm: Any, airflow_db: None) -> None:
    sm.load_scenario(_scenario(p5=2, p5e=0, p4d=8))
    dagrun = _dags().hp_invalid.test()
    (ti,) = dagrun.get_task_instances()
    assert ti.state == "failed"
    operations = sm.stats()["operations"]
    assert not operations.get("CreateCluster") and not operations.get("UpdateCluster")
    record = _record(dagrun, "scale")
    assert (record.failure_kind, record.group_name) == ("invalid_request", "gpu-workers")
    assert "appears twice" in (record.reason or "")


def test_a_cluster_the_task_creates_carries_the_identity_tags_after_its_own(
    sm: Any, airflow_db: None
) -> None:
    sm.load_scenario(_scenario(p5=2, p5e=0, p4d=8))
    with stepping(sm, 300):
        dagrun = _dags().hp_tagged.test()
    assert {ti.task_id: ti.state for ti in dagrun.get_task_instances()} == {"scale": "success"}
    client = _client(sm)
    arn = client.describe_cluster(ClusterName="nightly")["ClusterArn"]
    tags = {t["Key"]: t["Value"] for t in client.list_tags(ResourceArn=arn)["Tags"]}
    assert tags["team"] == "ml"
    assert (tags["sm-prefs:dag-id"], tags["sm-prefs:task-id"], tags["sm-prefs:try-number"]) == (
        "hp_tagged",
        "scale",
        "1",
    )
    assert _xcom(dagrun, "scale", "identity_tags") == {k: v for k, v in tags.items() if k != "team"}


def test_a_cluster_tag_with_an_identity_key_fails_before_any_call(sm: Any, airflow_db: None) -> None:
    sm.load_scenario(_scenario(p5=2, p5e=0, p4d=8))
    dagrun = _dags().hp_tag_clash.test()
    assert {ti.task_id: ti.state for ti in dagrun.get_task_instances()} == {"scale": "failed"}
    assert not sm.stats()["operations"].get("DescribeCluster")
    assert not sm.stats()["operations"].get("CreateCluster")


def test_the_sensor_hands_on_a_group_scaled_elsewhere(sm: Any, airflow_db: None) -> None:
    sm.load_scenario(_scenario(p5=1, p5e=1, p4d=8))
    _client(sm).create_cluster(
        ClusterName="nightly",
        InstanceGroups=[
            {
                "InstanceGroupName": "gpu-workers",
                "InstanceRequirements": {"InstanceTypes": [P5, P5E, P4D]},
                "InstanceCount": 4,
                "ExecutionRole": ROLE,
                "LifeCycleConfig": LIFECYCLE,
            }
        ],
    )
    with stepping(sm, 300):
        dagrun = _dags().hp_sensor.test()
    outcome = _xcom(dagrun, "watch", "hyperpod_outcome")
    assert [(n["instance_type"], n["count"]) for n in outcome["nodes"]] == [(P5, 1), (P5E, 1), (P4D, 2)]
    assert (
        outcome["mix"]
        == "1 × ml.p5.48xlarge + 1 × ml.p5e.48xlarge + 2 × ml.p4d.24xlarge = 8 × H100 + 8 × H200 + 16 × A100"
    )
    record = _record(dagrun, "watch")
    assert record.is_group and record.nodes == outcome["nodes"] and record.current_count == 4


def test_the_sensor_records_a_group_that_does_not_exist(sm: Any, airflow_db: None) -> None:
    sm.load_scenario(_scenario(p5=1, p5e=1, p4d=8))
    dagrun = _dags().hp_sensor.test()
    states = {ti.task_id: ti.state for ti in dagrun.get_task_instances()}
    assert states["watch"] == "failed"
    record = _record(dagrun, "watch")
    assert (record.failure_kind, record.job_status) == ("rejected", "NotFound")
    assert (record.cluster_name, record.group_name) == ("nightly", "gpu-workers")


class _Store:
    """A task state store: what Airflow keeps for a task instance across its tries."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def set(self, key: str, value: Any) -> None:
        self.data[key] = value


def _operator(**kwargs: Any) -> SageMakerHyperPodGroupOperator:
    return SageMakerHyperPodGroupOperator(
        task_id="scale",
        cluster_name="nightly",
        group_name="gpu-workers",
        instance_types=[P5, P5E, P4D],
        instance_count=8,
        execution_role=ROLE,
        group_config={"LifeCycleConfig": LIFECYCLE},
        cluster_config={},
        **kwargs,
    )


def test_a_retry_after_a_kill_mid_request_waits_for_that_request_instead_of_asking_twice(sm: Any) -> None:
    sm.load_scenario(_scenario(p5=2, p5e=0, p4d=8))
    store = _Store()
    context: dict[str, Any] = {"task_state_store": store}
    group = FlexibleGroup.parse("gpu-workers", [P5, P5E, P4D], 8, execution_role=ROLE)
    first = _operator()._submit_once(context, group)  # the request reached AWS; its try was killed
    assert not first.reattached and sm.stats()["operations"].get("CreateCluster") == 1
    again = _operator()._submit_once(context, group)
    assert again.reattached and again.request == first.request
    assert sm.stats()["operations"].get("CreateCluster") == 1
    assert not sm.stats()["operations"].get("UpdateCluster")


def test_a_request_recorded_but_never_answered_is_made_by_the_retry(sm: Any) -> None:
    sm.load_scenario(_scenario(p5=2, p5e=0, p4d=8))
    store = _Store()
    # The try wrote its request and was killed before the call left the worker.
    store.set(
        GROUP_STATE_KEY,
        GroupRequest("nightly", "gpu-workers", 8, 0, created_cluster=True, created_group=True).as_stored(),
    )
    group = FlexibleGroup.parse("gpu-workers", [P5, P5E, P4D], 8, execution_role=ROLE)
    decision = _operator()._submit_once({"task_state_store": store}, group)
    assert not decision.reattached and decision.request.requested_at is not None
    assert sm.stats()["operations"].get("CreateCluster") == 1


# -- what a scale keeps, what it refuses, how long it waits in Continuous mode ---------------------------

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly"
VPC = {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}
EKS = {"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/nightly"}}


def _existing_group(sm: Any, cluster_extra: dict[str, Any] | None = None, **group: Any) -> None:
    """The cluster as someone else made it: one group of two nodes, then the time for them to run."""
    spec = {
        "InstanceGroupName": "gpu-workers",
        "InstanceCount": 2,
        "ExecutionRole": ROLE,
        "LifeCycleConfig": LIFECYCLE,
        **group,
    }
    _client(sm).create_cluster(ClusterName="nightly", InstanceGroups=[spec], **(cluster_extra or {}))
    sm.advance(900)


def test_a_scale_up_and_down_keeps_the_groups_training_plan_and_vpc(sm: Any, airflow_db: None) -> None:
    sm.load_scenario(_scenario(p5=2, p5e=0, p4d=8))
    _existing_group(
        sm,
        InstanceRequirements={"InstanceTypes": [P5, P5E, P4D]},
        TrainingPlanArn=PLAN,
        OverrideVpcConfig=VPC,
        OnStartDeepHealthChecks=["InstanceStress"],
        ThreadsPerCore=1,
    )
    with stepping(sm, 300):
        dagrun = _dags().hp_keeps_fields.test()
    assert {ti.task_id: ti.state for ti in dagrun.get_task_instances()} == {
        "scale_up": "success",
        "scale_down": "success",
    }
    assert sm.stats()["operations"].get("UpdateCluster") == 2
    details = _group_details(sm)
    assert (details["TargetCount"], details["CurrentCount"]) == (1, 1)
    assert details["TrainingPlanArn"] == PLAN and details["OverrideVpcConfig"] == VPC
    assert details["OnStartDeepHealthChecks"] == ["InstanceStress"] and details["ThreadsPerCore"] == 1
    assert details["LifeCycleConfig"] == LIFECYCLE and details["ExecutionRole"] == ROLE


def test_a_group_of_one_fixed_instance_type_fails_before_any_update(sm: Any, airflow_db: None) -> None:
    sm.load_scenario(_scenario(p5=2, p5e=0, p4d=8))
    _existing_group(sm, InstanceType=P4D)
    dagrun = _dags().hp_fixed_type.test()
    assert {ti.task_id: ti.state for ti in dagrun.get_task_instances()} == {"scale": "failed"}
    assert not sm.stats()["operations"].get("UpdateCluster")
    record = _record(dagrun, "scale")
    assert (record.cluster_name, record.group_name) == ("nightly", "gpu-workers")
    reason = record.reason or ""
    assert "instance group gpu-workers of cluster nightly" in reason
    assert f"fixed InstanceType ({P4D})" in reason and "Give group_name a new group" in reason
    assert _group_details(sm)["TargetCount"] == 2  # untouched


@pytest.mark.timeout(180)  # before the change the wait never ended: HyperPod never gives up in this mode
def test_continuous_mode_without_max_pending_gives_up_after_three_hours_and_says_so(
    sm: Any, airflow_db: None, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(_scenario(p5=0, p5e=0, p4d=4))
    _existing_group(
        sm,
        cluster_extra={"NodeProvisioningMode": "Continuous", "Orchestrator": EKS},
        InstanceRequirements={"InstanceTypes": [P5, P5E, P4D]},
    )
    with stepping(sm, 300):
        dagrun = _dags().hp_continuous.test()  # max_pending not given
    assert {ti.task_id: ti.state for ti in dagrun.get_task_instances()} == {"scale": "failed"}
    record = _record(dagrun, "scale")
    assert record.failure_kind == "shortfall"
    assert "past max_pending (10800 s)" in (record.reason or "")
    out, err = capfd.readouterr()
    said = [line for line in (out + err).splitlines() if "NodeProvisioningMode Continuous" in line]
    assert said and "ends after 10800 s as a capacity shortfall" in said[0], said
    assert _group_details(sm)["TargetCount"] == 2  # and scaled back where the task found it


@pytest.mark.parametrize(
    ("now_targets", "rolled_back"), [(8, True), (5, False)], ids=["ours", "changed-since"]
)
def test_a_rollback_only_undoes_a_scale_up_that_is_still_the_groups_last_change(
    sm: Any, now_targets: int, rolled_back: bool
) -> None:
    """The task asked 2 -> 8. Someone then set the group to 5: scaling it back to 2 would undo their change."""
    sm.load_scenario(_scenario(p5=0, p5e=0, p4d=8))
    _client(sm).create_cluster(
        ClusterName="nightly",
        InstanceGroups=[
            {
                "InstanceGroupName": "gpu-workers",
                "InstanceRequirements": {"InstanceTypes": [P5, P5E, P4D]},
                "InstanceCount": now_targets,
                "ExecutionRole": ROLE,
                "LifeCycleConfig": LIFECYCLE,
            }
        ],
    )
    sm.advance(4 * 3600)  # InService again: it accepts an update
    task = _dags().hp_shortfall.get_task("scale")
    group = task._group(allowed_types=None)
    request = GroupRequest("nightly", "gpu-workers", target_count=group.instance_count, previous_count=2)
    assert group.instance_count == 8
    before = sm.stats()["operations"].get("UpdateCluster", 0)
    task._rollback(group, request)
    updates = sm.stats()["operations"].get("UpdateCluster", 0) - before
    assert (updates, _group_details(sm)["TargetCount"]) == ((1, 2) if rolled_back else (0, now_targets))


def test_the_sensor_on_a_continuous_cluster_without_max_pending_gives_up_after_three_hours(
    sm: Any, airflow_db: None, capfd: pytest.CaptureFixture[str]
) -> None:
    """HyperPod in Continuous mode retries a group short of its target without end: the sensor watching it
    would wait for ever without a bound of its own."""
    sm.load_scenario(_scenario(p5=0, p5e=0, p4d=4))
    _existing_group(
        sm,
        cluster_extra={"NodeProvisioningMode": "Continuous", "Orchestrator": EKS},
        InstanceRequirements={"InstanceTypes": [P5, P5E, P4D]},
        InstanceCount=8,
    )
    with stepping(sm, 300):
        dagrun = _dags().hp_sensor.test()  # max_pending not given
    assert {ti.task_id: ti.state for ti in dagrun.get_task_instances()}["watch"] == "failed"
    record = _record(dagrun, "watch")
    assert record.failure_kind == "shortfall" and "10800" in (record.reason or ""), record.reason
    out, err = capfd.readouterr()
    assert "without max_pending the watch of gpu-workers ends after 10800 s" in out + err
    assert _group_details(sm)["TargetCount"] == 8  # a sensor never changes the group
