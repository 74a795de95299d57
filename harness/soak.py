"""A week of nights under faults: the nightly example DAG and a 50-task mapped DAG, night after night.

``make soak`` (``python -m harness.soak --nights 7 --fleet 50 --seed N``) starts one :class:`LocalAirflow`
(or drives one it is given: :func:`run_soak`) and, for each night, loads a capacity scenario of the
offline SageMaker, triggers ``sm_prefs_nightly_retrain`` and ``e2e_fleet`` (``--fleet`` mapped training
tasks) through the REST API with a logical date one day after the previous night's, and compresses the
night by moving the emulated clock. Faults come at seeded random moments: throttling, HTTP 5xx and
dropped connections on the SageMaker API, one ``kill -9`` of the triggerer's session and one of the
scheduler's (each restarted) during the week.

The clock is frozen (``time_scale: 0``) and moves only in steps of :data:`STEP` emulated seconds, taken
once every unfinished task of the night is deferred and has been for :data:`SETTLE` seconds: a trigger
that fires right after its task deferred trips an Airflow 3.3.2 scheduler race (apache/airflow#72716)
that fails tasks without running them, which is not what this soak measures. The process kills happen at
such a step (a seeded random one of the night's first two) too: a kill of the scheduler's session also
kills the task processes it runs, and ``e2e_fleet`` has no retries.

After each night it counts, from Airflow's REST API and the emulator's ledger, before the next night's
scenario resets the emulator:

* DAG runs and their states; SageMaker jobs created;
* **duplicates**: the operators name a task's job deterministically (a base name; ``-r2``, ``-r3`` ...
  only for a new submission after the previous job of the same task ended ``Failed``/``Stopped``, or a
  clear). A job is a duplicate when it belongs to the same task's lineage (base name) as another job and
  was created while that earlier job had not ended ``Failed``/``Stopped``; a job no task of the night
  owns counts too;
* **unattended**: jobs still ``InProgress`` whose task is no longer running, deferred, queued or retrying;
* **failures**: every failed task instance's last log is read; one showing the provider's
  ``CapacityTimeoutError`` is an injected capacity failure, any other is a *foreign* failure;
* peak RSS of each component, sampled every :data:`SAMPLE_EVERY` seconds over all processes of its
  session (the scheduler's includes its LocalExecutor workers and task processes; PostgreSQL's the
  postmaster and its backends).

It writes ``build/reliability/soak.json`` and ``soak.md`` and exits non-zero when duplicates, unattended
jobs or foreign failures are not all 0; ``make reliability-doc`` publishes the JSON into ``docs/soak.json``
and renders it as a section of ``docs/reliability.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx

from harness.config import COMPONENTS, default_dags_folders
from harness.deployment import LocalAirflow, local_airflow
from harness.emulator import EMULATOR
from harness.rest import ACTIVE_TI_STATES, TERMINAL_RUN_STATES, TERMINAL_TI_STATES
from offline_sagemaker.jobs import training_config

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "build" / "reliability"
RUN_JSON = RUN_DIR / "soak.json"
RUN_MD = RUN_DIR / "soak.md"

NIGHTLY = "sm_prefs_nightly_retrain"
FLEET = "e2e_fleet"
DAGS = (NIGHTLY, FLEET)
#: Tasks that may sit without a state while the night is quiet: they wait on a deferred upstream.
DOWNSTREAM = {NIGHTLY: frozenset({"evaluate", "report"}), FLEET: frozenset[str]()}
G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"
#: Components whose peak memory is reported, in this order.
MEMORY_COMPONENTS = (*COMPONENTS, EMULATOR, "postgres")

#: Nights of ``make soak``.
WEEK = 7
#: Emulated seconds the clock moves per step.
STEP = 900
#: Real seconds every unfinished task must have been deferred, unchanged, before the clock moves.
SETTLE = 5.0
#: Before a night's faults switch off, every kind has happened at least once: a missing kind is raised
#: to this rate for at most FAULT_TOP_UP_SECONDS (the waiting triggers keep calling).
FAULT_TOP_UP_RATE = 0.5
FAULT_TOP_UP_SECONDS = 90.0
SAMPLE_EVERY = 1.5
#: Emulated job lifecycle: a job needs capacity at the end of Starting and trains JOB_RUNTIME seconds.
PHASES = {"starting": 60, "downloading": 30, "uploading": 30, "stopping": 10}
JOB_RUNTIME = 1800
#: The fleet's pending budget on the capacity-timeout night: shorter than any job frees its instance.
TIGHT_PENDING = 1800
RELAXED_PENDING = 7200
KINDS = ("plenty", "first-choice-scarce", "late-window", "capacity-timeout")
CAPACITY_TIMEOUT_MARK = "CapacityTimeoutError"
T = TypeVar("T")
_LINEAGE = re.compile(r"^(?P<base>.+?)(?:-r(?P<submission>\d+))?$")


@dataclass
class NightPlan:
    """What one night does: its capacity, its API faults and when, and whether a component is killed."""

    index: int
    kind: str
    throttle_rate: float
    error_rate: float
    drop_rate: float
    #: Faults switch on at this step (-1: as the runs are triggered) and off at ``faults_off_step``.
    faults_on_step: int
    faults_off_step: int
    kill_triggerer_step: int | None = None
    kill_scheduler_step: int | None = None
    down_seconds: float = 3.0
    first_choice_free: int = 0


def plan_week(nights: int, fleet: int, seed: int) -> list[NightPlan]:
    """The seeded plan: one capacity-timeout night, one triggerer kill and one scheduler kill."""
    rng = random.Random(seed)
    timeout_night = rng.randrange(nights)
    kinds = [
        rng.choice(("plenty", "first-choice-scarce", "first-choice-scarce", "late-window"))
        for _ in range(nights)
    ]
    kinds[timeout_night] = "capacity-timeout"
    if nights >= 3 and "first-choice-scarce" not in kinds:
        kinds[(timeout_night + 1) % nights] = "first-choice-scarce"
    triggerer_night, scheduler_night = rng.randrange(nights), rng.randrange(nights)
    plans = []
    for i in range(nights):
        on = rng.randint(-1, 1)
        plans.append(
            NightPlan(
                index=i + 1,
                kind=kinds[i],
                throttle_rate=round(rng.uniform(0.05, 0.3), 3),
                error_rate=round(rng.uniform(0.01, 0.06), 3),
                drop_rate=round(rng.uniform(0.02, 0.06), 3),
                faults_on_step=on,
                faults_off_step=on + rng.randint(1, 3),
                kill_triggerer_step=rng.randint(0, 1) if i == triggerer_night else None,
                kill_scheduler_step=rng.randint(0, 1) if i == scheduler_night else None,
                down_seconds=round(rng.uniform(2.0, 8.0), 1),
                first_choice_free=rng.randint(0, max(1, fleet // 4)),
            )
        )
    return plans


def night_scenario(plan: NightPlan, fleet: int) -> tuple[dict[str, Any], int]:
    """The emulator scenario of a night and the fleet's ``max_pending`` for it.

    The nightly example asks for G6×2, G5×4, P4D×2; the fleet for G6×1, G5×1. P4D always has 2 free, so
    the example finds capacity every night; the fleet's capacity is what the night is about.
    """
    plenty = fleet + 8
    capacity: dict[str, list[dict[str, Any]]]
    pending = RELAXED_PENDING
    if plan.kind == "plenty":
        capacity = {G6: [{"from": 0, "free": plenty}], G5: [{"from": 0, "free": plenty}]}
    elif plan.kind == "first-choice-scarce":
        capacity = {G6: [{"from": 0, "free": plan.first_choice_free}], G5: [{"from": 0, "free": plenty}]}
    elif plan.kind == "late-window":
        # Nothing frees for the first 2 emulated hours, then everything does: every task waits.
        opens = 1800
        capacity = {
            G6: [{"from": 0, "to": opens, "free": 0}, {"from": opens, "free": plenty}],
            G5: [{"from": 0, "to": opens, "free": 0}, {"from": opens, "free": plenty}],
        }
    else:
        # At most 60 % of the fleet fits on G5, fewer when the example's G5×4 gets there first (else the
        # example falls back to P4D): the rest waits, and no job frees an instance before the pending
        # deadline (Starting + Downloading + runtime > TIGHT_PENDING). Whatever the order of submission,
        # at least 40 % of the fleet times out.
        pending = TIGHT_PENDING
        capacity = {G6: [{"from": 0, "free": 0}], G5: [{"from": 0, "free": math.ceil(0.6 * fleet)}]}
    capacity[P4D] = [{"from": 0, "free": 2}]
    scenario = {
        "name": f"soak-night-{plan.index}-{plan.kind}",
        "time_scale": 0,
        "job_runtime_seconds": JOB_RUNTIME,
        "phase_seconds": dict(PHASES),
        "pending_timeout_outcome": "stopped",
        "processing_when_no_capacity": "wait",
        "capacity": capacity,
    }
    return scenario, pending


# -- memory ------------------------------------------------------------------------------------------------


class MemorySampler:
    """Peak RSS (sum over a component's processes) of every component, sampled in a thread."""

    def __init__(
        self, af: LocalAirflow, every: float = SAMPLE_EVERY, components: Sequence[str] = MEMORY_COMPONENTS
    ) -> None:
        self.af = af
        self.every = every
        self.components = tuple(components)
        self.peak: dict[str, int] = dict.fromkeys(self.components, 0)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-memory", daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _postgres_pids(self) -> set[int]:
        pg = self.af.postgres
        if pg is None or pg.data is None:
            return set()
        pidfile = pg.data / "data" / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError):
            import psutil

            leader = int(pidfile.read_text().split()[0])
            proc = psutil.Process(leader)
            return {leader, *(child.pid for child in proc.children(recursive=True))}
        return set()

    def sample(self) -> dict[str, int]:
        import psutil

        leaders = {proc.pid: name for name, proc in list(self.af.supervisor.procs.items())}
        postgres = self._postgres_pids()
        totals: Counter[str] = Counter()
        for proc in psutil.process_iter(["pid", "memory_info"]):
            pid = int(proc.info["pid"])
            mem = proc.info.get("memory_info")
            if mem is None:
                continue
            if pid in postgres:
                totals["postgres"] += mem.rss
                continue
            with contextlib.suppress(OSError):
                name = leaders.get(os.getsid(pid))
                if name is not None:
                    totals[name] += mem.rss
        for name, rss in totals.items():
            self.peak[name] = max(self.peak.get(name, 0), rss)
        self.samples += 1
        return dict(totals)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                self.sample()
            self._stop.wait(self.every)

    def peak_mib(self) -> dict[str, float]:
        return {name: round(self.peak.get(name, 0) / 2**20, 1) for name in self.components}


