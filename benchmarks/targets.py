"""The lead's targets for the benchmark, judged from the figures of a finished result's runs.

Apart from :mod:`benchmarks.metrics` because it answers another question: the figures say what a run
measured, the targets whether that is good enough. They read only the figures' JSON, so a published
result (``docs/data/``) can be judged again without running anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

#: The worst event-loop lag a run may show (seconds).
LAG_TARGET_SECONDS = 0.1
#: ``add(name, value, goal, met, note="")``: records one target's row.
AddTarget = Callable[..., None]


def find_run(
    runs: Iterable[Mapping[str, Any]], variant: str, n_jobs: int, throttled: bool
) -> Mapping[str, Any] | None:
    """The run of ``variant`` at ``n_jobs`` (throttled or not) that has figures, if there is one."""
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
    hint = find_run(runs, "events-hint", n_jobs, False)
    value = figure(hint["figures"]) if hint else None
    return "" if value is None else f"events-hint (a Describe per event): {value:.1f}"


def _ratio(num: float | None, den: float | None) -> float | None:
    return (num / den) if (num is not None and den) else None


def _met(value: float | None, ok: Callable[[float], bool]) -> bool | None:
    """Whether ``value`` meets its goal; None when it was not measured."""
    return None if value is None else ok(value)


def _at_least_20x(
    add: AddTarget, name: str, stock: float | None, ours: float | None, note: Callable[[], str]
) -> None:
    """A "stock / ours >= 20x" target; its note (which formats both figures) only when the ratio exists."""
    ratio = _ratio(stock, ours)
    add(name, ratio, ">= 20x", _met(ratio, lambda r: r >= 20.0), note() if ratio is not None else "")


def _event_p95(
    add: AddTarget, name: str, runs: Sequence[Mapping[str, Any]], n_jobs: int, figures: Mapping[str, Any]
) -> None:
    """Event mode's p95 detection latency at ``n_jobs`` (goal 2 s), with the ``events-hint`` run's beside it."""
    p95 = figures["latency_seconds"]["p95"]
    add(
        name,
        p95,
        "<= 2 s",
        _met(p95, lambda v: v <= 2.0),
        _hint_note(runs, n_jobs, lambda f: f["latency_seconds"]["p95"]),
    )


def _mode_targets(
    runs: Sequence[Mapping[str, Any]],
    n_jobs: int,
    o: Mapping[str, Any],
    st: Mapping[str, Any],
    add: AddTarget,
) -> None:
    """Poll mode against stock and event mode at ``n_jobs`` (same run), event mode at 10,000 waits."""
    if o and st:
        o_wait = o["calls"]["model"].get("waiting_per_job_hour")
        s_wait = st["calls"]["model"].get("waiting_per_job_hour")
        _at_least_20x(
            add, TARGET_NAMES[9], s_wait, o_wait, lambda: f"ours {o_wait:.2f}/job-h, stock {s_wait:.1f}/job-h"
        )
        o95, s95 = o["latency_seconds"]["p95"], st["latency_seconds"]["p95"]
        share = _ratio(o95, s95)
        add(TARGET_NAMES[10], share, "<= 0.6", _met(share, lambda v: v <= 0.6))
    events = find_run(runs, "events", n_jobs, False)
    if events:
        e = events["figures"]
        _event_p95(add, TARGET_NAMES[11], runs, n_jobs, e)
        polling = e["calls"]["model"].get("describe_per_job_hour")
        add(TARGET_NAMES[12], polling, "0", _met(polling, lambda v: v == 0), "List passes excluded")
        cpu = e["cpu"]["percent_of_one_core"]
        hint_cpu = _hint_note(runs, n_jobs, lambda f: f["cpu"]["percent_of_one_core"])
        add(
            TARGET_NAMES[13],
            cpu,
            "<= 5 %",
            cpu <= 5.0,
            "; ".join(n for n in ("start-up, others' events and detection included", hint_cpu) if n),
        )
    big = find_run(runs, "events", 10_000, False)
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
            _met(lag, lambda v: v < LAG_TARGET_SECONDS),
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
        _event_p95(add, TARGET_NAMES[17], runs, 10_000, b)


def evaluate_targets(runs: Sequence[Mapping[str, Any]], n_jobs: int = 1000) -> list[dict[str, Any]]:
    """The lead's targets for ``ours`` at ``n_jobs``: each with value, goal, met (None = not measured).

    Where a target reads differently over the whole run (start-up included) and in the waiting-only
    window, both are listed.
    """
    ours = find_run(runs, "ours", n_jobs, False)
    stock = find_run(runs, "stock", n_jobs, False)
    ours_thr = find_run(runs, "ours", n_jobs, True)
    o: Mapping[str, Any] = ours["figures"] if ours else {}
    st: Mapping[str, Any] = stock["figures"] if stock else {}
    rows: dict[str, dict[str, Any]] = {}

    def add(name: str, value: Any, goal: str, met: bool | None, note: str = "") -> None:
        rows[name] = {"target": name, "value": value, "goal": goal, "met": met, "note": note}

    if o and st:
        o_rate, s_rate = o["calls"]["per_job_hour_real"], st["calls"]["per_job_hour_real"]
        _at_least_20x(
            add, TARGET_NAMES[0], s_rate, o_rate, lambda: f"ours {o_rate:.1f}/job-h, stock {s_rate:.1f}/job-h"
        )
        o_model, s_model = o["calls"]["model"], st["calls"]["model"]
        _at_least_20x(
            add,
            TARGET_NAMES[1],
            s_model.get("per_job_hour_at_1h_waits"),
            o_model.get("per_job_hour_at_1h_waits"),
            lambda: (
                f"ours {o_model['waiting_per_job_hour']:.2f}/job-h waiting + "
                f"{o_model['fixed_per_job']:.2f} per job; stock "
                f"{s_model['waiting_per_job_hour']:.1f}/job-h + {s_model['fixed_per_job']:.2f}"
            ),
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
        add(TARGET_NAMES[4], waiting_cpu, "<= 5 %", _met(waiting_cpu, lambda v: v <= 5.0))
        rss = o["memory"]["peak_rss_mb"]
        add(TARGET_NAMES[5], rss, "<= 300 MB", rss <= 300.0, "includes the imports (Airflow, botocore)")
        lag = o["loop_lag_seconds"]["max"]
        add(TARGET_NAMES[6], lag, "< 0.1 s", _met(lag, lambda v: v < LAG_TARGET_SECONDS))
        quiet_lag = o["loop_lag_seconds"].get("max_while_waiting")
        add(
            TARGET_NAMES[7],
            quiet_lag,
            "< 0.1 s",
            _met(quiet_lag, lambda v: v < LAG_TARGET_SECONDS),
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
