"""Benchmark: many capacity waits in one trigger process outlive their temporary credentials.

    .venv/bin/python -m benchmarks.credentials --waits 1000 --hours 12 --modes poll,events \\
        --auth assume-role,web-identity                      # make bench-credentials (~12 min)
    .venv/bin/python -m benchmarks.credentials --smoke       # 5 waits, 1 emulated hour, poll, AssumeRole

Every run: N of our triggers (``SageMakerCapacityTrigger``) in one event loop, run the way Airflow's
triggerer runs them (:mod:`benchmarks.trigger_process`), on an ``aws_default`` connection that assumes a
role at the offline SageMaker's STS with 15-minute sessions (``DurationSeconds`` 900): with AssumeRole
(``--auth assume-role``) or AssumeRoleWithWebIdentity and a token file (``web-identity``). The capacity the
jobs wait for is absent for ``--hours`` emulated hours after they are created, then one instance arrives
per job over a few real seconds, so every wait ends; the run ends when every trigger has fired, or
``--tail`` real seconds after the last instance arrived. Poll mode is the ``ours`` variant of
:mod:`benchmarks.run`, event mode its ``events`` variant (an EventBridge rule to an SQS queue, whose
calls are signed with the same expiring credentials).

The emulated clock runs at ``--time-scale`` (default 300: 12 emulated hours in 144 real seconds) and is
never jumped: every wait lives through every session in real time. A 900 s session then lasts 3 real
seconds and STS reports its ``Expiration`` in host time, so botocore, whose refresh windows are 10 and
15 minutes before expiry, renews before nearly every call: what is measured is that sessions are per
process and client, not per wait, and that no wait fails.

Reported per run: waits, failed waits (an error event or an exception), undetected waits (no event by
the end), STS sessions issued and requests refused (the emulator's counts, ``credential_settings()``),
sessions per wait, SageMaker calls signed with the long-term keys (must be 0), the worst event-loop lag
over the whole run and after start-up (the first ``--startup`` real seconds after GO, while the N
triggers are created and take their first look) and the lag samples over 50 ms. Prints a Markdown
table and writes everything to ``benchmarks/results/credentials-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.launch import (
    benchmark_emulator,
    emulator_clock,
    error_record,
    result_header,
    result_path,
    run_timing,
    save_result,
    start_trigger_process,
    stop_trigger_process,
    write_creation_times,
)
from benchmarks.processes import ProcessError, TriggerProcess, assumed_role_env
from benchmarks.variants import EVENTS, OURS
from benchmarks.workload import HARNESS_KEY, Workload, pending_seconds, selection_time, submit_jobs

#: The role the connection assumes (any role ARN: the emulator's STS admits every one not revoked).
ROLE = "arn:aws:iam::123456789012:role/airflow-sm-prefs-waits"
#: Emulated seconds one session lasts: AssumeRole's minimum, 15 minutes.
LIFETIME = 900
#: ``--modes`` -> the variant of :mod:`benchmarks.variants` it runs.
MODES: dict[str, str] = {"poll": OURS, "events": EVENTS}
AUTHS: tuple[str, ...] = ("assume-role", "web-identity")
#: Loop-lag samples longer than this (seconds) are counted.
LAG_COUNTED = 0.05
#: Access key ids whose calls are not the trigger process's: the harness's and the long-term keys of the
#: connection (which sign only AssumeRole; a SageMaker call signed with them would be counted apart).
LONG_TERM_KEY = "testing"


@dataclass(frozen=True)
class CredentialsPlan:
    """Everything that shapes the benchmark (recorded in the result).

    :param waits: concurrent capacity waits (triggers) per run.
    :param hours: emulated hours the capacity is absent after the jobs are created.
    :param modes: ``poll`` and/or ``events``, run in this order for each auth.
    :param auths: ``assume-role`` and/or ``web-identity``.
    :param time_scale: emulated seconds per real second (never jumped).
    :param poll_interval: the triggers' ``poll_interval`` (real seconds).
    :param span: real seconds over which the N instances arrive.
    :param tail: real seconds after the last instance before the stragglers are stopped.
    :param startup: real seconds after GO that count as start-up for the lag figures.
    :param setup_per_wait: expected real seconds to create one job (the capacity window starts after).
    :param duration_seconds: ``DurationSeconds`` of every session (emulated seconds).
    :param seed: seed of the arrival times.
    :param log_level: Airflow log level in the trigger process.
    :param smoke: the tiny configuration of the test suite.
    """

    waits: int = 1000
    hours: float = 12.0
    modes: tuple[str, ...] = ("poll", "events")
    auths: tuple[str, ...] = AUTHS
    time_scale: float = 300.0
    poll_interval: float = 10.0
    span: float = 10.0
    tail: float = 90.0
    startup: float = 20.0
    setup_per_wait: float = 0.004
    duration_seconds: int = LIFETIME
    seed: int = 20261204
    log_level: str = "WARNING"
    smoke: bool = False

    def workload(self, auth: str, mode: str) -> Workload:
        """The run's jobs and capacity: nothing for ``hours`` after the jobs exist, then one per job."""
        ts = self.time_scale
        setup = 2.0 + self.setup_per_wait * self.waits  # real seconds from load to the last job created
        return Workload(
            name=f"creds-{'ar' if auth == 'assume-role' else 'wi'}-{mode}",
            n_jobs=self.waits,
            time_scale=ts,
            first_step=math.ceil(self.hours * 3600 + setup * ts),
            span=self.span * ts,
            seed=self.seed,
            rate_limits={},
        )

    def limit_seconds(self, workload: Workload) -> float:
        """Hard limit of the trigger process (real seconds after GO): well past the harness's deadline."""
        return (workload.first_step + workload.span) / self.time_scale + self.tail + 300.0

    def runs(self) -> list[tuple[str, str]]:
        """``(auth, mode)`` in execution order."""
        return [(auth, mode) for auth in self.auths for mode in self.modes]


