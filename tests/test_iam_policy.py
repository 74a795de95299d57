"""docs/iam-policy.json grants exactly what the provider calls: nothing missing, nothing unused.

The operators (guardrails before submit included: quotas, prices, a training plan), the trigger
(capacity and completion waits, the deadline stop and on_kill), the sensor and the nightly example DAG run against the offline SageMaker while every botocore and aiobotocore
call of this process is recorded. Each call becomes the IAM request AWS would authorise (job ARN,
``iam:PassRole`` for the role in a Create, ``sagemaker:AddTags`` when a Create carries Tags) and is
checked against the policy with its placeholder account replaced by the emulator's.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.identity import AirflowIdentity
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
POLICY_ACCOUNT = "111122223333"
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


def policy_for(account: str) -> dict[str, Any]:
    policy: dict[str, Any] = json.loads(POLICY.read_text().replace(POLICY_ACCOUNT, account))
    return policy


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
    env = sm.airflow_env(conn_id="aws_default")
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
            request, prefs = build_request("processing", processing_config("prep-2"), ["ml.c5.xlarge"], 1200)
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
                training_config("killed", ResourceConfig={"VolumeSizeInGB": 50}),
                [{"instance_type": G6, "instance_count": 1}],
                3600,
            )
            hook.create_job(JobKind.TRAINING, request, prefs)
            asyncio.run(SageMakerCapacityTrigger("killed", poll_interval=0.1).on_kill())
            states["on-kill"] = sm.job("killed")["status"]
            _count(stats, sm.stats())

            # The reconciler: lists the running jobs, reads their tags (ListTags), Describes and stops
            # the ones whose owner is gone (here every owner is: a source that finds no task instance).
            sm.load_scenario({"time_scale": 0})
            owner = AirflowIdentity("gone_dag", "train", "manual__1", -1, 1, "iam-tests").tags()
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
            report = Reconciler(
                hook, _NoOwners(), "iam-tests", dry_run=False, max_calls_per_second=None
            ).run()
            states["reconciler"] = f"{report.as_dict()['stopped']} stopped"
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

            # Event mode: the wait reads the queue (ReceiveMessage, DeleteMessageBatch) and announces
            # its consumer to its peers (SendMessage, SendMessageBatch). The clock stands still until the
            # consumer has made each of those calls (its presence sent, come back and offered again), so
            # the job is still waiting while it does, however slow the machine.
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
                request, prefs = build_request("training", training_config("evented"), [G6, G5], 86400)
                hook.create_job(JobKind.TRAINING, request, prefs)

                def queue_calls_made() -> bool:
                    consumers = [
                        c
                        for c in list(eventbridge_queue._CONSUMERS.values())
                        if c.queue_url == event_queue_url
                    ]
                    return any(
                        c.stats.receives and c.stats.presence_sent >= 2 and c.stats.deleted for c in consumers
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
        "states": states,
        "stats": stats,
        "account": str(sm.scenario_dict()["account_id"]),
    }


class _NoOwners:
    """A task-state source in which no task instance exists (what matters here is the AWS calls)."""

    def task_state(self, owner: Any, run_id: str, job_name: str) -> Gone:
        return Gone("no task instance")

    def run_ids(self, dag_id: str, task_id: str) -> list[str]:
        return []


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
        "processing-completion": "success",
        "event-mode": "success",
        "hyperpod": "success",
        "hyperpod-scale": "success",
        "reconciler": "2 stopped",
    }


def test_every_aws_call_the_provider_makes_is_granted_by_the_policy(exercised: dict[str, Any]) -> None:
    account = exercised["account"]
    requests = iam.required(exercised["calls"], account=account)
    assert iam.denied(policy_for(account), requests) == []


def test_every_operation_the_emulator_saw_is_in_the_policy(exercised: dict[str, Any]) -> None:
    granted = iam.granted_actions(policy_for(exercised["account"]))
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
            (("sagemaker:TaggingAction", "CreateTrainingJob"),),
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
