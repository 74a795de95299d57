"""The soak's report: its JSON (``build/reliability/soak.json``), its markdown and its one-line summary.

Apart from the driver (:mod:`harness.soak`) because the report outlives the run: ``make
reliability-doc`` renders a published ``soak.json`` again (tests/e2e/e2e_reliability.py) without a
deployment, so this module reads only the report's data.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.memory import SAMPLE_EVERY
from harness.soak_accounting import FAULT_KINDS, NightResult
from harness.soak_plan import SETTLE, STEP, WEEK, NightPlan

if TYPE_CHECKING:
    from harness.deployment import LocalAirflow
    from harness.memory import MemorySampler

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "build" / "reliability"
RUN_JSON = RUN_DIR / "soak.json"
RUN_MD = RUN_DIR / "soak.md"


def report(
    af: LocalAirflow,
    plans: Sequence[NightPlan],
    results: Sequence[NightResult],
    memory: MemorySampler,
    *,
    fleet: int,
    seed: int,
    seconds: float,
) -> dict[str, Any]:
    """The soak's report: the run's setting, totals over the nights, each night and the plan."""
    from airflow import __version__ as airflow_version

    runs = Counter(state for r in results for state in r.runs.values())
    totals = {
        "nights": len(results),
        "dag_runs": sum(len(r.runs) for r in results),
        "dag_run_states": dict(runs),
        "jobs_created": sum(r.jobs_created for r in results),
        "fell_back": sum(r.fell_back for r in results),
        "capacity_failures": sum(len(r.capacity_failures) for r in results),
        "duplicates": sum(len(r.duplicates) for r in results),
        "unattended": sum(len(r.unattended) for r in results),
        "foreign_failures": sum(len(r.foreign_failures) for r in results),
        **{kind: sum(r.faults.get(kind, 0) for r in results) for kind in (*FAULT_KINDS, "calls")},
        "kills": [f"night {r.index}: {k}" for r in results for k in r.kills],
    }
    return {
        "seed": seed,
        "fleet": fleet,
        "nights_planned": len(plans),
        "nights_run": len(results),
        "seconds": round(seconds, 1),
        "seconds_per_night": round(sum(r.seconds for r in results) / max(1, len(results)), 1),
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "airflow_version": airflow_version,
        "metadata_db": "PostgreSQL" if af.database_backend == "postgres" else "SQLite",
        "cpus": os.cpu_count(),
        "memory_samples": memory.samples,
        "peak_rss_mib": memory.peak_mib(),
        "totals": totals,
        "nights": [asdict(r) for r in results],
        "plan": [asdict(p) for p in plans],
        "ok": passed(totals) and len(results) > 0,
    }


def passed(totals: Mapping[str, Any]) -> bool:
    """The soak's verdict: no duplicate job, no job left running, no task failed for another reason."""
    return all(int(totals[key]) == 0 for key in ("duplicates", "unattended", "foreign_failures"))


