"""The reconciler against the offline SageMaker (real botocore HTTP) and Airflow's real REST API v2.

Jobs are created in the emulator with the provider's identity tags; their owners are real DAG runs and
task instances in the session's metadata database, read through Airflow's own api-server app
(``RestApiTaskStates`` on a ``TestClient``, real JWT authentication). Stops and their refusals are
counted by the emulator's ledger.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.identity import AirflowIdentity, IdentityKey, OwnerClaim, tag_value
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.domain.reconcile import (
    Decision,
    Gone,
    JobOwner,
    OwnerState,
    SeenJob,
    decide,
    identify,
    looks_shortened,
)
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook
from airflow_provider_sm_prefs.reconcile import Reconciler, RestApiTaskStates, StateUnavailable
from airflow_provider_sm_prefs.reconcile.__main__ import main
from offline_sagemaker.jobs import training_config
from tests.plugin.test_capacity_api import client, token  # noqa: F401 (the api-server app fixture)

pytestmark = pytest.mark.usefixtures("airflow_db")

DEPLOYMENT = "reconcile-tests"
OWNER_DAG = "t_null_xcom"
RUN = "manual__2026-11-30T12:00:00+00:00"
#: A run id AWS would refuse as a tag value (``#`` and ``,``, and too long): tagged shortened.
LONG_RUN = "manual__" + "x" * 260 + "#batch,1"
#: task id -> (state, try number) in RUN.
TASKS: dict[str, tuple[str | None, int]] = {
    "failed": ("failed", 1),
    "succeeded": ("success", 1),
    "handed_off": ("success", 1),
    "deferred": ("deferred", 1),
    "running": ("running", 2),
    "retrying": ("up_for_retry", 1),
    "cleared": (None, 0),
    "skipped": ("skipped", 1),
}
#: map index -> state of the mapped task ``fan`` in RUN.
MAPPED = {0: "failed", 1: "running"}
PROCESSING = {
    "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
    "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1}},
}


def add_runs(session: Any, run_ids: Any, rows: Any) -> None:
    """Runs of :data:`OWNER_DAG` and their task instances ``(run_id, task_id, map_index, state, tries)``."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import insert

    now = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
    for run_id in run_ids:
        session.execute(
            insert(DagRun.__table__).values(
                dag_id=OWNER_DAG,
                run_id=run_id,
                run_type="manual",
                run_after=now,
                clear_number=0,
                state="running",
                span_status="ended",
            )
        )
    for run_id, task_id, map_index, state, tries in rows:
        session.execute(
            insert(TaskInstance.__table__).values(
                dag_id=OWNER_DAG,
                task_id=task_id,
                run_id=run_id,
                map_index=map_index,
                state=state,
                try_number=tries,
                max_tries=0,
                pool="default_pool",
                span_status="ended",
            )
        )