SMOKE = CredentialsPlan(
    waits=5,
    hours=1.0,
    modes=("poll",),
    auths=("assume-role",),
    poll_interval=2.0,
    span=1.0,
    tail=30.0,
    startup=5.0,
    smoke=True,
)


def _lag_figures(result: Mapping[str, Any], startup: float) -> dict[str, Any]:
    """Worst loop lag (ms) over the run and after start-up, and the samples over 50 ms."""
    go, end = float(result["t_go"]), float(result["t_end"])
    lags = [(float(t), float(lag)) for t, lag in result.get("lags") or [] if float(t) <= end]
    after = [lag for t, lag in lags if t >= go + startup]
    whole = [lag for _, lag in lags]
    return {
        "max_ms": round(max(whole) * 1000, 1) if whole else None,
        "max_after_startup_ms": round(max(after) * 1000, 1) if after else None,
        "over_50ms": sum(1 for lag in whole if lag > LAG_COUNTED),
        "over_50ms_after_startup": sum(1 for lag in after if lag > LAG_COUNTED),
        "samples": len(whole),
        "startup_seconds": startup,
    }


def _wait_figures(
    records: Mapping[str, Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], clock: Any
) -> dict[str, Any]:
    """Failed and undetected waits, how long the jobs were pending, how late each end was seen."""
    by_name = {str(job["name"]): job for job in jobs}
    failed: list[dict[str, str]] = []
    undetected = 0
    pending: list[float] = []
    detection: list[float] = []
    for name, record in records.items():
        job = by_name.get(name) or {}
        seconds = pending_seconds(job) if job else None
        if seconds is not None:
            pending.append(seconds)
        if record.get("exception"):
            failed.append({"job": name, "why": str(record["exception"])})
        elif record.get("event_t") is None:
            undetected += 1
        elif record.get("status") != "success":
            why = f"{record.get('status')} {record.get('error_type') or ''}: {record.get('reason')}"
            failed.append({"job": name, "why": why})
        elif (selected := selection_time(job) if job else None) is not None:
            detection.append(max(0.0, float(record["event_t"]) - clock.to_real(selected)))
    detection.sort()
    return {
        "waits": len(records),
        "failed": len(failed),
        "failed_examples": failed[:5],
        "undetected": undetected,
        "pending_hours_min": round(min(pending) / 3600, 2) if pending else None,
        "pending_hours_median": round(statistics.median(pending) / 3600, 2) if pending else None,
        "selected": len(pending),
        "detection_seconds_p95": round(detection[int(0.95 * (len(detection) - 1))], 2) if detection else None,
        "detection_seconds_max": round(detection[-1], 2) if detection else None,
    }


