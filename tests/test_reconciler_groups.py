"""The reconciler's HyperPod part: groups whose last scale-up outlived its task, scaled back to the count
that task found, and nothing else touched.

The rules are tested pure; the passes run against the offline SageMaker (real botocore HTTP: ListClusters,
ListTags, DescribeCluster, UpdateCluster) and Airflow's real REST API v2 over the session's metadata
database, where the ledger entries are Airflow Variables, as the operator writes them. The last test runs
the operator in a real ``dag.test()`` and reconciles what it left.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.hyperpod_rollback import (
    RollbackResult,
    ScaleUp,
    decide_scale_back,
    plan_rollback,
    rollback_specification,
    scale_up_key,
    scale_up_verdict,
)
from airflow_provider_sm_prefs.domain.reconcile import Decision, Gone, JobOwner, OwnerState, Verdict
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook
from airflow_provider_sm_prefs.reconcile import Reconciler, RestApiTaskStates
from tests.plugin.test_capacity_api import client, token  # noqa: F401 (the api-server app fixture)
from tests.test_reconciler import DEPLOYMENT, OWNER_DAG, RUN, owners  # noqa: F401 (owners: a fixture)

pytestmark = pytest.mark.usefixtures("airflow_db")

P5, P4D = "ml.p5.48xlarge", "ml.p4d.24xlarge"
ROLE = "arn:aws:iam::123456789012:role/HyperPodNodeRole"
LIFECYCLE = {"SourceS3Uri": "s3://sm-prefs-demo/hyperpod/lifecycle/", "OnCreate": "on_create.sh"}
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"
VPC = {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}
REGION = "us-east-1"


def entry(task_id: str, previous: int = 2, target: int = 4, **kwargs: Any) -> ScaleUp:
    fields: dict[str, Any] = {
        "deployment": DEPLOYMENT,
        "dag_id": OWNER_DAG,
        "task_id": task_id,
        "run_id": RUN,
        "map_index": -1,
        "try_number": 1,
        "cluster_name": "c",
        "group_name": "g",
        "previous_count": previous,
        "target_count": target,
    }
    fields.update(kwargs)
    return ScaleUp(**fields)


def details(target: int, **extra: Any) -> dict[str, Any]:
    return {
        "InstanceGroupName": "g",
        "TargetCount": target,
        "CurrentCount": target,
        "MinCount": target,
        "Status": "InService",
        "InstanceRequirements": {"CurrentInstanceTypes": [P5], "DesiredInstanceTypes": [P5, P4D]},
        "ExecutionRole": ROLE,
        "LifeCycleConfig": LIFECYCLE,
        **extra,
    }


# -- the rules, pure ----------------------------------------------------------------------------------


def test_a_rollback_changes_only_the_count_and_keeps_every_field_the_group_has() -> None:
    group = details(4, TrainingPlanArn=PLAN, OverrideVpcConfig=VPC)
    spec = rollback_specification(group, 2)
    assert spec == {
        "InstanceGroupName": "g",
        "InstanceCount": 2,
        "InstanceRequirements": {"InstanceTypes": [P5, P4D]},
        "ExecutionRole": ROLE,
        "LifeCycleConfig": LIFECYCLE,
        "TrainingPlanArn": PLAN,
        "OverrideVpcConfig": VPC,
    }


@pytest.mark.parametrize(
    ("target", "asked", "found", "result"),
    [
        (4, 4, 2, None),  # still the task's scale-up: send it
        (6, 4, 2, RollbackResult.REFUSED),  # changed since: someone else's
        (2, 4, 2, RollbackResult.NOT_NEEDED),  # HyperPod put it back already
        (1, 4, 2, RollbackResult.NOT_NEEDED),  # below what the task found: never raised, never lowered
    ],
)
def test_one_rule_decides_every_rollback(target: int, asked: int, found: int, result: Any) -> None:
    plan = plan_rollback({"InstanceGroups": [details(target)]}, "g", asked, found)
    assert plan.result is result
    assert (plan.specification is None) is (result is not None)
    if plan.specification is not None:
        assert plan.specification["InstanceCount"] == found
    assert plan_rollback(None, "g", asked, found).result is RollbackResult.NOT_NEEDED


def test_a_group_is_judged_only_on_this_deployments_entry_for_exactly_its_count() -> None:
    def verdict(e: ScaleUp | None, target: int | None = 4, ours: bool = True) -> Decision | str:
        found = scale_up_verdict(e, details(target) if target is not None else None, DEPLOYMENT, ours)
        return "owner" if isinstance(found, JobOwner) else found.decision

    assert verdict(entry("failed")) == "owner"
    assert verdict(None) is Decision.REPORT_ONLY
    assert verdict(entry("failed", deployment="prod-eu")) is Decision.REPORT_ONLY
    assert verdict(entry("failed"), target=6) is Decision.REPORT_ONLY  # changed since: never scaled back
    assert verdict(entry("failed"), target=2) is Decision.KEEP  # back where the task found it
    assert verdict(entry("failed"), target=None) is Decision.KEEP
    assert verdict(entry("failed", rollback=False)) is Decision.KEEP
    assert verdict(entry("failed"), ours=False) is Decision.REPORT_ONLY  # the cluster is not tagged ours


def test_only_a_task_that_is_gone_or_ended_without_success_has_its_scale_up_undone() -> None:
    e = entry("t")
    assert decide_scale_back(e, Gone("no DAG run")).decision is Decision.STOP
    for state in ("failed", "upstream_failed", "skipped", "removed"):
        assert decide_scale_back(e, OwnerState(state)).decision is Decision.STOP, state
    for state in ("success", "running", "deferred", "up_for_retry", "queued", "none", "surprising"):
        assert decide_scale_back(e, OwnerState(state)).decision is Decision.KEEP, state


def test_a_ledger_entry_reads_back_and_anything_unreadable_is_none() -> None:
    e = entry("failed")
    assert ScaleUp.from_stored(e.as_stored()) == e
    for bad in (None, "", "not json", "[1]", '{"deployment": "x"}', '{"previous_count": "two"}'):
        assert ScaleUp.from_stored(bad) is None, bad


# -- passes against the offline SageMaker and Airflow's REST API ---------------------------------------


def create_cluster(sm: Any, name: str, count: int, tags: dict[str, str], **group: Any) -> None:
    sm.boto3_client("sagemaker").create_cluster(
        ClusterName=name,
        InstanceGroups=[
            {
                "InstanceGroupName": "g",
                "InstanceRequirements": {"InstanceTypes": [P5, P4D]},
                "InstanceCount": count,
                "ExecutionRole": ROLE,
                "LifeCycleConfig": LIFECYCLE,
                **group,
            }
        ],
        Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
    )


OURS = {"sm-prefs:deployment": DEPLOYMENT, "team": "ml"}
#: cluster -> (its tags, the group's count now, the ledger entry, the decision a pass must reach).
CLUSTERS: dict[str, tuple[dict[str, str], int, ScaleUp | None, Decision]] = {
    "orphan-failed": (OURS, 4, entry("failed"), Decision.STOP),
    "orphan-run-gone": (OURS, 4, entry("failed", run_id="manual__deleted"), Decision.STOP),
    "owner-running": (OURS, 4, entry("running"), Decision.KEEP),
    "owner-succeeded": (OURS, 4, entry("succeeded"), Decision.KEEP),
    "owner-retrying": (OURS, 4, entry("retrying"), Decision.KEEP),
    "changed-since": (OURS, 6, entry("failed"), Decision.REPORT_ONLY),
    "kept-on-purpose": (OURS, 4, entry("failed", rollback=False), Decision.KEEP),
    "other-deployment": (OURS, 4, entry("failed", deployment="prod-eu"), Decision.REPORT_ONLY),
    "not-tagged-ours": ({"sm-prefs:deployment": "prod-eu"}, 4, entry("failed"), Decision.REPORT_ONLY),
    "no-entry": (OURS, 4, None, Decision.REPORT_ONLY),
}
ORPHANS = {name for name, (_, _, _, decision) in CLUSTERS.items() if decision is Decision.STOP}


def set_variable(key: str, value: str | None) -> None:
    from airflow.models import Variable

    if value is None:
        Variable.delete(key)
    else:
        Variable.set(key, value)


@pytest.fixture
def clusters(sm: Any, owners: None) -> Iterator[None]:  # noqa: F811
    """Every cluster of :data:`CLUSTERS`, InService at its count, with its ledger entry; a cluster of
    nobody's with no entry besides (never reported)."""
    sm.load_scenario(
        {
            "time_scale": 0,
            "capacity": {P5: [{"from": 0, "free": 200}], P4D: [{"from": 0, "free": 200}]},
            "clusters": {"node_provisioning_seconds": 60, "node_shutdown_seconds": 30},
        }
    )
    for name, (tags, count, ledger, _) in CLUSTERS.items():
        create_cluster(sm, name, count, tags, TrainingPlanArn=PLAN, OverrideVpcConfig=VPC)
        if ledger is not None:
            set_variable(
                scale_up_key(REGION, name, "g"),
                ScaleUp(**{**ledger.__dict__, "cluster_name": name}).as_stored(),
            )
    create_cluster(sm, "someone-elses", 3, {"team": "research"})
    sm.advance(600)
    yield
    for name in CLUSTERS:
        set_variable(scale_up_key(REGION, name, "g"), None)