# -- one night ---------------------------------------------------------------------------------------------


@dataclass
class NightResult:
    index: int
    kind: str
    runs: dict[str, str] = field(default_factory=dict)
    task_states: dict[str, dict[str, int]] = field(default_factory=dict)
    jobs_created: int = 0
    create_calls: int = 0
    fell_back: int = 0
    duplicates: list[str] = field(default_factory=list)
    unattended: list[str] = field(default_factory=list)
    capacity_failures: list[str] = field(default_factory=list)
    foreign_failures: list[str] = field(default_factory=list)
    faults: dict[str, Any] = field(default_factory=dict)
    kills: list[str] = field(default_factory=list)
    steps: int = 0
    emulated_hours: float = 0.0
    seconds: float = 0.0
    timed_out: bool = False


def _log(message: str) -> None:
    print(f"[soak {datetime.now(timezone.utc):%H:%M:%S}] {message}", flush=True)


def duplicates_of(jobs: Sequence[Mapping[str, Any]], owned: Callable[[str], bool]) -> list[str]:
    """Jobs that are a second job of one task's lineage while the earlier had not failed or stopped.

    A lineage is a base job name; ``-rN`` marks the N-th submission of it (see operators/submission.py).
    A job ``owned`` rejects (no task of the night owns its lineage) counts as a duplicate as well.
    """
    lineages: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    found = []
    for job in jobs:
        match = _LINEAGE.match(job["name"])
        assert match is not None
        base = match["base"]
        if not owned(base):
            found.append(f"{job['name']} (no task of the night owns it)")
            continue
        lineages.setdefault(base, []).append((int(match["submission"] or 1), job))
    for members in lineages.values():
        members.sort(key=lambda m: (m[1].get("created_at") or 0, m[0]))
        for (_, earlier), (_, later) in itertools.pairwise(members):
            ended_ok = earlier["status"] in ("Failed", "Stopped") and (
                earlier.get("end_time") is not None
                and later.get("created_at") is not None
                and earlier["end_time"] <= later["created_at"]
            )
            if not ended_ok:
                found.append(f"{later['name']} (while {earlier['name']} was {earlier['status']})")
    return found


