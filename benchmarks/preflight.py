"""What the guardrails before submit add to each task: time and AWS calls, cold and warm cache, 1 and 100 tasks.

    .venv/bin/python -m benchmarks.preflight [--tasks 1,100] [--repeat 3]

One offline SageMaker serves Service Quotas, DescribeTrainingPlan and the Price List API from a
scenario. Each task is what an operator does in ``execute`` before Create: a fresh hook (as a new task
process builds), the look-ups (:meth:`SageMakerPreferenceHook.preflight_facts`) and the decision
(:func:`airflow_provider_sm_prefs.domain.guardrails.evaluate`) for a three-entry training list whose first entry
is backed by a training plan. Airflow 3 runs every task in a process of its own, so before each task the
in-memory cache is emptied: only the shared cache directory carries answers from one task to the next.

- **cold**: the cache directory starts empty, so the first task of the batch pays for the look-ups;
- **warm**: the directory already holds the answers (an earlier DAG run within the TTLs).

Calls are counted by the emulator. Prints a Markdown table; not part of ``make test``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

P5, P4D, G5 = "ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g5.48xlarge"
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/bench-p5"
SCENARIO: dict[str, Any] = {
    "name": "bench-preflight",
    "time_scale": 1,
    "quotas": {"training": {P5: 0}},
    "prices": {P5: 55.04, P4D: 37.69, G5: 20.36},
    "training_plans": [{"arn": PLAN, "instance_type": P5, "count": 2, "from": 0}],
}
LIST = [
    {"instance_type": P5, "instance_count": 2, "training_plan_arn": PLAN},
    {"instance_type": P4D, "instance_count": 2},
    {"instance_type": G5, "instance_count": 4},
]


def _one_task(kind: Any, prefs: Any, guardrails: Any) -> float:
    """One task's guardrails, timed: new hook (its SageMaker client exists for Create anyway), look-ups, decision."""
    from airflow_provider_sm_prefs.domain.guardrails import evaluate
    from airflow_provider_sm_prefs.hooks import preflight
    from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook

    preflight._CACHE._items.clear()  # a new task process starts with an empty memory
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    hook.conn  # noqa: B018 - built for Create in every task, with or without guardrails
    start = time.perf_counter()
    facts = hook.preflight_facts(
        kind, [(e.instance_type, e.training_plan_arn) for e in prefs], checks=True, prices=True
    )
    evaluate(prefs, None, guardrails, facts)
    return time.perf_counter() - start


def measure(server: Any, tasks: int, warm: bool) -> dict[str, Any]:
    from airflow_provider_sm_prefs.domain.guardrails import Guardrails
    from airflow_provider_sm_prefs.domain.kinds import JobKind
    from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
    from airflow_provider_sm_prefs.hooks.preflight import clear_cache

    prefs = InstancePreferenceList(LIST, "training")
    guardrails = Guardrails(max_hourly_cost=200.0)
    server.load_scenario(SCENARIO)
    clear_cache()
    if warm:
        _one_task(JobKind.TRAINING, prefs, guardrails)
    before = dict(server.stats()["operations"])
    times = [_one_task(JobKind.TRAINING, prefs, guardrails) for _ in range(tasks)]
    after = server.stats()["operations"]
    calls = {op: after.get(op, 0) - before.get(op, 0) for op in after if after.get(op, 0) - before.get(op, 0)}
    return {
        "tasks": tasks,
        "cache": "warm" if warm else "cold",
        "ms_mean": 1000 * statistics.fmean(times),
        "ms_first": 1000 * times[0],
        "ms_p95": 1000 * sorted(times)[max(0, round(0.95 * len(times)) - 1)],
        "calls_total": sum(calls.values()),
        "calls_per_task": sum(calls.values()) / tasks,
        "calls": calls,
    }


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| tasks | cache | ms/task mean | ms first task | ms p95 | calls total | calls/task | calls by operation |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        ops = ", ".join(f"{op} {n}" for op, n in sorted(r["calls"].items()))
        lines.append(
            f"| {r['tasks']} | {r['cache']} | {r['ms_mean']:.1f} | {r['ms_first']:.1f} | {r['ms_p95']:.1f} | "
            f"{r['calls_total']} | {r['calls_per_task']:.2f} | {ops} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="1,100", help="comma-separated batch sizes")
    parser.add_argument("--repeat", type=int, default=3, help="batches per row; the median batch is shown")
    args = parser.parse_args(argv)
    os.environ.setdefault("SM_PREFS_CACHE_DIR", tempfile.mkdtemp(prefix="sm-prefs-bench-cache-"))
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    from offline_sagemaker import OfflineSageMaker

    rows = []
    with OfflineSageMaker(scenario=SCENARIO) as server:
        os.environ.update(server.airflow_env(conn_id="aws_default"))
        for tasks in (int(n) for n in args.tasks.split(",")):
            for warm in (False, True):
                runs = sorted(
                    (measure(server, tasks, warm) for _ in range(args.repeat)), key=lambda r: r["ms_mean"]
                )
                rows.append(runs[len(runs) // 2])
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
