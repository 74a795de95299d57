"""Plain-text tables of a benchmark result (printed by the harness, pasted into docs/performance.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _num(value: Any, fmt: str = "{:.1f}") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return fmt.format(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table with columns padded to their widest cell."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in rows]
    return "\n".join(lines)


CALL_HEADERS = (
    "N",
    "variant",
    "calls",
    "calls/job-h real",
    "calls/job-h emul",
    "waiting calls/job-h",
    "fixed calls/job",
    "model calls/job-h @1h",
    "lat p50 s",
    "lat p95 s",
    "lat max s",
    "throttled",
    "failed",
    "undetected",
    "List pages/pass",
    "SQS calls",
)
RESOURCE_HEADERS = (
    "N",
    "variant",
    "CPU s/1k jobs",
    "CPU % run",
    "CPU % waiting",
    "peak RSS MB",
    "RSS +MB/1k",
    "max lag ms run",
    "max lag ms waiting",
    "warm-up s",
    "load 1m",
)


def _ms_or_dash(seconds: Any) -> str:
    return _num(None if seconds is None else float(seconds) * 1000.0, "{:.0f}")


def _selected(runs: Sequence[Mapping[str, Any]], throttled: bool) -> list[Mapping[str, Any]]:
    return [run for run in runs if bool(run.get("throttled")) == throttled]


def _not_run(run: Mapping[str, Any], width: int) -> list[str]:
    why = f"not run: {run.get('skipped') or run.get('error')}"
    return [str(run.get("n_jobs")), str(run.get("variant")), why] + [""] * (width - 3)


def call_rows(runs: Sequence[Mapping[str, Any]], throttled: bool) -> list[list[str]]:
    """Calls and detection, one row per run."""
    rows: list[list[str]] = []
    for run in _selected(runs, throttled):
        f = run.get("figures")
        if not f:
            rows.append(_not_run(run, len(CALL_HEADERS)))
            continue
        calls, model, lat = f["calls"], f["calls"]["model"], f["latency_seconds"]
        rows.append(
            [
                str(f["n_jobs"]),
                str(run["variant"]),
                _num(calls["total"]),
                _num(calls["per_job_hour_real"]),
                _num(calls["per_job_hour_emulated"], "{:.2f}"),
                _num(model.get("waiting_per_job_hour")),
                _num(model.get("fixed_per_job"), "{:.2f}"),
                _num(model.get("per_job_hour_at_1h_waits")),
                _num(lat["p50"]),
                _num(lat["p95"]),
                _num(lat["max"]),
                _num(calls["throttled_total"]),
                _num(f["tasks"]["failed"]),
                _num(f["tasks"]["undetected_at_end"]),
                _num(model.get("list_pages_per_pass")),
                _num((calls.get("sqs") or {}).get("total")),
            ]
        )
    return rows


def background_line(runs: Sequence[Mapping[str, Any]]) -> str | None:
    """Others' jobs in the account over the runs (None when there were none)."""
    histories = {int((r.get("background") or {}).get("history_jobs") or 0) for r in runs if r.get("figures")}
    churn = [
        (r.get("background") or {}).get("churn") or {}
        for r in runs
        if r.get("figures") and r.get("background")
    ]
    created = [int(c.get("jobs_created") or 0) for c in churn]
    rates = {float(c.get("rate_per_emulated_hour") or 0.0) for c in churn}
    if not any(histories) and not any(created):
        return None
    return (
        f"Others' jobs in the account: {', '.join(str(h) for h in sorted(histories))} ended before ours; "
        f"{', '.join(f'{r:g}' for r in sorted(rates))} new per emulated hour while ours waited "
        f"({min(created, default=0)}-{max(created, default=0)} per run)"
    )


