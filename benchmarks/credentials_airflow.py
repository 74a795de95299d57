"""Benchmark: capacity waits outlive 15-minute credentials in a real ``airflow triggerer``.

    .venv/bin/python -m benchmarks.credentials_airflow --waits 1000 --hours 12 --modes poll,events
    .venv/bin/python -m benchmarks.credentials_airflow --smoke    # 10 waits, 1 emulated hour, poll

:mod:`benchmarks.credentials` measures our triggers in a process that runs them the way the triggerer
does; this runs them in Airflow itself. Per mode, one :class:`~harness.deployment.LocalAirflow`
(LocalExecutor, PostgreSQL, one triggerer) with the DAG ``benchmarks/dags/credentials_airflow``:
``SageMakerCapacitySensor`` mapped over N jobs, half on a connection that assumes a role with AssumeRole,
half on one that uses AssumeRoleWithWebIdentity and a token file (``DurationSeconds`` 900, at the
emulator's STS), and one task deferring :class:`benchmarks.loop_probe.LoopLagTrigger`, which measures the
triggerer's event loop from inside it. ``events`` mode gives every process
``AIRFLOW__SM_PREFS__EVENT_QUEUE_URL``: an SQS queue fed by an EventBridge rule (:mod:`benchmarks.events`).

The benchmark loads the scenario (the emulated clock starts, the STS forgets every session), submits
the N training jobs itself, then triggers the DAG. The capacity they wait for is absent until
``defer_slack + N * defer_per_wait`` real seconds (the expected time for every task to defer on 2 cores)
plus ``--hours`` emulated hours after the scenario was loaded; then one instance arrives per job over
``span`` real seconds. The clock is never jumped: every session is lived through at the time scale. The
result records how many emulated hours the waits spent in the triggerer after the last one was taken
by it (``hours_after_last_taken``); a run where that is less than ``--hours`` says so (``long_enough``).

Reported per mode: waits, succeeded, failed, still deferred at the end; STS sessions issued (all, and
while every wait was in the triggerer: the triggerer's only, as no task process runs then) and requests
refused (``credential_settings()``); session keys that signed SageMaker calls while waiting; SageMaker
calls signed with the long-term keys (SQS calls are not counted per key by the emulator); the probe's
worst lag, p99 and samples over 50 ms; Airflow's "async thread was blocked" warnings in the triggerer's
log; the triggerer's CPU seconds and peak RSS (its processes' ``/proc``); real and emulated duration.
Prints a Markdown table; writes ``benchmarks/results/credentials-airflow-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.airflow_observe import (
    ENDED,
    MetadataCounts,
    process_usage,
)
from benchmarks.credentials_airflow_report import DAG_ID, figures, render
from benchmarks.launch import emulator_clock, result_path, save_result
from benchmarks.processes import ROOT, assumed_role_env, git_revision, machine_info
from benchmarks.variants import EVENT_DETAIL_ENV, EVENT_QUEUE_ENV
from benchmarks.workload import Workload, submit_jobs

DAGS = ROOT / "benchmarks" / "dags" / "credentials_airflow"
ROLE = "arn:aws:iam::123456789012:role/airflow-sm-prefs-waits"
CONNECTIONS = {"assume-role": "aws_creds_assume_role", "web-identity": "aws_creds_web_identity"}
MODES = ("poll", "events")
#: Probe lags over this (seconds) are counted.
COUNTED = 0.05


@dataclass(frozen=True)
class AirflowPlan:
    """Everything that shapes the benchmark (recorded in the result).

    :param waits: mapped sensor tasks (capacity waits) per mode.
    :param hours: emulated hours the waits spend in the triggerer before capacity arrives.
    :param modes: ``poll`` and/or ``events``, one deployment each.
    :param time_scale: emulated seconds per real second (never jumped).
    :param poll_interval: the sensors' ``poll_interval`` (real seconds).
    :param defer_per_wait: expected real seconds per task until all have deferred (2 cores: about 1;
        more while other work shares them).
    :param defer_slack: real seconds added to that (the DAG run starting, the first tasks).
    :param span: real seconds over which the N instances arrive.
    :param tail: real seconds after the last instance before the run is cut short.
    :param parallelism: ``[core] parallelism`` (LocalExecutor workers).
    :param duration_seconds: ``DurationSeconds`` of every session (emulated seconds).
    """

    waits: int = 1000
    hours: float = 12.0
    modes: tuple[str, ...] = MODES
    time_scale: float = 250.0
    poll_interval: float = 10.0
    defer_per_wait: float = 1.3
    defer_slack: float = 120.0
    span: float = 30.0
    tail: float = 600.0
    parallelism: int = 16
    duration_seconds: int = 900
    seed: int = 20261204
    smoke: bool = False

    def workload(self, mode: str) -> Workload:
        ahead = self.defer_slack + self.defer_per_wait * self.waits
        return Workload(
            name=f"cra-{mode}",
            n_jobs=self.waits,
            time_scale=self.time_scale,
            first_step=math.ceil(ahead * self.time_scale + self.hours * 3600),
            span=self.span * self.time_scale,
            seed=self.seed,
            rate_limits={},
        )


SMOKE = AirflowPlan(
    waits=10, hours=1.0, modes=("poll",), poll_interval=5.0, defer_per_wait=3.0, defer_slack=45.0, span=5.0,
    tail=300.0, parallelism=8, smoke=True,
)  # fmt: skip


def connection_env(endpoint_url: str, duration_seconds: int, token_dir: Path) -> dict[str, str]:
    """The two connections (``AIRFLOW_CONN_...``): AssumeRole, and web identity with a token file."""
    env: dict[str, str] = {}
    for auth, conn_id in CONNECTIONS.items():
        token = token_dir / "web-identity-token" if auth == "web-identity" else None
        [(_, value)] = assumed_role_env(endpoint_url, ROLE, duration_seconds, token).items()
        env[f"AIRFLOW_CONN_{conn_id.upper()}"] = value
    return env


def deployment_env(plan: AirflowPlan, mode: str, workload: Workload, stop_file: Path) -> dict[str, str]:
    """What every Airflow process of one mode's deployment gets besides LocalAirflow's own."""
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "SM_PREFS_CREDS_PREFIX": workload.name,
        "SM_PREFS_CREDS_WAITS": str(plan.waits),
        "SM_PREFS_CREDS_POLL_INTERVAL": str(plan.poll_interval),
        "SM_PREFS_CREDS_STOP_FILE": str(stop_file),
        "SM_PREFS_CREDS_CONN_ASSUME_ROLE": CONNECTIONS["assume-role"],
        "SM_PREFS_CREDS_CONN_WEB_IDENTITY": CONNECTIONS["web-identity"],
        # One triggerer holds every wait and the probe (Airflow's default capacity is 1,000).
        "AIRFLOW__TRIGGERER__CAPACITY": str(plan.waits + 100),
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "4096",
        "AIRFLOW__CORE__DEFAULT_POOL_TASK_SLOT_COUNT": "4096",
        "AIRFLOW__CORE__MAX_MAP_LENGTH": "4096",
        # 2 busy cores: a scheduler or triggerer starved for the harness's 10 s would be taken for dead
        # and its tasks or triggers handed over (to itself), which is not what is measured here.
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "120",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "60",
    }
    if mode == "events":
        env[EVENT_QUEUE_ENV] = queue_url(mode)
        env[EVENT_DETAIL_ENV] = "data"
    return env


def queue_name(mode: str) -> str:
    return f"sm-prefs-creds-airflow-{mode}"


def queue_url(mode: str) -> str:
    """An AWS-style queue URL (known before the emulator runs): the SQS client sends it to the endpoint."""
    return f"https://sqs.us-east-1.amazonaws.com/123456789012/{queue_name(mode)}"


def _deployment(plan: AirflowPlan, mode: str, run_dir: Path, env: Mapping[str, str]) -> Any:
    from harness.deployment import LocalAirflow

    af = LocalAirflow(
        run_dir / f"airflow-{mode}",
        dags_folders=[DAGS],
        parallelism=plan.parallelism,
        database="postgres",
        extra_env=env,
        triggerers=1,
        startup_timeout=600.0,
    )
    # The connections name the emulator's endpoint, known once it runs: added to the environment that
    # LocalAirflow builds for its processes after starting the emulator.
    build = af.config.airflow_env

    def with_connections(**kwargs: Any) -> dict[str, str]:
        built = build(**kwargs)
        built.update(connection_env(kwargs["emulator_url"], plan.duration_seconds, run_dir / mode))
        return built

    af.config.airflow_env = with_connections  # type: ignore[method-assign]
    return af


def _snapshot(emulator: Any, when: float) -> dict[str, Any]:
    return {"t": when, "credentials": emulator.credential_settings(), "stats": emulator.stats()}


def _observe(
    plan: AirflowPlan, af: Any, db: MetadataCounts, capacity_at: float, deadline: float, emulator: Any
) -> dict[str, Any]:
    """Until every wait has ended or ``deadline`` (monotonic): when all deferred, when the triggerer had
    taken all, emulator snapshots then and when capacity arrives, the triggerer's usage."""
    marks: dict[str, float] = {}
    snaps: dict[str, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    printed = 0.0
    states: dict[str, int] = {}
    while True:
        now = time.monotonic()
        af.supervisor.check_running()
        states = db.states()
        ended = sum(states.get(s, 0) for s in ENDED)
        if "all_deferred" not in marks and states.get("deferred", 0) + ended >= plan.waits:
            marks["all_deferred"] = now
        taken = "all_deferred" in marks and "all_taken" not in marks and db.triggers_assigned() + ended
        if taken and taken >= plan.waits:
            marks["all_taken"] = time.monotonic()
            snaps["waiting_from"] = _snapshot(emulator, marks["all_taken"])
        if "waiting_to" not in snaps and now >= capacity_at:
            snaps["waiting_to"] = _snapshot(emulator, now)
        usage = process_usage(af.members("triggerer")) or usage
        if ended >= plan.waits:
            marks["all_ended"] = now
            break
        if now >= deadline:
            break
        if now - printed >= 30.0:
            printed = now
            left = capacity_at - now
            print(f"      {time.strftime('%H:%M:%S')} {states}; capacity in {left:.0f} s", flush=True)
        time.sleep(3.0)
    return {"marks": marks, "snaps": snaps, "usage": usage, "states": states}


def _probe(af: Any, db: MetadataCounts, run_id: str, stop_file: Path) -> dict[str, Any]:
    stop_file.write_text("stop\n", encoding="utf-8")
    deadline = time.monotonic() + 180.0
    while time.monotonic() < deadline:
        state = db.states("loop_probe")
        if state.get("success"):
            value: dict[str, Any] = af.xcom(DAG_ID, run_id, "loop_probe")
            return value
        if state.get("failed"):
            break
        time.sleep(2.0)
    return {"error": f"the probe did not return: {db.states('loop_probe')}"}


def run_mode(plan: AirflowPlan, mode: str, run_dir: Path) -> dict[str, Any]:
    """One mode: its own deployment, from start to stop; returns its record."""
    workload = plan.workload(mode)
    names = workload.job_names
    stop_file = run_dir / f"stop-{mode}"
    stop_file.unlink(missing_ok=True)
    af = _deployment(plan, mode, run_dir, deployment_env(plan, mode, workload, stop_file))
    record: dict[str, Any] = {"mode": mode, "airflow_home": str(af.home)}
    route = None
    db: MetadataCounts | None = None
    started = time.monotonic()
    try:
        af.start()
        af.wait_for_dags([DAG_ID], timeout=600.0)
        ready = time.monotonic()
        db = MetadataCounts.of(af, DAG_ID)
        emulator = af.sm
        emulator.load_scenario(workload.write_scenario(run_dir / f"scenario-{mode}.json"))
        loaded, load_epoch = time.monotonic(), time.time()
        if mode == "events":
            from benchmarks.events import EventRoute

            route = EventRoute(emulator, queue_name(mode))
            route.connect()
            record["queue_url"] = route.queue_url
        submit_jobs(emulator, names)
        clock = emulator_clock(emulator)
        start_epoch = float(emulator.clock()["start_epoch"])
        capacity_at = clock.to_real(start_epoch + workload.first_step)
        last_step_at = clock.to_real(start_epoch + workload.last_step)
        run_id = af.trigger_dag(DAG_ID)
        triggered = time.monotonic()
        print(
            f"    {mode}: {plan.waits} waits triggered; capacity in {capacity_at - triggered:.0f} s",
            flush=True,
        )
        seen = _observe(plan, af, db, capacity_at, last_step_at + plan.tail, emulator)
        end = time.monotonic()
        final = _snapshot(emulator, end)
        usage = seen["usage"]
        probe = _probe(af, db, run_id, stop_file)
        jobs = [j for j in emulator.jobs() if str(j["name"]).startswith(workload.name + "-")]
        record.update(
            figures(
                plan,
                seen,
                final,
                probe,
                jobs,
                db,
                af,
                run_id,
                (capacity_at, loaded, load_epoch, triggered, end),
            )
        )
        record["triggerer_processes"] = usage
        record["timings"] = {
            "deployment_start_seconds": round(ready - started, 1),
            "trigger_to_all_deferred": _since(seen["marks"].get("all_deferred"), triggered),
            "trigger_to_all_taken": _since(seen["marks"].get("all_taken"), triggered),
            "capacity_after_trigger": round(capacity_at - triggered, 1),
            "capacity_to_all_ended": _since(seen["marks"].get("all_ended"), capacity_at),
        }
        record["workload"] = {"name": workload.name, "first_step": workload.first_step, "span": workload.span}
    finally:
        if route is not None:
            try:
                record["event_route"] = route.close()
            except Exception as err:  # never hide the run's own error behind the clean-up's
                record["event_route"] = {"error": f"{type(err).__name__}: {err}"}
        if db is not None:
            db.close()
        af.stop()
    return record


def _since(mark: float | None, origin: float) -> float | None:
    return None if mark is None else round(mark - origin, 1)


def _parse_args(argv: Sequence[str] | None) -> tuple[AirflowPlan, Path]:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.credentials_airflow", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--smoke", action="store_true", help="10 waits, 1 emulated hour, poll")
    parser.add_argument("--waits", type=int, help="mapped sensor tasks per mode (default 1000)")
    parser.add_argument("--hours", type=float, help="emulated hours in the triggerer (default 12)")
    parser.add_argument("--modes", help="comma-separated poll,events (default both)")
    parser.add_argument("--time-scale", type=float, help="emulated seconds per real second (default 250)")
    parser.add_argument("--poll-interval", type=float, help="the sensors' poll_interval, s (default 10)")
    parser.add_argument("--defer-per-wait", type=float, help="expected real s per task to defer (1.1)")
    parser.add_argument("--parallelism", type=int, help="[core] parallelism (default 16)")
    parser.add_argument("--output", type=Path, help="result JSON (default benchmarks/results/...)")
    args = parser.parse_args(argv)
    plan = SMOKE if args.smoke else AirflowPlan()
    changes: dict[str, Any] = {}
    if args.modes:
        modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
        if not modes or any(m not in MODES for m in modes):
            parser.error(f"--modes: choose from {', '.join(MODES)} (got {args.modes!r})")
        changes["modes"] = modes
    for name in ("waits", "hours", "time_scale", "poll_interval", "defer_per_wait", "parallelism"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    plan = replace(plan, **changes)
    output = args.output or result_path("credentials-airflow", plan.smoke)
    return plan, output.resolve()


def ok(run: Mapping[str, Any]) -> bool:
    """Every wait succeeded, none was refused, and they spent the hours in the triggerer."""
    f = run.get("figures") or {}
    return bool(f) and f["succeeded"] == f["waits"] and f["failed"] == 0 and f["long_enough"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run every mode; 0 when every wait of every mode succeeded after the planned hours, else 1."""
    plan, output = _parse_args(argv)
    run_dir = output.with_suffix("")
    run_dir.mkdir(parents=True, exist_ok=True)
    args = sys.argv[1:] if argv is None else list(argv)
    result: dict[str, Any] = {
        "command": ("python -m benchmarks.credentials_airflow " + " ".join(args)).strip(),
        "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_revision": git_revision(),
        "machine": machine_info(),
        "plan": {**asdict(plan), "role_arn": ROLE, "connections": CONNECTIONS},
        "runs": [],
    }
    started = time.monotonic()
    print(
        f"credentials in a real triggerer: {plan.modes} x {plan.waits} waits; results in {output}", flush=True
    )
    for index, mode in enumerate(plan.modes):
        print(f"[{index + 1}/{len(plan.modes)}] {mode} ...", flush=True)
        load = os.getloadavg()[0]
        try:
            record = run_mode(plan, mode, run_dir)
        except Exception as err:
            record = {
                "mode": mode,
                "error": f"{type(err).__name__}: {err}",
                "error_traceback": traceback.format_exc(),
            }
        record["loadavg_1m"] = {"start": load, "end": os.getloadavg()[0]}
        result["runs"].append(record)
        f = record.get("figures")
        print(f"    {json.dumps(f, default=str)[:600] if f else record.get('error')}", flush=True)
        save_result(result, output)
    result["total_minutes"] = round((time.monotonic() - started) / 60, 1)
    result["machine"]["loadavg_end"] = list(os.getloadavg())
    save_result(result, output)
    print()
    print(render(result))
    print(f"\nresults: {output} ({result['total_minutes']} min)")
    return 0 if result["runs"] and all(ok(r) for r in result["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
