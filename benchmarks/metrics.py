"""Figures of one run, from the trigger process's measurements and the emulator's records; targets.

Clocks: the trigger process stamps events with ``time.monotonic()``; the emulator's emulated clock is
a linear function of the same system-wide monotonic clock (``start + elapsed * time_scale``), so the
harness calibrates ``real = r0 + (emulated - e0) / time_scale`` once after the last clock jump and
converts the emulator's selection times with it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.processes import FAKE_KEY
from benchmarks.workload import pending_seconds, selection_time

#: Operations the harness itself makes; never charged to a variant (the throttle counters are per
#: operation only; the call counts are told apart by access key id, see :func:`variant_operations`).
HARNESS_OPERATIONS = frozenset({"CreateTrainingJob"})
#: The access key id the trigger process signs with (its ``aws_default`` connection).
TRIGGER_KEY = FAKE_KEY
#: The service whose calls the call model is about; others (SQS in event mode) are counted apart.
SAGEMAKER = "sagemaker"
LAG_TARGET_SECONDS = 0.1


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


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated ``q``-th percentile (0..100), None for no values.

    The capacity page's :func:`airflow_provider_sm_prefs.plugin.stats.percentile`, figure for figure (a
    test holds them equal). Not imported from there: that package imports Airflow, which this driver
    process keeps out (its own logging, no Airflow home). ``statistics.quantiles(method="inclusive")``
    is the same method but rounds differently in the last bit, so published figures could move.
    """
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _summary(values: Sequence[float]) -> dict[str, float | int | None]:
    return {
        "count": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
        "mean": (sum(values) / len(values)) if values else None,
    }


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


def _rounds(starts: Sequence[float], gap: float = 2.0) -> list[tuple[float, int]]:
    """Group call start times into bursts (a paginated List pass): ``(first start, calls)`` each."""
    rounds: list[tuple[float, int]] = []
    last = -math.inf
    for t in sorted(starts):
        if t - last > gap or not rounds:
            rounds.append((t, 1))
        else:
            rounds[-1] = (rounds[-1][0], rounds[-1][1] + 1)
        last = t
    return rounds


def _passes(lists: Sequence[Sequence[Any]], gap: float = 2.0) -> list[tuple[float, int]]:
    """The List passes in the call log: ``(first start, pages)`` each.

    A pass starts with a page asked for without a ``NextToken``, except when it retries a first page
    that failed. Call logs without that flag (older results) are grouped by time (:func:`_rounds`).

    :param lists: the List entries of the call log, ``[start, end, operation, name, error, service,
        paged]``.
    """
    if not lists or any(len(entry) < 7 for entry in lists):
        return _rounds([float(entry[0]) for entry in lists], gap)
    passes: list[tuple[float, int]] = []
    retrying = False
    for entry in sorted(lists, key=lambda e: float(e[0])):
        start, error, paged = float(entry[0]), entry[4], bool(entry[6])
        if paged or retrying:
            if passes:
                passes[-1] = (passes[-1][0], passes[-1][1] + 1)
            else:
                passes.append((start, 1))
        else:
            passes.append((start, 1))
        retrying = not paged and error is not None
    return passes


def _service(entry: Sequence[Any]) -> str:
    """The service of a call-log entry (logs without it held SageMaker calls only)."""
    return str(entry[5]) if len(entry) > 5 else SAGEMAKER


def service_calls(calls: Sequence[Sequence[Any]]) -> dict[str, dict[str, int]]:
    """Logical calls per service and operation in the call log."""
    counts: dict[str, dict[str, int]] = {}
    for entry in calls:
        ops = counts.setdefault(_service(entry), {})
        ops[str(entry[2])] = ops.get(str(entry[2]), 0) + 1
    return counts


