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
import math
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks import metrics, report
from benchmarks.background import (
    HISTORY_AGE_SECONDS,
    ChurnStream,
    JobCreator,
    count_by_status,
    create_history,
)
from benchmarks.events import EventRoute
from benchmarks.launch import (
    RESULTS,
    emulator_clock,
    result_path,
    save_result,
    start_trigger_process,
    write_creation_times,
)
from benchmarks.processes import (
    EmulatorProcess,
    ProcessError,
    TriggerProcess,
    bytecode_env,
    child_env,
    git_revision,
    machine_info,
)
from benchmarks.variants import ALL_VARIANTS, EVENT_MODES, VARIANTS
from benchmarks.workload import Workload, selection_time, submit_jobs

LIST_PAGE = 100  # ListTrainingJobs' largest page: a full pass over N jobs takes ceil(N / 100) calls


@dataclass(frozen=True)
class Plan:
    """Everything that shapes a benchmark run (recorded in the result).

    :param sizes: numbers of concurrent jobs.
    :param variants: variant keys, run in this order at each size.
    :param throttled_size: N of the throttled runs (None: none).
    :param throttled_variants: the variants of the throttled runs (None: every one in ``variants``).
    :param throttle_rate: DescribeTrainingJob and ListTrainingJobs calls per second the emulator allows.
    :param poll_interval: every variant's cadence (seconds).
    :param time_scale: emulated seconds per real second.
    :param span: real seconds over which the N capacity steps come.
    :param quiet: real seconds between the clock jump and the first step (the waiting-only window;
        one poll interval, so every per-job poller polls about once in it).
    :param tail: real seconds after the last step before stragglers are given up.
    :param throttled_tail: the same for the throttled runs (where the per-job pollers fall behind and
        always use all of it).
    :param warm_cap_base: warm-up cap, fixed part (seconds).
    :param warm_cap_per_job: warm-up cap per job (seconds).
    :param throttled_warm_cap: warm-up cap of the throttled runs (under the rate limit the per-job
        pollers cannot look at every job quickly anyway; what is measured there is failures).
    :param warm_cap_max: the warm-up cap never exceeds this (its value at N=3,000, so sizes up to
        3,000 keep their schedule, and N=10,000 does not wait 8 minutes for a look it may never take).
    :param setup_per_job: expected submission time per job (seconds), to place the first step.
    :param history_jobs: ended jobs of others created before ours (0: none).
    :param churn_rate: short jobs of others created per emulated hour while ours wait (0: none).
    :param setup_per_background_job: expected creation time per history job (seconds).
    :param parse_processes: fresh processes per DAG file in the parse-cost benchmark (0: skip it).
    :param parse_repeat: parses per process.
    :param budget: seconds the whole run may take; runs that would not fit are skipped.
    :param seed: seed of the capacity schedules (per N: ``seed + N``).
    :param smoke: the tiny configuration of the test suite.
    :param log_level: Airflow log level in the trigger process (its log goes to the run directory).
    :param profile: run the trigger process under cProfile (diagnosis only: inflates CPU figures).
    :param prespawn: start the next run's trigger process (its imports) while this run is measured;
        only for the smoke test, where the figures do not matter and time does.
    """

    sizes: tuple[int, ...] = (100, 1000, 3000)
    variants: tuple[str, ...] = (*ALL_VARIANTS, *EVENT_MODES)
    throttled_size: int | None = 1000
    throttled_variants: tuple[str, ...] | None = ALL_VARIANTS
    throttle_rate: float = 10.0
    poll_interval: float = 30.0
    time_scale: float = 60.0
    span: float = 40.0
    quiet: float = 30.0
    tail: float = 60.0
    throttled_tail: float = 45.0
    warm_cap_base: float = 15.0
    warm_cap_per_job: float = 0.05
    throttled_warm_cap: float = 30.0
    warm_cap_max: float = 165.0
    setup_per_job: float = 0.004
    history_jobs: int = 3000
    churn_rate: float = 300.0
    setup_per_background_job: float = 0.001
    parse_processes: int = 10
    parse_repeat: int = 5
    budget: float = 2700.0
    seed: int = 20261129
    smoke: bool = False
    log_level: str = "INFO"
    profile: bool = False
    prespawn: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def warm_cap(self, n_jobs: int, throttled: bool = False) -> float:
        """Longest warm-up waited for at ``n_jobs`` before the capacity steps start anyway."""
        cap = min(self.warm_cap_base + self.warm_cap_per_job * n_jobs, self.warm_cap_max)
        return min(cap, self.throttled_warm_cap) if throttled else cap

    def history_seconds(self) -> float:
        """Expected real seconds to create the history jobs."""
        return self.setup_per_background_job * self.history_jobs

    def workload(self, n_jobs: int, throttled: bool) -> Workload:
        """The scenario shared by every variant at this size."""
        ts = self.time_scale
        # Emulated seconds until the first step if the warm-up uses its whole cap (the clock jump
        # shortens the wait when the variant is ready sooner).
        first_real = 10.0 + self.setup_per_job * n_jobs + self.warm_cap(n_jobs, throttled) + self.quiet
        if self.history_jobs:
            # ... after the history is created and the clock jumps past its age.
            first_real += self.history_seconds() + HISTORY_AGE_SECONDS / ts
        rates = (
            {"DescribeTrainingJob": self.throttle_rate, "ListTrainingJobs": self.throttle_rate}
            if throttled
            else {}
        )
        return Workload(
            name=f"bench-n{n_jobs}{'-thr' if throttled else ''}",
            n_jobs=n_jobs,
            time_scale=ts,
            first_step=math.ceil(first_real * ts),
            span=self.span * ts,
            seed=self.seed + n_jobs,
            rate_limits=rates,
            history_jobs=self.history_jobs,
            churn_rate=self.churn_rate,
        )

    def estimate(self, n_jobs: int, variant: str, throttled: bool) -> float:
        """Rough real seconds one run takes (to respect the budget): a quarter of the warm-up cap,
        and half a poll interval after the last step (all of the tail when throttled)."""
        warm = self.warm_cap(n_jobs, throttled) / 4
        tail = self.tail_for(throttled) if throttled else self.poll_interval / 2
        return (
            10.0 + self.setup_per_job * n_jobs + self.history_seconds() + warm + self.quiet + self.span + tail
        )

    def tail_for(self, throttled: bool) -> float:
        """Real seconds after the last step before stragglers are given up."""
        return self.throttled_tail if throttled else self.tail

    def runs(self) -> list[tuple[int, str, bool]]:
        """``(N, variant, throttled)`` in execution order: the throttled runs right after their size.

        The largest sizes come last, so that a tight budget drops them rather than the runs the
        targets are judged on.
        """
        throttled = [
            v for v in self.variants if self.throttled_variants is None or v in self.throttled_variants
        ]
        order: list[tuple[int, str, bool]] = []
        for n in self.sizes:
            order += [(n, v, False) for v in self.variants]
            if n == self.throttled_size:
                order += [(n, v, True) for v in throttled]
        if self.throttled_size and self.throttled_size not in self.sizes:
            order += [(self.throttled_size, v, True) for v in throttled]
        return order