class Soak:
    """Drives the nights against ``af`` (a started deployment with the example and e2e DAGs parsed)."""

    def __init__(
        self, af: LocalAirflow, *, fleet: int, seed: int, night_timeout: float = 1200.0, step: int = STEP
    ) -> None:
        self.af = af
        self.fleet = fleet
        self.seed = seed
        self.night_timeout = night_timeout
        self.step = step
        # Every night has a quiet step 0 (all tasks wait for capacity); a step 1 only when one step of
        # the clock cannot take a job from capacity to its end nor past the tight pending deadline.
        self.last_sure_step = 1 if step < min(TIGHT_PENDING, sum(PHASES.values()) + JOB_RUNTIME) else 0
        self.base_date = datetime(2026, 10, 1, 2, 0, tzinfo=timezone.utc) + timedelta(minutes=seed % 1000)

    def run_night(self, plan: NightPlan) -> NightResult:
        af = self.af
        started = time.monotonic()
        result = NightResult(index=plan.index, kind=plan.kind)
        scenario, max_pending = night_scenario(plan, self.fleet)
        af.sm.load_scenario(scenario)
        af.sm.clear_faults()
        night = _NightState(faults_on=plan.faults_on_step < 0)
        if night.faults_on:
            self._faults(plan, on=True)
        prefix = f"soak{self.seed}-n{plan.index}"
        run_ids = self._trigger(plan, max_pending, prefix)
        _log(f"night {plan.index} ({plan.kind}): triggered {run_ids}")
        deadline = started + self.night_timeout
        while self._wait_quiet(run_ids, night, deadline):
            # Every unfinished task is deferred and has been for SETTLE seconds: a step of the night.
            if self._at_step(plan, night, run_ids, result):
                continue  # a component was killed: quiet again before the clock moves
            af.sm.advance(self.step)
            night.step += 1
        if night.timed_out:
            result.timed_out = True
            _log(f"night {plan.index}: timed out after {self.night_timeout:.0f}s; failing its runs")
            af.fail_active_runs()
        if night.faults_on:
            self._faults(plan, on=False)
        result.steps = night.step
        result.emulated_hours = round(af.sm.clock()["elapsed"] / 3600, 2)
        self._account(result, run_ids, prefix)
        result.seconds = round(time.monotonic() - started, 1)
        _log(
            f"night {plan.index}: runs {result.runs}, {result.jobs_created} jobs, {result.fell_back} fell back, "
            f"{len(result.capacity_failures)} capacity timeouts, duplicates {len(result.duplicates)}, "
            f"unattended {len(result.unattended)}, foreign failures {len(result.foreign_failures)}, "
            f"faults {result.faults.get('summary')}, kills {result.kills}, {result.seconds:.0f}s"
        )
        return result

    def _trigger(self, plan: NightPlan, max_pending: int, prefix: str) -> dict[str, str]:
        """The night's two runs, one logical day after the previous night's."""
        logical = self.base_date + timedelta(days=plan.index - 1)
        run_id = f"soak-{self.seed}-night{plan.index}"
        fleet_conf = {
            "config": training_config("x", max_runtime_seconds=86400),
            "prefs": [{"instance_type": G6, "instance_count": 1}, {"instance_type": G5, "instance_count": 1}],
            "max_pending": max_pending,
            "count": self.fleet,
            "name_prefix": prefix,
        }
        return {
            NIGHTLY: self.af.trigger_dag(NIGHTLY, run_id=run_id, logical_date=logical),
            FLEET: self.af.trigger_dag(FLEET, fleet_conf, run_id=run_id, logical_date=logical),
        }

    def _wait_quiet(self, run_ids: Mapping[str, str], night: _NightState, deadline: float) -> bool:
        """Until the night is quiet for SETTLE seconds (True) or its runs ended or it timed out (False)."""
        signature: frozenset[Any] | None = None
        quiet_since = time.monotonic()
        while True:
            if time.monotonic() > deadline:
                night.timed_out = True
                return False
            try:
                states = {dag: self.af.dag_run(dag, rid)["state"] for dag, rid in run_ids.items()}
                if all(s in TERMINAL_RUN_STATES for s in states.values()):
                    return False
                current = self._quiescent(run_ids, states, night.dead_triggerers)
            except httpx.TimeoutException:
                # The api-server, busy with a storm of task callbacks, answered a poll late: not quiet.
                current = None
            now = time.monotonic()
            if current is None or current != signature:
                signature, quiet_since = current, now
            elif now - quiet_since >= SETTLE:
                return True
            time.sleep(1.0)

    def _at_step(
        self, plan: NightPlan, night: _NightState, run_ids: Mapping[str, str], result: NightResult
    ) -> bool:
        """Switch the API faults and kill what this step kills; True when a component was killed."""
        step = night.step
        if not night.faults_on and step == min(plan.faults_on_step, self.last_sure_step):
            self._faults(plan, on=True)
            night.faults_on = True
        elif night.faults_on and step >= plan.faults_off_step:
            self._top_up_faults(plan)
            self._faults(plan, on=False)
            night.faults_on = False
        killed = False
        for name, at in (("triggerer", plan.kill_triggerer_step), ("scheduler", plan.kill_scheduler_step)):
            if at is not None and min(at, self.last_sure_step) == step and name not in night.killed:
                night.dead_triggerers |= self._kill(name, plan, run_ids, result)
                night.killed.add(name)
                killed = True
        return killed

    def _quiescent(
        self, run_ids: Mapping[str, str], states: Mapping[str, str], dead_triggerers: set[Any]
    ) -> frozenset[Any] | None:
        """The deferred tasks and their triggers when nothing else of the night's runs is in flight."""
        seen: set[Any] = set()
        for dag, run_id in run_ids.items():
            if states[dag] in TERMINAL_RUN_STATES:
                continue
            deferred = 0
            for ti in self.af.task_instances(dag, run_id):
                state = ti["state"]
                if state == "deferred":
                    trigger = ti.get("trigger") or {}
                    owner = trigger.get("triggerer_id")
                    if not trigger or owner is None or owner in dead_triggerers:
                        return None
                    seen.add(
                        (dag, ti["task_id"], ti["map_index"], trigger.get("id"), trigger.get("created_date"))
                    )
                    deferred += 1
                elif state in TERMINAL_TI_STATES or (state is None and ti["task_id"] in DOWNSTREAM[dag]):
                    continue
                else:
                    return None
            if deferred == 0:
                return None
        return frozenset(seen)

    def _faults(self, plan: NightPlan, *, on: bool) -> None:
        if on:
            self.af.sm.set_faults(
                throttle_rate=plan.throttle_rate, error_rate=plan.error_rate, drop_rate=plan.drop_rate
            )
        else:
            self.af.sm.clear_faults()
        _log(f"night {plan.index}: API faults {'on' if on else 'off'}")

    def _top_up_faults(self, plan: NightPlan) -> None:
        """Raise each fault kind the night has not injected yet until it has (low rates can miss one)."""
        kinds = ("throttled", "errors", "dropped")
        until = time.monotonic() + FAULT_TOP_UP_SECONDS
        raised: set[str] = set()
        while time.monotonic() < until:
            counts = fault_counts(self.af.sm.stats())
            missing = {kind for kind in kinds if counts[kind] == 0}
            if not missing:
                return
            if missing != raised:
                raise_to = {kind: FAULT_TOP_UP_RATE if kind in missing else None for kind in kinds}
                self.af.sm.set_faults(
                    throttle_rate=raise_to["throttled"],
                    error_rate=raise_to["errors"],
                    drop_rate=raise_to["dropped"],
                )
                _log(
                    f"night {plan.index}: no {', '.join(sorted(missing))} yet; raised to {FAULT_TOP_UP_RATE}"
                )
                raised = missing
            time.sleep(0.5)
        _log(f"night {plan.index}: after {FAULT_TOP_UP_SECONDS:.0f}s still no {', '.join(sorted(missing))}")

    def _kill(self, name: str, plan: NightPlan, run_ids: Mapping[str, str], result: NightResult) -> set[Any]:
        """kill -9 of ``name``'s whole session, down ``plan.down_seconds``, restarted."""
        before = {
            (ti.get("trigger") or {}).get("triggerer_id")
            for dag, rid in run_ids.items()
            for ti in patient(partial(self.af.task_instances, dag, rid))
            if ti["state"] == "deferred"
        } - {None}
        pids = self.af.kill_process(name, signal.SIGKILL)
        time.sleep(plan.down_seconds)
        self.af.restart(name)
        result.kills.append(
            f"{name} SIGKILL ({len(pids)} processes), down {plan.down_seconds:.0f} s, restarted"
        )
        _log(
            f"night {plan.index}: killed {name} ({len(pids)} processes), restarted after {plan.down_seconds}s"
        )
        if name == "scheduler":
            with contextlib.suppress(Exception):
                self.af.wait_healthy(120)
            return set()
        return before

    def _account(self, result: NightResult, run_ids: Mapping[str, str], prefix: str) -> None:
        af = self.af
        result.runs = {dag: patient(partial(af.dag_run, dag, rid))["state"] for dag, rid in run_ids.items()}
        tis = {dag: patient(partial(af.task_instances, dag, rid)) for dag, rid in run_ids.items()}
        result.task_states = {
            dag: dict(Counter(str(ti["state"]) for ti in rows)) for dag, rows in tis.items()
        }
        jobs = af.sm.jobs()
        stats = af.sm.stats()
        result.jobs_created = len(jobs)
        result.create_calls = int(stats.get("operations", {}).get("CreateTrainingJob", 0))
        result.fell_back = sum(1 for j in jobs if (j.get("selected_rank") or 1) > 1)
        result.faults = fault_counts(stats)
        owners = owners_of(jobs, prefix)
        result.duplicates = duplicates_of(jobs, lambda base: base in owners)
        nightly_bases = sorted(b for b, o in owners.items() if o[0] == NIGHTLY)
        result.duplicates += [
            f"{b} (a second lineage for the example's train task)" for b in nightly_bases[1:]
        ]
        ti_state = {
            (dag, ti["task_id"], ti["map_index"]): ti["state"] for dag, rows in tis.items() for ti in rows
        }
        result.unattended = unattended_of(jobs, owners, ti_state)
        for dag, rows in tis.items():
            for ti in rows:
                if ti["state"] == "failed":
                    self._classify_failure(result, dag, run_ids[dag], ti)
        if result.timed_out:
            result.foreign_failures.append("the night did not finish within its time limit")

    def _classify_failure(self, result: NightResult, dag: str, run_id: str, ti: Mapping[str, Any]) -> None:
        """The injected capacity shortage when the failed try's log shows CapacityTimeoutError."""
        where = f"{dag}.{ti['task_id']}[{ti['map_index']}]"
        log = patient(lambda: self.af.task_log(dag, run_id, ti["task_id"], map_index=ti["map_index"]))
        if CAPACITY_TIMEOUT_MARK in log:
            result.capacity_failures.append(where)
        else:
            tail = " ".join(log.splitlines()[-3:])[-300:]
            result.foreign_failures.append(f"{where}: {tail}")


