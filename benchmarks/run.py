"""Benchmark: waiting for SageMaker capacity with many deferred tasks, and the DAG parse cost.

    .venv/bin/python -m benchmarks.run                  # full run (≈ 25-30 min on 2 cores)
    .venv/bin/python -m benchmarks.run --smoke          # tiny, ≈ 45 s, for the test suite
    .venv/bin/python -m benchmarks.run --sizes 1000 --variants ours,stock --no-throttled --no-parse
    .venv/bin/python -m benchmarks.run --no-churn       # the account holds only the benchmark's jobs

For each N and each variant (``ours``, ``stock``, ``naive``; see :mod:`benchmarks.variants`) the
harness loads a fresh scenario into one offline SageMaker process (:mod:`benchmarks.workload`),
creates other people's ended jobs (:mod:`benchmarks.background`), submits N training jobs with boto3
while a thread keeps creating other short jobs, starts a separate trigger process
(:mod:`benchmarks.trigger_process`) that runs N triggers in one event loop, and measures it. Every
variant at a given N gets the same scenario, seed, time scale and real-time schedule:

1. start the trigger process and wait for its imports; load the scenario (the emulated clock starts),
   submit the jobs;
2. ``GO``: all triggers start at once (a triggerer picking up N deferred tasks);
3. warm-up: wait until every job has been looked at once (each described, or a full
   ListTrainingJobs pass), at most ``warm-up cap`` seconds;
4. jump the emulated clock forward (``advance``) so the first capacity step comes ``quiet`` seconds
   later, whatever the variant's warm-up took; the warm-up time is reported on its own;
5. the quiet window: every job waits and nothing changes, which is what a deployment does for hours;
   the waiting-only call rate, CPU and loop lag are measured here;
6. capacity steps arrive over ``span`` real seconds; the run ends when every trigger has fired, or
   ``tail`` seconds after the last step. Detection latencies come from this phase.

Prints Markdown tables and writes everything to ``benchmarks/results/bench-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks import metrics, report
from benchmarks.launch import (
    ADMIN_TIMEOUT,
    RESULTS,
    benchmark_emulator,
    result_header,
    result_path,
    run_timing,
    save_result,
)
from benchmarks.plan import SMOKE, Plan
from benchmarks.processes import TriggerProcess, bytecode_env, child_env
from benchmarks.single_run import (
    LIST_PAGE,
    run_key,
    run_one,
    run_or_error,
    spawn_trigger_process,
    stop_unmeasured,
)
from benchmarks.variants import ALL_VARIANTS, EVENT_MODES, VARIANTS

# The plan and one run live in their own modules; their names stay importable from here, where the
# benchmark's users (its tests, benchmarks.credentials) first found them.
__all__ = [
    "ADMIN_TIMEOUT",
    "LIST_PAGE",
    "SMOKE",
    "Plan",
    "main",
    "run_one",
    "spawn_trigger_process",
]


def _argument_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m benchmarks.run`` (every option defaults to the plan's value)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes and cadences (~45 s), for the test suite"
    )
    parser.add_argument("--sizes", help="comma-separated N list (default 100,1000,3000)")
    parser.add_argument(
        "--variants",
        help=f"comma-separated subset of {','.join(VARIANTS)} (default {','.join((*ALL_VARIANTS, *EVENT_MODES))})",
    )
    parser.add_argument("--throttled-size", type=int, help="N of the throttled runs (default 1000)")
    parser.add_argument("--no-throttled", action="store_true", help="skip the throttled runs")
    parser.add_argument(
        "--throttle-rate", type=float, help="allowed Describe/List calls per second (default 10)"
    )
    parser.add_argument("--poll-interval", type=float, help="cadence of every variant, seconds (default 30)")
    parser.add_argument("--time-scale", type=float, help="emulated seconds per real second (default 60)")
    parser.add_argument("--span", type=float, help="real seconds over which capacity arrives (default 40)")
    parser.add_argument(
        "--tail", type=float, help="real seconds after the last step before giving up (default 60)"
    )
    parser.add_argument(
        "--budget", type=float, help="time budget in seconds; runs that would not fit are skipped"
    )
    parser.add_argument(
        "--parse-processes", type=int, help="fresh processes per DAG file (default 10; 0 skips)"
    )
    parser.add_argument("--no-parse", action="store_true", help="skip the DAG parse-cost benchmark")
    parser.add_argument(
        "--history-jobs",
        type=int,
        help="others' ended jobs created before ours, ~10 %% Failed (default 3000)",
    )
    parser.add_argument(
        "--churn-rate",
        type=float,
        help="others' short jobs created per emulated hour while ours wait, ~10 %% failing (default 300)",
    )
    parser.add_argument(
        "--no-churn",
        action="store_true",
        help="no other jobs in the account (the workload of the results before churn)",
    )
    parser.add_argument("--seed", type=int, help="seed of the capacity schedules")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the trigger process (diagnosis; inflates CPU figures)",
    )
    parser.add_argument("--log-level", help="Airflow log level in the trigger process (default INFO)")
    parser.add_argument(
        "--output", type=Path, help="result JSON path (default benchmarks/results/bench-<ts>.json)"
    )
    return parser


def _chosen_variants(parser: argparse.ArgumentParser, text: str) -> tuple[str, ...]:
    """The variants named in ``--variants``; an unknown one ends the program with a usage error."""
    chosen = tuple(v.strip() for v in text.split(",") if v.strip())
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    return chosen


def _option_values(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """The plan fields given a value on the command line."""
    changes: dict[str, Any] = {}
    if args.sizes:
        changes["sizes"] = tuple(int(x) for x in args.sizes.split(",") if x.strip())
    if args.variants:
        changes["variants"] = _chosen_variants(parser, args.variants)
    if args.throttled_size is not None:
        changes["throttled_size"] = args.throttled_size
    for name in (
        "throttle_rate",
        "poll_interval",
        "time_scale",
        "span",
        "tail",
        "budget",
        "seed",
        "parse_processes",
        "history_jobs",
        "churn_rate",
    ):
        value = getattr(args, name)
        if value is not None:
            changes[name] = value
    if args.log_level:
        changes["log_level"] = args.log_level.upper()
    return changes


def _switches(args: argparse.Namespace) -> dict[str, Any]:
    """The plan fields the on/off switches set."""
    changes: dict[str, Any] = {}
    if args.no_throttled:
        changes["throttled_size"] = None
    if args.no_parse:
        changes["parse_processes"] = 0
    if args.profile:
        changes["profile"] = True
    if args.no_churn:
        changes["history_jobs"] = 0
        changes["churn_rate"] = 0.0
    return changes


def _plan_changes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """The plan fields the command line overrides; ``--no-throttled``, ``--no-parse`` and ``--no-churn``
    win over ``--throttled-size``, ``--parse-processes``, ``--history-jobs`` and ``--churn-rate``."""
    return {**_option_values(parser, args), **_switches(args)}


def _parse_args(argv: Sequence[str] | None) -> tuple[Plan, Path]:
    """The plan and the result JSON path from the command line."""
    parser = _argument_parser()
    args = parser.parse_args(argv)
    plan = SMOKE if args.smoke else Plan()
    plan = replace(plan, **_plan_changes(parser, args))
    output = args.output or result_path("bench", plan.smoke)
    return plan, output.resolve()


def _new_result(plan: Plan, argv: Sequence[str] | None) -> dict[str, Any]:
    """The result's header (command, machine, plan, variants) with no runs yet."""
    return {
        **result_header("benchmarks.run", argv),
        "plan": {
            **{k: v for k, v in asdict(plan).items() if k != "extra"},
            "throttle": {"rate": plan.throttle_rate, "size": plan.throttled_size},
            "warm_caps": {str(n): plan.warm_cap(n) for n in plan.sizes},
            "throttled_warm_cap": plan.warm_cap(plan.throttled_size, True) if plan.throttled_size else None,
        },
        "variants": {key: VARIANTS[key].description for key in plan.variants},
        "runs": [],
    }