SMOKE = Plan(
    sizes=(12,),
    variants=(*ALL_VARIANTS, *EVENT_MODES),
    throttled_size=12,
    throttled_variants=ALL_VARIANTS,
    throttle_rate=5.0,
    poll_interval=1.0,
    time_scale=60.0,
    span=1.5,
    # Two real seconds of waiting only: room for the harness's own calls before it on a busy host.
    quiet=2.0,
    tail=3.0,
    throttled_tail=3.0,
    warm_cap_base=3.0,
    warm_cap_per_job=0.0,
    parse_processes=1,
    parse_repeat=2,
    # About 50 s alone, with room for a busy machine. The smoke test lifts it (a skipped run has no
    # figures to check) and reports a run slower than this instead of failing.
    budget=200.0,
    # A few hundred others' jobs in the List window, so that a pass takes several pages.
    history_jobs=200,
    churn_rate=1200.0,
    smoke=True,
    prespawn=True,
    log_level="WARNING",
)


def _observed(
    stats: dict[str, Any], names: Sequence[str], listed_jobs: int, described_before: int
) -> tuple[set[str], bool]:
    """Jobs described so far, and whether the start-up is over.

    Over when every job has been described, or when a full ListTrainingJobs pass has happened and
    no new job was described since the previous look (a variant that describes each job on start
    is still starting while those Describes go on, even if it has listed everything already).

    :param listed_jobs: jobs a full pass pages through (ours and others' created since).
    """
    per_job = stats.get("jobs") or {}
    described = {name for name in names if (per_job.get(name) or {}).get("DescribeTrainingJob")}
    lists = int(metrics.variant_operations(stats).get("ListTrainingJobs", 0))
    listed = lists >= math.ceil(listed_jobs / LIST_PAGE)
    complete = len(described) == len(names) or (listed and len(described) == described_before)
    return described, complete