def patient(call: Callable[[], T], attempts: int = 5) -> T:
    """``call()``, asked again when the busy api-server answers late (the last late answer raises)."""
    for _ in range(attempts - 1):
        try:
            return call()
        except httpx.TimeoutException:
            time.sleep(2.0)
    return call()


def fault_counts(stats: Mapping[str, Any]) -> dict[str, Any]:
    throttled = sum(stats.get("throttled", {}).values())
    errors = sum(stats.get("errors", {}).values())
    dropped = sum(stats.get("dropped", {}).values())
    calls = sum(stats.get("operations", {}).values())
    return {
        "throttled": throttled,
        "errors": errors,
        "dropped": dropped,
        "calls": calls,
        "summary": f"{throttled} throttled + {errors} 5xx + {dropped} dropped of {calls} calls",
    }


def owners_of(jobs: Sequence[Mapping[str, Any]], prefix: str) -> dict[str, tuple[str, str, int]]:
    """Task of each job lineage: the fleet's are named ``<prefix>-NNN``, the others are the example's."""
    owners: dict[str, tuple[str, str, int]] = {}
    for job in jobs:
        match = _LINEAGE.match(job["name"])
        assert match is not None
        base = match["base"]
        index = base[len(prefix) + 1 :]
        if base.startswith(prefix + "-") and index.isdigit():
            owners[base] = (FLEET, "job", int(index))
        elif not base.startswith("soak"):
            owners[base] = (NIGHTLY, "train", -1)
    return owners