def render_markdown(data: Mapping[str, Any], heading: str = "##") -> str:
    """The soak report as markdown (a section of docs/reliability.md, and build/reliability/soak.md)."""
    t = data["totals"]
    runs = ", ".join(f"{n} {s}" for s, n in sorted(t["dag_run_states"].items())) or "none"
    short = data["nights_run"] < data["nights_planned"]
    lines = [
        f"{heading} A week of nights under faults (soak)",
        "",
        f"`python -m harness.soak --nights {data['nights_planned']} --fleet {data['fleet']} "
        f"--seed {data['seed']} --step {data.get('step_seconds', STEP)}` (`make soak` runs 7 nights of 50 with "
        f"{STEP}-second steps): one deployment, each night the nightly example DAG and `e2e_fleet` with "
        f"{data['fleet']} mapped training tasks, triggered through the REST API one logical day apart; the "
        f"night is compressed by moving the offline SageMaker's clock ({data.get('step_seconds', STEP) // 60} emulated minutes per "
        "step, once every unfinished task has been deferred for "
        f"{SETTLE:.0f} s). Each night has its capacity shape (plenty, first choice scarce, a late window, "
        "or capacity that never frees before the fleet's pending deadline) and throttling, HTTP 5xx and "
        "dropped connections switched on and off at seeded random steps; one night kills the triggerer's "
        "whole session with SIGKILL and one the scheduler's (task processes included), each restarted. "
        f"Recorded {str(data['recorded_at'])[:10]} on Airflow {data['airflow_version']} with "
        f"{data['metadata_db']}, {data['cpus']} CPUs shared with other work; wall time "
        f"{data['seconds'] / 60:.1f} min, {data['seconds_per_night']:.0f} s per night.",
        "",
    ]
    if short:
        lines += [
            f"**Only {data['nights_run']} of {data['nights_planned']} planned nights ran** (time budget).",
            "",
        ]
    if data["nights_run"] < WEEK:
        lines += [
            f"**Shorter than a week:** this run covers {data['nights_run']} of the {WEEK} nights of "
            f"`make soak`, with {data['fleet']} mapped tasks; at {data['seconds_per_night']:.0f} s per night "
            f"on this machine, a week at this clock step takes about "
            f"{WEEK * data['seconds_per_night'] / 60:.0f} min plus the start (smaller steps take longer: "
            "every step the tasks resume and defer again).",
            "",
        ]
    lines += [
        "| | |",
        "|---|---|",
        f"| Nights | {data['nights_run']} |",
        f"| DAG runs | {t['dag_runs']} ({runs}) |",
        f"| SageMaker jobs created | {t['jobs_created']} ({t['fell_back']} on a fallback entry) |",
        f"| Tasks failed by the injected capacity shortage (`CapacityTimeoutError` in their log) | "
        f"{t['capacity_failures']} |",
        f"| **Duplicate jobs** | **{t['duplicates']}** |",
        f"| **Jobs left running after their task ended** | **{t['unattended']}** |",
        f"| **Tasks failed for another reason** | **{t['foreign_failures']}** |",
        f"| API faults injected | {t['throttled']} throttled + {t['errors']} 5xx + {t['dropped']} dropped "
        f"of {t['calls']} SageMaker calls |",
        f"| Process kills | {'; '.join(t['kills']) or 'none'} |",
        "",
        "Peak resident memory of each component: the sum of RSS over all processes of its session, sampled "
        f"every {SAMPLE_EVERY:g} s ({data['memory_samples']} samples). The scheduler's includes its "
        "LocalExecutor workers (one per parallelism slot) and the task processes they run, PostgreSQL's its "
        "backends; pages shared between processes count once per process, so a sum overstates memory used:",
        "",
        "| Component | Peak RSS (MiB) |",
        "|---|---|",
    ]
    lines += [f"| {name} | {mib:.0f} |" for name, mib in data["peak_rss_mib"].items()]
    lines += [
        "",
        "| Night | Capacity | Runs | Jobs | Fell back | Capacity timeouts | Duplicates | Unattended | "
        "Other failures | API faults | Kills | Wall time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in data["nights"]:
        lines.append(
            f"| {n['index']} | {n['kind']} | {', '.join(f'{d}: {s}' for d, s in n['runs'].items())} | "
            f"{n['jobs_created']} | {n['fell_back']} | {len(n['capacity_failures'])} | {len(n['duplicates'])} | "
            f"{len(n['unattended'])} | {len(n['foreign_failures'])} | {n['faults'].get('summary', '')} | "
            f"{'; '.join(n['kills']) or '-'} | {n['seconds']:.0f} |"
        )
    lines += [
        "",
        "*Duplicate*: the operators name a task's job deterministically and only submit a new one "
        "(`-r2`, `-r3`...) after the previous job of the same task ended `Failed` or `Stopped` (or the "
        "task was cleared, which the soak never does); a job created while an earlier job of the same "
        "task had not ended that way, or a job no task of the night owns, is a duplicate. *Jobs left "
        "running*: jobs still `InProgress` once their task is no longer running, deferred, queued or "
        "waiting for a retry. *Another reason*: a failed task whose log does not show "
        "`CapacityTimeoutError`. The kills come at a step of the night, when every unfinished task is "
        "deferred: a kill of the scheduler's session while a task process runs would fail that task "
        "(`e2e_fleet` has no retries), and a trigger firing right after its task deferred trips an "
        "Airflow 3.3.2 scheduler race (apache/airflow#72716) this soak keeps out.",
    ]
    foreign = [f for n in data["nights"] for f in n["foreign_failures"]]
    problems = [p for n in data["nights"] for p in (*n["duplicates"], *n["unattended"])]
    if foreign or problems:
        lines += ["", "Found:", ""] + [f"- {_md(p)}" for p in (*problems, *foreign)]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """``text`` on one line with its pipes escaped, for a list item of the report's markdown."""
    return text.replace("|", "\\|").replace("\n", " ")


def write_report(data: Mapping[str, Any], json_path: Path = RUN_JSON, md_path: Path = RUN_MD) -> None:
    """Write the report's JSON and markdown (``make reliability-doc`` publishes them)."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    md_path.write_text(render_markdown(data, heading="#"))


def summary_line(data: Mapping[str, Any]) -> str:
    """The report in one line, printed at the end of a soak."""
    t = data["totals"]
    peaks = ", ".join(f"{k} {v:.0f}" for k, v in data["peak_rss_mib"].items())
    return (
        f"nights {data['nights_run']}/{data['nights_planned']}, runs {t['dag_runs']} {t['dag_run_states']}, "
        f"jobs {t['jobs_created']}, capacity failures {t['capacity_failures']}, duplicates {t['duplicates']}, "
        f"unattended {t['unattended']}, foreign failures {t['foreign_failures']}, "
        f"faults {t['throttled']} throttled/{t['errors']} 5xx/{t['dropped']} dropped of {t['calls']}, "
        f"kills {t['kills']}, peak RSS MiB: {peaks}, wall {data['seconds']:.0f}s"
    )