def spawn_trigger_process(
    plan: Plan, emulator: Any, n_jobs: int, variant: str, throttled: bool, run_dir: Path
) -> TriggerProcess:
    """Start the trigger process of one run (:func:`start_trigger_process` with the plan's figures)."""
    tag = f"n{n_jobs}-{variant}{'-throttled' if throttled else ''}"
    limit = plan.warm_cap(n_jobs, throttled) + plan.quiet + plan.span + plan.tail_for(throttled) + 600
    return start_trigger_process(
        emulator,
        variant,
        plan.workload(n_jobs, throttled).job_names,
        plan.poll_interval,
        limit,
        run_dir,
        tag,
        log_level=plan.log_level,
        profile=plan.profile,
    )


def _warm_up(
    plan: Plan,
    emulator: Any,
    names: Sequence[str],
    listed_jobs: Callable[[], int],
    go: float,
    cap: float,
    quiet_from: float,
) -> tuple[float | None, dict[str, float]]:
    """Wait until every job has been looked at once, or the cap, or the emulated second ``quiet_from``.

    :param listed_jobs: how many jobs a full List pass pages through by now.
    :param go: monotonic second the triggers were started.
    :param cap: longest warm-up (real seconds after ``go``).
    :param quiet_from: emulated second by which the warm-up ends (before the quiet window begins).
    :returns: the monotonic second the warm-up was over (None: not reached), and the monotonic second
        at which each job was first seen described.
    """
    first_seen: dict[str, float] = {}
    while True:
        now = time.monotonic()
        stats = emulator.stats()
        described, complete = _observed(stats, names, listed_jobs(), len(first_seen))
        for name in described:
            first_seen.setdefault(name, now)
        if complete:
            return now, first_seen
        if now - go >= cap or emulator.now() >= quiet_from:
            return None, first_seen
        time.sleep(0.25 if plan.smoke else 0.5)


def _jump_clock(emulator: Any, target: float) -> float:
    """Jump the emulated clock forward to ``target`` (never backwards); returns the jump asked for."""
    jump = target - emulator.now()
    if jump > 0:
        emulator.advance(jump)
    return jump


def _await_done(
    child: TriggerProcess, emulator: Any, first_step_real: float, deadline: float
) -> metrics.QuietWindow:
    """Measure the quiet window until the first step, then wait for every trigger to fire (stopping
    the stragglers at ``deadline``); returns the quiet window."""
    # The quiet window: only waiting until the first step.
    quiet_start, quiet_calls_start = time.monotonic(), metrics.variant_calls(emulator.stats())
    ended = child.expect("DONE", max(0.0, first_step_real - 0.05 - time.monotonic()))
    quiet = metrics.QuietWindow(
        quiet_start, time.monotonic(), quiet_calls_start, metrics.variant_calls(emulator.stats())
    )
    if not ended:
        ended = child.expect("DONE", max(0.0, deadline - time.monotonic()))
    if not ended:
        child.send("STOP")
        if not child.expect("DONE", 60.0):
            raise ProcessError(f"trigger process did not stop; see {child.log_path}")
    return quiet