def _call_figures(result: Mapping[str, Any], stats: Mapping[str, Any]) -> dict[str, Any]:
    """The trigger process's calls, their errors, and which keys signed the calls the emulator saw."""
    errors: dict[str, int] = {}
    by_service: dict[str, int] = {}
    for entry in result.get("calls") or []:
        by_service[str(entry[5])] = by_service.get(str(entry[5]), 0) + 1
        if entry[4]:
            errors[str(entry[4])] = errors.get(str(entry[4]), 0) + 1
    keys: Mapping[str, Mapping[str, int]] = stats.get("access_keys") or {}
    return {
        "trigger_calls": sum(by_service.values()),
        "trigger_calls_by_service": by_service,
        "trigger_call_errors": errors,
        "session_keys_used": sum(1 for key in keys if key.startswith("ASIA")),
        "long_term_key_calls": sum(keys.get(LONG_TERM_KEY, {}).values()),
        "harness_calls": sum(keys.get(HARNESS_KEY, {}).values()),
    }


def figures(
    plan: CredentialsPlan,
    result: Mapping[str, Any],
    settings: Mapping[str, Any],
    stats: Mapping[str, Any],
    jobs: Sequence[Mapping[str, Any]],
    clock: Any,
) -> dict[str, Any]:
    """One run's figures from the trigger process's result and the emulator's views at the end."""
    waits = _wait_figures(result["jobs"], jobs, clock)
    sessions = int(settings["sessions"])
    refused = {str(k): int(v) for k, v in (settings.get("refused") or {}).items()}
    return {
        **waits,
        "sts_sessions": sessions,
        "refused": refused,
        "refused_total": sum(refused.values()),
        "sessions_per_wait": round(sessions / waits["waits"], 4) if waits["waits"] else None,
        "lag": _lag_figures(result, plan.startup),
        "calls": _call_figures(result, stats),
        "ended_by": result.get("ended_by"),
        "real_seconds_after_go": round(float(result["t_end"]) - float(result["t_go"]), 1),
    }


def _await_end(child: TriggerProcess, deadline: float) -> str:
    """Wait for the trigger process's DONE until ``deadline`` (monotonic), then stop it."""
    if child.expect("DONE", max(0.0, deadline - time.monotonic())):
        return "done"
    child.send("STOP")
    if not child.expect("DONE", 60.0):
        raise ProcessError(f"trigger process did not stop; see {child.log_path}")
    return "stopped at the deadline"


def _connection_env(
    plan: CredentialsPlan, emulator: Any, auth: str, run_dir: Path, tag: str
) -> dict[str, str]:
    token = run_dir / f"web-identity-token-{tag}" if auth == "web-identity" else None
    return assumed_role_env(emulator.endpoint_url, ROLE, plan.duration_seconds, token)


