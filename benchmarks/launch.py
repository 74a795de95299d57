"""Starting a measured run, shared by the benchmarks: the offline SageMaker process, the trigger process,
the jobs' creation times for its GO, the emulated clock read against the host's, and the parts of a
result every benchmark writes the same way (its header, a failed run's error, a run's timing)."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks import metrics
from benchmarks.events import EventRoute
from benchmarks.processes import (
    EmulatorProcess,
    ProcessError,
    TriggerProcess,
    airflow_env,
    bytecode_env,
    child_env,
    git_revision,
    machine_info,
)
from benchmarks.variants import EVENT_QUEUE_ENV, VARIANTS
from benchmarks.workload import preference_list

RESULTS = Path(__file__).resolve().parent / "results"
#: Seconds the harness waits for an admin call of the offline SageMaker (scenario, reset, job views).
#: Loading the next run's scenario resets a world of thousands of jobs and queued events while the
#: emulator's event pump may still be delivering the last run's: far longer than a call's default.
ADMIN_TIMEOUT = 300.0


def result_path(name: str, smoke: bool) -> Path:
    """``benchmarks/results/<name>-<UTC timestamp>[-smoke].json``: where a run writes its result."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return RESULTS / f"{name}-{stamp}{'-smoke' if smoke else ''}.json"


def save_result(result: Mapping[str, Any], output: Path) -> None:
    """Write the result as it stands (after every run, so an interrupted benchmark keeps its figures)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")


def result_header(module: str, argv: Sequence[str] | None) -> dict[str, Any]:
    """The fields a benchmark's result starts with: the command that reproduces it, when, on what
    revision and machine (a published figure must say how to make it again).

    :param module: the benchmark's module, as ``python -m`` runs it.
    :param argv: the arguments given to its ``main`` (None: the process's own).
    """
    command = f"python -m {module} " + " ".join(sys.argv[1:] if argv is None else argv)
    return {
        "command": command.strip(),
        "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_revision": git_revision(),
        "machine": machine_info(),
    }


def error_record(err: BaseException) -> dict[str, str]:
    """A failed run's error and where it happened (a bare "timed out" says nothing of which call it
    was), for its record: one failed run must not end the benchmark. Call it in the ``except`` block."""
    return {"error": f"{type(err).__name__}: {err}", "error_traceback": traceback.format_exc()}


def run_timing(started: float, load_at_start: float) -> dict[str, Any]:
    """A run's wall time and the machine's 1-minute load around it: other work on the machine distorts
    latency and lag, and the load tells how much.

    :param started: monotonic second the run started.
    :param load_at_start: the 1-minute load average then.
    """
    return {
        "run_seconds": time.monotonic() - started,
        "loadavg_1m": {"start": load_at_start, "end": os.getloadavg()[0]},
    }


@contextmanager
def benchmark_emulator(run_dir: Path) -> Iterator[tuple[EmulatorProcess, Any]]:
    """One offline SageMaker process for all of a benchmark's runs, and its admin client
    (``offline_sagemaker.remote.RemoteSageMaker``); the process is closed on the way out.

    :param run_dir: where its log goes (``emulator.log``).
    """
    proc = EmulatorProcess(child_env(bytecode_env(RESULTS / ".pycache")), run_dir / "emulator.log")
    try:
        from offline_sagemaker.remote import RemoteSageMaker

        yield proc, RemoteSageMaker(proc.url, timeout=ADMIN_TIMEOUT)
    finally:
        proc.close()


def emulator_clock(emulator: Any, samples: int = 5) -> metrics.ClockMap:
    """Calibrate emulated -> monotonic time on the call with the shortest round trip."""
    best: tuple[float, float, float] | None = None
    scale = 1.0
    for _ in range(samples):
        before = time.monotonic()
        clock = emulator.clock()
        after = time.monotonic()
        scale = float(clock["time_scale"])
        if best is None or after - before < best[2]:
            best = ((before + after) / 2, float(clock["now"]), after - before)
    assert best is not None
    return metrics.ClockMap(real=best[0], emulated=best[1], time_scale=scale, uncertainty=best[2] / 2)


def start_trigger_process(
    emulator: Any,
    variant: str,
    names: Sequence[str],
    poll_interval: float,
    limit_seconds: float,
    run_dir: Path,
    tag: str,
    log_level: str = "INFO",
    profile: bool = False,
    extra_env: Mapping[str, str] | None = None,
) -> TriggerProcess:
    """Start a trigger process for ``names`` (one trigger each); it imports everything and waits for GO.

    For a variant in event mode, the run's SQS queue is created first and named in the process's
    environment (:data:`~benchmarks.variants.EVENT_QUEUE_ENV`); its rule is put when the run starts.

    :param limit_seconds: the process stops its triggers this long after GO whatever happens.
    :param tag: names the run's files in ``run_dir`` (spec, log, result, profile).
    :param extra_env: more environment for the process, over the rest (e.g. another
        ``AIRFLOW_CONN_AWS_DEFAULT``).
    """
    route = EventRoute(emulator, f"sm-prefs-bench-{tag}") if VARIANTS[variant].event_mode else None
    env = child_env(
        {
            **bytecode_env(RESULTS / ".pycache"),
            **airflow_env(run_dir / "airflow_home", emulator.endpoint_url),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": log_level,
            **({EVENT_QUEUE_ENV: route.queue_url} if route is not None else {}),
            **VARIANTS[variant].env,
            **(extra_env or {}),
        }
    )
    spec = {
        "variant": variant,
        "jobs": list(names),
        "preferences": preference_list(),
        "poll_interval": poll_interval,
        "limit_seconds": limit_seconds,
        "output": str(run_dir / f"trigger-{tag}.json"),
        "profile": str(run_dir / f"profile-{tag}.prof") if profile else None,
    }
    child = TriggerProcess(spec, run_dir / f"spec-{tag}.json", env, run_dir / f"trigger-{tag}.log")
    child.event_route = route
    return child


def stop_trigger_process(child: TriggerProcess, timeout: float = 30.0) -> dict[str, Any] | None:
    """Stop a run's trigger process if it still runs, and delete its event route (event mode).

    Called on the way out of a run, error or not: a failure to delete the route goes into the returned
    record rather than raising, so that it never hides the run's own error.

    :returns: the event route's record for the run's JSON (None for a run without one).
    """
    if child.proc.poll() is None:
        child.send("STOP")
        child.close(timeout=timeout)
    route, child.event_route = child.event_route, None
    if route is None:
        return None
    try:
        return route.close()
    except Exception as err:
        return {"queue_url": route.queue_url, "error": f"{type(err).__name__}: {err}"}


def creation_times(emulator: Any, names: Sequence[str]) -> dict[str, str]:
    """Each job's CreationTime (ISO, emulated clock), read from the emulator's admin view."""
    wanted = set(names)
    return {
        job["name"]: datetime.fromtimestamp(float(job["created_at"]), tz=timezone.utc).isoformat()
        for job in emulator.jobs()
        if job["name"] in wanted
    }


def write_creation_times(child: TriggerProcess, emulator: Any, names: Sequence[str], path: Path) -> None:
    """Wait until the trigger process is ready, then write the jobs' CreationTimes for its GO."""
    if not child.wait_ready(180.0):
        raise ProcessError(f"trigger process not ready; see {child.log_path}")
    path.write_text(json.dumps(creation_times(emulator, names)), encoding="utf-8")
