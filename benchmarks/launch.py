"""Starting a measured run, shared by the benchmarks: the trigger process, the jobs' creation times for
its GO, and the emulated clock read against the host's."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks import metrics
from benchmarks.events import EventRoute
from benchmarks.processes import ProcessError, TriggerProcess, airflow_env, bytecode_env, child_env
from benchmarks.variants import EVENT_QUEUE_ENV, VARIANTS
from benchmarks.workload import preference_list

RESULTS = Path(__file__).resolve().parent / "results"


def result_path(name: str, smoke: bool) -> Path:
    """``benchmarks/results/<name>-<UTC timestamp>[-smoke].json``: where a run writes its result."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return RESULTS / f"{name}-{stamp}{'-smoke' if smoke else ''}.json"


def save_result(result: Mapping[str, Any], output: Path) -> None:
    """Write the result as it stands (after every run, so an interrupted benchmark keeps its figures)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")


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