@pytest.fixture
def api(client: Any) -> RestApiTaskStates:  # noqa: F811
    return RestApiTaskStates("http://testserver", token("admin", "admin")["Authorization"][7:], client=client)


def reconciler(api: RestApiTaskStates, dry_run: bool, deployment: str = DEPLOYMENT) -> Reconciler:
    return Reconciler(
        SageMakerPreferenceHook(aws_conn_id="aws_default"),
        api,
        deployment,
        dry_run=dry_run,
        max_calls_per_second=None,
    )


def group(sm: Any, cluster: str) -> dict[str, Any]:
    (found,) = sm.boto3_client("sagemaker").describe_cluster(ClusterName=cluster)["InstanceGroups"]
    return dict(found)


def updates(sm: Any) -> int:
    return int(sm.stats()["operations"].get("UpdateCluster", 0))


def group_rows(report: Any) -> dict[str, dict[str, Any]]:
    return {row["job"].split("/")[0]: row for row in report.rows if row["kind"] == "hyperpod-group"}


def test_a_dry_run_judges_every_group_of_ours_or_in_the_ledger_and_changes_none(
    sm: Any, clusters: None, api: RestApiTaskStates
) -> None:
    before = updates(sm)
    report = reconciler(api, dry_run=True).run()
    rows = group_rows(report)
    assert set(rows) == set(CLUSTERS)  # someone-elses: not ours, no entry: not even reported
    assert {name: Decision(row["decision"]) for name, row in rows.items()} == {
        name: decision for name, (_, _, _, decision) in CLUSTERS.items()
    }
    assert {name for name, row in rows.items() if row["action"] == "would scale back"} == ORPHANS
    assert report.as_dict()["would_scale_back"] == len(ORPHANS)
    assert rows["orphan-failed"]["owner"].startswith(f"{OWNER_DAG}.failed run {RUN}")
    assert updates(sm) == before