def _measure_parse(plan: Plan, result: dict[str, Any]) -> None:
    """The DAG parse-cost benchmark, into ``result["parse"]`` (its error, if it fails)."""
    from benchmarks import parse_cost

    env = child_env(bytecode_env(RESULTS / ".pycache"))
    try:
        result["parse"] = parse_cost.measure(
            plan.parse_processes, plan.parse_repeat, env, warm_cache=not plan.smoke
        )
    except Exception as err:  # a broken DAG file must not cost the capacity figures
        result["parse"] = {"error": f"{type(err).__name__}: {err}"}


def _start_parse(plan: Plan, result: dict[str, Any], output: Path) -> threading.Thread | None:
    """Measure the parse cost now, or start it in a thread when prespawning (returned, to join)."""
    if plan.parse_processes <= 0:
        return None
    print("parse cost: measuring ...", flush=True)
    if plan.prespawn:
        # Smoke only: overlap with the capacity runs (its figures do not matter, its time does).
        thread = threading.Thread(target=_measure_parse, args=(plan, result), name="parse-cost", daemon=True)
        thread.start()
        return thread
    _measure_parse(plan, result)
    save_result(result, output)
    return None


def _background_summary(record: Mapping[str, Any]) -> str:
    """List pages per pass, SQS calls and others' jobs of a run, for its summary line ("" if none)."""
    figures, background = record.get("figures") or {}, record.get("background") or {}
    parts = []
    pages = (figures.get("calls") or {}).get("model", {}).get("list_pages_per_pass")
    if pages is not None:
        parts.append(f"List pages/pass {pages:.1f}")
    sqs = ((figures.get("calls") or {}).get("sqs") or {}).get("total")
    if sqs:
        parts.append(f"SQS {sqs}")
    if background.get("history_jobs") or (background.get("churn") or {}).get("jobs_created"):
        parts.append(
            f"others' jobs: {background.get('history_jobs', 0)} ended + "
            f"{(background.get('churn') or {}).get('jobs_created', 0)} new"
        )
    return (", " + ", ".join(parts)) if parts else ""


