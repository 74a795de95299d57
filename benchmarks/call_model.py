"""The call model: what a variant's waiting costs in SageMaker calls, from the trigger process's call log.

Apart from the rest of a run's figures (:mod:`benchmarks.metrics`) because it is a model, not a count:
it tells per-job polling from shared listing and from calls every job makes once, so that a run of a
few real minutes can say what a wait of hours costs (see :func:`call_model`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.percentiles import percentile

#: The service whose calls the call model is about; others (SQS in event mode) are counted apart.
SAGEMAKER = "sagemaker"


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
