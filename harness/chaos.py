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

This module drives the run and reads its outcome; the rest has its own module, and every name stays
importable from here, where the tests, ``make chaos`` and the reliability page find it: the plan
(:mod:`harness.chaos_plan`), the verdicts (:mod:`harness.chaos_accounting`), the report
(:mod:`harness.chaos_report`) and the deployments, the second one included
(:mod:`harness.chaos_deployments`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx

from harness.chaos_accounting import (
    STOP_OPERATION,
    TERMINAL_JOB,
    duplicates_of,
    ended_at,
    foreign_stops,
    lineage,
    passed,
    record_mismatches,
)
from harness.chaos_deployments import (
    DEPLOYMENT_TAG,
    DEPLOYMENT_VARIABLE,
    SECOND_ACCESS_KEY_ID,
    Deployment,
    job_tags,
    second_deployment,
    shared_sagemaker_report,
)
from harness.chaos_plan import (
    CAPACITY,
    CREATE_LATENCY_MS,
    DAG_ID,
    G5,
    G6,
    JOB_RUNTIME,
    KINDS,
    ONCE_TARGETS,
    P4D,
    P5,
    PHASES,
    RANDOM_TARGETS,
    RELAXED_PENDING,
    TASK_ID,
    TIGHT_PENDING,
    TIME_SCALE,
    WINDOW,
    PlannedKill,
    fleet_owners,
    plan_fleet,
    plan_kills,
    scenario,
)
from harness.chaos_plan import kind_of as _kind
from harness.chaos_report import (
    RUN_JSON,
    RUN_MD,
    ChaosRun,
    KillRecord,
    render_markdown,
    report,
    write_report,
)
from harness.config import connection_credentials
from harness.deployment import LocalAirflow, local_airflow
from harness.memory import MemorySampler
from harness.redis import REDIS
from harness.soak_accounting import CAPACITY_TIMEOUT_MARK
from harness.soak_report import ROOT, RUN_DIR
from harness.supervisor import Keeper

# Every name the run had before its split, importable from here (tests, ``make chaos``, the reliability page).
__all__ = [
    "CAPACITY",
    "CAPACITY_TIMEOUT_MARK",
    "CREATE_LATENCY_MS",
    "DAG_ID",
    "DEPLOYMENT_TAG",
    "DEPLOYMENT_VARIABLE",
    "G5",
    "G6",
    "JOB_RUNTIME",
    "KINDS",
    "ONCE_TARGETS",
    "P4D",
    "P5",
    "PHASES",
    "RANDOM_TARGETS",
    "RELAXED_PENDING",
    "ROOT",
    "RUN_DIR",
    "RUN_JSON",
    "RUN_MD",
    "SECOND_ACCESS_KEY_ID",
    "STOP_OPERATION",
    "TASK_ID",
    "TERMINAL_JOB",
    "TIGHT_PENDING",
    "TIME_SCALE",
    "WINDOW",
    "ChaosRun",
    "Deployment",
    "Driver",
    "KillRecord",
    "PlannedKill",
    "check",
    "check_deployment",
    "duplicates_of",
    "ended_at",
    "fleet_owners",
    "foreign_stops",
    "job_tags",
    "lineage",
    "main",
    "memory_components",
    "passed",
    "patient",
    "plan_fleet",
    "plan_kills",
    "record_mismatches",
    "render_markdown",
    "report",
    "run_chaos",
    "scenario",
    "second_deployment",
    "shared_sagemaker_report",
    "write_report",
]

T = TypeVar("T")


def patient(call: Callable[[], T], seconds: float = 180.0) -> T:
    """``call()``, asked again while the api-server is down (killed) or answers late.

    Not the soak's ``patient`` (:mod:`harness.soak`), which retries a few late answers only: here the
    api-server is killed on purpose, so a refused connection is retried too, until a deadline."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2.0)


def _log(message: str) -> None:
    """A progress line, stamped and marked as the chaos run's (a soak or e2e run may print beside it)."""
    print(f"[chaos {datetime.now(timezone.utc):%H:%M:%S}] {message}", flush=True)


# -- the driver --------------------------------------------------------------------------------------------


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


# -- the outcome ------------------------------------------------------------------------------------------


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


# -- the run -----------------------------------------------------------------------------------------------


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


def memory_components(af: LocalAirflow) -> tuple[str, ...]:
    """The components whose peak memory the report gives: ``af``'s (the Celery ones: workers, several
    schedulers and triggerers), the broker, the offline SageMaker and PostgreSQL."""
    from harness.emulator import EMULATOR

    return (*af.config.components, REDIS, EMULATOR, "postgres")


def _settle_jobs(af: LocalAirflow, seconds: float) -> None:
    """Wait up to ``seconds`` for every job to end, before the ledger is read."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if all(j["status"] in TERMINAL_JOB for j in af.sm.jobs()):
            return
        time.sleep(1)


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