@pytest.fixture(scope="module")
def owners(airflow_db: None) -> Iterator[None]:
    """Two runs of the serialized test DAG ``t_null_xcom``: RUN with a task instance per state (the tasks
    need not be the DAG's: a renamed task leaves its instances behind) and a mapped task, and LONG_RUN."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    from tests.conftest import _test_dags

    dags = _test_dags()
    dags.t_null_xcom.test(run_conf=dict(dags.PARAMS))  # the DAG in the database, as a deployment has it
    with create_session() as session:
        rows = [(RUN, task_id, -1, state, tries) for task_id, (state, tries) in TASKS.items()]
        rows += [(RUN, "fan", index, state, 1) for index, state in MAPPED.items()]
        rows += [(LONG_RUN, "failed", -1, "failed", 1)]
        add_runs(session, (RUN, LONG_RUN), rows)
        # What the operators push: handed_off returned its outcome with the job still running
        # (wait_for_completion=False); succeeded was marked success while it waited for completion, after
        # its selection pushed job_status InProgress, and returned nothing.
        handed = {"job_name": "j-handed-off", "job_status": "InProgress"}
        for task_id, key, value in (
            ("handed_off", "return_value", handed),
            ("handed_off", "job_status", "InProgress"),
            ("succeeded", "job_status", "InProgress"),
            ("succeeded", "job_name", "j-succeeded"),
        ):
            XComModel.set(
                key=key, value=value, dag_id=OWNER_DAG, task_id=task_id, run_id=RUN, session=session
            )
    yield
    with create_session() as session:
        for table in (XComModel, TaskInstance, DagRun):
            session.execute(
                delete(table.__table__).where(table.dag_id == OWNER_DAG, table.run_id.in_([RUN, LONG_RUN]))
            )


def identity(
    task_id: str, run_id: str = RUN, map_index: int = -1, try_number: int = 1, deployment: str = DEPLOYMENT
) -> dict[str, str]:
    return AirflowIdentity(OWNER_DAG, task_id, run_id, map_index, try_number, deployment).as_dict()


def create(sm: Any, name: str, tags: dict[str, str] | None, kind: str = "training") -> None:
    """A running job in the emulator, created as any SageMaker client would (real HTTP)."""
    sagemaker = sm.boto3_client("sagemaker")
    if kind == "training":
        config = training_config(name, tags=tags, InstanceCount=1)
        request, _ = build_request("training", config, ["ml.g5.12xlarge"], 3600)
        sagemaker.create_training_job(**request)
    else:
        config = {**PROCESSING, "ProcessingJobName": name}
        if tags:
            config["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
        request, _ = build_request("processing", config, ["ml.c5.xlarge"], None)
        sagemaker.create_processing_job(**request)


#: job name -> (tags, kind, the decision a pass must reach).
JOBS: dict[str, tuple[dict[str, str] | None, str, Decision]] = {
    "j-failed": (identity("failed"), "training", Decision.STOP),
    "j-succeeded": (identity("succeeded"), "training", Decision.STOP),
    "j-handed-off": (identity("handed_off"), "training", Decision.KEEP),
    "j-deferred": (identity("deferred"), "training", Decision.KEEP),
    "j-running-later-try": (identity("running", try_number=1), "training", Decision.KEEP),
    "j-retrying": (identity("retrying"), "training", Decision.KEEP),
    "j-cleared": (identity("cleared"), "training", Decision.KEEP),
    "p-skipped": (identity("skipped"), "processing", Decision.STOP),
    "j-fan-0": (identity("fan", map_index=0), "training", Decision.STOP),
    "j-fan-1": (identity("fan", map_index=1), "training", Decision.KEEP),
    "j-run-deleted": (identity("failed", run_id="manual__deleted"), "training", Decision.STOP),
    "j-task-gone": (identity("renamed_task"), "training", Decision.STOP),
    "j-long-run": (identity("failed", run_id=LONG_RUN), "training", Decision.STOP),
    "j-long-unknown": (identity("failed", run_id=LONG_RUN + "-gone"), "training", Decision.REPORT_ONLY),
    "j-untagged": ({"team": "ml"}, "training", Decision.REPORT_ONLY),
    "p-untagged": (None, "processing", Decision.REPORT_ONLY),
    "j-other-deployment": (identity("failed", deployment="prod-eu"), "training", Decision.REPORT_ONLY),
}
ORPHANS = {name for name, (_, _, decision) in JOBS.items() if decision is Decision.STOP}


@pytest.fixture
def jobs(sm: Any, owners: None) -> dict[str, tuple[dict[str, str] | None, str, Decision]]:
    """Every job of :data:`JOBS`, running, on a clock that stands still (nothing ends by itself)."""
    sm.load_scenario({"time_scale": 0})
    for name, (tags, kind, _) in JOBS.items():
        create(sm, name, tags, kind)
    return JOBS


@pytest.fixture
def api(client: Any) -> RestApiTaskStates:  # noqa: F811
    return RestApiTaskStates("http://testserver", token("admin", "admin")["Authorization"][7:], client=client)


def reconciler(api: RestApiTaskStates, dry_run: bool, **kwargs: Any) -> Reconciler:
    kwargs.setdefault("max_calls_per_second", None)
    return Reconciler(
        SageMakerPreferenceHook(aws_conn_id="aws_default"), api, DEPLOYMENT, dry_run=dry_run, **kwargs
    )


def stops(sm: Any) -> dict[str, int]:
    """Stop calls the emulator received, per job."""
    return {
        name: calls.get("StopTrainingJob", 0) + calls.get("StopProcessingJob", 0)
        for name, calls in sm.stats()["jobs"].items()
        if calls.get("StopTrainingJob") or calls.get("StopProcessingJob")
    }


def status(sm: Any, name: str) -> str:
    return str(sm.job(name)["status"])


# -- the decision core ------------------------------------------------------------------------------


def test_the_decision_core_never_stops_what_might_still_be_owned() -> None:
    owner = JobOwner(OWNER_DAG, "t", RUN, -1, 1, DEPLOYMENT)
    for state in (
        "running",
        "deferred",
        "queued",
        "scheduled",
        "up_for_retry",
        "up_for_reschedule",
        "restarting",
        "none",
    ):
        assert decide(owner, OwnerState(state, try_number=3)).decision is Decision.KEEP, state
    for state in ("failed", "skipped", "removed", "upstream_failed"):
        assert decide(owner, OwnerState(state)).decision is Decision.STOP, state
    assert decide(owner, OwnerState("success", handed_off=False)).decision is Decision.STOP
    assert decide(owner, OwnerState("success", handed_off=True)).decision is Decision.KEEP
    assert decide(owner, OwnerState("success", handed_off=None)).decision is Decision.KEEP
    assert decide(owner, OwnerState("something_new")).decision is Decision.KEEP
    gone = decide(owner, Gone("no DAG run 'r'"))
    assert gone.decision is Decision.STOP and "no DAG run 'r'" in gone.reason
    # Not ours to judge: no tags, unreadable tags, another deployment, incomplete identity.
    for tags, words in (
        ({}, "no sm-prefs identity tags"),
        (None, "tags unreadable"),
        (identity("t", deployment="prod-eu"), "prod-eu"),
        ({k: v for k, v in identity("t").items() if not k.endswith("run-id")}, "run-id missing"),
    ):
        verdict = identify(SeenJob("j", "training", "InProgress", tags, "AccessDenied"), DEPLOYMENT)
        assert not isinstance(verdict, JobOwner) and verdict.decision is Decision.REPORT_ONLY
        assert words in verdict.reason
    assert looks_shortened(tag_value(LONG_RUN)) and not looks_shortened(RUN)


# -- passes against the emulator and Airflow's API ------------------------------------------------


def test_a_dry_run_decides_every_job_and_stops_none(sm: Any, jobs: Any, api: RestApiTaskStates) -> None:
    report = reconciler(api, dry_run=True).run().as_dict()
    decisions = {row["job"]: row["decision"] for row in report["jobs"]}
    assert decisions == {name: decision.value for name, (_, _, decision) in jobs.items()}
    assert report["would_stop"] == len(ORPHANS) and report["stopped"] == 0 and report["errors"] == 0
    assert stops(sm) == {}
    assert {status(sm, name) for name in jobs} == {"InProgress"}
    reasons = {row["job"]: row["reason"] for row in report["jobs"]}
    assert "prod-eu" in reasons["j-other-deployment"]
    assert "no DAG run 'manual__deleted'" in reasons["j-run-deleted"]
    assert "no task instance 'renamed_task'" in reasons["j-task-gone"]
    assert "handed the running job off" in reasons["j-handed-off"]
    assert "later try" in reasons["j-running-later-try"]
    assert "shortened and matches no single run" in reasons["j-long-unknown"]


def test_stopping_stops_exactly_the_orphans_once_and_a_second_pass_stops_nothing(
    sm: Any, jobs: Any, api: RestApiTaskStates
) -> None:
    report = reconciler(api, dry_run=False).run().as_dict()
    stopped = {row["job"] for row in report["jobs"] if row["action"] == "stopped"}
    assert stopped == ORPHANS and report["errors"] == 0
    assert stops(sm) == dict.fromkeys(ORPHANS, 1)
    for name in jobs:
        assert status(sm, name) == ("Stopping" if name in ORPHANS else "InProgress"), name
    long_run = next(row for row in report["jobs"] if row["job"] == "j-long-run")
    assert long_run["run_id"] == LONG_RUN  # the shortened tag resolved to the run it stands for

    again = reconciler(api, dry_run=False).run().as_dict()
    assert again["stopped"] == 0 and again["would_stop"] == 0 and again["errors"] == 0
    assert again["seen"] == len(jobs) - len(ORPHANS)
    assert stops(sm) == dict.fromkeys(ORPHANS, 1)


def judged_claim(one: Reconciler, name: str) -> OwnerClaim:
    """The claim a pass judges job ``name`` by: the owner its tags name when it is listed."""
    described = one.hook.describe_job(JobKind.TRAINING, name)
    return OwnerClaim.of_tags(one.tags_of(described["TrainingJobArn"]))


def test_a_job_that_ended_before_its_stop_is_left_alone(sm: Any, jobs: Any, api: RestApiTaskStates) -> None:
    one = reconciler(api, dry_run=False, kinds=["training"])
    judged = judged_claim(one, "j-failed")
    assert one.stop(JobKind.TRAINING, "j-failed", judged) == "stopped"
    # Described again right before Stop: no longer InProgress, so no second Stop is sent.
    assert one.stop(JobKind.TRAINING, "j-failed", judged) == "already Stopping"
    assert stops(sm) == {"j-failed": 1}


def test_two_reconcilers_at_once_stop_each_orphan_and_never_fail(
    sm: Any, jobs: Any, api: RestApiTaskStates
) -> None:
    start = threading.Barrier(2)
    reports: list[dict[str, Any]] = []

    def run() -> None:
        each = reconciler(api, dry_run=False)
        start.wait(timeout=30)
        reports.append(each.run().as_dict())

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(reports) == 2 and all(r["errors"] == 0 for r in reports)
    for name in ORPHANS:
        assert status(sm, name) == "Stopping", name
    accepted = [row["job"] for report in reports for row in report["jobs"] if row["action"] == "stopped"]
    # Every Stop the emulator received was one a reconciler sent while it saw the job InProgress
    # (a refused one would be "already stopped"): none was sent to a job already seen Stopping.
    refused = sm.stats()["rejected"]
    assert sum(stops(sm).values()) == len(accepted) + sum(
        n for op in ("StopTrainingJob", "StopProcessingJob") for n in refused.get(op, {}).values()
    )
    assert set(accepted) == ORPHANS
    assert all(1 <= n <= 2 for n in stops(sm).values())
    again = reconciler(api, dry_run=False).run().as_dict()
    assert again["stopped"] == 0 and again["would_stop"] == 0


def test_an_unreadable_state_keeps_every_job(sm: Any, jobs: Any, client: Any) -> None:  # noqa: F811
    wrong = RestApiTaskStates("http://testserver", "not-a-token", client=client)
    with pytest.raises(StateUnavailable, match="HTTP 40"):
        wrong.check()
    report = reconciler(wrong, dry_run=False).run().as_dict()
    decisions = {row["job"]: row["decision"] for row in report["jobs"]}
    for name, (_, _, decision) in jobs.items():
        expected = Decision.REPORT_ONLY if decision is Decision.REPORT_ONLY else Decision.KEEP
        # A shortened run id is resolved first: with no readable runs it is reported, never stopped.
        if name in ("j-long-run", "j-long-unknown"):
            expected = Decision.KEEP
        assert decisions[name] == expected.value, name
    assert report["stopped"] == 0 and stops(sm) == {}


def test_calls_are_rate_limited(sm: Any, jobs: Any, api: RestApiTaskStates) -> None:
    from airflow_provider_sm_prefs.reconcile import RateLimiter

    clock = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the pass's own clock: no wall time is measured
        slept.append(seconds)
        clock[0] += seconds

    before = sum(sm.stats()["operations"].values())
    one = reconciler(api, dry_run=True, kinds=["processing"], hyperpod_groups=False)
    one.limiter = RateLimiter(10, clock=lambda: clock[0], sleep=sleep)
    one.run()
    calls = sum(sm.stats()["operations"].values()) - before
    assert calls >= 3  # ListProcessingJobs and one ListTags per processing job
    # Every call after the first waited its 0.1 s slot (the limiter's waits, not the host's speed).
    assert slept == [pytest.approx(0.1)] * (len(slept)) and len(slept) >= calls - 1
    assert clock[0] == pytest.approx(100.0 + 0.1 * len(slept))


def test_the_rate_limiter_spaces_calls_by_its_interval_and_never_waits_without_a_limit() -> None:
    from airflow_provider_sm_prefs.reconcile import RateLimiter

    clock = [0.0]
    slept: list[float] = []
    limiter = RateLimiter(4, clock=lambda: clock[0], sleep=slept.append)
    for _ in range(3):
        limiter.wait()
    assert slept == [0.25, 0.5]  # slots at 0, 0.25 and 0.5 for calls asked for at 0
    clock[0] = 10.0
    limiter.wait()
    assert slept == [0.25, 0.5]  # long after the last slot: no wait
    unlimited = RateLimiter(None, clock=lambda: clock[0], sleep=slept.append)
    unlimited.wait()
    assert slept == [0.25, 0.5]


def test_the_command_line_refuses_to_judge_without_a_readable_api(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--api-url", "http://127.0.0.1:9", "--deployment-id", DEPLOYMENT]) == 2
    assert "REST API cannot be read" in capsys.readouterr().err
    assert main(["--api-url", "http://127.0.0.1:9", "--deployment-id", ""]) == 2


# -- the maintenance DAG: the operator inside a real dag.test(), states through the Task SDK --------


def test_the_maintenance_dag_dry_runs_by_default_then_stops_the_orphans(
    sm: Any, jobs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.airflow_versions import DagBag
    from tests.test_example_dag_runs import DAGS, return_value, states_of

    monkeypatch.setenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", DEPLOYMENT)  # what the operators tagged with
    dag = DagBag(str(DAGS)).get_dag("sm_prefs_job_reconciler")

    run = dag.test()
    assert states_of(run) == {"reconcile_jobs": "success"}
    report = return_value("sm_prefs_job_reconciler", "reconcile_jobs")
    assert report["dry_run"] is True and report["deployment_id"] == DEPLOYMENT
    assert {row["job"]: row["decision"] for row in report["jobs"]} == {
        name: decision.value for name, (_, _, decision) in jobs.items()
    }
    assert report["would_stop"] == len(ORPHANS) and stops(sm) == {}

    run = dag.test(run_conf={"stop": True})
    assert states_of(run) == {"reconcile_jobs": "success"}
    report = return_value("sm_prefs_job_reconciler", "reconcile_jobs")
    assert report["dry_run"] is False and report["errors"] == 0
    assert {row["job"] for row in report["jobs"] if row["action"] == "stopped"} == ORPHANS
    assert stops(sm) == dict.fromkeys(ORPHANS, 1)
    reasons = {row["job"]: row["reason"] for row in report["jobs"]}
    assert "no DAG run 'manual__deleted'" in reasons["j-run-deleted"]
    assert "handed the running job off" in reasons["j-handed-off"]


def test_a_hand_off_without_any_xcom_is_kept(
    sm: Any, run_test_dag: Any, api: RestApiTaskStates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wait_for_completion=False with do_xcom_push=False: no return_value says the job was handed off; the
    hand-off tag its Create carried does."""
    from tests.operators.test_dag_runs import training_config as job_config

    monkeypatch.setenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", DEPLOYMENT)
    sm.load_scenario({"time_scale": 60, "job_runtime_seconds": 86400})
    prefs = [{"instance_type": "ml.g5.48xlarge", "instance_count": 1}]
    states, _ = run_test_dag(
        "t_train_handoff_quiet", config=job_config("quiet"), prefs=prefs, max_pending=3600
    )
    assert states["job"] == "success" and status(sm, "quiet") == "InProgress"
    report = reconciler(api, dry_run=False, kinds=["training"]).run().as_dict()
    (row,) = [row for row in report["jobs"] if row["job"] == "quiet"]
    assert row["decision"] == "keep" and "handed the running job off" in row["reason"], row
    assert status(sm, "quiet") == "InProgress" and stops(sm) == {}


