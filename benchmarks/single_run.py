"""One run of the capacity benchmark: one variant at one size, from its trigger process to its record.

The phases (see :mod:`benchmarks.run`): load the scenario, create others' jobs, submit ours, ``GO``,
warm-up, the clock jump, the quiet window, the capacity steps, then the figures. Kept apart from the
command line and the loop over runs (:mod:`benchmarks.run`) because this is the part whose timing the
published figures depend on: it reads top to bottom as the schedule a run follows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import metrics
from benchmarks.background import (
    HISTORY_AGE_SECONDS,
    ChurnStream,
    JobCreator,
    count_by_status,
    create_history,
)
from benchmarks.events import EventRoute
from benchmarks.launch import (
    emulator_clock,
    error_record,
    start_trigger_process,
    stop_trigger_process,
    write_creation_times,
)
from benchmarks.plan import Plan
from benchmarks.processes import EmulatorProcess, ProcessError, TriggerProcess
from benchmarks.workload import Workload, selection_time, submit_jobs

LIST_PAGE = 100  # ListTrainingJobs' largest page: a full pass over N jobs takes ceil(N / 100) calls


def run_key(n_jobs: int, variant: str, throttled: bool) -> dict[str, Any]:
    """The fields that name a run in the result, first in every run's record (done, failed or skipped)."""
    return {"n_jobs": n_jobs, "variant": variant, "throttled": throttled}


def run_tag(n_jobs: int, variant: str, throttled: bool) -> str:
    """The run's name in the file names of its run directory (spec, log, creation times)."""
    return f"n{n_jobs}-{variant}{'-throttled' if throttled else ''}"


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
    limit = plan.warm_cap(n_jobs, throttled) + plan.quiet + plan.span + plan.tail_for(throttled) + 600
    return start_trigger_process(
        emulator,
        variant,
        plan.workload(n_jobs, throttled).job_names,
        plan.poll_interval,
        limit,
        run_dir,
        run_tag(n_jobs, variant, throttled),
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
    jump = target - float(emulator.now())
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
    record: dict[str, Any] = {**run_key(n_jobs, variant, throttled), "scenario": str(scenario_path)}
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
        creation_file = run_dir / f"created-{run_tag(n_jobs, variant, throttled)}.json"
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
        route_record = stop_trigger_process(child)
        if route_record is not None:
            record["event_route"] = route_record
    return record


def stop_unmeasured(child: TriggerProcess | None) -> None:
    """Stop a trigger process that will not be measured (if there is one), and drop its event queue."""
    if child is not None:
        stop_trigger_process(child, timeout=10.0)


def run_or_error(
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
        return {**run_key(n_jobs, variant, throttled), **error_record(err)}
