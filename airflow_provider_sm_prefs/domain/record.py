"""The capacity record: one complete, versioned record per task try, failures included (pure).

Every try of the operators and the sensors leaves it in XCom under :data:`RECORD_KEY`, so what happened
to each job — which entry ran, after how long, for how long, or why nothing ran — can be read back
across runs from Airflow's own storage. A HyperPod instance group's try leaves one too, with ``job_kind``
:data:`~airflow_provider_sm_prefs.domain.kinds.GROUP_KIND`: the group's fields instead of a
job's (nodes per type in list order, counts, time to InService, the mix's accelerators and cost). ``return_value`` and the per-field keys of
:class:`~airflow_provider_sm_prefs.domain.outcome.XComKey` stay as they are; the record adds the task
instance, the region, the failure kind and timestamps.

Readers must expect records of other versions and junk under the key: :meth:`CapacityRecord.from_dict`
returns None for anything it cannot read, and never raises. What each field may hold when read back is
its annotation's types (:func:`~airflow_provider_sm_prefs.domain.schema.reader_types`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain import schema
from airflow_provider_sm_prefs.domain.hyperpod_outcome import GroupOutcome
from airflow_provider_sm_prefs.domain.kinds import GROUP_KIND
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome

__all__ = ["RECORD_KEY", "RECORD_VERSION", "CapacityRecord", "FailureKind", "TaskInstanceRef"]

#: The XCom key of the record.
RECORD_KEY = "capacity_outcome"
#: Bumped when a field changes meaning or goes away (adding a field with a default does not bump it).
RECORD_VERSION = 1


class FailureKind(str, Enum):
    """Why a try ended without its outcome, as the capacity page groups failures."""

    QUOTA = "quota"
    CAPACITY_TIMEOUT = "capacity_timeout"
    NO_CAPACITY = "cpu_no_capacity"
    FAILED = "failed"
    STOPPED = "stopped"
    REJECTED = "rejected"
    INVALID_REQUEST = "invalid_request"
    PREFLIGHT = "preflight"
    #: A HyperPod instance group short of its target (and of an accepted minimum) within the wait.
    SHORTFALL = "shortfall"
    #: HyperPod rolled a HyperPod instance group back.
    ROLLED_BACK = "rolled_back"

    @classmethod
    def of(cls, error: BaseException) -> FailureKind:
        """The kind of a domain exception (anything unexpected counts as failed)."""
        for error_type, kind in _KINDS:
            if isinstance(error, error_type):
                return kind
        return cls.FAILED


_KINDS: tuple[tuple[type[BaseException], FailureKind], ...] = (
    (errors.QuotaExceededError, FailureKind.QUOTA),
    (errors.CapacityTimeoutError, FailureKind.CAPACITY_TIMEOUT),
    (errors.CapacityUnavailableError, FailureKind.NO_CAPACITY),
    (errors.JobStoppedError, FailureKind.STOPPED),
    (errors.JobSubmissionError, FailureKind.REJECTED),
    (errors.InvalidInstancePreferencesError, FailureKind.INVALID_REQUEST),
    (errors.PreflightError, FailureKind.PREFLIGHT),
    (errors.ClusterQuotaError, FailureKind.QUOTA),
    (errors.GroupCapacityShortfallError, FailureKind.SHORTFALL),
    (errors.GroupRolledBackError, FailureKind.ROLLED_BACK),
    (errors.ClusterConfigError, FailureKind.REJECTED),
)


@dataclass(frozen=True)
class TaskInstanceRef:
    """Which task try the record belongs to."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1
    try_number: int = 1

    @classmethod
    def of(cls, ti: Any) -> TaskInstanceRef:
        """From a task instance (the ``ti`` of a task's context)."""
        map_index = getattr(ti, "map_index", -1)
        return cls(
            dag_id=str(ti.dag_id),
            task_id=str(ti.task_id),
            run_id=str(ti.run_id),
            map_index=-1 if map_index is None else int(map_index),
            try_number=int(getattr(ti, "try_number", 1) or 1),
        )