def test_a_decoy_run_named_like_a_shortened_run_id_makes_the_job_report_only(
    sm: Any, owners: None, api: RestApiTaskStates
) -> None:
    """A run whose id *is* the shortened tag text of the real run: two runs stand for one tag. Taking the
    decoy (failed task) would stop a job whose real run still owns it."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    real = "manual__" + "r" * 260 + "#real"
    decoy = tag_value(real)
    assert decoy != real and tag_value(decoy) == decoy  # the decoy's own id is a valid tag: itself
    with create_session() as session:
        add_runs(
            session, (real, decoy), [(real, "failed", -1, "running", 1), (decoy, "failed", -1, "failed", 1)]
        )
    try:
        sm.load_scenario({"time_scale": 0})
        create(sm, "j-decoyed", identity("failed", run_id=real))
        report = reconciler(api, dry_run=False, kinds=["training"]).run().as_dict()
        (row,) = [row for row in report["jobs"] if row["job"] == "j-decoyed"]
        assert row["decision"] == Decision.REPORT_ONLY.value and "ambiguous" in row["reason"], row
        assert stops(sm) == {} and status(sm, "j-decoyed") == "InProgress"
    finally:
        with create_session() as session:
            for table in (TaskInstance, DagRun):
                session.execute(
                    delete(table.__table__).where(table.dag_id == OWNER_DAG, table.run_id.in_([real, decoy]))
                )


def test_jobs_tagged_with_an_earlier_releases_derived_id_are_reported_unless_adopted(
    sm: Any, owners: None, api: RestApiTaskStates
) -> None:
    """Every deployment with the same URL derived the same id: such a job may be another deployment's."""
    legacy = "airflow-9f99d06225e6"
    sm.load_scenario({"time_scale": 0})
    create(sm, "j-legacy", identity("failed", deployment=legacy))
    report = reconciler(api, dry_run=False, kinds=["training"], legacy_ids=[legacy]).run().as_dict()
    (row,) = [row for row in report["jobs"] if row["job"] == "j-legacy"]
    assert row["decision"] == Decision.REPORT_ONLY.value and "earlier release" in row["reason"], row
    assert stops(sm) == {}
    adopted = reconciler(api, dry_run=False, kinds=["training"], legacy_ids=[legacy], adopt_legacy_ids=True)
    (row,) = [row for row in adopted.run().as_dict()["jobs"] if row["job"] == "j-legacy"]
    assert row["decision"] == Decision.STOP.value and row["action"] == "stopped", row
    assert stops(sm) == {"j-legacy": 1}


