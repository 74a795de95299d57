"""The published IAM policies grant exactly what the provider calls, and nothing that makes spoofing pay.

docs/iam-policy.json (the task role) grants exactly what the tasks, triggers and sensors call: nothing
missing, nothing unused; docs/iam-reconciler-policy.json what a reconciler pass calls. Both let a role stop
(or scale) only what carries this deployment's tag, create only with the identity tags, and tag only at
create; docs/iam-event-queue-policy.json lets only the EventBridge rule send to the event queue.

The operators (guardrails before submit included: quotas, prices, a training plan), the trigger
(capacity and completion waits, the deadline stop and on_kill), the sensor and the nightly example DAG run against the offline SageMaker while every botocore and aiobotocore
call of this process is recorded. Each call becomes the IAM request AWS would authorise (job ARN,
``iam:PassRole`` for the role in a Create, ``sagemaker:AddTags`` when a Create carries Tags) and is
checked against the policy with its placeholder account replaced by the emulator's and its placeholder
deployment id by the one the runs tag their jobs with.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.hyperpod_rollback import scale_up_key
from airflow_provider_sm_prefs.domain.identity import AirflowIdentity, OwnerClaim
from airflow_provider_sm_prefs.domain.preferences import JobKind, build_request
from airflow_provider_sm_prefs.domain.reconcile import Gone
from airflow_provider_sm_prefs.hooks.preflight import clear_cache
from airflow_provider_sm_prefs.reconcile import Reconciler
from airflow_provider_sm_prefs.triggers import eventbridge_queue
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger, WaitFor
from harness import iam
from offline_sagemaker.operations import SERVICE_OF
from tests.clock import advancing_once, advancing_once_served

pytestmark = pytest.mark.usefixtures("airflow_db")

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "docs" / "iam-policy.json"
RECONCILER_POLICY = ROOT / "docs" / "iam-reconciler-policy.json"
QUEUE_POLICY = ROOT / "docs" / "iam-event-queue-policy.json"
POLICY_ACCOUNT = "111122223333"
POLICY_DEPLOYMENT = "YOUR-DEPLOYMENT-ID"
#: ``[sm_prefs] deployment_id`` of the runs here: every job they create carries it.
DEPLOYMENT = "iam-tests"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def training_config(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
            "TrainingInputMode": "File",
        },
        "RoleArn": ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://models/out"},
        "ResourceConfig": {"VolumeSizeInGB": 50, "InstanceCount": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        **extra,
    }


def processing_config(name: str) -> dict[str, Any]:
    return {
        "ProcessingJobName": name,
        "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
        "RoleArn": ROLE,
        "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1}},
    }


def policy_for(account: str, path: Path = POLICY, deployment: str = DEPLOYMENT) -> dict[str, Any]:
    """A published policy with its placeholders replaced: the account, and this deployment's id."""
    text = path.read_text().replace(POLICY_ACCOUNT, account).replace(POLICY_DEPLOYMENT, deployment)
    policy: dict[str, Any] = json.loads(text)
    return policy


def identity_tags(dag_id: str = "iam_dag", deployment: str = DEPLOYMENT) -> list[dict[str, str]]:
    """The identity tags a task of ``deployment`` puts on what it creates."""
    return AirflowIdentity(dag_id, "train", "manual__1", -1, 1, deployment).tags()


def run_trigger(trigger: SageMakerCapacityTrigger, timeout: float = 60) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("no event")

    return asyncio.run(asyncio.wait_for(first(), timeout))


