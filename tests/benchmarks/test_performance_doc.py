"""docs/performance.md's tables are the report code's rendering of the committed results in docs/data/.

The figures typed by hand around them, and those other pages (limits, security, finish-in-triggerer) take
from the same results, must say what docs/data/ says: a figure without committed data is withdrawn.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import publish


def test_the_page_equals_its_rendering_from_docs_data() -> None:
    page = publish.PAGE.read_text(encoding="utf-8")
    assert publish.render_page(page) == page, (
        "docs/performance.md differs from the tables rendered from docs/data/: "
        "run `.venv/bin/python -m benchmarks.publish --render`"
    )


def test_rendering_twice_changes_nothing() -> None:
    once = publish.render_page(publish.PAGE.read_text(encoding="utf-8"))
    assert publish.render_page(once) == once


def test_a_page_without_a_generated_section_is_refused() -> None:
    with pytest.raises(ValueError, match="lacks the generated sections"):
        publish.render_page("# Performance\n<!-- generated: latency -->\n<!-- end generated -->\n")


def test_published_results_keep_figures_and_drop_raw_samples() -> None:
    result = {"runs": [{"figures": {"calls": {"total": 3}}, "latencies": list(range(publish.MAX_LIST + 1))}]}
    assert publish.slim(result) == {"runs": [{"figures": {"calls": {"total": 3}}}]}


def latency_result(**fields: Any) -> dict[str, Any]:
    """A ``make latency`` result of one mode whose every part is 1.5 / 2.5 / 3.5 s, with ``fields``."""
    from harness.latency import PARTS

    summary = {"p50": 1.5, "p95": 2.5, "max": 3.5}
    return {
        "recorded_at": "2026-12-04T00:00:00+00:00",
        "airflow_version": "3.3.2",
        "cpus": 2,
        "tasks": 20,
        "modes": {"poll": {part: summary for part in PARTS}},
        **fields,
    }


def test_a_published_latency_result_is_rendered_from_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "latency.json"
    path.write_text(json.dumps(latency_result()), encoding="utf-8")
    monkeypatch.setattr(publish, "LATENCY", path)
    text = publish.render_latency()
    assert "| poll | 20 | 1.5 / 2.5 / 3.5 |" in text
    assert "No result is published" not in text


def test_a_latency_result_says_whether_its_triggerers_were_warm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "latency.json"
    monkeypatch.setattr(publish, "LATENCY", path)
    cadence = {"poll_interval": 5.0, "max_poll_interval": 5.0}
    path.write_text(
        json.dumps(latency_result(**cadence, warm=True, cold_start=[12.8, 13.0])), encoding="utf-8"
    )
    assert "poll cadence 5 s fixed; triggerers warm, their first reads took 12.8 s, 13 s before;" in (
        publish.render_latency()
    )
    path.write_text(json.dumps(latency_result(**cadence, warm=False, cold_start=[])), encoding="utf-8")
    assert "triggerers cold;" in publish.render_latency()


DOCS = publish.PAGE.parent


def _data(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((publish.DATA / name).read_text(encoding="utf-8"))
    return data


def _span(values: list[float], fmt: str = "g") -> str:
    """``low-high`` of ``values`` as the prose writes a range (one value when they are all equal)."""
    low, high = f"{min(values):{fmt}}", f"{max(values):{fmt}}"
    return low if low == high else f"{low}-{high}"


def _latency_figures() -> list[tuple[str, str]]:
    data = _data("latency.json")
    modes, costs = data["modes"], data["costs"]
    ends_in_triggerer, resumes = ("poll", "events"), ("poll_resume", "events_resume")

    def total(mode: str, part: str = "total") -> str:
        return f"{modes[mode][part]['p50']:.1f} / {modes[mode][part]['p95']:.1f} s"

    def cost(modes_: tuple[str, ...], key: str) -> list[float]:
        return [costs[m][key] for m in modes_]

    triggerer_growth = [
        round(costs[m]["triggerer_cpu_per_job"] - costs[f"{m}_resume"]["triggerer_cpu_per_job"], 2)
        for m in ends_in_triggerer
    ]
    events_p95, poll_p95 = modes["events"]["total"]["p95"], modes["poll"]["total"]["p95"]
    poll_goal = data["poll_interval"] + 5
    met = "met" if events_p95 <= 5 and poll_p95 <= poll_goal else "not met"
    reads = " and ".join(f"{r:g} s" for r in data["cold_start"])
    return [
        (
            "performance.md",
            f"**Task processes per job: {_span(cost(ends_in_triggerer, 'task_processes_per_job'))}**",
        ),
        ("performance.md", f"resume takes {_span(cost(resumes, 'task_processes_per_job'))};"),
        (
            "performance.md",
            f"**worker CPU per job {_span(cost(ends_in_triggerer, 'worker_cpu_per_job'))} s instead of "
            f"{_span(cost(resumes, 'worker_cpu_per_job'))} s**",
        ),
        ("performance.md", f"grows by {_span(triggerer_growth)} s"),
        (
            "performance.md",
            f"event mode p50 {modes['events']['total']['p50']:.1f} s, p95 {events_p95:.1f} s** "
            f"({total('events_resume')} resuming); **poll mode p50 {modes['poll']['total']['p50']:.1f} s, "
            f"p95 {poll_p95:.1f} s** ({total('poll_resume')} resuming)",
        ),
        (
            "performance.md",
            f"**Goals: {met} in this run.** Event mode's p95 ≤ 5 s: {events_p95:.1f} s. Poll mode's p95 ≤ "
            f"poll interval + 5 s ({poll_goal:g} s): {poll_p95:.1f} s.",
        ),
        ("performance.md", f"event mode's detection p95 is {modes['events']['detection']['p95']:.1f} s"),
        ("performance.md", f"reads took: {reads}, `cold_start`"),
        ("limits.md", f"first reads took {reads} on a {data['cpus']}-core host"),
        ("guides/finish-in-triggerer.md", f"first reads took {reads} on a {data['cpus']}-core host"),
    ]


def _credentials_airflow_figures() -> list[tuple[str, str]]:
    data = _data("credentials-airflow.json")
    runs = {run["mode"]: run for run in data["runs"]}
    poll, events = runs["poll"], runs["events"]
    ended = {mode: f"{run['timings']['capacity_to_all_ended']:.0f} s" for mode, run in runs.items()}
    rows = []
    for mode, run in runs.items():
        f = run["figures"]
        rows.append(
            (
                "security.md",
                f"| {mode} | {f['waits']} | {f['succeeded']} | {f['failed']} | {f['still_deferred']} | "
                f"{f['hours_after_last_taken']:.1f} | {f['sts_sessions']:,} / {f['while_waiting']['sts_sessions']:,} | "
                f"{f['refused']['expired']}/{f['refused']['invalid']} | {f['probe']['max_ms']:,.0f} | "
                f"{f['probe']['p99_ms']:.1f} | {f['probe']['over_counted']} ({f['probe_over_50ms_while_waiting']}) | "
                f"{f['blocked_warnings']['count']} | {f['triggerer']['cpu_seconds']:.0f} | "
                f"{f['triggerer']['peak_rss_mib']:.0f} | {f['real_minutes']:.1f} |",
            )
        )
    pw, ew = poll["figures"]["while_waiting"], events["figures"]["while_waiting"]
    session_hours = data["plan"]["duration_seconds"] / 3600
    first_stalls = [ms / 1000 for _, ms in poll["probe_slow"] if ms >= 1000]
    recurring = [(at, ms) for at, ms in poll["probe_slow"] if 300 <= ms < 1000]
    gaps = [(b[0] - a[0]) / 60 for a, b in itertools.pairwise(recurring)]
    return [
        *rows,
        (
            "security.md",
            f"(here {poll['figures']['hours_after_last_taken']:.0f} and {events['figures']['hours_after_last_taken']:.0f}:",
        ),
        ("security.md", f"load average {data['machine']['loadavg_start'][0]:.0f} at its start"),
        (
            "security.md",
            f"it took {pw['sts_sessions']} sessions for {pw['session_calls']:,} List calls in "
            f"{pw['emulated_hours']:.0f} emulated hours in poll mode (renewing per wait would have taken about "
            f"{pw['emulated_hours'] / session_hours:.0f} sessions per wait",
        ),
        (
            "security.md",
            f"and {ew['sts_sessions']} in {ew['emulated_hours']:.0f} hours in event mode ({ew['session_keys']} of "
            f"them signed the safety List loop's {ew['session_calls']} SageMaker calls",
        ),
        ("security.md", f"loop stall for {events['figures']['probe']['max_ms'] / 1000:.1f} s"),
        ("security.md", f"the first triggers created: {_span(first_stalls, '.1f')} s in poll mode"),
        (
            "security.md",
            f"({pw['real_seconds']:.0f} s and {ew['real_seconds']:.0f} s), "
            f"{poll['figures']['probe_over_50ms_while_waiting']} (poll) and "
            f"{events['figures']['probe_over_50ms_while_waiting']} (events) samples exceeded 50 ms",
        ),
        (
            "security.md",
            f"samples of {_span([ms for _, ms in recurring], '.0f')} ms (those between 300 ms and 1 s) recurred "
            f"{min(gaps):.1f} to {max(gaps):.1f} minutes apart",
        ),
        ("security.md", f"took {ended['poll']} (poll) and {ended['events']} (events)"),
        ("performance.md", f"took {ended['poll']} and {ended['events']} (poll, events)"),
        ("limits.md", f"took {ended['poll']} and {ended['events']} on {data['machine']['nproc']} cores"),
    ]


def _credentials_figures() -> list[tuple[str, str]]:
    data, before = _data("credentials.json"), _data("credentials-before-fit.json")
    runs = {(run["auth"], run["mode"]): run["figures"] for run in data["runs"]}
    sessions = {key: f["sts_sessions"] for key, f in runs.items()}
    per_wait = [f["sessions_per_wait"] for f in runs.values()]
    web_poll = next(run for run in data["runs"] if (run["auth"], run["mode"]) == ("web-identity", "poll"))
    load = web_poll["loadavg_1m"]
    old = [run["figures"] for run in before["runs"]]
    return [
        ("performance.md", f"({data['total_seconds'] / 60:.0f} min in the published run: total_seconds)"),
        (
            "performance.md",
            f"1-minute load from {load['start']:.1f} to {load['end']:.1f} on {data['machine']['nproc']} cores",
        ),
        ("performance.md", f"its worst sample took {web_poll['figures']['lag']['max_ms']:.1f} ms there"),
        (
            "security.md",
            f"each pending {_span([f['pending_hours_median'] for f in runs.values()], '.2f')} emulated hours (median)",
        ),
        (
            "security.md",
            f"{sessions['assume-role', 'poll']} / {sessions['assume-role', 'events']} (AssumeRole, poll / events) and "
            f"{sessions['web-identity', 'poll']} / {sessions['web-identity', 'events']} (web identity) STS sessions",
        ),
        ("security.md", f"{min(per_wait):g} to {max(per_wait):g} per wait"),
        (
            "security.md",
            f"issued {old[0]['sts_sessions']:,} and {old[1]['sts_sessions']:,} for "
            f"{old[0]['calls']['trigger_calls']:,} and {old[1]['calls']['trigger_calls']:,} calls",
        ),
    ]


def _bench_and_retry_figures() -> list[tuple[str, str]]:
    def figures(name: str, n_jobs: int) -> dict[str, dict[str, Any]]:
        runs = _data(name)["runs"]
        return {r["variant"]: r["figures"] for r in runs if r["n_jobs"] == n_jobs and r.get("figures")}

    small = figures("bench-20261204T024104.json", 1000)
    large = figures("bench-20261204T084246.json", 10000)
    cpu = {variant: f["cpu"]["percent_of_one_core"] for variant, f in small.items()}
    fixed = {variant: f["calls"]["model"]["fixed_per_job"] for variant, f in small.items()}
    p95 = {variant: f["latency_seconds"]["p95"] for variant, f in large.items()}
    waiting = {f["calls"]["model"]["waiting_per_job_hour"] for f in large.values()}
    within = "within" if cpu["events"] <= 5 else "over"
    return [
        ("performance.md", f"(fixed calls per job {fixed['events-hint']:g} → {fixed['events']:g})"),
        (
            "performance.md",
            f"{cpu['events']:.1f} % of a core, {within} the 5 % goal, where `events-hint` takes {cpu['events-hint']:.1f} %",
        ),
        (
            "performance.md",
            f"**p95 detection {p95['events']:.1f} s with the detail, {p95['events-hint']:.1f} s with a Describe per event**",
        ),
        (
            "performance.md",
            f"per-job calls while waiting {' / '.join(f'{w:g}' for w in sorted(waiting))} in both",
        ),
        (
            "performance.md",
            f"# {_data('retry-budget.json')['runtime_s']:g} s in the published run (runtime_s)",
        ),
    ]


def hand_written_figures() -> list[tuple[str, str]]:
    """(page under docs/, what it must say) for every figure its prose takes from a committed result.

    The generated tables are checked against their rendering above; these are the sentences around
    them, typed by hand. Each expected text is built from docs/data/, so a republished result whose
    figures differ fails here until the prose is brought in line (or the figure is withdrawn).
    """
    return [
        *_latency_figures(),
        *_credentials_airflow_figures(),
        *_credentials_figures(),
        *_bench_and_retry_figures(),
    ]


def test_hand_written_figures_match_the_committed_results() -> None:
    pages: dict[str, str] = {}
    wrong = []
    for page, text in hand_written_figures():
        if page not in pages:
            pages[page] = " ".join((DOCS / page).read_text(encoding="utf-8").split())
        if " ".join(text.split()) not in pages[page]:
            wrong.append(f"docs/{page} should say: {text}")
    assert not wrong, (
        "prose figures that differ from docs/data/ (fix the prose or withdraw the figure):\n"
        + ("\n".join(wrong))
    )