def test_a_job_whose_tags_changed_since_the_pass_judged_it_is_not_stopped(
    sm: Any, owners: None, api: RestApiTaskStates
) -> None:
    sm.load_scenario({"time_scale": 0})
    create(sm, "j-retagged", identity("failed"))
    one = reconciler(api, dry_run=False, kinds=["training"])
    judged = judged_claim(one, "j-retagged")
    sagemaker = sm.boto3_client("sagemaker")
    arn = sagemaker.describe_training_job(TrainingJobName="j-retagged")["TrainingJobArn"]
    sagemaker.add_tags(ResourceArn=arn, Tags=[{"Key": IdentityKey.DEPLOYMENT.value, "Value": "af-other"}])
    assert one.stop(JobKind.TRAINING, "j-retagged", judged).startswith("not stopped")
    assert stops(sm) == {}


def test_two_deployments_with_the_same_dags_and_runs_stop_only_their_own(
    sm: Any, owners: None, api: RestApiTaskStates
) -> None:
    """Two deployments started from one compose file, in one account: the same DAG, task and run ids. Each
    reconciler (stop mode) sees the other's job as not its own, whatever the other's task states are."""
    sm.load_scenario({"time_scale": 0})
    create(sm, "j-ours", identity("failed", deployment=DEPLOYMENT))
    create(sm, "j-theirs", identity("failed", deployment="af-0123456789abcdef"))
    report = reconciler(api, dry_run=False, kinds=["training"]).run().as_dict()
    rows = {row["job"]: row for row in report["jobs"]}
    assert rows["j-ours"]["action"] == "stopped"
    assert rows["j-theirs"]["decision"] == Decision.REPORT_ONLY.value and rows["j-theirs"]["action"] == ""
    assert stops(sm) == {"j-ours": 1}


