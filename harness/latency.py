"""What a user feels in the production topology: from SageMaker selecting an entry to the task after the
job running. ``python -m harness.latency`` (``make latency``).

One Celery deployment (two workers, two schedulers, two triggerers; :mod:`harness.deployment`) runs, one
after the other, ``e2e_latency_poll_resume``, ``e2e_latency_poll``, ``e2e_latency_events_resume`` and
``e2e_latency_events``: ``--tasks`` mapped task groups, each a training job (``wait_for_completion=False``)
and the task after it. The ``_resume`` DAGs end the job task in a worker (``finish_in_triggerer=False``),
the others in the triggerer (the default), so each way of waiting is measured both ways in one run. The offline SageMaker runs its clock at
:data:`TIME_SCALE` x; instances of the one type on the lists free one by one as earlier jobs end, so the
selections spread over a minute or two. Poll mode waits with the deployment's poll cadence: ``--poll-interval``
5 s, fixed by default, so that its latency reads against one interval (``--max-poll-interval 30``: growing
1.5x per unchanged poll up to 30 s, the cadence an interval in effect anywhere from 5 to 30 s); event mode
on the ``aws_sm_events`` connection, whose queue an EventBridge rule at the offline SageMaker feeds.

Before the measured runs, every triggerer process ends a few tasks (:func:`warm_triggerers`), as a
triggerer in service has: Airflow builds a triggerer's in-process execution API on the first call that
needs it, once per process, and a fresh deployment's first selections would otherwise each carry that
cost. What it took is published (``cold_start``); ``--cold`` measures without it.

For every task, from the offline SageMaker's ledger (when the job was selected, mapped from its clock to
real time) and Airflow's task instances (REST API v2):

* **detection**: selection -> the trigger's event reaching the database (the task instance's
  ``scheduled_when``), less the dwell;
* **dwell**: what the trigger held its event back because its task had deferred moments before
  (``min_defer_seconds``, against apache/airflow#72716), read from the trigger's log;
* **triggerer -> scheduler**: ``scheduled_when`` -> ``queued_when`` (a scheduler sent it to Celery);
* **scheduler -> worker**: ``queued_when`` -> the job task's end (a worker picked it up, resumed it, pushed
  the outcome);

  (a task the triggerer ended is never scheduled or queued again: detection runs to its end, and these
  two parts are 0);
* **-> next task running**: the job task's end -> the next task's ``start_date``;
* **total**: selection -> the next task's ``start_date``.

Per mode also: **task processes per job** (the job task's processes, counted in its log: one per start)
and **worker CPU per job** (user + system seconds of the Celery workers and their task processes, over
the mode's run, divided by its tasks).

Prints p50/p95/max per mode and writes ``build/performance/latency.json`` and ``latency.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.config import EVENT_QUEUE, triggerer_names
from harness.deployment import LocalAirflow, local_airflow
from harness.rest import TERMINAL_RUN_STATES
from offline_sagemaker.jobs import training_config

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "build" / "performance"
TIME_SCALE = 60
G6 = "ml.g6.48xlarge"
#: Instances free after the first minute, and how long each job holds one (emulated seconds).
FREE, JOB_RUNTIME, OPENS = 3, 600, 120
MODES = ("poll_resume", "poll", "events_resume", "events")
PARTS = ("detection", "dwell", "triggerer_to_scheduler", "scheduler_to_worker", "to_next_task", "total")
_DWELL = re.compile(r"Reporting \S+ in ([\d.]+) s")
#: The job task's log line when the triggerer ended it (airflow_provider_sm_prefs.triggers.finish).
_ENDED_BY_TRIGGERER = "Ending the task from the triggerer"
#: A line every start of the job task's process writes (execute, and each resume in a worker).
_PROCESS_START = re.compile(r"Filling up the DagBag from")
#: A triggerer process's first read through its channel (airflow_provider_sm_prefs.triggers.finish.warm_up).
_FIRST_READ = re.compile(r"answered this process's first read in ([\d.]+)s")


def _log(message: str) -> None:
    print(f"[latency {datetime.now(timezone.utc):%H:%M:%S}] {message}", flush=True)


def scenario() -> dict[str, Any]:
    return {
        "name": "latency",
        "time_scale": TIME_SCALE,
        "job_runtime_seconds": JOB_RUNTIME,
        "phase_seconds": {"starting": 30, "downloading": 30, "uploading": 30, "stopping": 30},
        "capacity": {G6: [{"from": 0, "to": OPENS, "free": 0}, {"from": OPENS, "free": FREE}]},
    }


def _when(value: str | None) -> float | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def cpu_seconds(af: LocalAirflow, names: Sequence[str]) -> float:
    """User + system CPU seconds of the named supervised processes' groups so far, with the children they
    reaped (a Celery worker's task processes, once they exit)."""
    import psutil

    total = 0.0
    for name in names:
        for pid in af.supervisor.members(name):
            try:
                t = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system + t.children_user + t.children_system
    return total


def run_dag(af: LocalAirflow, mode: str, tasks: int) -> tuple[str, str]:
    """Run ``e2e_latency_<mode>`` with ``tasks`` jobs to its end, on a fresh offline SageMaker world;
    returns its DAG id and run id (the jobs are named ``<run id>-NNN``)."""
    af.sm.load_scenario(scenario())
    if mode.startswith("events"):
        af.sm.create_event_queue(EVENT_QUEUE)
    dag_id = f"e2e_latency_{mode}"
    prefix = f"lat-{mode.replace('_', '-')}-{int(time.time() * 10) % 1000000}"
    specs = [
        {
            "config": training_config(f"{prefix}-{i:03d}", max_runtime_seconds=86400),
            "instance_preferences": [{"instance_type": G6, "instance_count": 1}],
        }
        for i in range(tasks)
    ]
    run_id = af.trigger_dag(dag_id, {"tasks": specs}, run_id=prefix)
    _log(f"{dag_id}: {tasks} tasks waiting for {FREE} instances freeing one by one")
    deadline = time.monotonic() + 900
    while af.dag_run(dag_id, run_id)["state"] not in TERMINAL_RUN_STATES:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{dag_id} {run_id} did not finish within 900 s")
        time.sleep(2)
    if mode.startswith("events"):
        af.sm.remove_event_queue(EVENT_QUEUE)
    return dag_id, run_id


def first_reads(af: LocalAirflow) -> list[float]:
    """How long each triggerer process's first read through its channel took (seconds), from the trigger
    logs: the line :func:`airflow_provider_sm_prefs.triggers.finish.warm_up` writes once per process."""
    found: list[float] = []
    for path in sorted(Path(af.log_dir).glob("dag_id=e2e_latency_*/**/*.log")):
        found += [float(s) for s in _FIRST_READ.findall(path.read_text(encoding="utf-8", errors="replace"))]
    return found


def warm_triggerers(af: LocalAirflow, tasks: int = 6, rounds: int = 3) -> list[float]:
    """Have every triggerer process end tasks before anything is measured, as a triggerer in service has.

    Airflow builds a triggerer supervisor's in-process execution API on the first call that needs it
    (2-13 s on 2 cores), once per process; the provider makes that call as the process's first wait that
    will end its task starts. Measured cold, a fresh deployment's first selections would each carry that
    once-per-process cost. Returns what each process's first read took (published as ``cold_start``).
    """
    wanted = af.config.triggerers
    for _ in range(rounds):
        run_dag(af, "poll", tasks)
        deadline = time.monotonic() + 60
        while len(first_reads(af)) < wanted and time.monotonic() < deadline:
            time.sleep(2)
        if len(first_reads(af)) >= wanted:
            break
    reads = first_reads(af)
    if len(reads) < wanted:
        raise RuntimeError(f"warming: {len(reads)} of {wanted} triggerer processes made their first read")
    _log(f"triggerers warm: first reads took {', '.join(f'{r:.1f}s' for r in reads)}")
    return reads


def measure_mode(af: LocalAirflow, mode: str, tasks: int) -> tuple[list[dict[str, float]], dict[str, float]]:
    """Run ``e2e_latency_<mode>`` once: one row of :data:`PARTS` (seconds) per task, and the CPU seconds
    per task of the workers and of the triggerers over the run."""
    workers, triggerers = list(af.config.worker_names), list(triggerer_names(af.config.triggerers))
    cpu_before = (cpu_seconds(af, workers), cpu_seconds(af, triggerers))
    dag_id, run_id = run_dag(af, mode, tasks)
    prefix = run_id
    clock = af.sm.clock()
    wall, emulated = time.time(), float(clock["now"])
    jobs = {job["name"]: job for job in af.sm.jobs()}
    tis = af.task_instances(dag_id, run_id)
    by = {(ti["task_id"], ti["map_index"]): ti for ti in tis}
    rows = []
    for i in range(tasks):
        job_ti, next_ti = by[("selection.job", i)], by[("selection.after_selection", i)]
        job = jobs[f"{prefix}-{i:03d}"]
        if job_ti["state"] != "success" or next_ti["state"] != "success" or job["selected_at"] is None:
            raise RuntimeError(f"{dag_id}[{i}]: {job_ti['state']}/{next_ti['state']}, job {job['status']}")
        selected = wall - (emulated - float(job["selected_at"])) / TIME_SCALE
        ended, started = _when(job_ti["end_date"]), _when(next_ti["start_date"])
        assert ended and started
        log = af.task_log(dag_id, run_id, "selection.job", map_index=i)
        dwell = sum(float(m) for m in _DWELL.findall(log))
        processes = len(_PROCESS_START.findall(log))
        # A task the triggerer ended was never resumed: the trigger's event set its end state itself. Told
        # by its one task process (the triggerer's lines may reach the log served by the API late).
        resumed = processes > 1 or (processes == 0 and _ENDED_BY_TRIGGERER not in log)
        scheduled = _when(job_ti["scheduled_when"]) if resumed else ended
        queued = _when(job_ti["queued_when"]) if resumed else ended
        assert scheduled and queued
        rows.append(
            {
                "detection": scheduled - selected - dwell,
                "dwell": dwell,
                "triggerer_to_scheduler": queued - scheduled,
                "scheduler_to_worker": ended - queued,
                "to_next_task": started - ended,
                "total": started - selected,
                "task_processes": processes,
            }
        )
    cpu = {
        "worker_cpu_per_job": round((cpu_seconds(af, workers) - cpu_before[0]) / tasks, 2),
        "triggerer_cpu_per_job": round((cpu_seconds(af, triggerers) - cpu_before[1]) / tasks, 2),
        "task_processes_per_job": round(statistics.mean(r["task_processes"] for r in rows), 2),
    }
    return rows, cpu


def summarize(rows: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """p50, p95 and max of every part (seconds, 1 decimal)."""
    out: dict[str, dict[str, float]] = {}
    for part in PARTS:
        values = sorted(max(0.0, r[part]) for r in rows)
        p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
        out[part] = {
            "p50": round(statistics.median(values), 1),
            "p95": round(p95, 1),
            "max": round(values[-1], 1),
        }
    return out


#: The per-job figures of each mode, after the latency parts.
COSTS = ("task_processes_per_job", "worker_cpu_per_job", "triggerer_cpu_per_job")


def render_markdown(data: Mapping[str, Any]) -> str:
    lines = [
        "| mode | tasks | "
        + " | ".join(f"{p.replace('_', ' ')} p50 / p95 / max (s)" for p in PARTS)
        + " | task processes per job | worker CPU per job (s) | triggerer CPU per job (s) |",
        "|---|---|" + "---|" * (len(PARTS) + len(COSTS)),
    ]
    for mode, summary in data["modes"].items():
        cells = [f"{s['p50']} / {s['p95']} / {s['max']}" for s in (summary[p] for p in PARTS)]
        measured = data.get("costs", {}).get(mode, {})  # results published before these figures have none
        costs = [str(measured.get(c, "—")) for c in COSTS]
        lines.append(f"| {mode} | {data['tasks']} | " + " | ".join(cells + costs) + " |")
    return "\n".join(lines) + "\n"


def run(af: LocalAirflow, tasks: int, modes: Sequence[str] = MODES, warm: bool = True) -> dict[str, Any]:
    from airflow import __version__ as airflow_version

    af.wait_for_dags([f"e2e_latency_{m}" for m in modes], timeout=240)
    cold_start = warm_triggerers(af) if warm else []
    measured = {mode: measure_mode(af, mode, tasks) for mode in modes}
    rows = {mode: r for mode, (r, _) in measured.items()}
    return {
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "airflow_version": airflow_version,
        "cpus": os.cpu_count(),
        "tasks": tasks,
        "poll_interval": af.config.poll_interval,
        "max_poll_interval": af.config.max_poll_interval,
        "warm": warm,
        "cold_start": cold_start,
        "modes": {mode: summarize(r) for mode, r in rows.items()},
        "costs": {mode: c for mode, (_, c) in measured.items()},
        "rows": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.latency", description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20, help="mapped (job -> next task) pairs per mode")
    parser.add_argument("--root", type=Path, default=None, help="deployment directory (default: temporary)")
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help=f"comma-separated modes, run in this order (default {','.join(MODES)})",
    )
    parser.add_argument(
        "--poll-interval", type=float, default=5.0, help="poll mode's first cadence, seconds (default 5)"
    )
    parser.add_argument(
        "--max-poll-interval",
        type=float,
        default=None,
        help="cap of the cadence, which grows 1.5x per unchanged poll (default: --poll-interval, a fixed "
        "cadence, so that poll mode's latency reads against one interval)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="measure on triggerers that have not ended a task yet (default: each triggerer process ends "
        "tasks first, as one in service has; what its first read took is published as cold_start)",
    )
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)}; choose from {', '.join(MODES)}")
    root = args.root or Path(tempfile.mkdtemp(prefix="sm-prefs-latency-"))
    # Airflow's default triggerer health threshold (30 s), not the 10 s the chaos runs use to take over a
    # killed triggerer's work quickly: on 2 cores, while the job tasks start, a triggerer's supervisor can
    # miss its heartbeats for 10-20 s (its execution-API calls slow down with the database), and a 10 s
    # threshold then hands its triggers to the other triggerer, which runs them again.
    defaults = {"AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "30"}
    with local_airflow(
        root,
        executor="celery",
        poll_interval=args.poll_interval,
        max_poll_interval=max(args.max_poll_interval or args.poll_interval, args.poll_interval),
        extra_env=defaults,
    ) as af:
        data = run(af, args.tasks, modes, warm=not args.cold)
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    (RUN_DIR / "latency.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    table = render_markdown(data)
    (RUN_DIR / "latency.md").write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