def test_a_pass_scales_back_exactly_the_orphans_to_the_count_found_keeping_every_field(
    sm: Any, clusters: None, api: RestApiTaskStates
) -> None:
    before = updates(sm)
    report = reconciler(api, dry_run=False).run()
    assert report.as_dict()["scaled_back"] == len(ORPHANS)
    assert updates(sm) - before == len(ORPHANS)
    sm.advance(600)
    for name, (_, count, _, _) in CLUSTERS.items():
        found = group(sm, name)
        assert found["TargetCount"] == (2 if name in ORPHANS else count), name
        assert found["TrainingPlanArn"] == PLAN and found["OverrideVpcConfig"] == VPC, name
    assert group(sm, "orphan-failed")["CurrentCount"] == 2
    # A second pass finds every orphan where its task found it: nothing more to do.
    again = reconciler(api, dry_run=False).run()
    assert again.as_dict()["scaled_back"] == 0 and updates(sm) - before == len(ORPHANS)
    assert all(group_rows(again)[name]["decision"] == Decision.KEEP.value for name in ORPHANS)


def test_a_group_whose_ledger_changed_after_it_was_judged_is_not_scaled_back(
    sm: Any, clusters: None, api: RestApiTaskStates
) -> None:
    one = reconciler(api, dry_run=False)
    from airflow_provider_sm_prefs.reconcile.groups import GroupPass

    groups = GroupPass(one, one.tags_of)
    judged = ScaleUp(**{**entry("failed").__dict__, "cluster_name": "orphan-failed"})
    # Between the judgement and the act, a new task of this deployment scales the group up again.
    newer = ScaleUp(**{**judged.__dict__, "task_id": "running", "try_number": 2})
    set_variable(scale_up_key(REGION, "orphan-failed", "g"), newer.as_stored())
    before = updates(sm)
    assert (
        groups.act("orphan-failed", judged)
        == "not scaled back: a newer scale-up was recorded since it was judged"
    )
    # ... or its cluster loses this deployment's tag.
    sm.boto3_client("sagemaker").delete_tags(
        ResourceArn=sm.boto3_client("sagemaker").describe_cluster(ClusterName="orphan-run-gone")[
            "ClusterArn"
        ],
        TagKeys=["sm-prefs:deployment"],
    )
    gone = ScaleUp(
        **{**entry("failed", run_id="manual__deleted").__dict__, "cluster_name": "orphan-run-gone"}
    )
    assert groups.act("orphan-run-gone", gone).startswith("not scaled back: the cluster no longer carries")
    assert updates(sm) == before
    assert group(sm, "orphan-failed")["TargetCount"] == 4