def unattended_of(
    jobs: Sequence[Mapping[str, Any]],
    owners: Mapping[str, tuple[str, str, int]],
    ti_state: Mapping[tuple[str, str, int], str | None],
) -> list[str]:
    """Jobs still InProgress whose task is not running, deferred, queued or waiting for a retry."""
    found = []
    for job in jobs:
        if job["status"] != "InProgress":
            continue
        match = _LINEAGE.match(job["name"])
        assert match is not None
        owner = owners.get(match["base"])
        state = ti_state.get(owner) if owner is not None else None
        if state not in ACTIVE_TI_STATES:
            found.append(f"{job['name']} (task is {state})")
    return found


@dataclass
class _NightState:
    faults_on: bool
    step: int = 0
    timed_out: bool = False
    dead_triggerers: set[Any] = field(default_factory=set)
    killed: set[str] = field(default_factory=set)


# -- the week ----------------------------------------------------------------------------------------------


def run_soak(
    af: LocalAirflow,
    *,
    nights: int,
    fleet: int,
    seed: int,
    night_timeout: float = 1200.0,
    budget: float | None = None,
    step: int = STEP,
) -> dict[str, Any]:
    """Run the nights against a started deployment; returns the report (see :func:`write_report`).

    :param budget: real seconds; no night starts once this much time has passed (the report says so).
    """
    started = time.monotonic()
    plans = plan_week(nights, fleet, seed)
    soak = Soak(af, fleet=fleet, seed=seed, night_timeout=night_timeout, step=step)
    results: list[NightResult] = []
    with MemorySampler(af) as memory:
        for plan in plans:
            if budget is not None and results and time.monotonic() - started > budget:
                _log(f"time budget of {budget:.0f}s spent: stopping after {len(results)} nights")
                break
            results.append(soak.run_night(plan))
        memory.sample()
    data = report(af, plans, results, memory, fleet=fleet, seed=seed, seconds=time.monotonic() - started)
    data["step_seconds"] = step
    return data


