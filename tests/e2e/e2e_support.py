"""Helpers shared by the e2e tests: request and scenario builders, and the end-of-scenario checks."""

from __future__ import annotations

import itertools
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import psutil
import sqlalchemy
from e2e_reliability import Ledger

from harness import iam
from harness.deployment import LocalAirflow
from harness.rest import ACTIVE_TI_STATES
from offline_sagemaker.operations import JOB_NAME_PARAM, SERVICE_OF

ROOT = Path(__file__).resolve().parents[2]
POLICY_PATH = ROOT / "docs" / "iam-policy.json"
#: The placeholder account of docs/iam-policy.json; the emulator's account replaces it when checking.
POLICY_ACCOUNT = "111122223333"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"

#: Owner of a job: (dag_id, run_id, task_id, map_index).
Owner = tuple[str, str, str, int]


def training_config(name: str, tags: Mapping[str, str] | None = None, **resource: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
            "TrainingInputMode": "File",
        },
        "RoleArn": ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://models/out"},
        "ResourceConfig": {"VolumeSizeInGB": 50, **resource},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
    }
    if tags:
        config["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    return config


def processing_config(name: str, **cluster: Any) -> dict[str, Any]:
    return {
        "ProcessingJobName": name,
        "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
        "RoleArn": ROLE,
        "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30, **cluster}},
    }


def scenario(name: str, **overrides: Any) -> dict[str, Any]:
    """A scenario dict: plenty of everything at x60 unless overridden."""
    base: dict[str, Any] = {
        "name": name,
        "time_scale": 60,
        "job_runtime_seconds": 120,
        "phase_seconds": {"starting": 30, "downloading": 30, "uploading": 30, "stopping": 30},
        "pending_timeout_outcome": "stopped",
        "processing_when_no_capacity": "wait",
    }
    base.update(overrides)
    return base


def pending_from_timeline(job: Mapping[str, Any]) -> float:
    """Seconds a job spent with secondary status Pending, summed from the emulator's own timeline."""
    timeline = job["timeline"]
    total = 0.0
    for entry, following in itertools.pairwise(timeline):
        if entry["secondary_status"] == "Pending":
            total += following["emulated_time"] - entry["emulated_time"]
    return total


def unattended_jobs(af: LocalAirflow, owners: Mapping[str, Owner]) -> list[str]:
    """Emulator jobs still InProgress whose task is no longer looking after them.

    A job with no known owner counts as unattended: nothing in Airflow is waiting on it.
    """
    states: dict[tuple[str, str], dict[tuple[str, int], str | None]] = {}
    found = []
    for job in af.sm.jobs():
        if job["status"] != "InProgress":
            continue
        owner = owners.get(job["name"])
        if owner is None:
            found.append(f"{job['name']} (no task owns it)")
            continue
        dag_id, run_id, task_id, map_index = owner
        if (dag_id, run_id) not in states:
            states[(dag_id, run_id)] = {
                (ti["task_id"], ti["map_index"]): ti["state"] for ti in af.task_instances(dag_id, run_id)
            }
        state = states[(dag_id, run_id)].get((task_id, map_index))
        if state not in ACTIVE_TI_STATES:
            found.append(f"{job['name']} (task {task_id}[{map_index}] is {state})")
    return found


#: The placeholder deployment id of the published policies.
POLICY_DEPLOYMENT = "YOUR-DEPLOYMENT-ID"


def policy_for(account: str, deployment: str = POLICY_DEPLOYMENT) -> dict[str, Any]:
    """docs/iam-policy.json with its placeholder account and deployment id replaced."""
    text = POLICY_PATH.read_text().replace(POLICY_ACCOUNT, account).replace(POLICY_DEPLOYMENT, deployment)
    policy: dict[str, Any] = json.loads(text)
    return policy


#: The access key of a test's own reads of the offline SageMaker (:func:`observer_client`): what a test
#: checks with is not what the provider needs, so the policy check leaves its calls out.
OBSERVER_KEY = "AKIAE2EOBSERVERREADS"


def observer_client(af: LocalAirflow, service_name: str = "sagemaker", **kwargs: Any) -> Any:
    """A boto3 client for the test's own reads and set-up, signed with :data:`OBSERVER_KEY` (``kwargs``:
    the client's others, ``region_name`` for one)."""
    return af.sm.boto3_client(
        service_name, aws_access_key_id=OBSERVER_KEY, aws_secret_access_key="observer-secret", **kwargs
    )


def operations_outside_policy(af: LocalAirflow) -> list[str]:
    """AWS operations the emulator received that docs/iam-policy.json does not allow (the observer's
    calls left out)."""
    stats = af.sm.stats()
    observed = stats.get("access_keys", {}).get(OBSERVER_KEY, {})
    account = str(af.sm.scenario_dict().get("account_id", "123456789012"))
    # The policy's conditions read the tags a Create sent and a resource carries: the observer reads them.
    sagemaker = observer_client(af)
    jobs = af.sm.jobs()
    clusters = [c["ClusterArn"] for c in sagemaker.list_clusters().get("ClusterSummaries", [])]
    tags = {arn: _tags_of(af, arn) for arn in [job["arn"] for job in jobs] + clusters}
    deployments = {t["sm-prefs:deployment"] for t in tags.values() if "sm-prefs:deployment" in t}
    policy = policy_for(account, *deployments) if len(deployments) == 1 else policy_for(account)
    arn_of = {job["name"]: job["arn"] for job in jobs}
    calls = [
        iam.Call(
            "sagemaker", op, {JOB_NAME_PARAM[op]: job, **_create_tags(op, tags.get(arn_of.get(job, ""), {}))}
        )
        for job, ops in stats["jobs"].items()
        for op in ops
        if op in JOB_NAME_PARAM
    ]
    # Other operations by their service; the counts do not name the training plan a Describe was for,
    # nor the log group a Logs read was for (the policy grants both SageMaker groups alike); a cluster
    # operation is checked on every cluster (the counts do not say which one).
    calls += [
        call
        for op, count in stats["operations"].items()
        if op not in JOB_NAME_PARAM and op != "ListTags" and count > observed.get(op, 0)
        for call in _calls_of(op, clusters, tags)
    ]
    if stats["operations"].get("ListTags", 0) > observed.get("ListTags", 0):
        # The counts do not name the resource either; the provider lists the tags of jobs only (the
        # reconciler, of the jobs it finds running): one of each of the emulator's jobs.
        calls += [iam.Call("sagemaker", "ListTags", {"ResourceArn": job["arn"]}) for job in jobs]
    requests = iam.required(calls, account=account, resource_tags=tags)
    return [str(r) for r in iam.denied(policy, requests)]


def _tags_of(af: LocalAirflow, arn: str) -> dict[str, str]:
    """The tags of a job or cluster, read in its own region (a job the task moved is in another)."""
    sagemaker = observer_client(af, region_name=arn.split(":")[3])
    return {t["Key"]: t.get("Value", "") for t in sagemaker.list_tags(ResourceArn=arn).get("Tags", [])}


def _create_tags(op: str, tags: Mapping[str, str]) -> dict[str, Any]:
    """The ``Tags`` a Create sent (the resource's tags now: nothing but a Create tags it)."""
    if not op.startswith("Create") or not tags:
        return {}
    return {"Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}


def _calls_of(op: str, clusters: list[str], tags: Mapping[str, Mapping[str, str]]) -> list[iam.Call]:
    """One call per cluster for a cluster operation (its ARN as the name), else the one call."""
    if "Cluster" in op and op != "ListClusters" and clusters:
        return [
            iam.Call("sagemaker", op, {"ClusterName": arn, **_create_tags(op, tags.get(arn, {}))})
            for arn in clusters
        ]
    return [iam.Call(SERVICE_OF.get(op, "sagemaker"), op, _unnamed_resource(op))]


def _unnamed_resource(op: str) -> dict[str, str]:
    if "TrainingPlan" in op:
        return {"TrainingPlanName": "*"}
    if "Cluster" in op and op != "ListClusters":
        return {"ClusterName": "*"}
    if SERVICE_OF.get(op) == "logs":
        return {"logGroupName": "/aws/sagemaker/TrainingJobs"}
    return {}


def wait_for(
    check: Callable[[], Any],
    timeout: float,
    what: str,
    every: float = 0.25,
    detail: Callable[[], str] | None = None,
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except httpx.TimeoutException:
            # A busy api-server may answer one poll late (as harness.waits): not yet; the deadline holds.
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            more = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{more}")
        time.sleep(every)


def fault_summary(stats: Mapping[str, Any]) -> str:
    throttled = sum(stats.get("throttled", {}).values())
    errors = sum(stats.get("errors", {}).values())
    dropped = sum(stats.get("dropped", {}).values())
    calls = sum(stats.get("operations", {}).values())
    return f"{throttled} throttled + {errors} 5xx + {dropped} dropped of {calls} SageMaker calls"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def job_tis(af: LocalAirflow, run_id: str, dag_id: str = "e2e_fleet") -> list[dict[str, Any]]:
    return [ti for ti in af.task_instances(dag_id, run_id) if ti["task_id"] == "job"]


def finish(
    af: LocalAirflow,
    ledger: Ledger,
    owners: Mapping[str, Owner],
    started: float,
    **row: Any,
) -> None:
    """The checks every scenario ends with, then its row of the reliability table."""
    left = unattended_jobs(af, owners)
    outside = operations_outside_policy(af)
    ledger.record(
        jobs_created=len(af.sm.jobs()),
        unattended=len(left),
        seconds=time.monotonic() - started,
        **row,
    )
    assert left == [], f"SageMaker jobs left running with no task looking after them: {left}"
    assert outside == [], f"SageMaker calls not granted by docs/iam-policy.json: {outside}"


# The emulated clock: the fleet scenarios run at time_scale 1 and the test moves the clock past each
# phase once every task is deferred. A trigger that fires within a scheduler loop of its task's deferral
# trips an Airflow 3.3.2 scheduler race (apache/airflow#72716, see test_trigger_firing_right_after_deferral)
# that fails the task without running it (only the failure callback stops its job); the scenarios below
# are about other faults, so they
# never let a job change phase until the scheduler has seen every defer-exit (SETTLE seconds).
SETTLE = 5.0


def deferred_on(
    af: LocalAirflow,
    dag_id: str,
    run_id: str,
    task_id: str,
    count: int,
    previous: set[tuple[int, str]] | frozenset[tuple[int, str]] = frozenset(),
    timeout: float = 240.0,
    settle_seconds: float = SETTLE,
) -> set[tuple[int, str]]:
    """Until ``count`` instances of ``task_id`` are deferred on triggers not in ``previous``, then SETTLE
    (``settle_seconds``; 0 for a scenario about that race).

    Returns their triggers as ``(id, created_date)``: a task that resumes and defers again gets a new
    trigger, and SQLite may hand the new row the id of the deleted one.
    """

    def check() -> set[tuple[int, str]] | None:
        tis = [ti for ti in af.task_instances(dag_id, run_id) if ti["task_id"] == task_id]
        if len(tis) != count or any(ti["state"] != "deferred" or not ti["trigger"] for ti in tis):
            return None
        triggers = {(ti["trigger"]["id"], ti["trigger"]["created_date"]) for ti in tis}
        return triggers if not triggers & set(previous) else None

    triggers: set[tuple[int, str]] = wait_for(
        check, timeout, f"{count} × {dag_id}.{task_id} deferred on new triggers", every=1.0
    )
    time.sleep(settle_seconds)
    return triggers


def clock_scenario(name: str, **overrides: Any) -> dict[str, Any]:
    """Real-time emulated clock with long phases: nothing happens until the test advances the clock."""
    settings: dict[str, Any] = {
        "time_scale": 1,
        "job_runtime_seconds": 3600,
        "phase_seconds": {"starting": 60, "downloading": 30, "uploading": 30, "stopping": 10},
    }
    settings.update(overrides)
    return scenario(name, **settings)


def fleet_waiting_for_capacity(
    af: LocalAirflow, scenario_name: str, prefix: str, count: int, opens_at: float, free: int
) -> tuple[str, list[str]]:
    """``count`` mapped e2e_fleet tasks on [G6×1, G5×1], waiting up to a day: nothing is free until the
    test moves the emulated clock past ``opens_at``, then ``free`` of each type. Returns the run id and
    the job names, one per map index."""
    af.sm.load_scenario(
        clock_scenario(
            scenario_name,
            phase_seconds={"starting": 5, "downloading": 10, "uploading": 10, "stopping": 10},
            capacity={
                G6: [{"from": 0, "to": opens_at, "free": 0}, {"from": opens_at, "free": free}],
                G5: [{"from": 0, "to": opens_at, "free": 0}, {"from": opens_at, "free": free}],
            },
        )
    )
    prefs = [{"instance_type": G6, "instance_count": 1}, {"instance_type": G5, "instance_count": 1}]
    run_id = af.trigger_dag(
        "e2e_fleet",
        {
            "config": training_config("x"),
            "prefs": prefs,
            "max_pending": 86400,
            "count": count,
            "name_prefix": prefix,
        },
    )
    return run_id, [f"{prefix}-{i:03d}" for i in range(count)]


# -- the work a scenario leaves behind ---------------------------------------------------------------------

#: The triggerer sends the callback of a task it ended to the DAG processor (Airflow's own line).
_CALLBACK_SENT = re.compile(
    r"Sending callback: filepath='(?P<file>[^']*)'.*?ti=TaskInstance\(id=UUID\('(?P<ti>[0-9a-f-]{36})'\), "
    r"task_id='(?P<task>[^']*)', dag_id='(?P<dag>[^']*)', run_id='(?P<run>[^']*)'"
)
#: The DAG processor's file processor runs one (Airflow's own line, in dag_processor/<day>/<bundle>/<file>.log;
#: Airflow 3.0 names no task instance in it) ...
_CALLBACK_RUN = re.compile(
    r'"timestamp":"(?P<at>[^"]+)".*?"event":"Executing Task callback at index \d+: [^"]*?'
    r'(?:\(ti_id=(?P<ti>[0-9a-f-]{36})\))?"'
)
#: ... or finds that the task has none, or that it is not a failure callback (the triggerer sends one for
#: every task it ends, success included; Airflow 3.0 names the task by DAG, task and run in that line).
_CALLBACK_NONE = re.compile(
    r'"timestamp":"(?P<at>[^"]+)".*?"event":"(?:Callback requested but no callback found|'
    r'Task callback requested but is not a failure callback)"(?P<fields>.*)'
)
_FIELD = re.compile(r'"(dag_id|task_id|run_id|ti_id)":"([^"]*)"')
_UUID = re.compile(r"[0-9a-f-]{36}")


def callbacks_started(
    sent_texts: list[str], processor_logs: Mapping[str, str]
) -> tuple[set[str], dict[str, float]]:
    """The callbacks the triggerer sent (task instance ids) and when a DAG file processor started each.

    :param sent_texts: the triggerer logs.
    :param processor_logs: the DAG processor's per-file logs: ``(file name, text)``, the name ``<DAG file>.log``.
    """
    sent = {m["ti"]: m for text in sent_texts for m in _CALLBACK_SENT.finditer(text)}
    by_task: dict[tuple[str, str, str], list[str]] = {}
    by_file: dict[str, list[str]] = {}
    for ti, m in sent.items():
        by_task.setdefault((m["dag"], m["task"], m["run"]), []).append(ti)
        by_file.setdefault(m["file"], []).append(ti)
    started: dict[str, float] = {}

    def mark(tis: list[str], at: str) -> None:
        stamp = datetime.fromisoformat(at.replace("Z", "+00:00"))
        when = (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).timestamp()  # 3.0: UTC, no Z
        for ti in tis:
            started[ti] = max(when, started.get(ti, 0.0))

    for name, text in processor_logs:
        for m in _CALLBACK_RUN.finditer(text):
            # Without an id (Airflow 3.0): one of the callbacks sent for this file; counted for all of
            # them, which only ever makes the wait for its file processor longer, never shorter.
            mark([m["ti"]] if m["ti"] else by_file.get(name.removesuffix(".log"), []), m["at"])
        for m in _CALLBACK_NONE.finditer(text):
            fields = dict(_FIELD.findall(m["fields"]))
            ti_id = _UUID.search(fields.get("ti_id", ""))
            if ti_id:
                mark([ti_id.group(0)], m["at"])
            else:
                mark(
                    by_task.get(
                        (fields.get("dag_id", ""), fields.get("task_id", ""), fields.get("run_id", "")), []
                    ),
                    m["at"],
                )
    return set(sent), started


#: The title of a task process (Airflow's task runner; LocalExecutor and Celery workers alike).
_TASK_PROCESS = re.compile(r"^airflow worker -- [0-9a-f-]{36}$")


def settle(af: LocalAirflow, timeout: float = 120.0) -> None:
    """Until the work of the scenarios so far has ended, so that none of it reaches the next scenario.

    A DAG run is ``failed`` before its tasks' failure callbacks have run: a task process reports its
    state, then runs ``on_failure_callback`` (Airflow's ``finalize``); a task the triggerer ended gets
    its callback from the DAG processor, seconds later (a parse of its DAG file first). The provider's
    callback describes the task's job: run after the next scenario reset the offline SageMaker, that
    call lands in the next scenario's counts. Settled means, each from Airflow's own evidence:

    - no task process of the deployment is alive (its callbacks ran before it exited);
    - no callback waits in the metadata database for the DAG processor;
    - every callback the triggerer sent was started by a DAG file processor (its "Executing Task
      callback" line), and every file processor started before the last such line has exited.
    """
    url = af.database.airflow_env()["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    seen_waiting: set[str] = set()
    why = ["not looked yet"]
    try:
        wait_for(
            lambda: _settled(af, engine, seen_waiting, why),
            timeout,
            "the scenarios' work to end",
            every=0.5,
            detail=lambda: why[0],
        )
    finally:
        engine.dispose()


def _settled(af: LocalAirflow, engine: sqlalchemy.Engine, seen_waiting: set[str], why: list[str]) -> bool:
    """Whether the deployment is settled (see :func:`settle`); else ``why[0]`` says what still runs."""
    names = list(af.supervisor.procs)
    tasks = [t for name in names for t in _titles(af.members(name)) if _TASK_PROCESS.match(t)]
    if tasks:
        why[0] = f"task processes alive: {tasks}"
        return False
    waiting = _waiting_callbacks(engine)
    if waiting:
        # Remember whose callbacks waited: once fetched, their rows are gone but they are still owed.
        seen_waiting.update(ti for ti in waiting if ti)
        why[0] = f"callbacks waiting for the DAG processor, of task instances {waiting}"
        return False
    sent, started = callbacks_started(
        [_read(path) for path in af.log_dir.glob("triggerer*.log")],
        [(path.name, _read(path)) for path in (af.log_dir / "dag_processor").rglob("*.log")],
    )
    owed_ids = sent | seen_waiting
    if owed_ids - started.keys():
        why[0] = f"callbacks sent, not started by the DAG processor: {sorted(owed_ids - started.keys())}"
        return False
    owed = [started[ti] for ti in owed_ids]
    if not owed:
        return True
    processor = af.supervisor.procs.get("dag-processor")
    leader = processor.pid if processor is not None else None
    last = max(owed)
    running = [pid for pid in af.members("dag-processor") if pid != leader and _created(pid) <= last + 1.0]
    why[0] = f"DAG file processors that may still run a callback: {running} ({_titles(running)})"
    return not running


def _waiting_callbacks(engine: sqlalchemy.Engine) -> list[str | None]:
    """The task instance ids of the callbacks waiting for the DAG processor in the metadata database
    (table ``callback`` since Airflow 3.1, ``callback_request`` before; rows are deleted once fetched)."""
    if sqlalchemy.inspect(engine).has_table("callback"):
        query = "SELECT data FROM callback WHERE type = 'dag_processor'"
    else:
        query = "SELECT callback_data FROM callback_request"
    with engine.connect() as conn:
        return [_callback_ti(row[0]) for row in conn.execute(sqlalchemy.text(query))]


def _callback_ti(value: Any) -> str | None:
    """The task instance id of a stored callback request (JSON, the request itself JSON-encoded in it)."""
    data = json.loads(value) if isinstance(value, str) else value
    request = data.get("req_data", data) if isinstance(data, dict) else data
    if isinstance(request, str):
        request = json.loads(request)
    ti = request.get("ti") if isinstance(request, dict) else None
    return str(ti["id"]) if isinstance(ti, dict) and "id" in ti else None


def _titles(pids: list[int]) -> list[str]:
    titles = []
    for pid in pids:
        try:
            # setproctitle pads argv with empty strings.
            titles.append(" ".join(part for part in psutil.Process(pid).cmdline() if part).strip())
        except psutil.Error:
            continue
    return titles


def _created(pid: int) -> float:
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return float("inf")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