def _print_run_summary(record: Mapping[str, Any]) -> None:
    """One line per run: its headline figures, or its error."""
    figures = record.get("figures")
    if figures:
        lat = figures["latency_seconds"]
        print(
            f"    {record['run_seconds']:.0f} s: calls {figures['calls']['total']}, "
            f"p95 {lat['p95'] if lat['p95'] is not None else float('nan'):.1f} s, "
            f"CPU {figures['cpu']['percent_of_one_core']:.1f} %, RSS {figures['memory']['peak_rss_mb']:.0f} MB, "
            f"failed {figures['tasks']['failed']}, undetected {figures['tasks']['undetected_at_end']}"
            + _background_summary(record),
            flush=True,
        )
    else:
        print(f"    failed: {record.get('error')}", flush=True)


def _capacity_runs(
    plan: Plan,
    planned: Sequence[tuple[int, str, bool]],
    run_dir: Path,
    started: float,
    result: dict[str, Any],
    output: Path,
) -> None:
    """Every planned run against one offline SageMaker process, within the budget; each run's record
    goes to ``result["runs"]`` and the result is saved after each.

    :param started: monotonic second the benchmark started (the budget counts from it).
    """
    upcoming: TriggerProcess | None = None
    with benchmark_emulator(run_dir) as (emulator_proc, emulator):
        try:
            for index, (n_jobs, variant, throttled) in enumerate(planned):
                child, upcoming = upcoming, None
                remaining = plan.budget - (time.monotonic() - started)
                label = f"N={n_jobs} {variant}{' throttled' if throttled else ''}"
                if plan.estimate(n_jobs, variant, throttled) > remaining:
                    print(
                        f"[{index + 1}/{len(planned)}] {label}: skipped, {remaining:.0f} s of budget left",
                        flush=True,
                    )
                    result["runs"].append({**run_key(n_jobs, variant, throttled), "skipped": "time budget"})
                    stop_unmeasured(child)
                    continue
                print(f"[{index + 1}/{len(planned)}] {label} ...", flush=True)
                run_started, load_before = time.monotonic(), os.getloadavg()[0]
                if child is None:
                    child = spawn_trigger_process(plan, emulator, n_jobs, variant, throttled, run_dir)
                if plan.prespawn and index + 1 < len(planned):
                    upcoming = spawn_trigger_process(plan, emulator, *planned[index + 1], run_dir)
                record = run_or_error(
                    plan, emulator_proc, emulator, n_jobs, variant, throttled, run_dir, child
                )
                record.update(run_timing(run_started, load_before))
                result["runs"].append(record)
                _print_run_summary(record)
                save_result(result, output)
        finally:
            stop_unmeasured(upcoming)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit code (0 even when targets are missed)."""
    plan, output = _parse_args(argv)
    started = time.monotonic()
    run_dir = output.with_suffix("")
    run_dir.mkdir(parents=True, exist_ok=True)
    result = _new_result(plan, argv)
    planned = plan.runs()
    estimate = sum(plan.estimate(n, v, t) for n, v, t in planned)
    print(
        f"benchmark: {len(planned)} runs, estimated {estimate / 60:.1f} min (+ parse cost); budget "
        f"{plan.budget / 60:.0f} min; results in {output}",
        flush=True,
    )
    parse_thread = _start_parse(plan, result, output)
    _capacity_runs(plan, planned, run_dir, started, result, output)
    if parse_thread is not None:
        parse_thread.join(timeout=300)
    result["targets"] = metrics.evaluate_targets(result["runs"])
    result["finished_utc"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    result["total_seconds"] = time.monotonic() - started
    result["machine"]["loadavg_end"] = list(os.getloadavg())
    save_result(result, output)
    print()
    print(report.render(result))
    print(f"\nresults: {output} ({result['total_seconds'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