def test_another_deployment_sharing_the_account_scales_back_none_of_these_groups(
    sm: Any, clusters: None, api: RestApiTaskStates
) -> None:
    before = updates(sm)
    report = reconciler(api, dry_run=False, deployment="prod-eu").run()
    assert report.as_dict()["scaled_back"] == 0 and updates(sm) == before
    # prod-eu's entry is on a cluster tagged ours, the one tagged prod-eu has our entry: both report-only.
    rows = group_rows(report)
    assert rows["other-deployment"]["decision"] == rows["not-tagged-ours"]["decision"] == "report-only"


def test_a_verdict_reads_as_a_person_would_want_it() -> None:
    found = scale_up_verdict(entry("failed"), details(6), DEPLOYMENT, True)
    assert isinstance(found, Verdict)
    assert "targets 6 nodes, not the 4" in found.reason and "never scaled back" in found.reason


# -- what the operator leaves, reconciled ---------------------------------------------------------------


def test_the_operator_records_its_scale_up_and_a_pass_undoes_it_once_its_task_failed(
    sm: Any, api: RestApiTaskStates
) -> None:
    from airflow.models import Variable
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import update

    from tests.operators.test_hyperpod_runs import _dags, _scenario, stepping

    sm.load_scenario(_scenario(p5=2, p5e=0, p4d=8))
    with stepping(sm, 300):
        dagrun = _dags().hp_target.test()
    assert {ti.task_id: ti.state for ti in dagrun.get_task_instances()}["scale"] == "success"
    key = scale_up_key(REGION, "nightly", "gpu-workers")
    recorded = ScaleUp.from_stored(Variable.get(key))
    assert recorded is not None
    assert (recorded.dag_id, recorded.task_id, recorded.run_id) == ("hp_target", "scale", dagrun.run_id)
    assert (recorded.previous_count, recorded.target_count, recorded.rollback) == (0, 8, True)
    try:
        # The task succeeded: the group is its result.
        kept = group_rows(reconciler(api, dry_run=False, deployment=recorded.deployment).run())["nightly"]
        assert kept["decision"] == "keep" and "succeeded" in kept["reason"]
        # Marked failed afterwards (as a worker killed -9 leaves it, its rollback never run): scaled back.
        with create_session() as session:
            session.execute(
                update(TaskInstance.__table__)
                .where(TaskInstance.dag_id == "hp_target", TaskInstance.run_id == dagrun.run_id)
                .where(TaskInstance.task_id == "scale")
                .values(state="failed")
            )
        report = reconciler(api, dry_run=False, deployment=recorded.deployment).run()
        assert group_rows(report)["nightly"]["action"] == "scaled back to 0", group_rows(report)["nightly"]
        assert group(sm, "nightly")["TargetCount"] == 0
    finally:
        Variable.delete(key)
