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
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx

from harness.config import default_dags_folders
from harness.deployment import LocalAirflow, local_airflow
from harness.memory import MEMORY_COMPONENTS, SAMPLE_EVERY, MemorySampler
from harness.rest import TERMINAL_RUN_STATES, TERMINAL_TI_STATES
from harness.soak_accounting import (
    CAPACITY_TIMEOUT_MARK,
    FAULT_KINDS,
    NightResult,
    duplicates_of,
    fault_counts,
    owners_of,
    unattended_of,
)
from harness.soak_plan import (
    DAGS,
    FLEET,
    G5,
    G6,
    JOB_RUNTIME,
    KINDS,
    NIGHTLY,
    P4D,
    PHASES,
    RELAXED_PENDING,
    SETTLE,
    STEP,
    TIGHT_PENDING,
    WEEK,
    NightPlan,
    night_scenario,
    plan_week,
)
from harness.soak_report import (
    ROOT,
    RUN_DIR,
    RUN_JSON,
    RUN_MD,
    passed,
    render_markdown,
    report,
    summary_line,
    write_report,
)
from offline_sagemaker.jobs import training_config

# The plan, the accounting, the report and the memory sampler have their own modules; their names stay
# importable from here, where the soak's tests, the chaos run and the reliability page found them.
__all__ = [
    "CAPACITY_TIMEOUT_MARK",
    "DAGS",
    "FLEET",
    "G5",
    "G6",
    "JOB_RUNTIME",
    "KINDS",
    "MEMORY_COMPONENTS",
    "NIGHTLY",
    "P4D",
    "PHASES",
    "RELAXED_PENDING",
    "ROOT",
    "RUN_DIR",
    "RUN_JSON",
    "RUN_MD",
    "SAMPLE_EVERY",
    "SETTLE",
    "STEP",
    "TIGHT_PENDING",
    "WEEK",
    "MemorySampler",
    "NightPlan",
    "NightResult",
    "Soak",
    "duplicates_of",
    "fault_counts",
    "main",
    "night_scenario",
    "owners_of",
    "passed",
    "plan_week",
    "render_markdown",
    "report",
    "run_soak",
    "summary_line",
    "unattended_of",
    "write_report",
]

#: Tasks that may sit without a state while the night is quiet: they wait on a deferred upstream.
DOWNSTREAM = {NIGHTLY: frozenset({"evaluate", "report"}), FLEET: frozenset[str]()}
#: Before a night's faults switch off, every kind has happened at least once: a missing kind is raised
#: to this rate for at most FAULT_TOP_UP_SECONDS (the waiting triggers keep calling).
FAULT_TOP_UP_RATE = 0.5
FAULT_TOP_UP_SECONDS = 90.0
T = TypeVar("T")


# -- one night ---------------------------------------------------------------------------------------------


def _log(message: str) -> None:
    print(f"[soak {datetime.now(timezone.utc):%H:%M:%S}] {message}", flush=True)


@dataclass
class _NightState:
    """What the night's loop carries from one step to the next."""

    faults_on: bool
    step: int = 0
    timed_out: bool = False
    dead_triggerers: set[Any] = field(default_factory=set)
    killed: set[str] = field(default_factory=set)


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
        """Trigger the night's runs, step the clock each time the night is quiet, then count what happened."""
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
        """Switch the night's API faults on (at its planned rates) or off."""
        if on:
            self.af.sm.set_faults(
                throttle_rate=plan.throttle_rate, error_rate=plan.error_rate, drop_rate=plan.drop_rate
            )
        else:
            self.af.sm.clear_faults()
        _log(f"night {plan.index}: API faults {'on' if on else 'off'}")

    def _top_up_faults(self, plan: NightPlan) -> None:
        """Raise each fault kind the night has not injected yet until it has (low rates can miss one)."""
        until = time.monotonic() + FAULT_TOP_UP_SECONDS
        raised: set[str] = set()
        while time.monotonic() < until:
            counts = fault_counts(self.af.sm.stats())
            missing = {kind for kind in FAULT_KINDS if counts[kind] == 0}
            if not missing:
                return
            if missing != raised:
                raise_to = {kind: FAULT_TOP_UP_RATE if kind in missing else None for kind in FAULT_KINDS}
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
        """Count the night into ``result`` before the next night's scenario resets the emulator's ledger."""
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