def _cpu_used(before: float | None, after: float | None) -> float | None:
    """CPU seconds between two readings (None if either is unknown)."""
    return (after - before) if (before is not None and after is not None) else None


def _warm_up_figures(
    n_jobs: int, warm_at: float | None, first_seen: Mapping[str, float], jump: float
) -> dict[str, Any]:
    """How the warm-up went: reached or not, jobs not looked at, the clock jump that followed."""
    return {
        "warm_up_reached": warm_at is not None,
        # Jobs nobody had looked at when the steps began (a List pass counts for all).
        "not_looked_at_before_steps": 0 if warm_at is not None else n_jobs - len(first_seen),
        "clock_jump_emulated_seconds": max(0.0, jump),
    }


def _selected_after_go(
    jobs: Iterable[Mapping[str, Any]], names: Iterable[str], clock: metrics.ClockMap, go_child: float
) -> dict[str, float]:
    """Real seconds after GO at which each of ``names`` got capacity (jobs that never did are left out)."""
    wanted = set(names)
    selected = {}
    for job in jobs:
        if str(job["name"]) not in wanted:
            continue
        sel = selection_time(job)
        if sel is not None:
            selected[str(job["name"])] = round(clock.to_real(sel) - go_child, 4)
    return selected


def _workload_record(workload: Workload) -> dict[str, Any]:
    """The scenario's parameters, as recorded with each run."""
    return {
        "name": workload.name,
        "first_step_emulated": workload.first_step,
        "span_emulated": workload.span,
        "seed": workload.seed,
        "rate_limits": workload.rate_limits,
        "history_jobs": workload.history_jobs,
        "churn_rate_per_emulated_hour": workload.churn_rate,
    }


def _create_history(workload: Workload, emulator: Any, creator: JobCreator) -> dict[str, Any]:
    """Create the history jobs, then jump the clock past their age (see :mod:`benchmarks.background`)."""
    started = time.monotonic()
    created = create_history(workload, creator)
    if created:
        emulator.advance(HISTORY_AGE_SECONDS)
        emulator.now()  # let the world catch up now: the history ends before any event route exists
    return {"jobs": created, "seconds": time.monotonic() - started}


def _background_record(
    history: Mapping[str, Any],
    churn: ChurnStream,
    churn_counts: Mapping[str, int],
    jobs: Sequence[Mapping[str, Any]],
    workload: Workload,
) -> dict[str, Any]:
    """Others' jobs in the account during the run, for the run's JSON."""
    return {
        "history_jobs": history["jobs"],
        "history_seconds": history["seconds"],
        "history_age_emulated_seconds": HISTORY_AGE_SECONDS if history["jobs"] else 0.0,
        "history_status": count_by_status(jobs, f"{workload.name}-hist-"),
        "churn": {
            **churn.record(),
            # Jobs created by then (all of them after ours, so all inside the List window).
            "created_by": dict(churn_counts),
            "status_at_end": count_by_status(jobs, f"{workload.name}-churn-"),
        },
    }