def report(
    af: LocalAirflow,
    plans: Sequence[NightPlan],
    results: Sequence[NightResult],
    memory: MemorySampler,
    *,
    fleet: int,
    seed: int,
    seconds: float,
) -> dict[str, Any]:
    from airflow import __version__ as airflow_version

    runs = Counter(state for r in results for state in r.runs.values())
    totals = {
        "nights": len(results),
        "dag_runs": sum(len(r.runs) for r in results),
        "dag_run_states": dict(runs),
        "jobs_created": sum(r.jobs_created for r in results),
        "fell_back": sum(r.fell_back for r in results),
        "capacity_failures": sum(len(r.capacity_failures) for r in results),
        "duplicates": sum(len(r.duplicates) for r in results),
        "unattended": sum(len(r.unattended) for r in results),
        "foreign_failures": sum(len(r.foreign_failures) for r in results),
        "throttled": sum(r.faults.get("throttled", 0) for r in results),
        "errors": sum(r.faults.get("errors", 0) for r in results),
        "dropped": sum(r.faults.get("dropped", 0) for r in results),
        "calls": sum(r.faults.get("calls", 0) for r in results),
        "kills": [f"night {r.index}: {k}" for r in results for k in r.kills],
    }
    return {
        "seed": seed,
        "fleet": fleet,
        "nights_planned": len(plans),
        "nights_run": len(results),
        "seconds": round(seconds, 1),
        "seconds_per_night": round(sum(r.seconds for r in results) / max(1, len(results)), 1),
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "airflow_version": airflow_version,
        "metadata_db": "PostgreSQL" if af.database_backend == "postgres" else "SQLite",
        "cpus": os.cpu_count(),
        "memory_samples": memory.samples,
        "peak_rss_mib": memory.peak_mib(),
        "totals": totals,
        "nights": [asdict(r) for r in results],
        "plan": [asdict(p) for p in plans],
        "ok": passed(totals) and len(results) > 0,
    }


