"""Capacity records for the capacity page benchmark: what N task tries over 60 days would have left (pure).

:func:`plan_runs` lays out DAG runs and their task instances, each with the
:class:`~airflow_provider_sm_prefs.domain.record.CapacityRecord` its try left under ``capacity_outcome``:

- fleet runs of ``e2e_fleet`` (a training job per mapped task, ``width`` map indexes each) make up
  about 90 % of the records;
- the rest are single-job runs of four other DAGs (the nightly example, the CPU processing example and
  two test DAGs), one task instance each;
- runs spread over the ``days`` before ``now``; how often the first entry is scarce drifts over the
  period, so the fallback chart has a shape;
- the first entry is scarcer in the afternoon and evening (UTC) than at night, so the hours of the day
  differ too;
- about 8 % of tries fail (capacity timeout, quota, CPU-only "no capacity", job failed or stopped),
  some tries are retries (try 2);
- every try went through the guardrails as the operators run them
  (:func:`~airflow_provider_sm_prefs.domain.guardrails.evaluate`, then ``GuardrailReport.apply``), so
  records carry the selected cluster's and the first choice's hourly cost and the run's estimated cost
  from :data:`PRICES`; some runs cap the hourly cost and leave an entry out, some tries find an entry
  short of quota, and a few could not read the price list (unpriced);
- some fleet runs and every ``t_train_complete`` run wait for their first choice alone for
  :data:`WINDOW_SECONDS` first (acceptance windows), so their records carry stages.

Deterministic for a given seed and ``now``. The database side (:mod:`benchmarks.capacity_seed_db`)
turns the plan into DagRun, TaskInstance and XCom rows.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_provider_sm_prefs.domain.guardrails import Facts, GuardrailReport, Guardrails, evaluate
from airflow_provider_sm_prefs.domain.outcome import Capacity, CapacityOutcome
from airflow_provider_sm_prefs.domain.preferences import InstancePreference, InstancePreferenceList
from airflow_provider_sm_prefs.domain.record import CapacityRecord, FailureKind, TaskInstanceRef
from airflow_provider_sm_prefs.domain.windows import StageEnd, StageRecord, stage_suffix
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
    #: Share of runs whose later entries wait for :data:`WINDOW_SECONDS` (acceptance windows).
    windowed: float = 0.0


TRAINING_LISTS = (
    (("ml.g6.48xlarge", 2), ("ml.g5.48xlarge", 4), ("ml.p4d.24xlarge", 2)),
    (("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2), ("ml.g6e.48xlarge", 2)),
    (("ml.g6e.12xlarge", 1), ("ml.g5.12xlarge", 1)),
)
PROCESSING_LISTS = ((("ml.c7i.4xlarge", 2), ("ml.c6i.4xlarge", 2), ("ml.m5.4xlarge", 2)),)
TRAINING_OP, PROCESSING_OP = "SageMakerPreferenceTrainingOperator", "SageMakerPreferenceProcessingOperator"

FLEET = Workflow(FLEET_DAG, FLEET_TASK, "training", TRAINING_OP, TRAINING_LISTS, windowed=0.3)
SINGLE_JOB = (
    Workflow("sm_prefs_nightly_retrain", "train", "training", TRAINING_OP, TRAINING_LISTS[:1]),
    Workflow("sm_prefs_processing_cpu", "prepare_features", "processing", PROCESSING_OP, PROCESSING_LISTS),
    Workflow("t_train_complete", "job", "training", TRAINING_OP, TRAINING_LISTS[1:], windowed=1.0),
    Workflow("t_process", "job", "processing", PROCESSING_OP, PROCESSING_LISTS),
)
#: Illustrative USD per instance-hour for the seeded history (not AWS's prices): fallbacks that cost
#: more than the first choice, and some that cost less.
PRICES = {
    "ml.g6.48xlarge": 13.35,
    "ml.g5.48xlarge": 16.29,
    "ml.p4d.24xlarge": 37.69,
    "ml.p5.48xlarge": 63.0,
    "ml.g6e.48xlarge": 30.13,
    "ml.g6e.12xlarge": 10.49,
    "ml.g5.12xlarge": 7.09,
    "ml.c7i.4xlarge": 0.86,
    "ml.c6i.4xlarge": 0.82,
    "ml.m5.4xlarge": 0.92,
}
#: Share of runs with ``max_hourly_cost=COST_CAP`` (it leaves ml.p4d.24xlarge×2 out of their lists).
CAPPED, COST_CAP = 0.2, 70.0
#: Share of tries that found the last entry short of quota (preflight prunes it), or could not price.
SHORT_OF_QUOTA, UNPRICED = 0.04, 0.03
#: The acceptance window of every entry after the first, in windowed runs.
WINDOW_SECONDS = 1800.0
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
    guardrails = Guardrails(max_hourly_cost=COST_CAP) if rng.random() < CAPPED else Guardrails()
    windowed = rng.random() < workflow.windowed
    tasks = [
        _task(
            rng,
            workflow,
            run_id,
            map_index if count > 1 else -1,
            prefs,
            run_after,
            phase,
            guardrails,
            windowed,
        )
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


def _rank(rng: random.Random, kept: list[int], phase: float, created: datetime) -> int:
    """1-based rank (in the list as written) among the ``kept`` ones: the first entry gets scarcer and then
    easier again over the period, and is scarcer from 13:00 to 21:00 UTC than at other hours."""
    scarce = 0.2 + 0.3 * math.sin(math.pi * phase) + (0.25 if 13 <= created.hour < 21 else 0.0)
    position = 0
    while position < len(kept) - 1 and rng.random() < scarce:
        position += 1
    return kept[position]


def _guardrails(
    rng: random.Random, kind: str, prefs: tuple[tuple[str, int], ...], guardrails: Guardrails
) -> GuardrailReport:
    """What the guardrails before submit decided for one try (as the operators decide it)."""
    facts = Facts(region=REGION, quotas={t: 64.0 for t, _ in prefs})
    if not guardrails.caps and rng.random() < UNPRICED:  # a capped list without prices would fail
        facts.unchecked = [
            f"price: {t} could not be priced (ThrottlingException: Rate exceeded)" for t, _ in prefs
        ]
    else:
        facts.prices = {t: PRICES[t] for t, _ in prefs}
    if len(prefs) > 2 and rng.random() < SHORT_OF_QUOTA:
        last_type, last_count = prefs[-1]
        facts.quotas[last_type] = float(last_count - 1)
    written = InstancePreferenceList([InstancePreference(t, n) for t, n in prefs], kind)
    return evaluate(written, None, guardrails, facts)


def _task(
    rng: random.Random,
    workflow: Workflow,
    run_id: str,
    map_index: int,
    prefs: tuple[tuple[str, int], ...],
    run_after: datetime,
    phase: float,
    guardrails: Guardrails,
    windowed: bool,
) -> SeedTask:
    try_number = 2 if rng.random() < 0.05 else 1
    name = derive_job_name(workflow.dag_id, workflow.task_id, run_id, map_index)
    created = run_after + timedelta(seconds=rng.uniform(5, 60))
    report = _guardrails(rng, workflow.job_kind, prefs, guardrails)
    ti = TaskInstanceRef(workflow.dag_id, workflow.task_id, run_id, map_index, try_number)
    base: dict[str, Any] = {
        "job_kind": workflow.job_kind,
        "job_name": name,
        "job_arn": _arn(workflow.job_kind, name),
        "preferences": [
            InstancePreference(t, n, accept_after=WINDOW_SECONDS if windowed and i else None).as_dict()
            for i, (t, n) in enumerate(prefs)
        ],
    }
    kind = _failure(rng, workflow)
    if kind is not None:
        record = _failed(rng, ti, base, kind, prefs, created, report, windowed)
    else:
        record = _selected(rng, ti, base, prefs, created, phase, report, windowed)
    return SeedTask(map_index, try_number, "failed" if kind else "success", record.as_dict())


def _arn(job_kind: str, name: str) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{job_kind}-job/{name}"


def _stage(
    number: int, entries: list[str], name: str, pending: float, ended: StageEnd, at: datetime
) -> dict[str, Any]:
    return StageRecord(
        number, entries, name + stage_suffix(number), pending, ended.value, at.isoformat()
    ).as_dict()


def _selected(
    rng: random.Random,
    ti: TaskInstanceRef,
    base: dict[str, Any],
    prefs: tuple[tuple[str, int], ...],
    created: datetime,
    phase: float,
    report: GuardrailReport,
    windowed: bool,
) -> CapacityRecord:
    rank = _rank(rng, report.kept, phase, created)
    instance_type, count = prefs[rank - 1]
    pending = round(rng.lognormvariate(math.log(120 + 900 * (rank - 1)), 0.8), 1)
    stages: list[dict[str, Any]] = []
    name, started = base["job_name"], created
    if windowed:
        first = prefs[0][0]
        if rank == 1 and pending < WINDOW_SECONDS and rng.random() < 0.85:
            stages = [_stage(1, [first], name, pending, StageEnd.SELECTED, created)]
        else:  # still Pending when the window opened: stage 2 offers every entry kept
            started = created + timedelta(seconds=WINDOW_SECONDS)
            again = round(rng.lognormvariate(math.log(60 + 600 * (rank - 1)), 0.8), 1)
            stages = [
                _stage(1, [first], name, WINDOW_SECONDS, StageEnd.ESCALATED, created),
                _stage(2, [prefs[r - 1][0] for r in report.kept], name, again, StageEnd.SELECTED, started),
            ]
            name, pending = name + stage_suffix(2), WINDOW_SECONDS + again
    training = int(rng.uniform(900, 4 * 3600)) if base["job_kind"] == "training" else None
    runtime = training or int(rng.uniform(300, 1800))
    ended = created + timedelta(seconds=pending + runtime + 120)
    outcome = CapacityOutcome(
        job_name=name,
        job_kind=base["job_kind"],
        job_arn=_arn(base["job_kind"], name),
        selected_instance_type=instance_type,
        selected_instance_count=count,
        preference_rank=rank,
        fell_back=rank > 1,
        pending_seconds=pending,
        capacity=Capacity.ON_DEMAND.value,
        accelerators=None,
        job_status="Completed",
        preferences=base["preferences"],
        training_seconds=training,
        billable_seconds=runtime + 90 if training is not None else None,
        created_at=started.isoformat(),
        ended_at=ended.isoformat(),
        stages=stages,
    )
    # The cost fields and the exclusions, as the operator adds them; then the list as written again
    # (apply() takes it from the report, which does not know the acceptance windows).
    priced = report.apply(outcome)
    priced = CapacityOutcome.from_dict({**priced.as_dict(), "preferences": base["preferences"]})
    recorded = ended + timedelta(seconds=rng.uniform(1, 30))
    return CapacityRecord.from_outcome(ti, priced, REGION, now=recorded)


def _failed(
    rng: random.Random,
    ti: TaskInstanceRef,
    base: dict[str, Any],
    kind: FailureKind,
    prefs: tuple[tuple[str, int], ...],
    created: datetime,
    report: GuardrailReport,
    windowed: bool,
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
    stages: list[dict[str, Any]] = []
    if windowed and kind is FailureKind.CAPACITY_TIMEOUT:  # no entry got capacity in either stage
        waited = max(waited, WINDOW_SECONDS + 600)
        name, opened = base["job_name"], created + timedelta(seconds=WINDOW_SECONDS)
        stages = [
            _stage(1, [prefs[0][0]], name, WINDOW_SECONDS, StageEnd.ESCALATED, created),
            _stage(
                2,
                [prefs[r - 1][0] for r in report.kept],
                name,
                waited - WINDOW_SECONDS,
                StageEnd.TIMED_OUT,
                opened,
            ),
        ]
        fields["job_name"] = name + stage_suffix(2)
        fields["job_arn"] = _arn(base["job_kind"], fields["job_name"])
    return CapacityRecord(
        **asdict(ti),
        **fields,
        region=REGION,
        stages=stages,
        **report.record_fields(),
        job_status=status,
        failure_kind=kind.value,
        reason=REASONS[kind].format(type=prefs[0][0]),
        created_at=created.isoformat() if status else None,
        ended_at=(created + timedelta(seconds=waited)).isoformat() if status else None,
        recorded_at=(created + timedelta(seconds=waited + rng.uniform(1, 30))).isoformat(),
    )