def resource_rows(runs: Sequence[Mapping[str, Any]], throttled: bool) -> list[list[str]]:
    """The trigger process's CPU, memory and event-loop lag, one row per run."""
    rows: list[list[str]] = []
    for run in _selected(runs, throttled):
        f = run.get("figures")
        if not f:
            rows.append(_not_run(run, len(RESOURCE_HEADERS)))
            continue
        cpu, mem, lag = f["cpu"], f["memory"], f["loop_lag_seconds"]
        rows.append(
            [
                str(f["n_jobs"]),
                str(run["variant"]),
                _num(cpu["seconds_per_1000_jobs"]),
                _num(cpu["percent_of_one_core"]),
                _num(cpu.get("waiting_percent_of_one_core")),
                _num(mem["peak_rss_mb"], "{:.0f}"),
                _num(mem["peak_rss_growth_per_1000_jobs_mb"], "{:.0f}"),
                _ms_or_dash(lag["max"]),
                _ms_or_dash(lag.get("max_while_waiting")),
                _num(f["warm_up_seconds"]),
                _num((run.get("loadavg_1m") or {}).get("end")),
            ]
        )
    return rows


def parse_rows(parse: Mapping[str, Any]) -> list[list[str]]:
    """One row per DAG file of the parse-cost benchmark."""
    rows = []
    for key, item in (parse.get("files") or {}).items():
        rows.append(
            [
                key,
                str(item.get("tasks")),
                _num(item.get("processes")),
                _num(_ms(item.get("import_seconds_median")), "{:.0f}"),
                _num(_ms(item.get("first_parse_seconds_median")), "{:.1f}"),
                _num(_ms(item.get("parse_seconds_median")), "{:.1f}"),
                _num(_ms(item.get("parse_seconds_min")), "{:.1f}"),
                _num(item.get("network_attempts")),
                _num(len(item.get("import_errors") or [])),
            ]
        )
    return rows


PARSE_HEADERS = (
    "DAG file",
    "tasks",
    "processes",
    "operator import ms",
    "1st parse ms",
    "warm parse ms (median)",
    "warm parse ms (min)",
    "network attempts",
    "import errors",
)


def _ms(seconds: Any) -> float | None:
    return None if seconds is None else float(seconds) * 1000.0


def target_rows(targets: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row per target."""
    rows = []
    for t in targets:
        met = t.get("met")
        rows.append(
            [
                str(t["target"]),
                str(t["goal"]),
                _num(t.get("value"), "{:.3g}"),
                "MET" if met else ("not measured" if met is None else "MISSED"),
                str(t.get("note") or ""),
            ]
        )
    return rows


def render(result: Mapping[str, Any]) -> str:
    """Every table of a result, as Markdown."""
    runs = result.get("runs") or []
    background = background_line(runs)
    parts = [background] if background else []
    parts += [
        "### API calls and detection latency (no throttling)",
        table(CALL_HEADERS, call_rows(runs, throttled=False)),
        "### Trigger process: CPU, memory, event loop (no throttling)",
        table(RESOURCE_HEADERS, resource_rows(runs, throttled=False)),
    ]
    if any(r.get("throttled") for r in runs):
        rate = (result.get("plan") or {}).get("throttle", {}).get("rate")
        parts += [
            f"### Throttled: DescribeTrainingJob and ListTrainingJobs each limited to {rate}/s",
            table(CALL_HEADERS, call_rows(runs, throttled=True)),
            table(RESOURCE_HEADERS, resource_rows(runs, throttled=True)),
        ]
    parse = result.get("parse")
    if parse and parse.get("files"):
        parts += [
            "### DAG parse cost (100 tasks)",
            table(PARSE_HEADERS, parse_rows(parse)),
            f"warm per-file parse ratio preferences/stock: {_num(parse.get('warm_parse_ratio'), '{:.3f}')} "
            f"(goal <= 1.1); first parse in a process: {_num(parse.get('first_parse_ratio'), '{:.2f}')}; "
            f"operator import: {_num(parse.get('import_ratio'), '{:.2f}')}; "
            f"network attempts at parse: {parse.get('network_attempts_total')}",
        ]
    elif parse:
        parts += ["### DAG parse cost", f"failed: {parse.get('error')}"]
    targets = result.get("targets")
    if targets:
        parts += [
            "### Targets for ours at N=1,000",
            table(("target", "goal", "value", "result", "note"), target_rows(targets)),
        ]
    return "\n\n".join(parts)
