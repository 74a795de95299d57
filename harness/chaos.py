"""Chaos at any instant in the production topology: ``make chaos`` (``python -m harness.chaos``).

One :class:`~harness.deployment.LocalAirflow` with ``executor="celery"`` (Redis broker, two Celery
workers, two schedulers, two triggerers, api-server, dag-processor, PostgreSQL) runs ``e2e_chaos``: a
fleet of mapped training tasks with retries, each with its own list (:func:`plan_fleet`):

* ``fallback``: g6 x1, g5 x1, p4d x1; capacity is scarce, so most fall back or wait Pending;
* ``window``: g6 x1, then g5 x1 acceptable after :data:`WINDOW` emulated seconds (acceptance-window
  stages: stage 1 waits for g6 alone, stage 2 ``-s2`` takes either);
* ``timeout``: p5 x1, which never has capacity, with the shortest pending budget SageMaker takes: each try
  fails with ``CapacityTimeoutError`` (the failures the scenario sets).

The offline SageMaker runs its clock at :data:`TIME_SCALE` x real time and answers every
``CreateTrainingJob`` :data:`CREATE_LATENCY_MS` late *after* creating the job, so a worker killed in that
window dies between recording the job's name and Create's answer.

While the fleet runs, a driver seeded by ``--seed`` kills (``kill -9`` of the whole process group) a
component at random instants and restarts it after a random pause (:func:`plan_kills`): workers (one of
them on purpose while a Create is in flight, its task's own worker), schedulers, triggerers, the
api-server, the dag-processor, and the Redis broker and PostgreSQL once each. Same seed, same schedule:
the components, the gaps between kills and the pauses (the instants a kill lands on depend on how fast the
machine runs).

Afterwards, from the offline SageMaker's own ledger of jobs and Airflow's REST API (:func:`check`):

* **duplicates**: two jobs of one task alive at once (a task's jobs are its base name and the ``-rN``
  resubmissions and ``-sN`` stages; each must have ended ``Failed``/``Stopped`` before the next was
  created), or a job no task owns;
* **unattended**: jobs not ended once every task has ended;
* **foreign failures**: failed tasks other than the ``timeout`` ones, or a ``timeout`` task whose log does
  not show ``CapacityTimeoutError``;
* **records**: every successful task's XCom record (job name, ARN, selected type and count, rank, status)
  against the job's ``DescribeTrainingJob``;
* **wrong stops**: the reconciler runs throughout (:mod:`harness.reconciling`, a ``--stop`` pass every
  30 s, failing passes counted while the api-server or the database is down); a job it stopped whose
  task still owned it (running, deferred, queued, scheduled, up for retry) is a wrong stop. Its stop
  count is reported.

With ``--deployments 2`` a second deployment runs beside the first, started from the same defaults (neither
sets ``[sm_prefs] deployment_id``, so each generates its own id and keeps it in its Airflow Variable): the
LocalExecutor with one scheduler and one triggerer, its own ``AIRFLOW_HOME`` and PostgreSQL server, the
first one's offline SageMaker (one AWS account) and an AWS access key id of its own (the offline SageMaker
counts calls per access key id). Both run ``e2e_chaos`` with the same run id and the same fleet, without a
job name in the config: the operator derives each name from the task instance and the deployment id, the
scheme every deployment uses. Each has its own reconciler loop in stop mode; the kills hit the first. The
invariants above are checked per deployment (a job belongs to the deployment its ``sm-prefs:deployment``
tag names), and besides:

* **foreign stops** (:func:`foreign_stops`): a job of one deployment stopped by the other's reconciler
  (its ledger names the jobs it stopped), a ``StopTrainingJob`` of a job no deployment owns, and
  ``StopTrainingJob`` calls reaching one deployment's jobs beyond those its own access key sent (the
  emulator's ledger counts the calls per job and per access key id); and the two generated ids must
  differ.

It writes ``build/reliability/chaos.json`` and ``chaos.md`` (kills by component and instant, invariants,
task outcomes, peak memory per component) and exits non-zero unless every invariant holds;
``make reliability-doc`` publishes the report into docs/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx

from airflow_provider_sm_prefs.domain.identity import IdentityKey
from airflow_provider_sm_prefs.hooks.sagemaker import derive_job_name
from harness.config import FAKE_SECRET_ACCESS_KEY, connection_credentials
from harness.deployment import LocalAirflow, local_airflow
from harness.memory import MemorySampler
from harness.reconciling import ReconcilerLoop
from harness.redis import REDIS
from harness.rest import TERMINAL_RUN_STATES
from harness.supervisor import Keeper
from offline_sagemaker.jobs import training_config

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "build" / "reliability"
RUN_JSON = RUN_DIR / "chaos.json"
RUN_MD = RUN_DIR / "chaos.md"

DAG_ID = "e2e_chaos"
TASK_ID = "job"
G6, G5, P4D, P5 = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge"
#: Emulated seconds per real second.
TIME_SCALE = 60
#: Emulated job lifecycle (seconds): at 60x a job trains 30 real seconds.
PHASES = {"starting": 60, "downloading": 30, "uploading": 30, "stopping": 30}
JOB_RUNTIME = 1800
#: Instances free all the time: fewer than the fleet, so jobs wait Pending for those that finish, and the
#: one g6 keeps most ``window`` tasks in stage 1 until stage 2 opens.
CAPACITY = {G6: 1, G5: 4, P4D: 2, P5: 0}
#: When stage 2 of a ``window`` task opens (emulated seconds after stage 1's creation).
WINDOW = 900
#: SageMaker's minimum MaxPendingTimeInSeconds: the ``timeout`` tasks' budget.
TIGHT_PENDING = 1800
RELAXED_PENDING = 6 * 3600
#: Create answers this late after creating the job: the instant a worker dies without the answer.
CREATE_LATENCY_MS = 3000
KINDS = ("fallback", "window", "timeout")
#: Components killed at random; the broker and the database are restarted once each besides.
RANDOM_TARGETS = ("worker", "worker-2", "scheduler", "scheduler-2", "triggerer", "triggerer-2", "api-server")
ONCE_TARGETS = (REDIS, "postgres", "dag-processor", "worker-mid-create")
CAPACITY_TIMEOUT_MARK = "CapacityTimeoutError"
#: A task's jobs: its base name (``<prefix>-NNN`` given in the config, or the operator's derived
#: ``<dag>-<task>-<map index>-<10 hex digits>``), then ``-rN`` resubmissions and ``-sN`` stages.
_LINEAGE = re.compile(
    r"^(?P<base>.+?-(?:\d{3}|[0-9a-f]{10}))(?:-r(?P<submission>\d+))?(?:-s(?P<stage>\d+))?$"
)
#: The second deployment's AWS access key id (the first keeps aws_default's): the offline SageMaker counts
#: calls per access key id, which tells the two deployments' StopTrainingJob calls apart.
SECOND_ACCESS_KEY_ID = "AKIASMPREFSDEPLOYB02"
#: The Airflow Variable a deployment keeps its generated id in (operators/identity.py).
DEPLOYMENT_VARIABLE = "sm_prefs_deployment_id"
STOP_OPERATION = "StopTrainingJob"
#: The identity tag naming the deployment that created a job.
DEPLOYMENT_TAG = IdentityKey.DEPLOYMENT.value
TERMINAL_JOB = ("Completed", "Failed", "Stopped")
T = TypeVar("T")


def patient(call: Callable[[], T], seconds: float = 180.0) -> T:
    """``call()``, asked again while the api-server is down (killed) or answers late."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2.0)


