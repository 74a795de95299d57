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

from harness.deployment import LocalAirflow, local_airflow
from harness.reconciling import ReconcilerLoop
from harness.redis import REDIS
from harness.rest import TERMINAL_RUN_STATES
from harness.soak import MemorySampler
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
_LINEAGE = re.compile(r"^(?P<base>.+?-\d{3})(?:-r(?P<submission>\d+))?(?:-s(?P<stage>\d+))?$")
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


def plan_fleet(fleet: int, seed: int, prefix: str) -> list[dict[str, Any]]:
    """The mapped tasks' arguments: 60 % ``fallback``, 20 % ``window``, 20 % ``timeout`` (at least one
    of each), shuffled by ``seed``. Each carries its kind in a tag."""
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
    return [
        {
            "config": training_config(
                f"{prefix}-{i:03d}", max_runtime_seconds=86400, tags={"chaos-kind": kind}
            ),
            "instance_preferences": prefs[kind],
            "max_pending": TIGHT_PENDING if kind == "timeout" else RELAXED_PENDING,
        }
        for i, kind in enumerate(kinds)
    ]


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

    def __init__(self, af: LocalAirflow, plan: Sequence[PlannedKill], run: ChaosRun, run_id: str) -> None:
        self.af = af
        self.plan = list(plan)
        self.run = run
        self.run_id = run_id
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
        for job in jobs[:5]:
            match = _LINEAGE.match(job["name"])
            if match is None or job["status"] in TERMINAL_JOB:
                continue
            ti = tis.get(int(match["base"].rsplit("-", 1)[1]))
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


def check(af: LocalAirflow, run_id: str, specs: Sequence[Mapping[str, Any]], prefix: str) -> dict[str, Any]:
    """The invariants and task outcomes of a finished run (see the module's docstring)."""
    kinds = {i: _kind(spec) for i, spec in enumerate(specs)}
    owners = {f"{prefix}-{i:03d}": i for i in kinds}
    tis = [ti for ti in patient(lambda: af.task_instances(DAG_ID, run_id)) if ti["task_id"] == TASK_ID]
    jobs = af.sm.jobs()
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


def run_chaos(af: LocalAirflow, *, fleet: int, kills: int, seed: int, timeout: float) -> dict[str, Any]:
    """Run the fleet under the kill plan against a started Celery deployment; returns the report."""
    prefix = f"chaos{seed}"
    specs = plan_fleet(fleet, seed, prefix)
    plan = plan_kills(kills, seed)
    af.sm.load_scenario(scenario())
    af.sm.set_faults(response_latency_ms={"CreateTrainingJob": CREATE_LATENCY_MS})
    af.wait_for_dags([DAG_ID], timeout=240)
    run = ChaosRun(seed=seed, fleet=fleet, kills_planned=len(plan))
    run_id = af.trigger_dag(DAG_ID, {"tasks": specs}, run_id=f"chaos-{seed}-{int(time.time())}")
    _log(f"triggered {DAG_ID} {run_id}: {fleet} tasks {dict(Counter(_kind(s) for s in specs))}")
    driver = Driver(af, plan, run, run_id)
    deadline = time.monotonic() + timeout

    def finished() -> bool:
        with contextlib.suppress(Exception):
            return bool(af.dag_run(DAG_ID, run_id)["state"] in TERMINAL_RUN_STATES)
        return time.monotonic() > deadline

    keeper = Keeper(
        af.supervisor,
        hold=lambda: set(driver.down),
        on_restart=lambda name, code: _log(f"{name} exited ({code}); restarted, as its orchestrator would"),
    )
    with keeper, MemorySampler(af, components=memory_components(af)) as memory, ReconcilerLoop(af) as rec:
        driver.drive(lambda: finished() or time.monotonic() > deadline)
        _log(f"{len(run.kills)} kills done; waiting for the run to finish")
        while not finished() and time.monotonic() < deadline:
            time.sleep(2)
        timed_out = not finished()
        if timed_out:
            _log(f"the run did not finish within {timeout:.0f}s; failing it")
            af.fail_active_runs()
        # Stops of jobs whose task ended come from failure callbacks and trigger cleanups: let them land.
        _settle_jobs(af, 60)
        memory.sample()
    af.sm.set_faults(response_latency_ms={})
    result = check(af, run_id, specs, prefix)
    result["reconciler"] = rec.ledger.as_dict()
    if timed_out:
        result["foreign_failures"].append(f"the run did not finish within {timeout:.0f}s")
    run.exits = [f"{name} (exit {code})" for name, code in keeper.restarts]
    return report(af, run, plan, result, memory, seconds=run.elapsed())


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
        f"`python -m harness.chaos --fleet {data['fleet']} --kills {len(data['plan'])} --seed {data['seed']}` "
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
    return "\n".join(lines) + "\n"


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
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    root = args.root or Path(tempfile.mkdtemp(prefix="sm-prefs-chaos-"))
    _log(f"starting the Celery deployment in {root}")
    with local_airflow(root, executor="celery", poll_interval=2.0, max_poll_interval=5.0) as af:
        data = run_chaos(af, fleet=args.fleet, kills=args.kills, seed=args.seed, timeout=args.timeout)
    write_report(data)
    _log(f"report: {RUN_MD}")
    print(render_markdown(data))
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