def passed(totals: Mapping[str, Any]) -> bool:
    return all(int(totals[key]) == 0 for key in ("duplicates", "unattended", "foreign_failures"))


# -- the report --------------------------------------------------------------------------------------------


def render_markdown(data: Mapping[str, Any], heading: str = "##") -> str:
    """The soak report as markdown (a section of docs/reliability.md, and build/reliability/soak.md)."""
    t = data["totals"]
    runs = ", ".join(f"{n} {s}" for s, n in sorted(t["dag_run_states"].items())) or "none"
    short = data["nights_run"] < data["nights_planned"]
    lines = [
        f"{heading} A week of nights under faults (soak)",
        "",
        f"`python -m harness.soak --nights {data['nights_planned']} --fleet {data['fleet']} "
        f"--seed {data['seed']} --step {data.get('step_seconds', STEP)}` (`make soak` runs 7 nights of 50 with "
        f"{STEP}-second steps): one deployment, each night the nightly example DAG and `e2e_fleet` with "
        f"{data['fleet']} mapped training tasks, triggered through the REST API one logical day apart; the "
        f"night is compressed by moving the offline SageMaker's clock ({data.get('step_seconds', STEP) // 60} emulated minutes per "
        "step, once every unfinished task has been deferred for "
        f"{SETTLE:.0f} s). Each night has its capacity shape (plenty, first choice scarce, a late window, "
        "or capacity that never frees before the fleet's pending deadline) and throttling, HTTP 5xx and "
        "dropped connections switched on and off at seeded random steps; one night kills the triggerer's "
        "whole session with SIGKILL and one the scheduler's (task processes included), each restarted. "
        f"Recorded {str(data['recorded_at'])[:10]} on Airflow {data['airflow_version']} with "
        f"{data['metadata_db']}, {data['cpus']} CPUs shared with other work; wall time "
        f"{data['seconds'] / 60:.1f} min, {data['seconds_per_night']:.0f} s per night.",
        "",
    ]
    if short:
        lines += [
            f"**Only {data['nights_run']} of {data['nights_planned']} planned nights ran** (time budget).",
            "",
        ]
    if data["nights_run"] < WEEK:
        lines += [
            f"**Shorter than a week:** this run covers {data['nights_run']} of the {WEEK} nights of "
            f"`make soak`, with {data['fleet']} mapped tasks; at {data['seconds_per_night']:.0f} s per night "
            f"on this machine, a week at this clock step takes about "
            f"{WEEK * data['seconds_per_night'] / 60:.0f} min plus the start (smaller steps take longer: "
            "every step the tasks resume and defer again).",
            "",
        ]
    lines += [
        "| | |",
        "|---|---|",
        f"| Nights | {data['nights_run']} |",
        f"| DAG runs | {t['dag_runs']} ({runs}) |",
        f"| SageMaker jobs created | {t['jobs_created']} ({t['fell_back']} on a fallback entry) |",
        f"| Tasks failed by the injected capacity shortage (`CapacityTimeoutError` in their log) | "
        f"{t['capacity_failures']} |",
        f"| **Duplicate jobs** | **{t['duplicates']}** |",
        f"| **Jobs left running after their task ended** | **{t['unattended']}** |",
        f"| **Tasks failed for another reason** | **{t['foreign_failures']}** |",
        f"| API faults injected | {t['throttled']} throttled + {t['errors']} 5xx + {t['dropped']} dropped "
        f"of {t['calls']} SageMaker calls |",
        f"| Process kills | {'; '.join(t['kills']) or 'none'} |",
        "",
        "Peak resident memory of each component: the sum of RSS over all processes of its session, sampled "
        f"every {SAMPLE_EVERY:g} s ({data['memory_samples']} samples). The scheduler's includes its "
        "LocalExecutor workers (one per parallelism slot) and the task processes they run, PostgreSQL's its "
        "backends; pages shared between processes count once per process, so a sum overstates memory used:",
        "",
        "| Component | Peak RSS (MiB) |",
        "|---|---|",
    ]
    lines += [f"| {name} | {mib:.0f} |" for name, mib in data["peak_rss_mib"].items()]
    lines += [
        "",
        "| Night | Capacity | Runs | Jobs | Fell back | Capacity timeouts | Duplicates | Unattended | "
        "Other failures | API faults | Kills | Wall time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in data["nights"]:
        lines.append(
            f"| {n['index']} | {n['kind']} | {', '.join(f'{d}: {s}' for d, s in n['runs'].items())} | "
            f"{n['jobs_created']} | {n['fell_back']} | {len(n['capacity_failures'])} | {len(n['duplicates'])} | "
            f"{len(n['unattended'])} | {len(n['foreign_failures'])} | {n['faults'].get('summary', '')} | "
            f"{'; '.join(n['kills']) or '-'} | {n['seconds']:.0f} |"
        )
    lines += [
        "",
        "*Duplicate*: the operators name a task's job deterministically and only submit a new one "
        "(`-r2`, `-r3`...) after the previous job of the same task ended `Failed` or `Stopped` (or the "
        "task was cleared, which the soak never does); a job created while an earlier job of the same "
        "task had not ended that way, or a job no task of the night owns, is a duplicate. *Jobs left "
        "running*: jobs still `InProgress` once their task is no longer running, deferred, queued or "
        "waiting for a retry. *Another reason*: a failed task whose log does not show "
        "`CapacityTimeoutError`. The kills come at a step of the night, when every unfinished task is "
        "deferred: a kill of the scheduler's session while a task process runs would fail that task "
        "(`e2e_fleet` has no retries), and a trigger firing right after its task deferred trips an "
        "Airflow 3.3.2 scheduler race (apache/airflow#72716) this soak keeps out.",
    ]
    foreign = [f for n in data["nights"] for f in n["foreign_failures"]]
    problems = [p for n in data["nights"] for p in (*n["duplicates"], *n["unattended"])]
    if foreign or problems:
        lines += ["", "Found:", ""] + [f"- {_md(p)}" for p in (*problems, *foreign)]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_report(data: Mapping[str, Any], json_path: Path = RUN_JSON, md_path: Path = RUN_MD) -> None:
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    md_path.write_text(render_markdown(data, heading="#"))


def summary_line(data: Mapping[str, Any]) -> str:
    t = data["totals"]
    peaks = ", ".join(f"{k} {v:.0f}" for k, v in data["peak_rss_mib"].items())
    return (
        f"nights {data['nights_run']}/{data['nights_planned']}, runs {t['dag_runs']} {t['dag_run_states']}, "
        f"jobs {t['jobs_created']}, capacity failures {t['capacity_failures']}, duplicates {t['duplicates']}, "
        f"unattended {t['unattended']}, foreign failures {t['foreign_failures']}, "
        f"faults {t['throttled']} throttled/{t['errors']} 5xx/{t['dropped']} dropped of {t['calls']}, "
        f"kills {t['kills']}, peak RSS MiB: {peaks}, wall {data['seconds']:.0f}s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=7)
    parser.add_argument("--fleet", type=int, default=50, help="mapped tasks of e2e_fleet per night")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--root", type=Path, default=None, help="AIRFLOW_HOME parent (default: temporary)")
    parser.add_argument(
        "--budget", type=float, default=None, help="real seconds after which no further night starts"
    )
    parser.add_argument("--night-timeout", type=float, default=1200.0)
    parser.add_argument("--step", type=int, default=STEP, help="emulated seconds per clock step")
    args = parser.parse_args(argv)

    def _interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    # A failed soak keeps the deployment's directory (component and task logs) for a look afterwards.
    root = args.root or Path(tempfile.mkdtemp(prefix="sm-prefs-soak-"))
    with local_airflow(
        root,
        dags_folders=default_dags_folders(),
        scenario="default",
        poll_interval=0.5,
        max_poll_interval=2.0,
        parallelism=24,
        database="postgres",
    ) as af:
        af.wait_for_dags(DAGS, timeout=240)
        _log(f"deployment ready in {time.monotonic() - started:.0f}s; logs in {af.log_dir}")
        data = run_soak(
            af,
            nights=args.nights,
            fleet=args.fleet,
            seed=args.seed,
            night_timeout=args.night_timeout,
            budget=args.budget,
            step=args.step,
        )
    write_report(data)
    print(summary_line(data))
    if args.root is None and data["ok"]:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"deployment directory kept: {root} (logs in {root / 'airflow_home' / 'logs'})")
    print(
        f"report: {RUN_JSON.relative_to(ROOT)} and {RUN_MD.relative_to(ROOT)} (make reliability-doc publishes it)"
    )
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
