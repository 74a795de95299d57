"""Capacity records for the capacity page benchmark: what N task tries over 60 days would have left (pure).

:func:`plan_runs` lays out DAG runs and their task instances, each with the
:class:`~airflow_provider_sm_prefs.domain.record.CapacityRecord` its try left under ``capacity_outcome``:

- fleet runs of ``e2e_fleet`` (a training job per mapped task, ``width`` map indexes each) make up
  about 90 % of the records;
- the rest are single-job runs of four other DAGs (the nightly example, the CPU processing example and
  two test DAGs), one task instance each;
- runs spread over the ``days`` before ``now``; how often the first entry is scarce drifts over the
  period, so the fallback chart has a shape;
- about 8 % of tries fail (capacity timeout, quota, CPU-only "no capacity", job failed or stopped),
  some tries are retries (try 2).

Deterministic for a given seed and ``now``. The database side (:mod:`benchmarks.capacity_seed_db`)
turns the plan into DagRun, TaskInstance and XCom rows.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_provider_sm_prefs.domain.preferences import InstancePreference
from airflow_provider_sm_prefs.domain.record import CapacityRecord, FailureKind
from airflow_provider_sm_prefs.hooks.sagemaker import derive_job_name

FLEET_DAG, FLEET_TASK = "e2e_fleet", "job"
REGION = "us-east-1"
ACCOUNT = "123456789012"


@dataclass(frozen=True)
class Workflow:
    """A DAG/task whose runs leave records, and the lists its jobs are submitted with."""

    dag_id: str
    task_id: str
    job_kind: str
    operator: str
    lists: tuple[tuple[tuple[str, int], ...], ...]


TRAINING_LISTS = (
    (("ml.g6.48xlarge", 2), ("ml.g5.48xlarge", 4), ("ml.p4d.24xlarge", 2)),
    (("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2), ("ml.g6e.48xlarge", 2)),
    (("ml.g6e.12xlarge", 1), ("ml.g5.12xlarge", 1)),
)
PROCESSING_LISTS = ((("ml.c7i.4xlarge", 2), ("ml.c6i.4xlarge", 2), ("ml.m5.4xlarge", 2)),)
TRAINING_OP, PROCESSING_OP = "SageMakerPreferenceTrainingOperator", "SageMakerPreferenceProcessingOperator"

FLEET = Workflow(FLEET_DAG, FLEET_TASK, "training", TRAINING_OP, TRAINING_LISTS)
SINGLE_JOB = (
    Workflow("sm_prefs_nightly_retrain", "train", "training", TRAINING_OP, TRAINING_LISTS[:1]),
    Workflow("sm_prefs_processing_cpu", "prepare_features", "processing", PROCESSING_OP, PROCESSING_LISTS),
    Workflow("t_train_complete", "job", "training", TRAINING_OP, TRAINING_LISTS[1:]),
    Workflow("t_process", "job", "processing", PROCESSING_OP, PROCESSING_LISTS),
)
#: Share of tries that fail, by kind (training; processing swaps the timeout for "no capacity").
FAILURES = (
    (FailureKind.CAPACITY_TIMEOUT, 0.03),
    (FailureKind.QUOTA, 0.015),
    (FailureKind.FAILED, 0.02),
    (FailureKind.STOPPED, 0.015),
)
REASONS = {
    FailureKind.CAPACITY_TIMEOUT: "No instance type in the list got capacity within MaxPendingTimeInSeconds.",
    FailureKind.NO_CAPACITY: "CapacityError: Unable to provision requested ML compute capacity.",
    FailureKind.QUOTA: "ResourceLimitExceeded: The account-level service limit for {type} is 2 Instances.",
    FailureKind.FAILED: "AlgorithmError: ExecuteUserScriptError: exit code 1 (CUDA out of memory)",
    FailureKind.STOPPED: "Stopped by a user.",
}


@dataclass(frozen=True)
class SeedTask:
    """One task instance and the record its (last) try left."""

    map_index: int
    try_number: int
    state: str
    record: dict[str, Any]


@dataclass(frozen=True)
class SeedRun:
    """One DAG run, its task (one operator, mapped or not) and its task instances."""

    dag_id: str
    task_id: str
    run_id: str
    run_type: str
    run_after: str
    operator: str
    state: str
    tasks: list[SeedTask] = field(default_factory=list)


def plan_runs(
    records: int, now: datetime | None = None, days: int = 60, width: int = 50, seed: int = 20261130
) -> list[SeedRun]:
    """DAG runs holding exactly ``records`` task instances, each with one valid record, oldest first."""
    if records < 0 or width < 1 or days < 1:
        raise ValueError("records >= 0, width >= 1 and days >= 1 are required")
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    rng = random.Random(seed)
    fleet_runs = round(records * 0.9) // width if width > 1 else 0
    singles = records - fleet_runs * width
    shapes = [(FLEET, width)] * fleet_runs + [(SINGLE_JOB[i % len(SINGLE_JOB)], 1) for i in range(singles)]
    start = now - timedelta(days=days)
    when = sorted(start + timedelta(seconds=rng.uniform(0, days * 86400 - 3600)) for _ in shapes)
    rng.shuffle(shapes)
    # A distinct microsecond per run keeps (dag_id, logical_date) unique.
    return [
        _run(rng, workflow, count, after.replace(microsecond=i % 1_000_000), (after - start) / (now - start))
        for i, ((workflow, count), after) in enumerate(zip(shapes, when, strict=True))
    ]


def _run(rng: random.Random, workflow: Workflow, count: int, run_after: datetime, phase: float) -> SeedRun:
    run_type = "manual" if workflow is FLEET else "scheduled"
    run_id = f"{run_type}__{run_after.isoformat()}"
    prefs = rng.choice(workflow.lists)
    tasks = [
        _task(rng, workflow, run_id, map_index if count > 1 else -1, prefs, run_after, phase)
        for map_index in range(count)
    ]
    failed = any(t.state == "failed" for t in tasks)
    return SeedRun(
        dag_id=workflow.dag_id,
        task_id=workflow.task_id,
        run_id=run_id,
        run_type=run_type,
        run_after=run_after.isoformat(),
        operator=workflow.operator,
        state="failed" if failed else "success",
        tasks=tasks,
    )


def _failure(rng: random.Random, workflow: Workflow) -> FailureKind | None:
    roll = rng.random()
    for kind, share in FAILURES:
        if roll < share:
            if kind is FailureKind.CAPACITY_TIMEOUT and workflow.job_kind == "processing":
                return FailureKind.NO_CAPACITY
            return kind
        roll -= share
    return None


def _rank(rng: random.Random, entries: int, phase: float) -> int:
    """1-based rank: the first entry gets scarcer and then easier again over the period."""
    scarce = 0.25 + 0.35 * math.sin(math.pi * phase)
    rank = 1
    while rank < entries and rng.random() < scarce:
        rank += 1
    return rank


def _task(
    rng: random.Random,
    workflow: Workflow,
    run_id: str,
    map_index: int,
    prefs: tuple[tuple[str, int], ...],
    run_after: datetime,
    phase: float,
) -> SeedTask:
    try_number = 2 if rng.random() < 0.05 else 1
    name = derive_job_name(workflow.dag_id, workflow.task_id, run_id, map_index)
    created = run_after + timedelta(seconds=rng.uniform(5, 60))
    base: dict[str, Any] = {
        "dag_id": workflow.dag_id,
        "task_id": workflow.task_id,
        "run_id": run_id,
        "map_index": map_index,
        "try_number": try_number,
        "job_kind": workflow.job_kind,
        "job_name": name,
        "job_arn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{workflow.job_kind}-job/{name}",
        "region": REGION,
        "preferences": [InstancePreference(t, n).as_dict() for t, n in prefs],
    }
    kind = _failure(rng, workflow)
    if kind is not None:
        record = _failed(rng, base, kind, prefs, created)
    else:
        record = _selected(rng, base, prefs, created, phase)
    return SeedTask(map_index, try_number, "failed" if kind else "success", record.as_dict())


def _selected(
    rng: random.Random,
    base: dict[str, Any],
    prefs: tuple[tuple[str, int], ...],
    created: datetime,
    phase: float,
) -> CapacityRecord:
    rank = _rank(rng, len(prefs), phase)
    instance_type, count = prefs[rank - 1]
    pending = round(rng.lognormvariate(math.log(120 + 900 * (rank - 1)), 0.8), 1)
    training = int(rng.uniform(900, 4 * 3600)) if base["job_kind"] == "training" else None
    runtime = training or int(rng.uniform(300, 1800))
    ended = created + timedelta(seconds=pending + runtime + 120)
    return CapacityRecord(
        **base,
        selected_instance_type=instance_type,
        selected_instance_count=count,
        preference_rank=rank,
        fell_back=rank > 1,
        capacity="on-demand",
        pending_seconds=pending,
        training_seconds=training,
        billable_seconds=runtime + 90 if training is not None else None,
        job_status="Completed",
        created_at=created.isoformat(),
        ended_at=ended.isoformat(),
        recorded_at=(ended + timedelta(seconds=rng.uniform(1, 30))).isoformat(),
    )


def _failed(
    rng: random.Random,
    base: dict[str, Any],
    kind: FailureKind,
    prefs: tuple[tuple[str, int], ...],
    created: datetime,
) -> CapacityRecord:
    status = {
        FailureKind.CAPACITY_TIMEOUT: "Stopped",
        FailureKind.NO_CAPACITY: "Failed",
        FailureKind.FAILED: "Failed",
        FailureKind.STOPPED: "Stopped",
    }.get(kind)
    fields = dict(base)
    if kind is FailureKind.QUOTA:  # rejected by Create: no job exists
        fields["job_arn"] = None
    waited = rng.uniform(1800, 7200) if kind is FailureKind.CAPACITY_TIMEOUT else rng.uniform(60, 3600)
    return CapacityRecord(
        **fields,
        job_status=status,
        failure_kind=kind.value,
        reason=REASONS[kind].format(type=prefs[0][0]),
        created_at=created.isoformat() if status else None,
        ended_at=(created + timedelta(seconds=waited)).isoformat() if status else None,
        recorded_at=(created + timedelta(seconds=waited + rng.uniform(1, 30))).isoformat(),
    )