def _split_calls(
    calls: Sequence[Sequence[Any]],
) -> tuple[dict[str, list[float]], list[Sequence[Any]], int]:
    """Split the SageMaker calls of the log: each job's Describe starts, the List entries, and how
    many other calls. Calls to other services (SQS in event mode) are left out: see
    :func:`service_calls`."""
    per_job: dict[str, list[float]] = {}
    lists: list[Sequence[Any]] = []
    other = 0
    for entry in calls:
        if _service(entry) != SAGEMAKER:
            continue
        start, operation, name = entry[0], entry[2], entry[3]
        if str(operation).startswith("Describe") and name:
            per_job.setdefault(str(name), []).append(float(start))
        elif str(operation).startswith("List"):
            lists.append(entry)
        else:
            other += 1
    for times in per_job.values():
        times.sort()
    return per_job, lists, other


def _describe_rate(
    per_job: Mapping[str, Sequence[float]], selected_real: Mapping[str, float], steady_from: float
) -> tuple[float, float | None]:
    """Per-job polling: Describes per job-hour while waiting, and the median polling interval.

    :param per_job: each job's sorted Describe starts.
    """
    intervals: list[float] = []
    polling = 0
    for name, times in per_job.items():
        before = [t for t in times if t < selected_real.get(name, math.inf)]
        if len(before) >= 2:
            steady = [b - a for a, b in itertools.pairwise(before) if a >= steady_from]
            intervals += steady
            polling += 1 if steady else 0
    cadence = percentile(intervals, 50) if intervals else None
    if not cadence:
        return 0.0, cadence
    long_enough = sum(
        1
        for name, times in per_job.items()
        # Two cadences of steady waiting always hold one whole interval.
        if selected_real.get(name, math.inf) - max(times[0], steady_from) >= 2.0 * cadence
    )
    share = min(1.0, polling / long_enough) if long_enough else 1.0
    return 3600.0 / cadence * share, cadence


def _waiting_spans(
    per_job: Mapping[str, Sequence[float]], event_real: Mapping[str, float], end: float, go: float | None
) -> list[tuple[float, float]]:
    """Each job's ``(start, end)`` of waiting: from ``go`` (when every trigger started), or else from
    its first call, to its event (``end`` for jobs without one).

    :param per_job: each job's sorted Describe starts.
    """
    first = {name: times[0] for name, times in per_job.items()}
    return [
        (go if go is not None else first.get(name, math.inf), event_real.get(name, end))
        for name in event_real.keys() | first.keys()
    ]


def _list_rate(rounds: Sequence[tuple[float, int]], spans: Sequence[tuple[float, float]]) -> float:
    """Shared listing: List pages per job-hour waited, each pass after the first charged to the
    job-time waited since the previous pass.

    :param rounds: the List passes (see :func:`_rounds`).
    :param spans: each job's ``(start, end)`` of waiting, monotonic seconds.
    """
    if len(rounds) < 2:
        return 0.0
    pages, job_seconds = 0, 0.0
    for (previous, _), (start, count) in itertools.pairwise(rounds):
        covered = sum(max(0.0, min(stop, start) - max(begin, previous)) for begin, stop in spans)
        if covered > 0:
            pages += count
            job_seconds += covered
    return 3600.0 * pages / job_seconds if job_seconds > 0 else 0.0


def _fixed_per_job(
    per_job: Mapping[str, Sequence[float]], other: int, selected_real: Mapping[str, float], n_jobs: int
) -> float | None:
    """Calls per job that do not depend on the wait's length (None for no jobs)."""
    describes = sum(len(t) for t in per_job.values())
    # Every Describe that follows another one before the job got capacity is polling, not fixed.
    repeated = sum(
        max(0, sum(1 for t in times if t < selected_real.get(name, math.inf)) - 1)
        for name, times in per_job.items()
    )
    return (describes - repeated + other) / n_jobs if n_jobs else None


def _pages_per_pass(
    passes: Sequence[tuple[float, int]], window: tuple[float, float] | None
) -> dict[str, Any]:
    """List pages per pass: over the run and over the passes that started in ``window``."""
    pages = [count for _, count in passes]
    waiting = [count for start, count in passes if window is not None and window[0] <= start <= window[1]]
    return {
        "list_pages_per_pass": (sum(pages) / len(pages)) if pages else None,
        "list_pages_per_pass_max": max(pages, default=None),
        "list_pages_per_pass_waiting": (sum(waiting) / len(waiting)) if waiting else None,
        "list_pages": sum(pages),
        "list_pass_pages": pages,
    }