def test_a_real_hand_off_is_kept_and_its_task_marked_failed_afterwards_is_stopped(
    sm: Any, run_test_dag: Any, api: RestApiTaskStates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real operator run with wait_for_completion=False succeeds with its job still training."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import update

    from tests.operators.test_dag_runs import training_config as job_config

    monkeypatch.setenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", DEPLOYMENT)
    sm.load_scenario({"time_scale": 60, "job_runtime_seconds": 86400})
    prefs = [{"instance_type": "ml.g5.48xlarge", "instance_count": 1}]
    states, _ = run_test_dag("t_train_capacity", config=job_config("handoff"), prefs=prefs, max_pending=3600)
    assert states == {"job": "success", "consume": "success"}
    assert status(sm, "handoff") == "InProgress"

    report = reconciler(api, dry_run=False, kinds=["training"]).run().as_dict()
    (row,) = [row for row in report["jobs"] if row["job"] == "handoff"]
    assert row["decision"] == "keep" and "handed the running job off" in row["reason"], row
    assert status(sm, "handoff") == "InProgress" and stops(sm) == {}

    with create_session() as session:  # a user marks the task failed: nothing looks after the job now
        session.execute(
            update(TaskInstance)
            .where(TaskInstance.dag_id == "t_train_capacity", TaskInstance.run_id == row["run_id"])
            .where(TaskInstance.task_id == "job")
            .values(state="failed")
        )
    report = reconciler(api, dry_run=False, kinds=["training"]).run().as_dict()
    (row,) = [row for row in report["jobs"] if row["job"] == "handoff"]
    assert (row["decision"], row["action"]) == ("stop", "stopped"), row
    assert stops(sm) == {"handoff": 1}