def run_one(plan: CredentialsPlan, emulator: Any, auth: str, mode: str, run_dir: Path) -> dict[str, Any]:
    """One ``(auth, mode)`` run; returns its record."""
    workload = plan.workload(auth, mode)
    names = workload.job_names
    tag = f"{auth}-{mode}"
    scenario = workload.write_scenario(run_dir / f"scenario-{tag}.json")
    child = start_trigger_process(
        emulator,
        MODES[mode],
        names,
        plan.poll_interval,
        plan.limit_seconds(workload),
        run_dir,
        tag,
        log_level=plan.log_level,
        extra_env=_connection_env(plan, emulator, auth, run_dir, tag),
    )
    route = child.event_route
    record: dict[str, Any] = {"auth": auth, "mode": mode, "variant": MODES[mode], "scenario": str(scenario)}
    try:
        if not child.wait_ready(180.0):
            raise ProcessError(f"trigger process not ready; see {child.log_path}")
        # The clock starts, and the STS forgets every session and count, when the scenario loads.
        emulator.load_scenario(scenario)
        loaded = time.monotonic()
        if route is not None:
            route.connect()
        submit_jobs(emulator, names)
        submitted = time.monotonic()
        creation_file = run_dir / f"created-{tag}.json"
        write_creation_times(child, emulator, names, creation_file)
        child.send(f"GO {creation_file}")
        go = time.monotonic()
        clock = emulator_clock(emulator)
        start_epoch = float(emulator.clock()["start_epoch"])
        first_step_real = clock.to_real(start_epoch + workload.first_step)
        deadline = clock.to_real(start_epoch + workload.last_step) + plan.tail
        print(
            f"    GO: {len(names)} waits, capacity in {first_step_real - go:.0f} s real "
            f"({(first_step_real - go) * plan.time_scale / 3600:.1f} emulated h)",
            flush=True,
        )
        ended = _await_end(child, deadline)
        settings = emulator.credential_settings()
        stats = emulator.stats()
        jobs = [job for job in emulator.jobs() if str(job["name"]).startswith(workload.name + "-")]
        child.close()
        result = child.result()
        record.update(
            {
                "figures": figures(plan, result, settings, stats, jobs, clock),
                "end": ended,
                "credential_settings": settings,
                "timings": {
                    "submit_seconds": round(submitted - loaded, 2),
                    "import_seconds": result.get("import_seconds"),
                    "first_step_after_go": round(first_step_real - go, 2),
                },
                "workload": {
                    "name": workload.name,
                    "first_step_emulated": workload.first_step,
                    "span_emulated": workload.span,
                    "time_scale": workload.time_scale,
                },
                "source_digest": result.get("source_digest"),
                "kwargs_example": result.get("kwargs_example"),
            }
        )
    finally:
        route_record = stop_trigger_process(child)
        if route_record is not None:
            record["event_route"] = route_record
    return record


def _cell(value: Any) -> str:
    return "–" if value is None else str(value)


def _load(run: Mapping[str, Any]) -> str:
    """The host's 1-minute load average at the run's start and end (other work on the machine)."""
    load = run.get("loadavg_1m") or {}
    if load.get("start") is None or load.get("end") is None:
        return "–"
    return f"{load['start']:.1f}/{load['end']:.1f}"


