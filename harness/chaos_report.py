"""The chaos run's report: its record of kills, its JSON (``build/reliability/chaos.json``) and markdown.

Apart from the driver (:mod:`harness.chaos`) because the report outlives the run: ``make
reliability-doc`` renders a published ``chaos.json`` again (tests/e2e/e2e_reliability.py) without a
deployment, so rendering reads only the report's data. The report directory is the soak's
(:data:`harness.soak_report.RUN_DIR`); the files are written as the chaos run always wrote them (keys in
run order, the markdown with a section heading), which is why :func:`write_report` is not the soak's.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.chaos_accounting import passed
from harness.chaos_plan import CREATE_LATENCY_MS, TIME_SCALE, PlannedKill
from harness.soak_report import RUN_DIR

if TYPE_CHECKING:
    from harness.deployment import LocalAirflow
    from harness.memory import MemorySampler

RUN_JSON = RUN_DIR / "chaos.json"
RUN_MD = RUN_DIR / "chaos.md"


@dataclass
class KillRecord:
    """One kill as it happened: the planned ``target``, the ``component`` killed (the worker a
    ``worker-mid-create`` found), when, for how long, how many processes, and at which instant."""

    target: str
    component: str
    at_seconds: float
    pause: float
    processes: int
    instant: str
    restarted: bool = True


@dataclass
class ChaosRun:
    """State and results of one run."""

    seed: int
    fleet: int
    kills_planned: int
    kills: list[KillRecord] = field(default_factory=list)
    #: Components that exited on their own (e.g. a scheduler whose database went away), restarted.
    exits: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        """Real seconds since the run started, as the report and the kill records give them."""
        return round(time.monotonic() - self.started, 1)


def report(
    af: LocalAirflow,
    run: ChaosRun,
    plan: Sequence[PlannedKill],
    result: Mapping[str, Any],
    memory: MemorySampler,
    *,
    seconds: float,
) -> dict[str, Any]:
    """The run's report: its setting and topology, the plan and the kills as they happened, the memory
    peaks, ``result`` (the first deployment's :func:`~harness.chaos.check`) and the verdict."""
    from airflow import __version__ as airflow_version

    by_component = Counter(k.component.rstrip("-0123456789") for k in run.kills)
    return {
        "seed": run.seed,
        "fleet": run.fleet,
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "airflow_version": airflow_version,
        "topology": {
            "executor": "CeleryExecutor",
            "broker": "Redis (redis-server, append-only file)",
            "workers": af.config.workers,
            "worker_concurrency": af.config.worker_concurrency,
            "schedulers": af.config.schedulers,
            "triggerers": af.config.triggerers,
            "metadata_db": "PostgreSQL",
        },
        "cpus": os.cpu_count(),
        "seconds": seconds,
        "time_scale": TIME_SCALE,
        "create_latency_ms": CREATE_LATENCY_MS,
        "plan": [asdict(p) for p in plan],
        "kills": [asdict(k) for k in run.kills],
        "kills_by_component": dict(sorted(by_component.items())),
        "exits": run.exits,
        "memory_samples": memory.samples,
        "peak_rss_mib": memory.peak_mib(),
        "result": dict(result),
        "ok": passed(result) and len(run.kills) >= min(len(plan), 1),
    }


def render_markdown(data: Mapping[str, Any], heading: str = "##") -> str:
    """The report as markdown (a section of docs/reliability.md, and build/reliability/chaos.md)."""
    r, topo = data["result"], data["topology"]
    lines = [
        f"{heading} Chaos at any instant (CeleryExecutor topology)",
        "",
        f"`python -m harness.chaos --fleet {data['fleet']} --kills {len(data['plan'])} --seed {data['seed']}"
        f"{' --deployments 2' if data.get('deployments') else ''}` "
        f"(`make chaos`): Airflow {data['airflow_version']}, {topo['executor']} on {topo['broker']}, "
        f"{topo['workers']} Celery workers x {topo['worker_concurrency']} slots, {topo['schedulers']} schedulers, "
        f"{topo['triggerers']} triggerers, api-server, dag-processor, {topo['metadata_db']}; "
        f"{data['cpus']} CPUs shared with other work; recorded {data['recorded_at']}, wall time "
        f"{data['seconds'] / 60:.1f} min. The offline SageMaker's clock ran at {data['time_scale']}x and every "
        f"CreateTrainingJob answered {data['create_latency_ms']} ms after creating its job.",
        "",
        f"**Invariants**: duplicate jobs {len(r['duplicates'])}, jobs left running {len(r['unattended'])}, "
        f"tasks failed for another reason than their set capacity timeout {len(r['foreign_failures'])}, "
        f"XCom records differing from Describe {len(r['record_mismatches'])} of {r['records_checked']} checked. "
        f"{'All hold.' if data['ok'] else '**Not all hold.**'}",
        "",
        _reconciler_line(r.get("reconciler")),
        "",
        f"**Tasks**: {data['fleet']} mapped ({_pairs(r['tasks_by_kind'])}); final states {_pairs(r['task_states'])}; "
        f"tries {_pairs(r['task_tries'])}; capacity timeouts {len(r['capacity_timeouts'])}. "
        f"**Jobs**: {r['jobs_created']} created ({_pairs(r['jobs_by_kind'])}), {r['jobs_resubmitted']} "
        f"resubmissions, {r['jobs_stages']} acceptance-window stages, {r['fell_back']} fell back, "
        f"{r['waited_pending']} waited Pending.",
        "",
        f"**Kills** ({len(data['kills'])}; {_pairs(data['kills_by_component'])}), each `kill -9` of the "
        "component's whole process group, restarted after the pause:",
        "",
        "| # | At (s) | Component | Processes | Instant | Down (s) |",
        "|---|---|---|---|---|---|",
    ]
    for i, k in enumerate(data["kills"], start=1):
        lines.append(
            f"| {i} | {k['at_seconds']:.0f} | {k['component']} | {k['processes']} | {k['instant']} | {k['pause']} |"
        )
    peaks = data["peak_rss_mib"]
    exits = Counter(e.split(" ")[0] for e in data["exits"])
    lines += [
        "",
        f"Components that exited on their own and were restarted, as Kubernetes or systemd restarts them "
        f"({len(data['exits'])}): {_pairs(exits)}.",
        "",
        f"Peak resident memory per component (MiB; the sum over the processes of its group, sampled "
        f"{data['memory_samples']} times):",
        "",
        "| " + " | ".join(peaks) + " |",
        "|" + "---|" * len(peaks),
        "| " + " | ".join(f"{v:.0f}" for v in peaks.values()) + " |",
    ]
    for title, key in (
        ("Duplicates", "duplicates"),
        ("Left running", "unattended"),
        ("Other failures", "foreign_failures"),
        ("Record mismatches", "record_mismatches"),
    ):
        if r[key]:
            lines += ["", f"{title}:", *(f"- {item}" for item in r[key])]
    wrong = (r.get("reconciler") or {}).get("wrong_stops")
    if wrong:
        lines += ["", "Wrong stops:", *(f"- {item}" for item in wrong)]
    if data.get("deployments"):
        lines += ["", *_shared_sagemaker_markdown(data, heading + "#")]
    return "\n".join(lines) + "\n"


def _shared_sagemaker_markdown(data: Mapping[str, Any], heading: str) -> list[str]:
    """The per-deployment section of a ``--deployments 2`` run."""
    foreign = data["foreign_stops"]
    lines = [
        f"{heading} Two deployments sharing one offline SageMaker",
        "",
        "Both started from the same defaults (no `[sm_prefs] deployment_id`: each generated its own id), ran "
        "`e2e_chaos` with the same run id and the same fleet, job names derived by the operator, and a "
        "reconciler loop in stop mode each; the kills hit deployment A. Invariants per deployment (a job is "
        "the deployment's its `sm-prefs:deployment` tag names):",
        "",
        "| Deployment | Topology | Generated id | Tasks | Jobs | Duplicates | Left running | Other failures "
        "| Record mismatches | Reconciler stopped | Wrong stops | StopTrainingJob sent / received | Holds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in data["deployments"]:
        r = d["result"]
        topology = f"{d['executor']}, {d['schedulers']} scheduler(s), {d['triggerers']} triggerer(s)"
        if d["workers"]:
            topology += f", {d['workers']} workers"
        topology += ", killed" if d["killed"] else ", not killed"
        key = str(d["deployment_id"])
        lines.append(
            f"| {d['label']} | {topology} | `{d['deployment_id']}` | {_pairs(r['task_states'])} | "
            f"{r['jobs_created']} | {len(r['duplicates'])} | {len(r['unattended'])} | "
            f"{len(r['foreign_failures'])} | {len(r['record_mismatches'])} of {r['records_checked']} | "
            f"{len(r['reconciler']['stopped'])} | {len(r['reconciler']['wrong_stops'])} | "
            f"{foreign['sent'].get(key, 0)} / {foreign['received'].get(key, 0)} | "
            f"{'yes' if d['ok'] else '**no**'} |"
        )
    lines += [
        "",
        f"**Generated ids differ**: {'yes' if data['deployment_ids_differ'] else '**no**'}. "
        f"**Foreign stops** (a job of one deployment stopped by the other's reconciler or calls; "
        f"{foreign['total_calls']} StopTrainingJob calls in all): **{foreign['count']}**. "
        f"Jobs no deployment owns: {len(data['unowned_jobs'])}.",
    ]
    for d in data["deployments"]:
        r = d["result"]
        for title, items in (
            ("duplicates", r["duplicates"]),
            ("left running", r["unattended"]),
            ("other failures", r["foreign_failures"]),
            ("wrong stops", r["reconciler"]["wrong_stops"]),
        ):
            if items:
                lines += ["", f"{d['label']}, {title}:", *(f"- {item}" for item in items)]
    if foreign["items"]:
        lines += ["", "Foreign stops:", *(f"- {item}" for item in foreign["items"])]
    if data["unowned_jobs"]:
        lines += ["", "Jobs no deployment owns:", *(f"- {item}" for item in data["unowned_jobs"])]
    return lines


def _reconciler_line(ledger: Mapping[str, Any] | None) -> str:
    if not ledger:
        return "**Reconciler**: not run."
    return (
        f"**Reconciler** (a `sm-prefs-reconcile --stop` pass every 30 s throughout): {ledger['passes']} passes "
        f"({ledger['failed_passes']} could not run while a component was down), {len(ledger['stopped'])} jobs "
        f"stopped, **{len(ledger['wrong_stops'])} wrong stops** (a job whose task still owned it), "
        f"{ledger['errors']} errors."
    )


def _pairs(counts: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def write_report(data: Mapping[str, Any], json_path: Path = RUN_JSON, md_path: Path = RUN_MD) -> None:
    """Write the report's JSON and markdown (``make reliability-doc`` publishes them)."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    md_path.write_text(render_markdown(data), encoding="utf-8")