def call_model(
    calls: Sequence[Sequence[Any]],
    selected_real: Mapping[str, float],
    event_real: Mapping[str, float],
    n_jobs: int,
    end: float,
    steady_from: float = -math.inf,
    go: float | None = None,
    pass_gap: float = 2.0,
    window: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Calls per job-hour while waiting, and calls per job that do not depend on the wait's length.

    The emulator compresses the pending time but not the variants' real cadence, so each job here
    waits a minute or two of real time; a per-job constant (a Describe when the wait starts, one
    when it ends) weighs far more per job-hour than in production, where waits last hours. From the
    trigger process's call log (logical calls, see ``trigger_process._record_calls``):

    * per-job polling: Describes of a job that follow another Describe of it, both before the job
      got capacity; their median interval gives the rate (scaled by the share of jobs that poll);
    * shared listing: List calls grouped into passes; each pass after the first is charged to the
      job-time waited since the previous pass (a job waits from ``go``, when every trigger started,
      or else from its first call, to its event);
    * fixed per job: every other call (the first Describe, the one that sees the change, stops).

    ``per_job_hour_at_<h>h_waits`` = waiting rate + fixed / h. Only SageMaker calls are modelled;
    calls to other services (the SQS long-polls of event mode) are in :func:`service_calls`. A
    variant that never Describes a job before its change (event mode) has no per-job polling: 0.

    :param calls: ``[start, end, operation, job name, error]`` entries.
    :param selected_real: monotonic second at which each job got capacity.
    :param event_real: monotonic second of each job's trigger event.
    :param n_jobs: jobs in the run.
    :param end: monotonic end of the run (for jobs without an event).
    :param steady_from: polling intervals that start earlier are ignored (the warm-up, where creating
        clients stalls the event loop and stretches them).
    :param go: monotonic second at which every trigger started (None: each job from its first call).
    :param pass_gap: call logs without the NextToken flag: List calls closer than this are one pass.
    :param window: the waiting-only window (monotonic), for the pages per pass paid while waiting.
    """
    per_job, lists, other = _split_calls(calls)
    describe_rate, cadence = _describe_rate(per_job, selected_real, steady_from)
    rounds = _passes(lists, pass_gap)
    list_rate = _list_rate(rounds, _waiting_spans(per_job, event_real, end, go))
    fixed = _fixed_per_job(per_job, other, selected_real, n_jobs)
    model: dict[str, Any] = {
        "waiting_per_job_hour": describe_rate + list_rate,
        "describe_per_job_hour": describe_rate,
        "list_per_job_hour": list_rate,
        "describe_cadence_seconds": cadence,
        "list_passes": len(rounds),
        "fixed_per_job": fixed,
        "logical_calls": sum(1 for entry in calls if _service(entry) == SAGEMAKER),
        **_pages_per_pass(rounds, window),
    }
    for hours in (1.0, 4.0):
        model[f"per_job_hour_at_{hours:g}h_waits"] = describe_rate + list_rate + (fixed or 0.0) / hours
    return model


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
        "latency_seconds": {**_summary(latencies), "clock_uncertainty": clock.uncertainty},
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


def _find(
    runs: Iterable[Mapping[str, Any]], variant: str, n_jobs: int, throttled: bool
) -> Mapping[str, Any] | None:
    for run in runs:
        if (
            run.get("variant") == variant
            and run.get("n_jobs") == n_jobs
            and bool(run.get("throttled")) == throttled
            and run.get("figures")
        ):
            return run
    return None


TARGET_NAMES: tuple[str, ...] = (
    "API calls per job-hour as measured: stock / ours",
    "API calls per job-hour at 1-h waits (waiting rate + fixed per job): stock / ours",
    "p95 detection latency: ours <= stock",
    "CPU, % of one core, whole run",
    "CPU, % of one core, while waiting",
    "peak RSS of the trigger process",
    "worst event-loop lag, whole run",
    "worst event-loop lag, while waiting",
    "failed tasks under 10/s throttling",
    "poll mode: waiting calls per job-hour, stock / ours",
    "poll mode: p95 detection latency, ours / stock",
    "event mode: p95 detection latency",
    "event mode: per-job calls per job-hour while waiting",
    "event mode: CPU, % of one core, whole run",
    "event mode at 10,000 waits: peak RSS",
    "event mode at 10,000 waits: worst event-loop lag after start-up",
    "event mode at 10,000 waits: failed triggers",
    "event mode at 10,000 waits: p95 detection latency",
)


def _hint_note(
    runs: Sequence[Mapping[str, Any]], n_jobs: int, figure: Callable[[Mapping[str, Any]], Any]
) -> str:
    """The same figure of the ``events-hint`` run at ``n_jobs`` (event details as hints only), if it ran."""
    hint = _find(runs, "events-hint", n_jobs, False)
    value = figure(hint["figures"]) if hint else None
    return "" if value is None else f"events-hint (a Describe per event): {value:.1f}"


def _ratio(num: float | None, den: float | None) -> float | None:
    return (num / den) if (num is not None and den) else None


def _mode_targets(
    runs: Sequence[Mapping[str, Any]],
    n_jobs: int,
    o: Mapping[str, Any],
    st: Mapping[str, Any],
    add: Any,
) -> None:
    """Poll mode against stock and event mode at ``n_jobs`` (same run), event mode at 10,000 waits."""
    if o and st:
        o_wait = o["calls"]["model"].get("waiting_per_job_hour")
        s_wait = st["calls"]["model"].get("waiting_per_job_hour")
        ratio = _ratio(s_wait, o_wait)
        add(
            TARGET_NAMES[9],
            ratio,
            ">= 20x",
            None if ratio is None else ratio >= 20.0,
            f"ours {o_wait:.2f}/job-h, stock {s_wait:.1f}/job-h" if ratio is not None else "",
        )
        o95, s95 = o["latency_seconds"]["p95"], st["latency_seconds"]["p95"]
        share = _ratio(o95, s95)
        add(TARGET_NAMES[10], share, "<= 0.6", None if share is None else share <= 0.6)
    events = _find(runs, "events", n_jobs, False)
    if events:
        e = events["figures"]
        p95 = e["latency_seconds"]["p95"]
        add(
            TARGET_NAMES[11],
            p95,
            "<= 2 s",
            None if p95 is None else p95 <= 2.0,
            _hint_note(runs, n_jobs, lambda f: f["latency_seconds"]["p95"]),
        )
        polling = e["calls"]["model"].get("describe_per_job_hour")
        add(TARGET_NAMES[12], polling, "0", None if polling is None else polling == 0, "List passes excluded")
        cpu = e["cpu"]["percent_of_one_core"]
        hint_cpu = _hint_note(runs, n_jobs, lambda f: f["cpu"]["percent_of_one_core"])
        add(
            TARGET_NAMES[13],
            cpu,
            "<= 5 %",
            cpu <= 5.0,
            "; ".join(n for n in ("start-up, others' events and detection included", hint_cpu) if n),
        )
    big = _find(runs, "events", 10_000, False)
    if big:
        b = big["figures"]
        rss = b["memory"]["peak_rss_mb"]
        add(TARGET_NAMES[14], rss, "<= 500 MB", rss <= 500.0)
        after = [b["loop_lag_seconds"].get(k) for k in ("max_while_waiting", "max_after_first_step")]
        lag = max((v for v in after if v is not None), default=None)
        at_stop = b["loop_lag_seconds"].get("max_at_stop")
        add(
            TARGET_NAMES[15],
            lag,
            "< 0.1 s",
            None if lag is None else lag < LAG_TARGET_SECONDS,
            f"{at_stop * 1000:.0f} ms while the run was stopped" if at_stop is not None else "",
        )
        failed = b["tasks"]["failed"]
        add(
            TARGET_NAMES[16],
            failed,
            "0",
            failed == 0,
            f"{b['tasks']['undetected_at_end']} undetected at the end",
        )
        p95 = b["latency_seconds"]["p95"]
        add(
            TARGET_NAMES[17],
            p95,
            "<= 2 s",
            None if p95 is None else p95 <= 2.0,
            _hint_note(runs, 10_000, lambda f: f["latency_seconds"]["p95"]),
        )


def evaluate_targets(runs: Sequence[Mapping[str, Any]], n_jobs: int = 1000) -> list[dict[str, Any]]:
    """The lead's targets for ``ours`` at ``n_jobs``: each with value, goal, met (None = not measured).

    Where a target reads differently over the whole run (start-up included) and in the waiting-only
    window, both are listed.
    """
    ours = _find(runs, "ours", n_jobs, False)
    stock = _find(runs, "stock", n_jobs, False)
    ours_thr = _find(runs, "ours", n_jobs, True)
    o: Mapping[str, Any] = ours["figures"] if ours else {}
    st: Mapping[str, Any] = stock["figures"] if stock else {}
    rows: dict[str, dict[str, Any]] = {}

    def add(name: str, value: Any, goal: str, met: bool | None, note: str = "") -> None:
        rows[name] = {"target": name, "value": value, "goal": goal, "met": met, "note": note}

    if o and st:
        o_rate, s_rate = o["calls"]["per_job_hour_real"], st["calls"]["per_job_hour_real"]
        ratio = _ratio(s_rate, o_rate)
        add(
            TARGET_NAMES[0],
            ratio,
            ">= 20x",
            None if ratio is None else ratio >= 20.0,
            f"ours {o_rate:.1f}/job-h, stock {s_rate:.1f}/job-h" if ratio is not None else "",
        )
        o_model = o["calls"]["model"].get("per_job_hour_at_1h_waits")
        s_model = st["calls"]["model"].get("per_job_hour_at_1h_waits")
        model_ratio = _ratio(s_model, o_model)
        add(
            TARGET_NAMES[1],
            model_ratio,
            ">= 20x",
            None if model_ratio is None else model_ratio >= 20.0,
            (
                f"ours {o['calls']['model']['waiting_per_job_hour']:.2f}/job-h waiting + "
                f"{o['calls']['model']['fixed_per_job']:.2f} per job; stock "
                f"{st['calls']['model']['waiting_per_job_hour']:.1f}/job-h + {st['calls']['model']['fixed_per_job']:.2f}"
            )
            if model_ratio is not None
            else "",
        )
        o95, s95 = o["latency_seconds"]["p95"], st["latency_seconds"]["p95"]
        add(
            TARGET_NAMES[2],
            o95,
            f"<= stock ({s95:.1f} s)" if s95 is not None else "<= stock",
            (o95 <= s95) if (o95 is not None and s95 is not None) else None,
            f"ours p95 {o95:.1f} s, stock p95 {s95:.1f} s" if (o95 is not None and s95 is not None) else "",
        )
    if o:
        cpu = o["cpu"]["percent_of_one_core"]
        add(TARGET_NAMES[3], cpu, "<= 5 %", cpu <= 5.0, "start-up and detection bursts included")
        waiting_cpu = o["cpu"].get("waiting_percent_of_one_core")
        add(TARGET_NAMES[4], waiting_cpu, "<= 5 %", None if waiting_cpu is None else waiting_cpu <= 5.0)
        rss = o["memory"]["peak_rss_mb"]
        add(TARGET_NAMES[5], rss, "<= 300 MB", rss <= 300.0, "includes the imports (Airflow, botocore)")
        lag = o["loop_lag_seconds"]["max"]
        add(TARGET_NAMES[6], lag, "< 0.1 s", None if lag is None else lag < LAG_TARGET_SECONDS)
        quiet_lag = o["loop_lag_seconds"].get("max_while_waiting")
        add(
            TARGET_NAMES[7],
            quiet_lag,
            "< 0.1 s",
            None if quiet_lag is None else quiet_lag < LAG_TARGET_SECONDS,
        )
    if ours_thr:
        failed = ours_thr["figures"]["tasks"]["failed"]
        undetected = ours_thr["figures"]["tasks"]["undetected_at_end"]
        add(
            TARGET_NAMES[8],
            failed,
            "0",
            failed == 0,
            f"{undetected} still waiting for their event at the end",
        )
    _mode_targets(runs, n_jobs, o, st, add)
    out = []
    for name in TARGET_NAMES:
        out.append(
            rows.get(name) or {"target": name, "value": None, "goal": "", "met": None, "note": "not run"}
        )
    return out