def render(result: Mapping[str, Any]) -> str:
    """The Markdown table of the runs."""
    lines = [
        "| auth | mode | waits | failed | undetected | pending h (median) | STS sessions | refused "
        "(expired/invalid) | sessions per wait | long-term key calls | max lag ms | max lag ms after "
        "start-up | samples > 50 ms (after start-up) | load (1 min), start/end |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for run in result["runs"]:
        f = run.get("figures")
        if not f:
            lines.append(f"| {run['auth']} | {run['mode']} | run failed: {run.get('error')} |")
            continue
        refused, lag = f["refused"], f["lag"]
        lines.append(
            f"| {run['auth']} | {run['mode']} | {f['waits']} | {f['failed']} | {f['undetected']} | "
            f"{_cell(f['pending_hours_median'])} | {f['sts_sessions']} | "
            f"{refused.get('expired', 0)}/{refused.get('invalid', 0)} | {_cell(f['sessions_per_wait'])} | "
            f"{f['calls']['long_term_key_calls']} | {_cell(lag['max_ms'])} | "
            f"{_cell(lag['max_after_startup_ms'])} | {lag['over_50ms']} ({lag['over_50ms_after_startup']}) | "
            f"{_load(run)} |"
        )
    return "\n".join(lines)


def _choices(
    parser: argparse.ArgumentParser, option: str, text: str, allowed: Sequence[str]
) -> tuple[str, ...]:
    chosen = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [x for x in chosen if x not in allowed]
    if unknown or not chosen:
        parser.error(f"{option}: choose from {', '.join(allowed)} (got {text!r})")
    return chosen


def _parse_args(argv: Sequence[str] | None) -> tuple[CredentialsPlan, Path]:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.credentials", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--smoke", action="store_true", help="5 waits, 1 emulated hour, poll, AssumeRole")
    parser.add_argument("--waits", type=int, help="concurrent waits per run (default 1000)")
    parser.add_argument("--hours", type=float, help="emulated hours without capacity (default 12)")
    parser.add_argument("--modes", help="comma-separated poll,events (default both)")
    parser.add_argument("--auth", help="comma-separated assume-role,web-identity (default both)")
    parser.add_argument("--time-scale", type=float, help="emulated seconds per real second (default 300)")
    parser.add_argument("--poll-interval", type=float, help="the triggers' poll_interval, s (default 10)")
    parser.add_argument("--tail", type=float, help="real seconds after the last arrival (default 90)")
    parser.add_argument(
        "--startup", type=float, help="real seconds after GO counted as start-up (default 20)"
    )
    parser.add_argument("--log-level", help="Airflow log level in the trigger process (default WARNING)")
    parser.add_argument(
        "--output", type=Path, help="result JSON (default benchmarks/results/credentials-<ts>.json)"
    )
    args = parser.parse_args(argv)
    plan = SMOKE if args.smoke else CredentialsPlan()
    changes: dict[str, Any] = {}
    if args.modes:
        changes["modes"] = _choices(parser, "--modes", args.modes, tuple(MODES))
    if args.auth:
        changes["auths"] = _choices(parser, "--auth", args.auth, AUTHS)
    for name in ("waits", "hours", "time_scale", "poll_interval", "tail", "startup"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.log_level:
        changes["log_level"] = args.log_level.upper()
    plan = replace(plan, **changes)
    output = args.output or result_path("credentials", plan.smoke)
    return plan, output.resolve()


def _summary(record: Mapping[str, Any]) -> str:
    f = record.get("figures")
    if not f:
        return f"    failed: {record.get('error')}"
    return (
        f"    {record['run_seconds']:.0f} s: failed {f['failed']}, undetected {f['undetected']}, "
        f"STS sessions {f['sts_sessions']}, refused {f['refused']}, max lag {f['lag']['max_ms']} ms, "
        f"call errors {f['calls']['trigger_call_errors']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the matrix; returns 0 when every run ended with every wait successful, else 1."""
    plan, output = _parse_args(argv)
    run_dir = output.with_suffix("")
    run_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        **result_header("benchmarks.credentials", argv),
        "plan": {**asdict(plan), "role_arn": ROLE},
        "runs": [],
    }
    started = time.monotonic()
    planned = plan.runs()
    print(
        f"credentials benchmark: {len(planned)} runs of {plan.waits} waits; results in {output}", flush=True
    )
    with benchmark_emulator(run_dir) as (_, emulator):
        for index, (auth, mode) in enumerate(planned):
            print(f"[{index + 1}/{len(planned)}] {auth} {mode} ...", flush=True)
            run_started, load = time.monotonic(), os.getloadavg()[0]
            try:
                record = run_one(plan, emulator, auth, mode, run_dir)
            except Exception as err:
                record = {"auth": auth, "mode": mode, **error_record(err)}
            record.update(run_timing(run_started, load))
            result["runs"].append(record)
            print(_summary(record), flush=True)
            save_result(result, output)
    result["total_seconds"] = time.monotonic() - started
    result["machine"]["loadavg_end"] = list(os.getloadavg())
    save_result(result, output)
    print()
    print(render(result))
    print(f"\nresults: {output} ({result['total_seconds'] / 60:.1f} min)")
    ok = all(
        (r.get("figures") or {}).get("failed") == 0 and r["figures"]["undetected"] == 0
        for r in result["runs"]
    )
    return 0 if ok and result["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