@pytest.fixture(scope="module")
def exercised(offline_sm_server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every code path that talks to AWS, run once with all calls recorded."""
    import os

    sm = offline_sm_server
    env = {**sm.airflow_env(conn_id="aws_default"), "AIRFLOW__SM_PREFS__DEPLOYMENT_ID": DEPLOYMENT}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    dags = _load(ROOT / "tests" / "dags" / "sm_prefs_test_dags.py", "iam_policy_test_dags")
    examples = _load(ROOT / "dags_examples" / "example_sm_prefs_nightly_retrain.py", "iam_policy_nightly")
    out = tmp_path_factory.mktemp("iam")
    states: dict[str, str | None] = {}
    stats: dict[str, Any] = {"operations": {}}
    # The example DAG creates its bucket only when missing: start without it (an earlier test of the
    # session may have left it in the shared emulator), so the CreateBucket path is exercised too.
    s3 = sm.boto3_client("s3")
    if any(b["Name"] == "sm-prefs-demo" for b in s3.list_buckets().get("Buckets", [])):
        for item in s3.list_objects_v2(Bucket="sm-prefs-demo").get("Contents", []):
            s3.delete_object(Bucket="sm-prefs-demo", Key=item["Key"])
        s3.delete_bucket(Bucket="sm-prefs-demo")
    # Event mode's queue and rule exist before recording: setting them up is the deployment's job.
    event_queue_url = sm.create_event_queue("sagemaker-job-events")
    try:
        with iam.recording_calls() as calls:
            sm.load_scenario(
                {"time_scale": 600, "job_runtime_seconds": 600, "capacity": {G6: [{"from": 0, "free": 0}]}}
            )
            run = examples.dag.test()
            states["nightly"] = run.state
            _count(stats, sm.stats())

            sm.load_scenario("default")
            tagged = training_config("tagged", Tags=[{"Key": "team", "Value": "ml"}])
            run = dags.t_train_complete.test(
                run_conf={"config": tagged, "prefs": [G6, G5], "max_pending": None, "out": str(out / "a")}
            )
            states["tagged"] = run.state
            run = dags.t_train_crash.test(
                run_conf={
                    "config": training_config("crashy"),
                    "prefs": [G6, G5],
                    "max_pending": None,
                    "out": str(out / "b"),
                }
            )
            states["crash-and-reattach"] = run.state
            run = dags.t_sensor.test(run_conf={"job_name": "tagged", "out": str(out / "c")})
            states["sensor"] = run.state
            _count(stats, sm.stats())

            # Guardrails before submit: quotas, prices and a per-entry training plan.
            plan = f"arn:aws:sagemaker:us-east-1:{sm.scenario_dict()['account_id']}:training-plan/later-p5"
            p5 = "ml.p5.48xlarge"
            sm.load_scenario(
                {
                    "time_scale": 600,
                    "prices": {p5: 55.04, G5: 20.36},
                    "training_plans": [{"arn": plan, "instance_type": p5, "count": 1, "from": 864000}],
                }
            )
            clear_cache()  # earlier runs here cached "no price" for these types
            run = dags.t_train_capacity.test(
                run_conf={
                    **dags.PARAMS,
                    "config": training_config("guarded", ResourceConfig={"VolumeSizeInGB": 50}),
                    "prefs": [
                        {"instance_type": p5, "instance_count": 1, "training_plan_arn": plan},
                        {"instance_type": G5, "instance_count": 1},
                    ],
                    "max_pending": 3600,
                    "max_hourly_cost": 100,
                    "out": str(out / "g"),
                }
            )
            states["guardrails"] = run.state
            _count(stats, sm.stats())

            # Processing: the trigger's client-side deadline stops the job (StopProcessingJob).
            sm.load_scenario({"time_scale": 1200, "capacity": {"ml.*": [{"from": 0, "free": 0}]}})
            run = dags.t_process.test(
                run_conf={
                    "config": processing_config("prep"),
                    "prefs": ["ml.c5.xlarge", "ml.m5.xlarge"],
                    "max_pending": 1200,
                    "out": str(out / "d"),
                }
            )
            states["processing-deadline"] = run.state
            _count(stats, sm.stats())

            # Regions: before its first Create the task reads the region of every bucket a region's request
            # names (GetBucketLocation); a bucket of another region fails the task before any Create. The
            # bucket is made in the emulator's S3 directly: its Create is not the provider's call.
            from moto.s3.models import s3_backends

            sm.load_scenario({"time_scale": 0})
            s3_backends[sm.scenario_dict()["account_id"]]["aws"].create_bucket("west-out", "us-east-1")
            west = {
                "AlgorithmSpecification": {
                    "TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1"
                },
                "OutputDataConfig": {"S3OutputPath": "s3://west-out/models"},
            }
            run = dags.t_train_capacity.test(
                run_conf={
                    **dags.PARAMS,
                    "config": training_config("moving"),
                    "prefs": [G6, G5],
                    "regions": [{"region": "us-west-2", "after": 1800, "overrides": west}],
                    "out": str(out / "r"),
                }
            )
            states["regions-bucket-check"] = run.state
            _count(stats, sm.stats())

            # A processing job waited on until it ends, and a deferred training wait killed by a user
            # (on_kill stops the job), driven through the trigger itself as the triggerer would.
            from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook

            # The clock stands still until the trigger has listed the running processing job, so it
            # always sees it InProgress and learns of its end from the shared ListProcessingJobs loop,
            # however slow the machine.
            sm.load_scenario(
                {
                    "time_scale": 0,
                    "job_runtime_seconds": 3000,
                    "capacity": {G6: [{"from": 0, "free": 0}], G5: [{"from": 0, "free": 0}]},
                }
            )
            hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
            request, prefs = build_request(
                "processing", {**processing_config("prep-2"), "Tags": identity_tags()}, ["ml.c5.xlarge"], 1200
            )
            hook.create_job(JobKind.PROCESSING, request, prefs)
            with advancing_once_served(sm, "ListProcessingJobs", 4 * 3600):
                event = run_trigger(
                    SageMakerCapacityTrigger(
                        "prep-2", JobKind.PROCESSING.value, WaitFor.COMPLETION.value, poll_interval=0.1
                    )
                )
            states["processing-completion"] = event["status"]
            request, prefs = build_request(
                "training",
                training_config("killed", ResourceConfig={"VolumeSizeInGB": 50}, Tags=identity_tags()),
                [{"instance_type": G6, "instance_count": 1}],
                3600,
            )
            hook.create_job(JobKind.TRAINING, request, prefs)
            # The trigger carries its task's claim: on_kill stops only a job whose tags prove it the task's.
            owner = OwnerClaim.of_tags({t["Key"]: t["Value"] for t in identity_tags()}, created=True)
            killing = SageMakerCapacityTrigger("killed", poll_interval=0.1, owner=owner.as_dict())
            asyncio.run(killing.on_kill())
            states["on-kill"] = sm.job("killed")["status"]
            _count(stats, sm.stats())

            # The reconciler: lists the running jobs, reads their tags (ListTags), Describes and stops
            # the ones whose owner is gone (here every owner is: a source that finds no task instance).
            # And a HyperPod group scaled up by a task that is gone (its ledger entry says 1 -> 2 nodes): it
            # reads the clusters' tags and the group, and scales it back.
            sm.load_scenario(
                {
                    "time_scale": 0,
                    "capacity": {"ml.p5.48xlarge": [{"from": 0, "free": 8}]},
                    "clusters": {"node_provisioning_seconds": 60},
                }
            )
            hook.conn.create_cluster(
                ClusterName="orphaned",
                InstanceGroups=[
                    {
                        "InstanceGroupName": "g",
                        "InstanceRequirements": {"InstanceTypes": ["ml.p5.48xlarge"]},
                        "InstanceCount": 2,
                        "ExecutionRole": "arn:aws:iam::123456789012:role/SageMakerHyperPodNodeRole",
                        "LifeCycleConfig": {"SourceS3Uri": "s3://b/lc/", "OnCreate": "on_create.sh"},
                    }
                ],
                Tags=identity_tags("gone_dag"),
            )
            sm.advance(300)
            owner = identity_tags("gone_dag")
            request, prefs = build_request(
                "training",
                training_config("orphan", Tags=owner),
                [G5],
                3600,
            )
            hook.create_job(JobKind.TRAINING, request, prefs)
            request, prefs = build_request(
                "processing", {**processing_config("orphan-prep"), "Tags": owner}, ["ml.c5.xlarge"], None
            )
            hook.create_job(JobKind.PROCESSING, request, prefs)
            reconciler_from = len(calls)
            report = Reconciler(hook, _NoOwners(), DEPLOYMENT, dry_run=False, max_calls_per_second=None).run()
            reconciler_calls = calls[reconciler_from:]
            del calls[reconciler_from:]
            summary = report.as_dict()
            states["reconciler"] = f"{summary['stopped']} stopped, {summary['scaled_back']} scaled back"
            _count(stats, sm.stats())

            # HyperPod: a flexible group created with its cluster (tags on create, the node role passed),
            # waited for and its nodes listed; then scaled up.
            hyperpod = _load(ROOT / "tests" / "dags" / "sm_prefs_hyperpod_dags.py", "iam_policy_hyperpod")
            sm.load_scenario(
                {
                    "time_scale": 0,
                    "capacity": {"ml.p5.48xlarge": [{"from": 0, "free": 8}]},
                    "clusters": {"node_provisioning_seconds": 600},
                }
            )
            with advancing_once_served(sm, "CreateCluster", 900):
                run = hyperpod.hp_tagged.test()
            states["hyperpod"] = run.state
            with advancing_once_served(sm, "UpdateCluster", 900):
                run = hyperpod.hp_target.test()  # the same group scaled up: UpdateCluster
            states["hyperpod-scale"] = run.state
            _count(stats, sm.stats())

            # Event mode: the wait reads the queue (ReceiveMessage, DeleteMessageBatch) and releases an
            # event about a job it does not watch for a peer (ChangeMessageVisibilityBatch); it never
            # sends. The clock stands still until the consumer has made each of those calls (the
            # bystander's event released, come back and dropped), so the job is still waiting while it
            # does, however slow the machine.
            os.environ["AIRFLOW__SM_PREFS__EVENT_QUEUE_URL"] = event_queue_url
            try:
                sm.load_scenario(
                    {
                        "time_scale": 0,
                        "job_runtime_seconds": 600,
                        "capacity": {
                            G6: [{"from": 0, "free": 0}],
                            G5: [{"from": 0, "to": 3000, "free": 0}, {"from": 3000, "free": 8}],
                        },
                    }
                )
                request, prefs = build_request(
                    "training", training_config("evented", Tags=identity_tags()), [G6, G5], 86400
                )
                hook.create_job(JobKind.TRAINING, request, prefs)
                # The EventBridge rule's part (not the provider's): an event about a job nobody here waits on.
                setup_from = len(calls)
                sm.boto3_client("sqs").send_message(QueueUrl=event_queue_url, MessageBody=bystander_event())
                del calls[setup_from:]

                def queue_calls_made() -> bool:
                    consumers = [
                        c
                        for c in list(eventbridge_queue._CONSUMERS.values())
                        if c.queue_url == event_queue_url
                    ]
                    return any(
                        c.stats.receives and c.stats.passed and c.stats.expired and c.stats.deleted
                        for c in consumers
                    )

                with advancing_once(sm, queue_calls_made, 3000):
                    event = run_trigger(
                        SageMakerCapacityTrigger("evented", preferences=prefs.as_list(), poll_interval=0.5),
                        timeout=180,
                    )
                states["event-mode"] = event["status"]
            finally:
                os.environ.pop("AIRFLOW__SM_PREFS__EVENT_QUEUE_URL", None)
            _count(stats, sm.stats())
    finally:
        sm.remove_event_queue("sagemaker-job-events")
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {
        "calls": list(calls),
        "reconciler_calls": reconciler_calls,
        "states": states,
        "stats": stats,
        "account": str(sm.scenario_dict()["account_id"]),
    }


def bystander_event() -> str:
    """SageMaker's event about a training job of another deployment, as the queue's rule delivers it."""
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/bystander"
    detail = {"TrainingJobName": "bystander", "TrainingJobArn": arn, "TrainingJobStatus": "InProgress"}
    return json.dumps(
        {
            "version": "0",
            "id": "bystander-1",
            "detail-type": "SageMaker Training Job State Change",
            "source": "aws.sagemaker",
            "account": "123456789012",
            "region": "us-east-1",
            "resources": [arn],
            "detail": detail,
        }
    )


class _NoOwners:
    """A task-state source in which no task instance exists (what matters here is the AWS calls)."""

    def task_state(self, owner: Any, run_id: str, job_name: str) -> Gone:
        return Gone("no task instance")

    def run_ids(self, dag_id: str, task_id: str) -> list[str]:
        return []

    def variable(self, key: str) -> str | None:
        if key != scale_up_key("us-east-1", "orphaned", "g"):
            return None
        return json.dumps(
            {
                "deployment": DEPLOYMENT,
                "dag_id": "gone_dag",
                "task_id": "scale",
                "run_id": "manual__gone",
                "map_index": -1,
                "try_number": 1,
                "cluster_name": "orphaned",
                "group_name": "g",
                "previous_count": 1,
                "target_count": 2,
            }
        )


def _count(total: dict[str, Any], stats: dict[str, Any]) -> None:
    for op, n in stats["operations"].items():
        total["operations"][op] = total["operations"].get(op, 0) + n


def test_the_exercised_paths_really_ran(exercised: dict[str, Any]) -> None:
    states = dict(exercised["states"])
    assert states.pop("on-kill") in ("Stopping", "Stopped")
    assert states == {
        "nightly": "success",
        "tagged": "success",
        "crash-and-reattach": "success",
        "sensor": "success",
        "guardrails": "success",
        "processing-deadline": "failed",
        "regions-bucket-check": "failed",
        "processing-completion": "success",
        "event-mode": "success",
        "hyperpod": "success",
        "hyperpod-scale": "success",
        "reconciler": "2 stopped, 1 scaled back",
    }


def test_every_aws_call_the_provider_makes_is_granted_by_the_policy(exercised: dict[str, Any]) -> None:
    account = exercised["account"]
    requests = iam.required(exercised["calls"], account=account)
    assert iam.denied(policy_for(account), requests) == []


def test_every_call_of_a_reconciler_pass_is_granted_by_the_reconciler_policy(
    exercised: dict[str, Any],
) -> None:
    account = exercised["account"]
    tags = iam.tags_after(exercised["calls"], account=account)
    requests = iam.required(exercised["reconciler_calls"], account=account, resource_tags=tags)
    assert {r.action for r in requests} >= {"sagemaker:ListTags", "sagemaker:StopTrainingJob"}
    policy = policy_for(account, RECONCILER_POLICY)
    assert iam.denied(policy, requests) == []
    # ... and it grants nothing a pass does not use.
    assert iam.granted_actions(policy) - {r.action for r in requests} == set()


def test_every_operation_the_emulator_saw_is_in_the_policy(exercised: dict[str, Any]) -> None:
    granted = iam.granted_actions(policy_for(exercised["account"])) | iam.granted_actions(
        policy_for(exercised["account"], RECONCILER_POLICY)
    )
    seen = {f"{SERVICE_OF[op]}:{op}" for op in exercised["stats"]["operations"]}
    assert seen and seen <= granted, sorted(seen - granted)


def test_the_policy_grants_nothing_the_provider_does_not_use(exercised: dict[str, Any]) -> None:
    used = {r.action for r in iam.required(exercised["calls"], account=exercised["account"])}
    assert iam.granted_actions(policy_for(exercised["account"])) - used == set()


def test_tags_on_create_need_add_tags_and_the_role_needs_pass_role_to_sagemaker_only(
    exercised: dict[str, Any],
) -> None:
    account = exercised["account"]
    policy = policy_for(account)
    requests = iam.required(exercised["calls"], account=account)
    assert (
        iam.Request(
            "sagemaker:AddTags",
            f"arn:aws:sagemaker:us-east-1:{account}:training-job/tagged",
            (("sagemaker:TaggingAction", "CreateTrainingJob"), *request_tags(tagged_run_tags(exercised))),
        )
        in requests
    )
    assert any(r.action == "iam:PassRole" and r.resource == ROLE for r in requests)
    # PassRole is scoped: not to another service, not to a role outside the SageMaker* name pattern.
    assert not iam.allows(
        policy, iam.Request("iam:PassRole", ROLE, (("iam:PassedToService", "ec2.amazonaws.com"),))
    )
    assert not iam.allows(
        policy,
        iam.Request(
            "iam:PassRole",
            f"arn:aws:iam::{account}:role/Admin",
            (("iam:PassedToService", "sagemaker.amazonaws.com"),),
        ),
    )
    # Nothing outside jobs: no model, endpoint or notebook actions, no Delete*.
    assert not any(
        a.startswith(("sagemaker:Delete", "sagemaker:CreateModel", "sagemaker:CreateEndpoint"))
        for a in iam.granted_actions(policy)
    )


# ------------------------------------------------------------------ what a spoofing DAG cannot do

ACCOUNT = "123456789012"
JOB = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/someone-elses"
PROCESSING_JOB = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:processing-job/someone-elses"
CLUSTER = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/someone-elses"
QUEUE = f"arn:aws:sqs:us-east-1:{ACCOUNT}:sagemaker-job-events"
RULE = f"arn:aws:events:us-east-1:{ACCOUNT}:rule/sagemaker-job-events"
CREATE_OF = {
    "training-job": "CreateTrainingJob",
    "processing-job": "CreateProcessingJob",
    "cluster": "CreateCluster",
}


def request_tags(tags: list[dict[str, str]]) -> tuple[tuple[str, str], ...]:
    """The condition context of a request that carries ``tags`` (as :func:`harness.iam.required` sets it)."""
    pairs = {t["Key"]: t["Value"] for t in tags}
    return (
        *((f"aws:RequestTag/{k}", v) for k, v in sorted(pairs.items())),
        *(("aws:TagKeys", k) for k in sorted(pairs)),
    )


def resource_tags(tags: list[dict[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((f"aws:ResourceTag/{t['Key']}", t["Value"]) for t in sorted(tags, key=lambda t: t["Key"]))


def tagged_run_tags(exercised: dict[str, Any]) -> list[dict[str, str]]:
    """The Tags the "tagged" run's CreateTrainingJob sent (its own and the identity tags)."""
    creates = [
        c
        for c in exercised["calls"]
        if c.operation == "CreateTrainingJob" and c.params["TrainingJobName"] == "tagged"
    ]
    tags: list[dict[str, str]] = creates[0].params["Tags"]
    return tags


def test_the_runs_tag_everything_they_create_with_this_deployment(exercised: dict[str, Any]) -> None:
    """What makes the tag conditions hold for the provider: every Create carries the deployment's tag."""
    creates = [c for c in exercised["calls"] if c.service == "sagemaker" and c.operation.startswith("Create")]
    assert creates
    for call in creates:
        assert {"Key": "sm-prefs:deployment", "Value": DEPLOYMENT} in call.params.get("Tags", []), (
            call.operation
        )


@pytest.mark.parametrize("resource", [JOB, PROCESSING_JOB, CLUSTER])
def test_the_task_role_creates_only_with_this_deployments_identity_tags(resource: str) -> None:
    policy = policy_for(ACCOUNT)
    action = "sagemaker:" + CREATE_OF[resource.split(":")[5].split("/")[0]]
    assert iam.allows(policy, iam.Request(action, resource, request_tags(identity_tags())))
    assert not iam.allows(policy, iam.Request(action, resource))
    assert not iam.allows(
        policy, iam.Request(action, resource, request_tags([{"Key": "team", "Value": "ml"}]))
    )
    assert not iam.allows(
        policy, iam.Request(action, resource, request_tags(identity_tags(deployment="other")))
    )
    # The deployment's tag alone is not an identity: the task's keys must be there too.
    only_deployment = [t for t in identity_tags() if t["Key"] == "sm-prefs:deployment"]
    assert not iam.allows(policy, iam.Request(action, resource, request_tags(only_deployment)))


@pytest.mark.parametrize("path", [POLICY, RECONCILER_POLICY], ids=["task-role", "reconciler-role"])
@pytest.mark.parametrize(
    ("action", "resource"),
    [
        ("sagemaker:StopTrainingJob", JOB),
        ("sagemaker:StopProcessingJob", PROCESSING_JOB),
        ("sagemaker:UpdateCluster", CLUSTER),
    ],
)
def test_a_role_stops_or_scales_only_what_carries_this_deployments_tag(
    path: Path, action: str, resource: str
) -> None:
    policy = policy_for(ACCOUNT, path)
    ours = resource_tags(identity_tags())
    assert iam.allows(policy, iam.Request(action, resource, ours))
    assert not iam.allows(policy, iam.Request(action, resource))  # untagged: nobody's
    theirs = resource_tags(identity_tags(deployment="other"))
    assert not iam.allows(policy, iam.Request(action, resource, theirs))


@pytest.mark.parametrize("path", [POLICY, RECONCILER_POLICY], ids=["task-role", "reconciler-role"])
@pytest.mark.parametrize("resource", [JOB, PROCESSING_JOB, CLUSTER])
def test_no_role_adds_tags_to_a_resource_that_exists(path: Path, resource: str) -> None:
    """AddTags outside a Create would let a DAG put this deployment's tag on another's job, and a
    reconciler stop it."""
    policy = policy_for(ACCOUNT, path)
    forged = request_tags(identity_tags())
    assert not iam.allows(policy, iam.Request("sagemaker:AddTags", resource, forged))
    theirs = resource_tags(identity_tags("x", "other"))
    assert not iam.allows(policy, iam.Request("sagemaker:AddTags", resource, (*forged, *theirs)))
    if path == POLICY:  # tagging at create, with the deployment's tag, stays allowed
        create = CREATE_OF[resource.split(":")[5].split("/")[0]]
        at_create = (("sagemaker:TaggingAction", create), *forged)
        assert iam.allows(policy, iam.Request("sagemaker:AddTags", resource, at_create))


@pytest.mark.parametrize("path", [POLICY, RECONCILER_POLICY], ids=["task-role", "reconciler-role"])
def test_no_role_sends_to_the_event_queue(path: Path) -> None:
    policy = policy_for(ACCOUNT, path)
    assert not iam.allows(policy, iam.Request("sqs:SendMessage", QUEUE))
    assert not iam.allows(policy, iam.Request("sqs:SendMessageBatch", QUEUE))
    assert not any(a.startswith("sqs:Send") or a == "sqs:*" for a in iam.granted_actions(policy))


def test_the_reconciler_role_creates_nothing_and_reads_no_queue() -> None:
    policy = policy_for(ACCOUNT, RECONCILER_POLICY)
    granted = iam.granted_actions(policy)
    forbidden = ("sagemaker:Create", "sagemaker:AddTags", "sqs:")
    assert granted and not any(a.startswith(forbidden) for a in granted)
    # It updates clusters only to scale a group back (on this deployment's clusters, tested above), and
    # passes a group's node role back to SageMaker only, as UpdateCluster requires.
    assert {a for a in granted if a.startswith(("sagemaker:Update", "iam:"))} == {
        "sagemaker:UpdateCluster",
        "iam:PassRole",
    }
    node_role = f"arn:aws:iam::{ACCOUNT}:role/SageMakerHyperPodNodeRole"
    assert not iam.allows(
        policy, iam.Request("iam:PassRole", node_role, (("iam:PassedToService", "ec2.amazonaws.com"),))
    )


def test_only_the_eventbridge_rule_sends_to_the_event_queue() -> None:
    policy = policy_for(ACCOUNT, QUEUE_POLICY)
    send = iam.Request("sqs:SendMessage", QUEUE, (("aws:SourceArn", RULE),))
    assert iam.allows(policy, send, principal="events.amazonaws.com")
    # Another rule (of this account or another), or no rule at all.
    other_rule = iam.Request("sqs:SendMessage", QUEUE, (("aws:SourceArn", RULE.replace("job-events", "x")),))
    assert not iam.allows(policy, other_rule, principal="events.amazonaws.com")
    assert not iam.allows(policy, iam.Request("sqs:SendMessage", QUEUE), principal="events.amazonaws.com")
    assert not iam.allows(policy, send, principal="sns.amazonaws.com")
    # A role of the account, even one whose own policy grants sqs:* (the queue's Deny wins).
    for caller in (f"arn:aws:iam::{ACCOUNT}:role/airflow-task", f"arn:aws:iam::{ACCOUNT}:root"):
        assert not iam.allows(policy, iam.Request("sqs:SendMessage", QUEUE), principal=caller)
        assert not iam.allows(policy, send, principal=caller)
        own = {"Effect": "Allow", "Action": "sqs:*", "Resource": "*", "Principal": {"AWS": caller}}
        with_own = {"Statement": [*policy["Statement"], own]}
        assert not iam.allows(with_own, iam.Request("sqs:SendMessage", QUEUE), principal=caller)


def test_the_evaluator_follows_aws_for_missing_keys_and_set_operators() -> None:
    """Explicit deny wins; a missing key is false except under Null, IfExists, a negated operator and
    ForAllValues; ForAnyValue needs one match, ForAllValues every one."""

    def allow(condition: dict[str, Any]) -> dict[str, Any]:
        return {"Statement": [{"Effect": "Allow", "Action": "s:A", "Resource": "*", "Condition": condition}]}

    bare = iam.Request("s:A", "r")
    keyed = iam.Request("s:A", "r", (("aws:TagKeys", "a"), ("aws:TagKeys", "b")))
    assert not iam.allows(allow({"StringEquals": {"k": "v"}}), bare)
    assert iam.allows(allow({"StringEqualsIfExists": {"k": "v"}}), bare)
    assert iam.allows(allow({"StringNotEquals": {"k": "v"}}), bare)
    assert iam.allows(allow({"Null": {"k": "true"}}), bare)
    assert not iam.allows(allow({"Null": {"k": "false"}}), bare)
    assert iam.allows(allow({"ForAllValues:StringEquals": {"aws:TagKeys": ["a", "b", "c"]}}), keyed)
    assert not iam.allows(allow({"ForAllValues:StringEquals": {"aws:TagKeys": ["a"]}}), keyed)
    assert iam.allows(allow({"ForAllValues:StringEquals": {"aws:TagKeys": ["a"]}}), bare)
    assert iam.allows(allow({"ForAnyValue:StringEquals": {"aws:TagKeys": ["b", "z"]}}), keyed)
    assert not iam.allows(allow({"ForAnyValue:StringEquals": {"aws:TagKeys": ["z"]}}), keyed)
    assert not iam.allows(allow({"ForAnyValue:StringEquals": {"aws:TagKeys": ["a"]}}), bare)
    assert not iam.allows(allow({"StringEquals": {"aws:TagKeys": "a"}}), keyed)  # single-valued on a set
    assert iam.allows(allow({"StringEquals": {"K": ["x", "v"]}}), iam.Request("s:A", "r", (("k", "v"),)))
    assert not iam.allows(allow({"SomethingElse": {"k": "v"}}), iam.Request("s:A", "r", (("k", "v"),)))
    deny = {"Effect": "Deny", "Action": "s:*", "Resource": "*"}
    assert not iam.allows({"Statement": [*allow({})["Statement"], deny]}, bare)


def simulate(
    sm: Any,
    policy: dict[str, Any],
    request: iam.Request,
    resource_policy: dict[str, Any] | None = None,
    caller: str | None = None,
) -> str:
    """The offline SageMaker's IAM ``SimulateCustomPolicy`` decision for ``request`` (botocore, over HTTP)."""
    values: dict[str, list[str]] = {}
    for key, value in request.context:
        values.setdefault(key, []).append(value)
    entries = [
        {
            "ContextKeyName": k,
            "ContextKeyValues": v,
            "ContextKeyType": "stringList" if len(v) > 1 else "string",
        }
        for k, v in values.items()
    ]
    extra: dict[str, Any] = {"ResourcePolicy": json.dumps(resource_policy)} if resource_policy else {}
    if caller:
        extra["CallerArn"] = caller
    answer = sm.boto3_client("iam").simulate_custom_policy(
        PolicyInputList=[json.dumps(policy)],
        ActionNames=[request.action],
        ResourceArns=[request.resource],
        ContextEntries=entries,
        **extra,
    )
    decision: str = answer["EvaluationResults"][0]["EvalDecision"]
    return decision


def test_the_offline_sagemakers_iam_simulation_refuses_what_a_spoofing_dag_would_try(
    offline_sm_server: Any,
) -> None:
    sm = offline_sm_server
    task, reconciler = policy_for(ACCOUNT), policy_for(ACCOUNT, RECONCILER_POLICY)
    ours, theirs = identity_tags(), identity_tags("x", "other")
    create = "sagemaker:CreateTrainingJob"
    assert simulate(sm, task, iam.Request(create, JOB, request_tags(ours))) == "allowed"
    assert simulate(sm, task, iam.Request(create, JOB)) == "implicitDeny"
    stop = "sagemaker:StopTrainingJob"
    assert simulate(sm, task, iam.Request(stop, JOB, resource_tags(ours))) == "allowed"
    assert simulate(sm, task, iam.Request(stop, JOB, resource_tags(theirs))) == "implicitDeny"
    assert simulate(sm, reconciler, iam.Request(stop, JOB)) == "implicitDeny"
    assert simulate(sm, task, iam.Request("sagemaker:AddTags", JOB, request_tags(ours))) == "implicitDeny"
    assert simulate(sm, task, iam.Request("sqs:SendMessage", QUEUE)) == "implicitDeny"
    # A role whose own policy grants sqs:* still cannot send: the queue's Deny is explicit.
    everything = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}],
    }
    caller = f"arn:aws:iam::{ACCOUNT}:role/airflow-task"
    send = iam.Request("sqs:SendMessage", QUEUE)
    assert simulate(sm, everything, send) == "allowed"
    assert simulate(sm, everything, send, policy_for(ACCOUNT, QUEUE_POLICY), caller) == "explicitDeny"
