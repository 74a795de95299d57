"""Figures of one run, from the trigger process's measurements and the emulator's records.

Clocks: the trigger process stamps events with ``time.monotonic()``; the emulator's emulated clock is
a linear function of the same system-wide monotonic clock (``start + elapsed * time_scale``), so the
harness calibrates ``real = r0 + (emulated - e0) / time_scale`` once after the last clock jump and
converts the emulator's selection times with it.

The call model (:mod:`benchmarks.call_model`), the percentile method (:mod:`benchmarks.percentiles`)
and the targets (:mod:`benchmarks.targets`) have their own modules; their names stay importable from
here, where the benchmark and its tests first found them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.call_model import SAGEMAKER, call_model, service_calls
from benchmarks.percentiles import percentile, summary
from benchmarks.processes import FAKE_KEY
from benchmarks.targets import LAG_TARGET_SECONDS, TARGET_NAMES, evaluate_targets
from benchmarks.workload import pending_seconds, selection_time

__all__ = [
    "HARNESS_OPERATIONS",
    "LAG_TARGET_SECONDS",
    "SAGEMAKER",
    "TARGET_NAMES",
    "TRIGGER_KEY",
    "ClockMap",
    "QuietWindow",
    "call_model",
    "evaluate_targets",
    "percentile",
    "run_figures",
    "service_calls",
    "variant_calls",
    "variant_operations",
]

#: Operations the harness itself makes; never charged to a variant (the throttle counters are per
#: operation only; the call counts are told apart by access key id, see :func:`variant_operations`).
HARNESS_OPERATIONS = frozenset({"CreateTrainingJob"})
#: The access key id the trigger process signs with (its ``aws_default`` connection).
TRIGGER_KEY = FAKE_KEY


@dataclass(frozen=True)
class ClockMap:
    """Emulated epoch seconds -> this machine's monotonic seconds.

    :param real: monotonic seconds at the calibration point.
    :param emulated: emulated epoch seconds at the same point.
    :param time_scale: emulated seconds per real second.
    :param uncertainty: half the round trip of the calibration call (seconds).
    """

    real: float
    emulated: float
    time_scale: float
    uncertainty: float

    def to_real(self, emulated: float) -> float:
        """Monotonic seconds at which the emulated clock showed ``emulated``."""
        return self.real + (emulated - self.emulated) / self.time_scale


def _cpu_at(samples: Sequence[Sequence[float]], t: float) -> float | None:
    """CPU seconds at monotonic second ``t``, interpolated between the samples around it."""
    for before, after in itertools.pairwise(samples):
        if before[0] <= t <= after[0]:
            span = after[0] - before[0]
            weight = (t - before[0]) / span if span > 0 else 0.0
            return before[1] + (after[1] - before[1]) * weight
    return None


def _window_rate(samples: Sequence[Sequence[float]], start: float, end: float) -> float | None:
    """CPU seconds per wall second between ``start`` and ``end`` (from the once-a-second samples)."""
    if end <= start:
        return None
    first, last = _cpu_at(samples, start), _cpu_at(samples, end)
    if first is None or last is None:
        return None
    return (last - first) / (end - start)


@dataclass(frozen=True)
class QuietWindow:
    """The stretch between the clock jump and the first capacity step: every job waits, nothing changes.

    What a variant costs while it simply waits (production's normal state, for hours) is measured here.

    :param start: monotonic second the window opened.
    :param end: monotonic second it closed.
    :param calls_start: variant calls the emulator had counted at ``start``.
    :param calls_end: the same at ``end``.
    """

    start: float
    end: float
    calls_start: int
    calls_end: int

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


def variant_operations(stats: Mapping[str, Any]) -> dict[str, int]:
    """SageMaker calls in ``stats`` that the variant made, by operation: those signed with the trigger
    process's access key id (the harness signs its own with ``workload.HARNESS_KEY``). From an emulator
    without per-key counts: every operation but the harness's."""
    per_key = stats.get("access_keys")
    if per_key is None:
        return {
            op: int(n) for op, n in (stats.get("operations") or {}).items() if op not in HARNESS_OPERATIONS
        }
    return {op: int(n) for op, n in (per_key.get(TRIGGER_KEY) or {}).items()}


def variant_calls(stats: Mapping[str, Any]) -> int:
    """SageMaker calls in ``stats`` that the variant made (see :func:`variant_operations`)."""
    return sum(variant_operations(stats).values())


def run_figures(
    *,
    child: Mapping[str, Any],
    stats: Mapping[str, Any],
    jobs: Iterable[Mapping[str, Any]],
    clock: ClockMap,
    n_jobs: int,
    warm_at: float | None,
    first_step_real: float,
    emulator_cpu: float | None,
    quiet: QuietWindow | None,
    poll_interval: float = 30.0,
) -> dict[str, Any]:
    """Every figure of one run (JSON-ready).

    :param child: the trigger process's result.
    :param stats: the emulator's ``stats()`` after the run.
    :param jobs: the emulator's ``jobs()`` after the run.
    :param clock: the emulated -> real mapping.
    :param n_jobs: jobs submitted.
    :param warm_at: monotonic second at which every job had been looked at once (None: not reached).
    :param first_step_real: monotonic second of the first capacity step.
    :param emulator_cpu: CPU seconds the emulator used during the run.
    :param quiet: the waiting-only window (None if the run had none).
    :param poll_interval: the variants' cadence (to tell List passes apart in older call logs).
    """
    go, end = float(child["t_go"]), float(child["t_end"])
    wall = max(end - go, 1e-9)
    by_name = {str(job["name"]): job for job in jobs}
    records: Mapping[str, Mapping[str, Any]] = child["jobs"]

    operations = variant_operations(stats)
    total_calls = sum(operations.values())
    throttled = {
        op: int(n) for op, n in (stats.get("throttled") or {}).items() if op not in HARNESS_OPERATIONS
    }

    latencies: list[float] = []
    failed: list[dict[str, Any]] = []
    undetected = 0
    detected_before_selection = 0
    waiting_real = 0.0
    waiting_emulated = 0.0
    pending_emulated: list[float] = []
    for name, record in records.items():
        event_t = record.get("event_t")
        waiting_real += (float(event_t) if event_t is not None else end) - go
        job = by_name.get(name, {})
        pending = pending_seconds(job) if job else None
        if pending is not None:
            pending_emulated.append(pending)
            waiting_emulated += pending
        if record.get("exception"):
            failed.append({"job": name, "why": record["exception"]})
            continue
        if event_t is None:
            undetected += 1
            continue
        if record.get("status") != "success":
            failed.append(
                {
                    "job": name,
                    "why": f"{record.get('status')} {record.get('error_type') or ''}: {record.get('reason')}",
                }
            )
            continue
        selected = selection_time(job) if job else None
        if selected is None:
            continue
        latency = float(event_t) - clock.to_real(selected)
        if latency < -clock.uncertainty - 0.05:
            detected_before_selection += 1
        latencies.append(max(0.0, latency))

    selected_real = {
        name: clock.to_real(sel)
        for name, job in by_name.items()
        if name in records and (sel := selection_time(job)) is not None
    }
    event_real = {name: float(r["event_t"]) for name, r in records.items() if r.get("event_t") is not None}
    call_log = child.get("calls") or []
    model = call_model(
        call_log,
        selected_real,
        event_real,
        n_jobs,
        end,
        steady_from=warm_at or go,
        go=go,
        pass_gap=min(2.0, poll_interval / 4),
        window=(quiet.start, quiet.end) if quiet is not None else None,
    )
    by_service = service_calls(call_log)
    sqs = by_service.get("sqs") or {}
    sqs_total = sum(sqs.values())

    # The run ends when the harness stops it (``end``, where the CPU figures end too); what the loop
    # does after that (cancelling the triggers still waiting, as a triggerer does when it stops) is
    # reported on its own: ``max_at_stop``.
    lags = [float(lag) for t, lag in child.get("lags") or [] if float(t) <= end]
    stop_lags = [float(lag) for t, lag in child.get("lags") or [] if float(t) > end]
    quiet_lags = (
        [float(lag) for t, lag in child.get("lags") or [] if quiet.start <= float(t) <= quiet.end]
        if quiet is not None
        else []
    )
    steady_lags = [float(lag) for t, lag in child.get("lags") or [] if first_step_real <= float(t) <= end]
    samples = child.get("samples") or []
    cpu = float(child["cpu_end"]) - float(child["cpu_go"])
    steady_rate = _window_rate(samples, first_step_real, end)
    quiet_rate = _window_rate(samples, quiet.start, quiet.end) if quiet is not None else None
    peak_rss = int(child["peak_rss_bytes"])
    rss_go = int(child["rss_go_bytes"])
    per_k = 1000.0 / n_jobs if n_jobs else 0.0
    return {
        "n_jobs": n_jobs,
        "shared_poll": child.get("shared_poll"),
        "ended_by": child.get("ended_by"),
        "wall_seconds": wall,
        "warm_up_seconds": (warm_at - go) if warm_at is not None else None,
        "first_step_after_go_seconds": first_step_real - go,
        "calls": {
            "total": total_calls,
            "by_operation": operations,
            "throttled_total": sum(throttled.values()),
            "throttled_by_operation": throttled,
            "per_job_hour_real": total_calls / (waiting_real / 3600.0) if waiting_real > 0 else None,
            "per_job_hour_emulated": total_calls / (waiting_emulated / 3600.0)
            if waiting_emulated > 0
            else None,
            "per_job": total_calls / n_jobs if n_jobs else None,
            "model": model,
            # Calls to other services, from the trigger process's log (logical calls; the emulator
            # counts SageMaker requests only). SQS: event mode's long-polls and deletes.
            "sqs": {
                "total": sqs_total,
                "by_operation": sqs,
                "per_hour_real": 3600.0 * sqs_total / wall,
                "per_job_hour_real": sqs_total / (waiting_real / 3600.0) if waiting_real > 0 else None,
            },
            "logical_by_service": by_service,
        },
        "waiting": {
            "real_job_hours": waiting_real / 3600.0,
            "emulated_job_hours": waiting_emulated / 3600.0,
            "emulated_pending_minutes": {
                "min": min(pending_emulated) / 60 if pending_emulated else None,
                "p50": (percentile(pending_emulated, 50) or 0) / 60 if pending_emulated else None,
                "max": max(pending_emulated) / 60 if pending_emulated else None,
            },
        },
        "latency_seconds": {**summary(latencies), "clock_uncertainty": clock.uncertainty},
        "detected_before_selection": detected_before_selection,
        "cpu": {
            "seconds": cpu,
            "seconds_per_1000_jobs": cpu * per_k,
            "percent_of_one_core": 100.0 * cpu / wall,
            "waiting_percent_of_one_core": 100.0 * quiet_rate if quiet_rate is not None else None,
            "detection_percent_of_one_core": 100.0 * steady_rate if steady_rate is not None else None,
        },
        "memory": {
            "peak_rss_mb": peak_rss / 2**20,
            "rss_after_imports_mb": rss_go / 2**20,
            "peak_rss_growth_per_1000_jobs_mb": max(0, peak_rss - rss_go) / 2**20 * per_k,
            "max_threads": max((int(s[3]) for s in samples), default=None),
            "max_open_fds": max((int(s[4]) for s in samples), default=None),
        },
        "loop_lag_seconds": {
            "max": max(lags) if lags else None,
            "p99": percentile(lags, 99),
            "over_100ms": sum(1 for lag in lags if lag > LAG_TARGET_SECONDS),
            "max_while_waiting": max(quiet_lags) if quiet_lags else None,
            "max_after_first_step": max(steady_lags) if steady_lags else None,
            "max_at_stop": max(stop_lags) if stop_lags else None,
            "samples": len(lags),
        },
        "tasks": {
            "failed": len(failed),
            "failed_examples": failed[:5],
            "undetected_at_end": undetected,
            "succeeded": len(latencies),
        },
        "emulator_cpu_seconds": emulator_cpu,
    }