@dataclass(frozen=True)
class CapacityRecord:
    """What one task try did with its SageMaker job or HyperPod instance group. JSON-safe via :meth:`as_dict`.

    Carries every field of :class:`~airflow_provider_sm_prefs.domain.outcome.CapacityOutcome` and of
    :class:`~airflow_provider_sm_prefs.domain.hyperpod_outcome.GroupOutcome` that is not ``OUTCOME_ONLY``,
    under the same name (optional here: a failed try has none of them, and a job's record none of a
    group's), besides the task try, the region, the failure and when it was recorded. ``job_kind`` tells
    them apart (:attr:`is_group`).
    """

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    try_number: int
    job_kind: str
    job_name: str | None = None
    job_arn: str | None = None
    region: str | None = None
    #: A job's entries as dicts; a HyperPod instance group's instance types as strings.
    preferences: list[dict[str, Any] | str] = field(default_factory=list)
    selected_instance_type: str | None = None
    selected_instance_count: int | None = None
    preference_rank: int | None = None
    fell_back: bool | None = None
    capacity: str | None = None
    pending_seconds: float | None = None
    #: Read back as any number, as they always were.
    training_seconds: int | None = field(default=None, metadata=schema.reads(int | float | None))
    billable_seconds: int | None = field(default=None, metadata=schema.reads(int | float | None))
    job_status: str | None = None
    failure_kind: str | None = None
    reason: str | None = None
    created_at: str | None = None
    ended_at: str | None = None
    recorded_at: str = ""
    #: Checked by value before anything else is read (:meth:`from_dict`).
    version: int = field(default=RECORD_VERSION, metadata=schema.reads(Any))
    # Guardrails before submit (added in version 1 with defaults; see outcome.CapacityOutcome).
    hourly_cost: float | None = None
    first_choice_hourly_cost: float | None = None
    cost_increase: float | None = None
    estimated_cost: float | None = None
    excluded: list[dict[str, Any]] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    # Submission stages of a list with acceptance windows (added in version 1 with a default).
    stages: list[dict[str, Any]] = field(default_factory=list)
    # A HyperPod instance group (job_kind GROUP_KIND; added in version 1 with defaults): see GroupOutcome.
    cluster_name: str | None = None
    group_name: str | None = None
    phase: str | None = None
    target_count: int | None = None
    current_count: int | None = None
    min_count: int | None = None
    #: Nodes per type in list order: ``{instance_type, rank, count, accelerators, hourly_cost, ...}``.
    nodes: list[dict[str, Any]] = field(default_factory=list)
    seconds_to_in_service: float | None = None
    accelerators_total: int | None = None
    accelerator_memory_gib_total: float | None = None
    #: The Airflow identity tags the job was created with (``AirflowIdentity.as_dict()``: tag key to
    #: value; added in version 1 with a default). Empty when identity tags were off, for a job the task did
    #: not create (the sensor's) and for a HyperPod instance group.
    identity_tags: dict[str, str] = field(default_factory=dict)

    @property
    def is_group(self) -> bool:
        """Whether the record is a HyperPod instance group's (else a job's)."""
        return self.job_kind == GROUP_KIND

    @classmethod
    def from_outcome(
        cls,
        ti: TaskInstanceRef,
        outcome: CapacityOutcome | GroupOutcome,
        region: str | None,
        now: datetime | None = None,
        identity_tags: Mapping[str, str] | None = None,
    ) -> CapacityRecord:
        """The record of a try that got its outcome (capacity acquired, the job completed, or the group
        reached its count).

        Every field the outcome declares for the record (:func:`~airflow_provider_sm_prefs.domain.schema.recorded`)
        is taken from it as is.
        """
        names = {f.name for f in fields(cls)}
        values = {
            name: _copied(getattr(outcome, name)) for name in schema.recorded(type(outcome)) if name in names
        }
        # The job's own region (its ARN's) when the outcome knows it, else where the task reached SageMaker.
        values["region"] = values.get("region") or region
        return cls(
            **asdict(ti),
            **values,
            recorded_at=_now(now),
            identity_tags=dict(identity_tags or {}),
        )

    @classmethod
    def from_error(
        cls,
        ti: TaskInstanceRef,
        error: BaseException,
        job_kind: str,
        job_name: str | None,
        preferences: list[dict[str, Any]],
        region: str | None,
        now: datetime | None = None,
        guardrails: Mapping[str, Any] | None = None,
        stages: list[dict[str, Any]] | None = None,
        group: Mapping[str, Any] | None = None,
        identity_tags: Mapping[str, str] | None = None,
    ) -> CapacityRecord:
        """The record of a try that failed: why, and what is known of the job or group.

        :param guardrails: ``first_choice_hourly_cost``, ``excluded`` and ``unchecked`` when the guardrails
            before submit ran (see ``GuardrailReport.record_fields``).
        :param group: what is known of a HyperPod instance group (``hyperpod_outcome.request_fields``):
            its names, and once checked its list, target and minimum count.
        """
        status: str | None = None
        reason: str | None = str(error)
        if isinstance(error, errors.SageMakerJobError):
            status, reason = error.status, error.reason
        elif isinstance(error, errors.ClusterGroupError):
            status, reason = error.status, error.reason or str(error)
        values: dict[str, Any] = {
            **asdict(ti),
            "job_kind": job_kind,
            "job_name": getattr(error, "job_name", None) or job_name,
            "job_arn": None,
            "region": region,
            "preferences": list(preferences),
            "job_status": status,
            "failure_kind": FailureKind.of(error).value,
            "reason": reason,
            "recorded_at": _now(now),
            "stages": list(stages or []),
            "identity_tags": dict(identity_tags or {}),
            **dict(guardrails or {}),
        }
        if isinstance(error, errors.ClusterGroupError):
            values |= {"cluster_name": error.cluster_name, "group_name": error.group_name}
        return cls(**(values | dict(group or {})))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> CapacityRecord | None:
        """A record read back from XCom; None for another version or anything malformed."""
        if not isinstance(data, Mapping) or data.get("version") != RECORD_VERSION:
            return None
        types = schema.reader_types(cls)
        values = {k: v for k, v in data.items() if k in types}
        if not all(schema.holds(types[name], value) for name, value in values.items()):
            return None
        try:
            return cls(**values)
        except TypeError:
            return None


def _copied(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


def _now(now: datetime | None) -> str:
    return (now or datetime.now(timezone.utc)).isoformat()