def run_one(
    plan: Plan,
    emulator_proc: EmulatorProcess,
    emulator: Any,
    n_jobs: int,
    variant: str,
    throttled: bool,
    run_dir: Path,
    child: TriggerProcess | None = None,
) -> dict[str, Any]:
    """One variant at one size; returns the run's record (figures + raw timings).

    :param child: the run's trigger process if already started (see ``Plan.prespawn``).
    """
    workload = plan.workload(n_jobs, throttled)
    names = workload.job_names
    scenario_path = workload.write_scenario(
        run_dir / f"scenario-n{n_jobs}{'-throttled' if throttled else ''}.json"
    )
    if child is None:
        child = spawn_trigger_process(plan, emulator, n_jobs, variant, throttled, run_dir)
    # The scenario's clock starts when it loads: only once the trigger process is ready, so that its
    # imports (slow on a busy machine) cannot use up the time placed before the first capacity step.
    if not child.wait_ready(180.0):
        raise ProcessError(f"trigger process not ready; see {child.log_path}")
    emulator.load_scenario(scenario_path)
    loaded = time.monotonic()
    cap = plan.warm_cap(n_jobs, throttled)
    record: dict[str, Any] = {
        "n_jobs": n_jobs,
        "variant": variant,
        "throttled": throttled,
        "scenario": str(scenario_path),
    }
    creator = JobCreator(emulator.endpoint_url, emulator.region)
    churn = ChurnStream(workload, creator, emulator.now)
    churn_counts: dict[str, int] = {}
    route: EventRoute | None = child.event_route
    try:
        history = _create_history(workload, emulator, creator)
        if route is not None:
            route.connect()
        submit_started = time.monotonic()
        created = submit_jobs(emulator, names)
        submitted = time.monotonic()
        churn.start()
        creation_file = run_dir / f"created-n{n_jobs}-{variant}{'-throttled' if throttled else ''}.json"
        write_creation_times(child, emulator, names, creation_file)
        emulator_cpu0 = emulator_proc.cpu_seconds()
        child.send(f"GO {creation_file}")
        go = time.monotonic()
        churn_counts["go"] = churn.created
        start_epoch = float(emulator.clock()["start_epoch"])
        first_step_abs = start_epoch + workload.first_step
        quiet_from = first_step_abs - plan.quiet * plan.time_scale
        # The warm-up ends half a window before the quiet window at the latest, and the jump below
        # restores the whole window: a slow look at the clock on a busy host cannot eat into it.
        warm_until = quiet_from - plan.quiet * plan.time_scale / 2
        warm_at, first_seen = _warm_up(
            plan, emulator, names, lambda: n_jobs + churn.created, go, cap, warm_until
        )
        # Others' jobs due before the waiting window are created at their due times during the jump.
        churn.catch_up_through(quiet_from, emulator.advance)
        churn_counts["waiting_window"] = churn.created
        # Jump so that the first step comes `quiet` seconds from now, whatever the warm-up took.
        jump = _jump_clock(emulator, quiet_from)
        clock = emulator_clock(emulator)
        first_step_real = clock.to_real(first_step_abs)
        last_step_real = clock.to_real(start_epoch + workload.last_step)
        quiet = _await_done(child, emulator, first_step_real, last_step_real + plan.tail_for(throttled))
        emulator_cpu1 = emulator_proc.cpu_seconds()
        churn.stop()
        churn_counts["end"] = churn.created
        child.close()
        result = child.result()
        stats = emulator.stats()
        jobs = emulator.jobs()
        figures = metrics.run_figures(
            child=result,
            stats=stats,
            jobs=jobs,
            clock=clock,
            n_jobs=n_jobs,
            warm_at=warm_at,
            first_step_real=first_step_real,
            emulator_cpu=_cpu_used(emulator_cpu0, emulator_cpu1),
            quiet=quiet,
            poll_interval=plan.poll_interval,
        )
        figures.update(_warm_up_figures(n_jobs, warm_at, first_seen, jump))
        record.update(
            {
                "figures": figures,
                "created": created,
                "background": _background_record(history, churn, churn_counts, jobs, workload),
                "timings": {
                    "history_seconds": history["seconds"],
                    "submit_seconds": submitted - submit_started,
                    "import_seconds": result.get("import_seconds"),
                    "go_after_load": go - loaded,
                    "first_step_after_go": first_step_real - go,
                    "last_step_after_go": last_step_real - go,
                },
                "classpath": result.get("classpath"),
                "kwargs_example": result.get("kwargs_example"),
                "source_digest": result.get("source_digest"),
                "event_queue_url": result.get("event_queue_url"),
                # Raw material to recompute figures: seconds after GO of each job's selection.
                "selected_after_go": _selected_after_go(jobs, names, clock, float(result["t_go"])),
                "workload": _workload_record(workload),
            }
        )
    finally:
        churn.stop()
        if child.proc.poll() is None:
            child.send("STOP")
            child.close(timeout=30.0)
        if route is not None:
            try:
                record["event_route"] = route.close()
            except Exception as err:  # never hide the run's own error behind the clean-up's
                record["event_route"] = {
                    "queue_url": route.queue_url,
                    "error": f"{type(err).__name__}: {err}",
                }
            child.event_route = None
    return record


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
    command = "python -m benchmarks.run " + " ".join(sys.argv[1:] if argv is None else argv)
    return {
        "command": command.strip(),
        "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_revision": git_revision(),
        "machine": machine_info(),
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


def _stop(child: TriggerProcess | None, timeout: float = 10.0) -> None:
    """Stop a trigger process that will not be measured (if there is one), and drop its event queue."""
    if child is not None:
        child.send("STOP")
        child.close(timeout=timeout)
        if child.event_route is not None:
            child.event_route.close()
            child.event_route = None


#: Seconds the harness waits for an admin call of the offline SageMaker (scenario, reset, job views).
ADMIN_TIMEOUT = 300.0


def _run_or_error(
    plan: Plan,
    emulator_proc: EmulatorProcess,
    emulator: Any,
    n_jobs: int,
    variant: str,
    throttled: bool,
    run_dir: Path,
    child: TriggerProcess,
) -> dict[str, Any]:
    """:func:`run_one`, or a record of its error (one failed run must not end the benchmark)."""
    try:
        return run_one(plan, emulator_proc, emulator, n_jobs, variant, throttled, run_dir, child)
    except Exception as err:
        return {
            "n_jobs": n_jobs,
            "variant": variant,
            "throttled": throttled,
            "error": f"{type(err).__name__}: {err}",
            # Where it failed: a bare "timed out" says nothing of which call it was.
            "error_traceback": traceback.format_exc(),
        }


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
    emulator_env = child_env(bytecode_env(RESULTS / ".pycache"))
    emulator_proc = EmulatorProcess(emulator_env, run_dir / "emulator.log")
    upcoming: TriggerProcess | None = None
    try:
        from offline_sagemaker.remote import RemoteSageMaker

        # Loading the next run's scenario resets a world of thousands of jobs and queued events while the
        # emulator's event pump may still be delivering the last run's: far longer than a call's default.
        emulator = RemoteSageMaker(emulator_proc.url, timeout=ADMIN_TIMEOUT)
        for index, (n_jobs, variant, throttled) in enumerate(planned):
            child, upcoming = upcoming, None
            remaining = plan.budget - (time.monotonic() - started)
            label = f"N={n_jobs} {variant}{' throttled' if throttled else ''}"
            if plan.estimate(n_jobs, variant, throttled) > remaining:
                print(
                    f"[{index + 1}/{len(planned)}] {label}: skipped, {remaining:.0f} s of budget left",
                    flush=True,
                )
                result["runs"].append(
                    {"n_jobs": n_jobs, "variant": variant, "throttled": throttled, "skipped": "time budget"}
                )
                _stop(child)
                continue
            print(f"[{index + 1}/{len(planned)}] {label} ...", flush=True)
            run_started = time.monotonic()
            load_before = os.getloadavg()
            if child is None:
                child = spawn_trigger_process(plan, emulator, n_jobs, variant, throttled, run_dir)
            if plan.prespawn and index + 1 < len(planned):
                upcoming = spawn_trigger_process(plan, emulator, *planned[index + 1], run_dir)
            record = _run_or_error(plan, emulator_proc, emulator, n_jobs, variant, throttled, run_dir, child)
            record["run_seconds"] = time.monotonic() - run_started
            # Other work on the machine distorts latency and lag; the 1-minute load tells how much.
            record["loadavg_1m"] = {"start": load_before[0], "end": os.getloadavg()[0]}
            result["runs"].append(record)
            _print_run_summary(record)
            save_result(result, output)
    finally:
        _stop(upcoming)
        emulator_proc.close()


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