def _log(message: str) -> None:
    print(f"[chaos {datetime.now(timezone.utc):%H:%M:%S}] {message}", flush=True)


# -- the plan ----------------------------------------------------------------------------------------------


def plan_fleet(fleet: int, seed: int, prefix: str | None) -> list[dict[str, Any]]:
    """The mapped tasks' arguments: 60 % ``fallback``, 20 % ``window``, 20 % ``timeout`` (at least one
    of each), shuffled by ``seed``. Each carries its kind in a tag. Job names ``<prefix>-NNN``; with
    ``prefix`` None the config gives none and the operator derives each (unique per deployment)."""
    rng = random.Random(f"fleet:{seed}")
    windows = timeouts = max(1, fleet // 5)
    kinds = ["window"] * windows + ["timeout"] * timeouts
    kinds += ["fallback"] * (fleet - len(kinds))
    rng.shuffle(kinds)
    prefs = {
        "fallback": [
            {"instance_type": G6, "instance_count": 1},
            {"instance_type": G5, "instance_count": 1},
            {"instance_type": P4D, "instance_count": 1},
        ],
        "window": [
            {"instance_type": G6, "instance_count": 1},
            {"instance_type": G5, "instance_count": 1, "accept_after": WINDOW},
        ],
        "timeout": [{"instance_type": P5, "instance_count": 1}],
    }
    specs = []
    for i, kind in enumerate(kinds):
        config = training_config(f"{prefix}-{i:03d}", max_runtime_seconds=86400, tags={"chaos-kind": kind})
        if prefix is None:
            del config["TrainingJobName"]
        specs.append(
            {
                "config": config,
                "instance_preferences": prefs[kind],
                "max_pending": TIGHT_PENDING if kind == "timeout" else RELAXED_PENDING,
            }
        )
    return specs


def fleet_owners(
    specs: Sequence[Mapping[str, Any]], run_id: str, deployment_id: str | None
) -> dict[str, int]:
    """Each task's base job name and its map index: the config's name, else the one the operator derives
    for the task instance in the deployment ``deployment_id`` (:func:`derive_job_name`)."""
    owners = {}
    for index, spec in enumerate(specs):
        given = spec["config"].get("TrainingJobName")
        owners[str(given or derive_job_name(DAG_ID, TASK_ID, run_id, index, deployment_id))] = index
    return owners


def scenario() -> dict[str, Any]:
    """The offline SageMaker's world for the run."""
    return {
        "name": "chaos",
        "time_scale": TIME_SCALE,
        "job_runtime_seconds": JOB_RUNTIME,
        "phase_seconds": dict(PHASES),
        "pending_timeout_outcome": "stopped",
        "capacity": {t: [{"from": 0, "free": n}] for t, n in CAPACITY.items()},
    }


@dataclass
class PlannedKill:
    """One kill of the schedule: ``gap`` real seconds after the previous restart, ``target`` down for
    ``pause`` seconds."""

    target: str
    gap: float
    pause: float


def plan_kills(kills: int, seed: int) -> list[PlannedKill]:
    """``kills`` kills (at least one per :data:`ONCE_TARGETS` entry and per kind of component): the
    once-only targets at seeded places in the first half (a Create is in flight early, when tasks submit),
    the rest drawn from :data:`RANDOM_TARGETS`."""
    rng = random.Random(f"kills:{seed}")
    kills = max(kills, len(ONCE_TARGETS) + 4)
    targets = [rng.choice(RANDOM_TARGETS) for _ in range(kills - len(ONCE_TARGETS))]
    for kind in ("worker", "scheduler", "triggerer", "api-server"):  # every kind at least once
        if not any(t.partition("-")[0] == kind.partition("-")[0] for t in targets):
            targets[rng.randrange(len(targets))] = kind
    half = max(1, kills // 2)
    for once in ONCE_TARGETS:
        targets.insert(0 if once == "worker-mid-create" else rng.randrange(1, half), once)
    return [
        PlannedKill(target=t, gap=round(rng.uniform(2.0, 9.0), 1), pause=round(rng.uniform(1.0, 6.0), 1))
        for t in targets
    ]


# -- the driver --------------------------------------------------------------------------------------------


@dataclass
class KillRecord:
    target: str
    component: str
    at_seconds: float
    pause: float
    processes: int
    instant: str
    restarted: bool = True


@dataclass
class ChaosRun:
    """State and results of one run."""

    seed: int
    fleet: int
    kills_planned: int
    kills: list[KillRecord] = field(default_factory=list)
    #: Components that exited on their own (e.g. a scheduler whose database went away), restarted.
    exits: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 1)


class Driver:
    """Kills and restarts components of ``af`` by the plan while ``done()`` is false."""

    def __init__(
        self,
        af: LocalAirflow,
        plan: Sequence[PlannedKill],
        run: ChaosRun,
        run_id: str,
        owners: Callable[[], Mapping[str, int]],
    ) -> None:
        self.af = af
        self.plan = list(plan)
        self.run = run
        self.run_id = run_id
        #: ``af``'s tasks' base job names and map indexes (the names may wait on its deployment id).
        self.owners = owners
        #: Components down on purpose right now: the keeper leaves them alone.
        self.down: set[str] = set()

    def drive(self, done: Callable[[], bool]) -> None:
        for planned in self.plan:
            if _sleep_unless(done, planned.gap):
                _log(f"the fleet finished before {len(self.plan) - len(self.run.kills)} planned kills")
                return
            record = self.kill(planned)
            self.run.kills.append(record)
            _log(
                f"kill {len(self.run.kills)}: {record.component} ({record.processes} processes) "
                f"{record.instant}; down {record.pause}s"
            )

    def kill(self, planned: PlannedKill) -> KillRecord:
        af, at = self.af, self.run.elapsed()
        target, instant = planned.target, "at a random instant"
        if target == "worker-mid-create":
            target, instant = self._worker_mid_create()
            at = self.run.elapsed()
        if target == "postgres":
            pg = af.postgres
            assert pg is not None
            processes = pg.kill()
            time.sleep(planned.pause)
            pg.start_again()
        else:
            self.down.add(target)
            try:
                processes = len(af.kill_process(target, signal.SIGKILL))
                time.sleep(planned.pause)
                if target == REDIS:
                    af.start_broker()
                else:
                    af.restart(target)
            finally:
                self.down.discard(target)
        return KillRecord(planned.target, target, at, planned.pause, processes, instant)

    def _worker_mid_create(self) -> tuple[str, str]:
        """The worker running a task whose Create took effect and whose answer has not arrived."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            in_flight = self.af.sm.stats().get("in_flight", {}).get("CreateTrainingJob", 0)
            if in_flight:
                found = self._worker_of_newest_job()
                if found is not None:
                    worker, job = found
                    return worker, f"while Create of {job} was in flight (created, answer not yet sent)"
            time.sleep(0.05)
        return "worker", "at a random instant (no Create was in flight within 120 s)"

    def _worker_of_newest_job(self) -> tuple[str, str] | None:
        from harness.supervisor import task_pids

        jobs = sorted(self.af.sm.jobs(), key=lambda j: j["created_at"], reverse=True)
        tis = {
            ti["map_index"]: ti
            for ti in patient(lambda: self.af.task_instances(DAG_ID, self.run_id))
            if ti["task_id"] == TASK_ID
        }
        leaders = {proc.pid: name for name, proc in self.af.supervisor.procs.items()}
        owners = self.owners()
        for job in jobs[:5]:
            index = owners.get(lineage(job["name"]) or "")
            if index is None or job["status"] in TERMINAL_JOB:
                continue  # ended, or another deployment's
            ti = tis.get(index)
            if ti is None or ti["state"] != "running":
                continue
            pid: Any = task_pids(ti["id"]).get("task") or ti.get("pid")
            with contextlib.suppress(OSError, TypeError, ValueError):
                worker = leaders.get(os.getsid(int(pid)))
                if worker is not None and worker.startswith("worker"):
                    return worker, job["name"]
        return None


def _sleep_unless(done: Callable[[], bool], seconds: float) -> bool:
    """Sleep ``seconds`` unless ``done()`` turns true first (checked every second); returns ``done()``."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if done():
            return True
        time.sleep(min(1.0, max(0.0, until - time.monotonic())))
    return done()


# -- the invariants ----------------------------------------------------------------------------------------


def lineage(name: str) -> str | None:
    """The task's base job name of one of its jobs (``-rN`` resubmissions, ``-sN`` stages stripped)."""
    match = _LINEAGE.match(name)
    return match["base"] if match else None


def ended_at(job: Mapping[str, Any]) -> float | None:
    """When a job reached its terminal status (emulated epoch), None while it has not."""
    if job["status"] not in TERMINAL_JOB:
        return None
    return float(job["last_modified"])


def duplicates_of(jobs: Sequence[Mapping[str, Any]], owners: Mapping[str, int]) -> list[str]:
    """Jobs created while another job of the same task had not ended, and jobs no task owns."""
    by_task: dict[str, list[Mapping[str, Any]]] = {}
    found = []
    for job in jobs:
        base = lineage(job["name"])
        if base is None or base not in owners:
            found.append(f"{job['name']} (no task owns it)")
            continue
        by_task.setdefault(base, []).append(job)
    for members in by_task.values():
        members.sort(key=lambda j: j["created_at"])
        for i, later in enumerate(members[1:], start=1):
            for earlier in members[:i]:
                end = ended_at(earlier)
                if end is None or end > later["created_at"] or earlier["status"] == "Completed":
                    found.append(f"{later['name']} (while {earlier['name']} was {earlier['status']})")
    return found


def record_mismatches(record: Mapping[str, Any], describe: Mapping[str, Any]) -> list[str]:
    """Where a task's XCom record and its job's DescribeTrainingJob disagree."""
    resources = describe.get("ResourceConfig") or {}
    prefs = resources.get("InstancePreferences") or []
    selected = resources.get("SelectedInstanceType")
    ranks = [i + 1 for i, p in enumerate(prefs) if p.get("InstanceType") == selected]
    expected = {
        "job_name": describe["TrainingJobName"],
        "job_arn": describe["TrainingJobArn"],
        "selected_instance_type": selected,
        "selected_instance_count": resources.get("SelectedInstanceCount"),
        "preference_rank": ranks[0] if ranks else None,
        "job_status": describe["TrainingJobStatus"],
    }
    return [
        f"{key}: XCom {record.get(key)!r}, Describe {value!r}"
        for key, value in expected.items()
        if record.get(key) != value
    ]


def check(
    af: LocalAirflow,
    run_id: str,
    specs: Sequence[Mapping[str, Any]],
    owners: Mapping[str, int],
    jobs: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The invariants and task outcomes of a finished run of ``af`` (see the module's docstring).

    :param owners: its tasks' base job names and map indexes (:func:`fleet_owners`).
    :param jobs: its jobs in the offline SageMaker's ledger (with two deployments, those its tag names).
    """
    kinds = {i: _kind(spec) for i, spec in enumerate(specs)}
    tis = [ti for ti in patient(lambda: af.task_instances(DAG_ID, run_id)) if ti["task_id"] == TASK_ID]
    client = af.sm.boto3_client("sagemaker")
    unattended = [f"{j['name']} ({j['status']})" for j in jobs if j["status"] not in TERMINAL_JOB]
    capacity_timeouts: list[str] = []
    foreign: list[str] = []
    records_checked = 0
    mismatches: list[str] = []
    tries: Counter[int] = Counter()
    for ti in tis:
        index, state = int(ti["map_index"]), ti["state"]
        tries[int(ti["try_number"])] += 1
        where = f"{DAG_ID}.{TASK_ID}[{index}] ({kinds.get(index)})"
        if state == "failed":
            log = patient(partial(af.task_log, DAG_ID, run_id, TASK_ID, map_index=index))
            if kinds.get(index) == "timeout" and CAPACITY_TIMEOUT_MARK in log:
                capacity_timeouts.append(where)
            else:
                foreign.append(f"{where}: " + " ".join(log.splitlines()[-3:])[-400:])
        elif state == "success":
            if kinds.get(index) == "timeout":
                foreign.append(f"{where}: succeeded though its list never has capacity")
            record = patient(partial(af.xcom, DAG_ID, run_id, TASK_ID, map_index=index))
            describe = client.describe_training_job(TrainingJobName=record["job_name"])
            records_checked += 1
            mismatches += [f"{where}: {m}" for m in record_mismatches(record, describe)]
        else:
            foreign.append(f"{where}: ended {state}")
    jobs_by_kind: Counter[str] = Counter()
    for job in jobs:
        base = lineage(job["name"])
        jobs_by_kind[kinds.get(owners.get(base or "", -1), "unowned")] += 1
    return {
        "task_states": dict(Counter(str(ti["state"]) for ti in tis)),
        "task_tries": {str(k): v for k, v in sorted(tries.items())},
        "tasks_by_kind": dict(Counter(kinds.values())),
        "jobs_created": len(jobs),
        "jobs_by_kind": dict(jobs_by_kind),
        "jobs_stages": sum(1 for j in jobs if re.search(r"-s\d+$", j["name"])),
        "jobs_resubmitted": sum(1 for j in jobs if re.search(r"-r\d+(-s\d+)?$", j["name"])),
        "fell_back": sum(1 for j in jobs if (j.get("selected_rank") or 1) > 1),
        "waited_pending": sum(1 for j in jobs if (j.get("waited_seconds") or 0) > 0),
        "duplicates": duplicates_of(jobs, owners),
        "unattended": unattended,
        "capacity_timeouts": capacity_timeouts,
        "foreign_failures": foreign,
        "records_checked": records_checked,
        "record_mismatches": mismatches,
    }


def _kind(spec: Mapping[str, Any]) -> str:
    tags = {t["Key"]: t["Value"] for t in spec["config"].get("Tags", [])}
    return str(tags.get("chaos-kind", "fallback"))


def passed(result: Mapping[str, Any]) -> bool:
    return (
        not any(result[key] for key in ("duplicates", "unattended", "foreign_failures", "record_mismatches"))
        and result["records_checked"] > 0
        and not result.get("reconciler", {}).get("wrong_stops")
    )


# -- the run -----------------------------------------------------------------------------------------------


def foreign_stops(
    owner_of: Mapping[str, str | None],
    stopped_by: Mapping[str, Sequence[str]],
    stop_calls: Mapping[str, int],
    sent: Mapping[str, int],
    total: int,
) -> dict[str, Any]:
    """Stops of a job by a deployment other than the one that owns it, from what each side recorded.

    :param owner_of: each job's owner: the deployment id its ``sm-prefs:deployment`` tag names (None:
        untagged, or no such job).
    :param stopped_by: per deployment id, the jobs its reconciler stopped (its ledger).
    :param stop_calls: per job, the ``StopTrainingJob`` calls the offline SageMaker received.
    :param sent: per deployment id, the ``StopTrainingJob`` calls signed with its access key id.
    :param total: every ``StopTrainingJob`` call the offline SageMaker received.

    Found: a job a reconciler stopped whose tag names another deployment (exactly attributed); a stop of a
    job no deployment owns; calls reaching a deployment's jobs beyond those its own key sent (a lower bound
    of the other side's stops of its jobs: the ledger counts calls per job and per key, not per pair); and
    calls signed by no deployment's key. ``count`` adds them up.
    """
    items: list[str] = []
    count = 0
    for deployment, jobs in stopped_by.items():
        for job in jobs:
            if owner_of.get(job) != deployment:
                items.append(f"{job} (of {owner_of.get(job)}) stopped by the reconciler of {deployment}")
                count += 1
    received: Counter[str] = Counter()
    for job, calls in sorted(stop_calls.items()):
        owner = owner_of.get(job)
        if owner is not None and owner in sent:
            received[owner] += calls
        elif calls:
            items.append(f"{job} (owned by no deployment: tag {owner}) received {calls} {STOP_OPERATION}")
            count += calls
    for deployment, own in sent.items():
        extra = received[deployment] - own
        if extra > 0:
            items.append(
                f"{extra} {STOP_OPERATION} calls reached the jobs of {deployment} beyond the {own} it sent"
            )
            count += extra
    unsigned = total - sum(sent.values())
    if unsigned > 0:
        items.append(f"{unsigned} {STOP_OPERATION} calls signed by no deployment's access key")
        count += unsigned
    return {
        "count": count,
        "items": items,
        "sent": dict(sent),
        "received": {d: received[d] for d in sent},
        "total_calls": total,
    }


@dataclass
class Deployment:
    """One deployment of a run: its Airflow, its fleet's run, and what tells its calls and jobs apart."""

    label: str
    af: LocalAirflow
    run_id: str
    specs: Sequence[Mapping[str, Any]]
    #: Its ``aws_default`` connection's access key id (the offline SageMaker counts calls by it).
    access_key_id: str
    #: Its generated id (the Airflow Variable), once a task created it.
    deployment_id: str | None = None
    #: Its reconciler loop (``--stop`` passes) while the fleet runs.
    loop: ReconcilerLoop = field(init=False)
    #: Its run had not ended by the deadline (and was failed).
    timed_out: bool = False

    def __post_init__(self) -> None:
        self.loop = ReconcilerLoop(self.af)

    def run_ended(self) -> bool:
        """Whether its run of the fleet has ended (False while its api-server does not answer)."""
        with contextlib.suppress(Exception):
            return bool(self.af.dag_run(DAG_ID, self.run_id)["state"] in TERMINAL_RUN_STATES)
        return False

    def read_deployment_id(self) -> str | None:
        """The id the deployment generated (its Airflow Variable), read over its REST API; None before
        any task created it or while the api-server is down."""
        if self.deployment_id is None:
            with contextlib.suppress(Exception):
                self.deployment_id = str(
                    self.af.api("GET", f"/api/v2/variables/{DEPLOYMENT_VARIABLE}")["value"]
                ).strip()
        return self.deployment_id

    def owners(self) -> dict[str, int]:
        """Its tasks' base job names (derived names need its id: none before it exists)."""
        named = all(spec["config"].get("TrainingJobName") for spec in self.specs)
        if not named and self.read_deployment_id() is None:
            return {}
        return fleet_owners(self.specs, self.run_id, self.deployment_id)


def second_deployment(root: Path, first: LocalAirflow, **kwargs: Any) -> LocalAirflow:
    """The second deployment of ``--deployments 2``, not started: the LocalExecutor with one scheduler and
    one triggerer, its own ``AIRFLOW_HOME`` and PostgreSQL server under ``root``, ``first``'s offline
    SageMaker, and an ``aws_default`` connection of its own access key id (:data:`SECOND_ACCESS_KEY_ID`).
    Neither sets ``[sm_prefs] deployment_id``: each generates its own."""
    sm = first.sm
    connection = {
        "conn_type": "aws",
        "login": SECOND_ACCESS_KEY_ID,
        "password": FAKE_SECRET_ACCESS_KEY,
        "extra": {"endpoint_url": sm.endpoint_url, "region_name": sm.region},
    }
    return LocalAirflow(
        root,
        executor="local",
        database="postgres",
        emulator_url=sm.endpoint_url,
        extra_env={"AIRFLOW_CONN_AWS_DEFAULT": json.dumps(connection)},
        **{
            "poll_interval": 2.0,
            "max_poll_interval": 5.0,
            "parallelism": 16,
            "startup_timeout": 480.0,
            **kwargs,
        },
    )


def run_chaos(
    af: LocalAirflow,
    *,
    fleet: int,
    kills: int,
    seed: int,
    timeout: float,
    others: Sequence[LocalAirflow] = (),
) -> dict[str, Any]:
    """Run the fleet under the kill plan against a started Celery deployment; returns the report.

    :param others: started deployments sharing ``af``'s offline SageMaker (:func:`second_deployment`):
        each runs the same fleet with the same run id and its own reconciler loop; the kills hit ``af``.
    """
    prefix = f"chaos{seed}" if not others else None
    specs = plan_fleet(fleet, seed, prefix)
    plan = plan_kills(kills, seed)
    af.sm.load_scenario(scenario())
    af.sm.set_faults(response_latency_ms={"CreateTrainingJob": CREATE_LATENCY_MS})
    for each in (af, *others):
        each.wait_for_dags([DAG_ID], timeout=240)
    run = ChaosRun(seed=seed, fleet=fleet, kills_planned=len(plan))
    run_id = f"chaos-{seed}-{int(time.time())}"
    deployments = [
        Deployment(
            label=chr(ord("A") + i),
            af=each,
            run_id=run_id,
            specs=specs,
            access_key_id=connection_credentials(each.env, "aws_default")["aws_access_key_id"],
        )
        for i, each in enumerate((af, *others))
    ]
    for d in deployments:
        d.af.trigger_dag(DAG_ID, {"tasks": specs}, run_id=run_id)
        _log(
            f"triggered {DAG_ID} {run_id} in {d.label}: {fleet} tasks {dict(Counter(_kind(s) for s in specs))}"
        )
    first = deployments[0]
    driver = Driver(af, plan, run, run_id, first.owners)
    deadline = time.monotonic() + timeout

    def finished() -> bool:
        return all(d.run_ended() for d in deployments) or time.monotonic() > deadline

    keepers = [
        Keeper(
            d.af.supervisor,
            hold=(lambda: set(driver.down)) if d.af is af else set,
            on_restart=partial(_restarted, d.label if others else ""),
        )
        for d in deployments
    ]
    with contextlib.ExitStack() as stack:
        for keeper in keepers:
            stack.enter_context(keeper)
        memory = stack.enter_context(MemorySampler(af, components=memory_components(af)))
        for d in deployments:
            stack.enter_context(d.loop)
        driver.drive(finished)
        _log(f"{len(run.kills)} kills done; waiting for the run to finish")
        while not finished():
            time.sleep(2)
        for d in deployments:
            d.timed_out = not d.run_ended()
            if d.timed_out:
                _log(f"the run of {d.label} did not finish within {timeout:.0f}s; failing it")
                d.af.fail_active_runs()
        # Stops of jobs whose task ended come from failure callbacks and trigger cleanups: let them land.
        _settle_jobs(af, 60)
        memory.sample()
    af.sm.set_faults(response_latency_ms={})
    jobs = af.sm.jobs()
    tags = job_tags(af, jobs) if others else {}
    results = [check_deployment(d, jobs, tags if others else None, timeout) for d in deployments]
    run.exits = [f"{name} (exit {code})" for keeper in keepers for name, code in keeper.restarts]
    data = report(af, run, plan, results[0], memory, seconds=run.elapsed())
    if others:
        data.update(shared_sagemaker_report(af, deployments, results, jobs, tags))
        data["ok"] = bool(data["ok"] and data["shared_ok"])
    return data


def check_deployment(
    d: Deployment,
    jobs: Sequence[Mapping[str, Any]],
    tags: Mapping[str, Mapping[str, str]] | None,
    timeout: float,
) -> dict[str, Any]:
    """:func:`check` of one deployment, over the jobs its tag names (``tags`` None: every job is its)."""
    mine = jobs
    if tags is not None:
        deployment_id = d.read_deployment_id()
        mine = [j for j in jobs if tags.get(j["name"], {}).get(DEPLOYMENT_TAG) == deployment_id]
    result = check(d.af, d.run_id, d.specs, d.owners(), mine)
    result["reconciler"] = d.loop.ledger.as_dict()
    if d.timed_out:
        result["foreign_failures"].append(f"the run did not finish within {timeout:.0f}s")
    return result


def _restarted(label: str, name: str, code: int) -> None:
    where = f" of {label}" if label else ""
    _log(f"{name}{where} exited ({code}); restarted, as its orchestrator would")


def job_tags(af: LocalAirflow, jobs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Each job's tags (ListTags), read from the offline SageMaker as anyone would."""
    client = af.sm.boto3_client("sagemaker")
    found = {}
    for job in jobs:
        pages = client.get_paginator("list_tags").paginate(ResourceArn=job["arn"])
        found[job["name"]] = {t["Key"]: t["Value"] for page in pages for t in page.get("Tags", [])}
    return found


def shared_sagemaker_report(
    af: LocalAirflow,
    deployments: Sequence[Deployment],
    results: Sequence[Mapping[str, Any]],
    jobs: Sequence[Mapping[str, Any]],
    tags: Mapping[str, Mapping[str, str]],
) -> dict[str, Any]:
    """The two-deployment part of the report: each deployment's id and invariants, the foreign stops, the
    jobs no deployment owns."""
    ids = [d.deployment_id for d in deployments]
    stats = af.sm.stats()
    stop_calls = {
        name: int(ops.get(STOP_OPERATION, 0))
        for name, ops in stats.get("jobs", {}).items()
        if ops.get(STOP_OPERATION)
    }
    owner_of = {name: tags.get(name, {}).get(DEPLOYMENT_TAG) for name in {*stop_calls, *tags}}
    foreign = foreign_stops(
        owner_of,
        {str(d.deployment_id): list(d.loop.ledger.stopped) for d in deployments},
        stop_calls,
        {
            str(d.deployment_id): int(
                stats.get("access_keys", {}).get(d.access_key_id, {}).get(STOP_OPERATION, 0)
            )
            for d in deployments
        },
        int(stats.get("operations", {}).get(STOP_OPERATION, 0)),
    )
    unowned = [
        f"{j['name']} (tag {tags.get(j['name'], {}).get(DEPLOYMENT_TAG)})"
        for j in jobs
        if tags.get(j["name"], {}).get(DEPLOYMENT_TAG) not in ids
    ]
    ids_differ = None not in ids and len(set(ids)) == len(ids)
    return {
        "deployments": [
            {
                "label": d.label,
                "executor": "CeleryExecutor" if d.af.config.executor == "celery" else "LocalExecutor",
                "schedulers": d.af.config.schedulers,
                "triggerers": d.af.config.triggerers,
                "workers": d.af.config.workers,
                "deployment_id": d.deployment_id,
                "access_key_id": d.access_key_id,
                "run_id": d.run_id,
                "killed": d.af is af,
                "result": dict(result),
                "ok": passed(result),
            }
            for d, result in zip(deployments, results, strict=True)
        ],
        "deployment_ids_differ": ids_differ,
        "foreign_stops": foreign,
        "unowned_jobs": unowned,
        "shared_ok": ids_differ
        and foreign["count"] == 0
        and not unowned
        and all(passed(result) for result in results),
    }


def memory_components(af: LocalAirflow) -> tuple[str, ...]:
    from harness.emulator import EMULATOR

    return (*af.config.components, REDIS, EMULATOR, "postgres")


def _settle_jobs(af: LocalAirflow, seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if all(j["status"] in TERMINAL_JOB for j in af.sm.jobs()):
            return
        time.sleep(1)


def report(
    af: LocalAirflow,
    run: ChaosRun,
    plan: Sequence[PlannedKill],
    result: Mapping[str, Any],
    memory: MemorySampler,
    *,
    seconds: float,
) -> dict[str, Any]:
    from airflow import __version__ as airflow_version

    by_component = Counter(k.component.rstrip("-0123456789") for k in run.kills)
    return {
        "seed": run.seed,
        "fleet": run.fleet,
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "airflow_version": airflow_version,
        "topology": {
            "executor": "CeleryExecutor",
            "broker": "Redis (redis-server, append-only file)",
            "workers": af.config.workers,
            "worker_concurrency": af.config.worker_concurrency,
            "schedulers": af.config.schedulers,
            "triggerers": af.config.triggerers,
            "metadata_db": "PostgreSQL",
        },
        "cpus": os.cpu_count(),
        "seconds": seconds,
        "time_scale": TIME_SCALE,
        "create_latency_ms": CREATE_LATENCY_MS,
        "plan": [asdict(p) for p in plan],
        "kills": [asdict(k) for k in run.kills],
        "kills_by_component": dict(sorted(by_component.items())),
        "exits": run.exits,
        "memory_samples": memory.samples,
        "peak_rss_mib": memory.peak_mib(),
        "result": dict(result),
        "ok": passed(result) and len(run.kills) >= min(len(plan), 1),
    }


def render_markdown(data: Mapping[str, Any], heading: str = "##") -> str:
    """The report as markdown (a section of docs/reliability.md, and build/reliability/chaos.md)."""
    r, topo = data["result"], data["topology"]
    lines = [
        f"{heading} Chaos at any instant (CeleryExecutor topology)",
        "",
        f"`python -m harness.chaos --fleet {data['fleet']} --kills {len(data['plan'])} --seed {data['seed']}"
        f"{' --deployments 2' if data.get('deployments') else ''}` "
        f"(`make chaos`): Airflow {data['airflow_version']}, {topo['executor']} on {topo['broker']}, "
        f"{topo['workers']} Celery workers x {topo['worker_concurrency']} slots, {topo['schedulers']} schedulers, "
        f"{topo['triggerers']} triggerers, api-server, dag-processor, {topo['metadata_db']}; "
        f"{data['cpus']} CPUs shared with other work; recorded {data['recorded_at']}, wall time "
        f"{data['seconds'] / 60:.1f} min. The offline SageMaker's clock ran at {data['time_scale']}x and every "
        f"CreateTrainingJob answered {data['create_latency_ms']} ms after creating its job.",
        "",
        f"**Invariants**: duplicate jobs {len(r['duplicates'])}, jobs left running {len(r['unattended'])}, "
        f"tasks failed for another reason than their set capacity timeout {len(r['foreign_failures'])}, "
        f"XCom records differing from Describe {len(r['record_mismatches'])} of {r['records_checked']} checked. "
        f"{'All hold.' if data['ok'] else '**Not all hold.**'}",
        "",
        _reconciler_line(r.get("reconciler")),
        "",
        f"**Tasks**: {data['fleet']} mapped ({_pairs(r['tasks_by_kind'])}); final states {_pairs(r['task_states'])}; "
        f"tries {_pairs(r['task_tries'])}; capacity timeouts {len(r['capacity_timeouts'])}. "
        f"**Jobs**: {r['jobs_created']} created ({_pairs(r['jobs_by_kind'])}), {r['jobs_resubmitted']} "
        f"resubmissions, {r['jobs_stages']} acceptance-window stages, {r['fell_back']} fell back, "
        f"{r['waited_pending']} waited Pending.",
        "",
        f"**Kills** ({len(data['kills'])}; {_pairs(data['kills_by_component'])}), each `kill -9` of the "
        "component's whole process group, restarted after the pause:",
        "",
        "| # | At (s) | Component | Processes | Instant | Down (s) |",
        "|---|---|---|---|---|---|",
    ]
    for i, k in enumerate(data["kills"], start=1):
        lines.append(
            f"| {i} | {k['at_seconds']:.0f} | {k['component']} | {k['processes']} | {k['instant']} | {k['pause']} |"
        )
    peaks = data["peak_rss_mib"]
    exits = Counter(e.split(" ")[0] for e in data["exits"])
    lines += [
        "",
        f"Components that exited on their own and were restarted, as Kubernetes or systemd restarts them "
        f"({len(data['exits'])}): {_pairs(exits)}.",
        "",
        f"Peak resident memory per component (MiB; the sum over the processes of its group, sampled "
        f"{data['memory_samples']} times):",
        "",
        "| " + " | ".join(peaks) + " |",
        "|" + "---|" * len(peaks),
        "| " + " | ".join(f"{v:.0f}" for v in peaks.values()) + " |",
    ]
    for title, key in (
        ("Duplicates", "duplicates"),
        ("Left running", "unattended"),
        ("Other failures", "foreign_failures"),
        ("Record mismatches", "record_mismatches"),
    ):
        if r[key]:
            lines += ["", f"{title}:", *(f"- {item}" for item in r[key])]
    wrong = (r.get("reconciler") or {}).get("wrong_stops")
    if wrong:
        lines += ["", "Wrong stops:", *(f"- {item}" for item in wrong)]
    if data.get("deployments"):
        lines += ["", *_shared_sagemaker_markdown(data, heading + "#")]
    return "\n".join(lines) + "\n"


def _shared_sagemaker_markdown(data: Mapping[str, Any], heading: str) -> list[str]:
    """The per-deployment section of a ``--deployments 2`` run."""
    foreign = data["foreign_stops"]
    lines = [
        f"{heading} Two deployments sharing one offline SageMaker",
        "",
        "Both started from the same defaults (no `[sm_prefs] deployment_id`: each generated its own id), ran "
        "`e2e_chaos` with the same run id and the same fleet, job names derived by the operator, and a "
        "reconciler loop in stop mode each; the kills hit deployment A. Invariants per deployment (a job is "
        "the deployment's its `sm-prefs:deployment` tag names):",
        "",
        "| Deployment | Topology | Generated id | Tasks | Jobs | Duplicates | Left running | Other failures "
        "| Record mismatches | Reconciler stopped | Wrong stops | StopTrainingJob sent / received | Holds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in data["deployments"]:
        r = d["result"]
        topology = f"{d['executor']}, {d['schedulers']} scheduler(s), {d['triggerers']} triggerer(s)"
        if d["workers"]:
            topology += f", {d['workers']} workers"
        topology += ", killed" if d["killed"] else ", not killed"
        key = str(d["deployment_id"])
        lines.append(
            f"| {d['label']} | {topology} | `{d['deployment_id']}` | {_pairs(r['task_states'])} | "
            f"{r['jobs_created']} | {len(r['duplicates'])} | {len(r['unattended'])} | "
            f"{len(r['foreign_failures'])} | {len(r['record_mismatches'])} of {r['records_checked']} | "
            f"{len(r['reconciler']['stopped'])} | {len(r['reconciler']['wrong_stops'])} | "
            f"{foreign['sent'].get(key, 0)} / {foreign['received'].get(key, 0)} | "
            f"{'yes' if d['ok'] else '**no**'} |"
        )
    lines += [
        "",
        f"**Generated ids differ**: {'yes' if data['deployment_ids_differ'] else '**no**'}. "
        f"**Foreign stops** (a job of one deployment stopped by the other's reconciler or calls; "
        f"{foreign['total_calls']} StopTrainingJob calls in all): **{foreign['count']}**. "
        f"Jobs no deployment owns: {len(data['unowned_jobs'])}.",
    ]
    for d in data["deployments"]:
        r = d["result"]
        for title, items in (
            ("duplicates", r["duplicates"]),
            ("left running", r["unattended"]),
            ("other failures", r["foreign_failures"]),
            ("wrong stops", r["reconciler"]["wrong_stops"]),
        ):
            if items:
                lines += ["", f"{d['label']}, {title}:", *(f"- {item}" for item in items)]
    if foreign["items"]:
        lines += ["", "Foreign stops:", *(f"- {item}" for item in foreign["items"])]
    if data["unowned_jobs"]:
        lines += ["", "Jobs no deployment owns:", *(f"- {item}" for item in data["unowned_jobs"])]
    return lines


def _reconciler_line(ledger: Mapping[str, Any] | None) -> str:
    if not ledger:
        return "**Reconciler**: not run."
    return (
        f"**Reconciler** (a `sm-prefs-reconcile --stop` pass every 30 s throughout): {ledger['passes']} passes "
        f"({ledger['failed_passes']} could not run while a component was down), {len(ledger['stopped'])} jobs "
        f"stopped, **{len(ledger['wrong_stops'])} wrong stops** (a job whose task still owned it), "
        f"{ledger['errors']} errors."
    )


def _pairs(counts: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def write_report(data: Mapping[str, Any], json_path: Path = RUN_JSON, md_path: Path = RUN_MD) -> None:
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    md_path.write_text(render_markdown(data), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", type=int, default=50, help="mapped training tasks (default 50)")
    parser.add_argument("--kills", type=int, default=20, help="kills, at least (default 20)")
    parser.add_argument("--seed", type=int, default=1, help="seeds the fleet and the kill schedule")
    parser.add_argument("--timeout", type=float, default=1800.0, help="real seconds the run may take")
    parser.add_argument("--root", type=Path, default=None, help="deployment directory (default: temporary)")
    parser.add_argument(
        "--deployments",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: a second deployment (LocalExecutor, its own database) shares the offline SageMaker, runs "
        "the same fleet with the same run id and its own reconciler; foreign stops are counted (default 1)",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    root = args.root or Path(tempfile.mkdtemp(prefix="sm-prefs-chaos-"))
    _log(f"starting the Celery deployment in {root}")
    with contextlib.ExitStack() as stack:
        af = stack.enter_context(
            local_airflow(root, executor="celery", poll_interval=2.0, max_poll_interval=5.0)
        )
        others = []
        if args.deployments == 2:
            _log(
                f"starting the second deployment (LocalExecutor) in {root / 'second'}, sharing {af.emulator_url}"
            )
            others.append(stack.enter_context(second_deployment(root / "second", af)))
        data = run_chaos(
            af, fleet=args.fleet, kills=args.kills, seed=args.seed, timeout=args.timeout, others=others
        )
    write_report(data)
    _log(f"report: {RUN_MD}")
    print(render_markdown(data))
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
