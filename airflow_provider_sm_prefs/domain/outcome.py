"""The outcome record handed to downstream tasks, its XCom keys, and how it is read off AWS (pure).

Every figure comes from what SageMaker reports (Selected*, SecondaryStatusTransitions,
CreationTime...), never from the waiting process's memory, so a triggerer restart or a retry
reports exactly the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.domain import catalog
from airflow_provider_sm_prefs.domain.exceptions import (
    CapacityTimeoutError,
    CapacityUnavailableError,
    JobFailedError,
    JobStoppedError,
    SageMakerJobError,
)
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.domain.schema import OUTCOME_ONLY, facet
from airflow_provider_sm_prefs.domain.status import JobStatus, as_datetime, cluster_of, job_status, selected


class XComKey(str, Enum):
    """XCom keys pushed by the operators and the sensor. ``return_value`` holds the whole record.

    Each key is the name of the :class:`CapacityOutcome` field it carries.
    """

    JOB_NAME = "job_name"
    JOB_ARN = "job_arn"
    SELECTED_INSTANCE_TYPE = "selected_instance_type"
    SELECTED_INSTANCE_COUNT = "selected_instance_count"
    PREFERENCE_RANK = "preference_rank"
    FELL_BACK = "fell_back"
    PENDING_SECONDS = "pending_seconds"
    CAPACITY = "capacity"
    ACCELERATORS = "accelerators"
    JOB_STATUS = "job_status"
    REGION = "region"
    REGION_RANK = "region_rank"


class Capacity(str, Enum):
    TRAINING_PLAN = "training-plan"
    ON_DEMAND = "on-demand"


@dataclass(frozen=True)
class CapacityOutcome:
    """What SageMaker chose for a job, and how long it took to get it. JSON-safe via :meth:`as_dict`.

    The one declaration of the outcome's fields (see :mod:`.schema`): the capacity record carries each
    field under the same name unless it is ``OUTCOME_ONLY``; the OpenLineage facet carries the fields
    marked ``facet(...)`` as they are.
    """

    job_name: str
    job_kind: str
    job_arn: str | None
    selected_instance_type: str = field(
        metadata=facet("The entry SageMaker selected (SelectedInstanceType).")
    )
    selected_instance_count: int = field(metadata=facet(minimum=1))
    preference_rank: int | None = field(
        metadata=facet("Place of the selected entry in the list as written; 1 = first choice.", minimum=1)
    )
    fell_back: bool = field(metadata=facet())
    pending_seconds: float = field(
        metadata=facet("Time waited for capacity, from AWS's timestamps.", minimum=0)
    )
    capacity: str = field(metadata=facet(enum=sorted(c.value for c in Capacity)))
    accelerators: dict[str, Any] | None = field(metadata=OUTCOME_ONLY)
    job_status: str = field(metadata=facet())
    secondary_status: str | None = field(default=None, metadata=OUTCOME_ONLY)
    preferences: list[dict[str, Any]] = field(default_factory=list)
    training_seconds: int | None = None
    billable_seconds: int | None = field(default=None, metadata=facet(minimum=0))
    failure_reason: str | None = field(default=None, metadata=OUTCOME_ONLY)
    #: CreationTime and the end time SageMaker reports (ISO 8601), when known.
    created_at: str | None = None
    ended_at: str | None = None
    #: Training: where SageMaker put the model (``ModelArtifacts.S3ModelArtifacts``), once it reports it.
    model_artifacts: str | None = field(default=None, metadata=OUTCOME_ONLY)
    #: Guardrails before submit (see :mod:`.guardrails`): USD per hour of the selected cluster and of the
    #: first entry as written, the difference as a fraction, the cost once billable seconds are known,
    #: the entries left out (``{instance_type, rank, kind, reason}``) and the checks that could not run.
    hourly_cost: float | None = field(
        default=None, metadata=facet("USD per hour of the selected cluster (On-Demand list price x count).")
    )
    first_choice_hourly_cost: float | None = field(default=None, metadata=facet())
    cost_increase: float | None = field(
        default=None, metadata=facet("hourlyCost against firstChoiceHourlyCost, as a fraction.")
    )
    estimated_cost: float | None = field(default=None, metadata=facet("hourlyCost x billable time, in USD."))
    excluded: list[dict[str, Any]] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    #: Acceptance windows (see :mod:`.windows`): one ``StageRecord.as_dict()`` per submission stage,
    #: empty for a list without windows. ``pending_seconds`` is then the total across stages.
    stages: list[dict[str, Any]] = field(default_factory=list)
    #: The AWS region the job ran in (from its ARN), and its place among the task's regions: 1 = the task's
    #: own, 2 = the first of ``regions``... (see :mod:`.regions`).
    region: str | None = None
    region_rank: int = field(default=1, metadata=OUTCOME_ONLY)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapacityOutcome:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def xcom_values(self) -> dict[str, Any]:
        """The per-key XComs (``return_value`` carries :meth:`as_dict`): each key names an outcome field."""
        return {key.value: getattr(self, key.value) for key in XComKey}

    def summary(self) -> str:
        rank = f"rank {self.preference_rank}" if self.preference_rank else "rank ?"
        return (
            f"{self.job_name}: {self.selected_instance_type}×{self.selected_instance_count} ({rank}, "
            f"{self.capacity}) after {format_duration(self.pending_seconds)} pending; status {self.job_status}"
        )


def pending_seconds(kind: JobKind, describe: Mapping[str, Any], now: datetime | None = None) -> float:
    """Seconds the job has waited for capacity, from AWS's own timestamps.

    Training: the summed duration of the ``Pending`` secondary-status transitions (an open one runs
    until ``now``, the service clock). Processing has no transitions: the time from CreationTime to
    ProcessingStartTime (or ``now`` while none is selected).
    """
    if kind.spec.secondary_status:
        total = 0.0
        for transition in describe.get("SecondaryStatusTransitions") or []:
            if transition.get("Status") != "Pending":
                continue
            start = as_datetime(transition.get("StartTime"))
            end = as_datetime(transition.get("EndTime")) or now
            if start and end:
                total += max(0.0, (end - start).total_seconds())
        return round(total, 3)
    created = as_datetime(describe.get("CreationTime"))
    started = as_datetime(describe.get("ProcessingStartTime"))
    end = started or now
    if created is None or end is None:
        return 0.0
    return round(max(0.0, (end - created).total_seconds()), 3)


def accelerator_facts(instance_type: str, count: int) -> dict[str, Any] | None:
    """Accelerator facts of ``count`` × ``instance_type`` from the catalog; None for unknown types."""
    try:
        totals = catalog.totals(instance_type, count)
    except KeyError:
        return None
    data = totals.as_dict()
    return {
        "model": data["accelerator_model"],
        "per_instance": data["accelerators_per_instance"],
        "total": data["accelerators_total"],
        "memory_gib_per_device": data["accelerator_memory_gib_per_device"],
        "memory_gib_total": data["accelerator_memory_gib_total"],
        "vcpus_total": data["vcpus_total"],
        "memory_gib_total_host": data["memory_gib_total"],
        "description": totals.describe(),
    }


def outcome_from_describe(
    kind: JobKind,
    describe: Mapping[str, Any],
    preferences: InstancePreferenceList | None = None,
    now: datetime | None = None,
) -> CapacityOutcome:
    """Build the outcome of a job whose entry has been selected.

    :param preferences: the list the job was submitted with; read from the response when None.
    :param now: the service clock, used only while a Pending transition is still open.
    """
    spec = kind.spec
    job_name = spec.name_of(describe) or "?"
    if preferences is None:
        preferences = InstancePreferenceList.from_response(
            cluster_of(kind, describe).get("InstancePreferences"), kind
        )
    instance_type, count = selected(kind, describe)
    cluster = cluster_of(kind, describe)
    if instance_type is None:
        # A single-type job (no preference list) reports its type at top level.
        instance_type = cluster.get("InstanceType")
    if count is None:
        count = cluster.get("InstanceCount")
    if instance_type is None:
        raise ValueError(f"job {job_name!r} has no selected instance type yet")
    # The rank is computed here, where the selection is first known, and only here: the event carries
    # it, and the guardrails map it to the list as written (GuardrailReport.apply) without looking again.
    rank: int | None
    try:
        rank = preferences.rank_of(instance_type) if len(preferences) else 1
    except KeyError:
        rank = None
    entry = preferences[rank - 1] if rank and len(preferences) else None
    if count is None and entry is not None:
        count = entry.instance_count
    plan_backed = bool(entry and entry.training_plan_arn)
    status = job_status(kind, describe)
    return CapacityOutcome(
        job_name=job_name,
        job_kind=kind.value,
        job_arn=describe.get(spec.arn_field),
        selected_instance_type=instance_type,
        selected_instance_count=int(count or 1),
        preference_rank=rank,
        fell_back=bool(rank and rank > 1),
        pending_seconds=pending_seconds(kind, describe, now),
        capacity=(Capacity.TRAINING_PLAN if plan_backed else Capacity.ON_DEMAND).value,
        accelerators=accelerator_facts(instance_type, int(count or 1)),
        job_status=status.value,
        secondary_status=describe.get("SecondaryStatus"),
        preferences=preferences.as_list(),
        training_seconds=describe.get("TrainingTimeInSeconds"),
        billable_seconds=describe.get("BillableTimeInSeconds"),
        failure_reason=describe.get("FailureReason"),
        created_at=_iso(describe.get("CreationTime")),
        ended_at=_iso(describe.get(spec.end_time_field)),
        model_artifacts=(describe.get("ModelArtifacts") or {}).get("S3ModelArtifacts"),
        region=_region_of_arn(describe.get(spec.arn_field)),
    )


def _region_of_arn(arn: Any) -> str | None:
    """The region field of an ARN (``arn:aws:sagemaker:<region>:...``); None for anything else."""
    parts = arn.split(":") if isinstance(arn, str) else []
    return parts[3] or None if len(parts) > 3 and parts[0] == "arn" else None


def _iso(value: Any) -> str | None:
    moment = as_datetime(value)
    return moment.isoformat() if moment else None


def terminal_error(
    kind: JobKind, describe: Mapping[str, Any], now: datetime | None = None
) -> SageMakerJobError | None:
    """The domain error a terminal, unsuccessful job stands for; None for Completed.

    Capacity outcomes are told apart by facts, not message text (AWS says StatusMessage may change):
    a job that ends without a selected entry never got capacity.
    """
    job_name = kind.spec.name_of(describe) or "?"
    status = job_status(kind, describe)
    reason = describe.get("FailureReason") or describe.get("ExitMessage")
    if status is JobStatus.COMPLETED:
        return None
    instance_type, _ = selected(kind, describe)
    never_selected = (
        instance_type is None and cluster_of(kind, describe).get("InstancePreferences") is not None
    )
    if status is JobStatus.FAILED:
        text = reason or ""
        if never_selected and text.startswith("CapacityError"):
            return CapacityUnavailableError(job_name, status.value, reason)
        if never_selected or "InsufficientCapacityError" in text:
            return CapacityTimeoutError(job_name, status.value, reason)
        return JobFailedError(job_name, status.value, reason)
    if status in (JobStatus.STOPPED, JobStatus.DELETING, JobStatus.STOPPING):
        limit = (describe.get("StoppingCondition") or {}).get("MaxPendingTimeInSeconds")
        waited = pending_seconds(kind, describe, now)
        if never_selected and limit and waited >= float(limit) - 60:
            return CapacityTimeoutError(
                job_name,
                status.value,
                reason or f"MaxPendingTimeInSeconds={limit} passed after {waited:.0f}s pending",
            )
        return JobStoppedError(
            job_name, status.value, reason or "stopped by a StopJob call from outside this task"
        )
    return None


def capacity_deadline_error(
    job_name: str, status: str | None, max_pending_seconds: float, waited: float, stopped: bool
) -> CapacityTimeoutError:
    """The error of a client-side ``max_pending`` that passed with no entry selected (trigger and sensor)."""
    reason = (
        f"no entry of the preference list got capacity within max_pending={format_duration(max_pending_seconds)} "
        f"(waited {format_duration(waited)})"
    )
    reason += "; the job was stopped" if stopped else "; the job was left running"
    return CapacityTimeoutError(job_name, status, reason)


def format_duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s" if sec else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
