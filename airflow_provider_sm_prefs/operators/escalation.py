"""The operators' side of acceptance windows: submit in stages, stop a still-Pending stage, go on.

The stages themselves are decided in :mod:`airflow_provider_sm_prefs.domain.escalation`; :class:`Escalation` keeps
their state in the task state store (next to the submit-once record), so a retry, a worker kill or a
triggerer restart continues the current stage and never runs two stages' jobs at once.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.escalation import (
    Stage,
    StageEnd,
    StageLimits,
    StageRecord,
    plan_stages,
    stage_limits,
    stage_records,
    stage_suffix,
)
from airflow_provider_sm_prefs.domain.events import CapacityEvent, EventStatus, event_from_describe
from airflow_provider_sm_prefs.domain.job_state import JobState, JobStateStore
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import (
    CapacityOutcome,
    format_duration,
    pending_seconds,
    terminal_error,
)
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList, build_request, without_list
from airflow_provider_sm_prefs.domain.status import Phase, WaitFor, as_datetime, phase_of, selected
from airflow_provider_sm_prefs.hooks.sagemaker import sanitize_job_name, service_now
from airflow_provider_sm_prefs.recording import TryProgress

#: Longest the task waits, after stopping a Pending stage, for SageMaker to report it Stopped before
#: submitting the next one (a Pending job holds no instances; this only keeps the order of events clean).
STOP_SETTLE_SECONDS = 60.0


@dataclass
class Staging:
    """Where a task with acceptance windows stands. Stored under ``staging`` in the task's state.

    :param submitted: the list as submitted (after the guardrails), with its windows.
    :param stage: the current stage number (1-based).
    :param base_name: stage 1's job name; stage N runs as ``<base_name>-sN``.
    :param origin: stage 1's CreationTime (ISO 8601): the start of the total wait.
    :param total: ``max_pending`` in seconds (None: no bound).
    :param history: the stages that ended (``StageRecord.as_dict()``).
    :param escalating: the current stage is being stopped for the next one.
    :param elapsed: seconds of total waiting when the current stage was submitted.
    """

    submitted: InstancePreferenceList
    stage: int
    base_name: str
    origin: str | None = None
    total: float | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    escalating: bool = False
    elapsed: float = 0.0

    @property
    def stages(self) -> list[Stage]:
        return plan_stages(self.submitted)

    @property
    def current(self) -> Stage:
        return self.stages[self.stage - 1]

    def as_dict(self) -> dict[str, Any]:
        return {
            "submitted": self.submitted.as_list(),
            "stage": self.stage,
            "base_name": self.base_name,
            "origin": self.origin,
            "total": self.total,
            "history": list(self.history),
            "escalating": self.escalating,
            "elapsed": self.elapsed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], kind: JobKind) -> Staging:
        return cls(
            submitted=InstancePreferenceList.from_response(data.get("submitted") or [], kind),
            stage=int(data.get("stage") or 1),
            base_name=str(data["base_name"]),
            origin=data.get("origin"),
            total=float(data["total"]) if data.get("total") is not None else None,
            history=[r.as_dict() for r in stage_records(data.get("history"))],
            escalating=bool(data.get("escalating")),
            elapsed=float(data.get("elapsed") or 0.0),
        )

    def offset(self, describe: Mapping[str, Any] | None) -> float:
        """Seconds between the start of the total wait and this stage's job's CreationTime."""
        origin = as_datetime(self.origin)
        created = as_datetime((describe or {}).get("CreationTime"))
        if origin is None or created is None:
            return self.elapsed
        return max(0.0, (created - origin).total_seconds())

    def limits(self, kind: JobKind, elapsed: float) -> StageLimits:
        return stage_limits(kind, self.current.preferences(self.submitted), self.total, elapsed)

    def timers(self, kind: JobKind, describe: Mapping[str, Any] | None) -> tuple[float | None, float | None]:
        """(escalate after, client deadline) in seconds from the current job's CreationTime."""
        offset = self.offset(describe)
        closes = self.current.closes_at
        escalate = None if closes is None else max(0.0, closes - offset)
        limits = self.limits(kind, offset)
        deadline = 0.001 if limits.exhausted else limits.client_deadline
        return escalate, deadline


@dataclass(frozen=True)
class KeepJob:
    """The escalation's answer when the job got capacity as its window closed: resume with this event."""

    event: dict[str, Any]


@dataclass(frozen=True)
class NextStage:
    """The escalation's answer when the next stage is to be submitted: its name is already recorded."""

    job_name: str
    limits: StageLimits


class Escalation:
    """Acceptance windows (``accept_after``) as submission stages, for one task try.

    Keeps the :class:`Staging` in the job state, so a retry, a worker kill or a triggerer restart
    continues the current stage and never runs two stages' jobs at once.

    :param job_kind: the kind of job.
    :param hook: the SageMaker hook of the task.
    :param store: the task's job state.
    :param progress: the try's progress; its ``stages`` follow the stages that ended.
    :param log: the task's logger.
    """

    def __init__(
        self, job_kind: JobKind, hook: Any, store: JobStateStore, progress: TryProgress, log: Any
    ) -> None:
        self.job_kind = job_kind
        self.hook = hook
        self.store = store
        self.progress = progress
        self.log = log
        self.staging: Staging | None = None

    # -- state -----------------------------------------------------------------------------------------
    def save(self, job_name: str | None = None) -> None:
        """Store the staging in the job state (``job_name``: the next stage's, recorded before Create)."""
        if self.staging is None:
            return
        changes: dict[str, Any] = {"staging": self.staging.as_dict()}
        if job_name is not None:
            changes["job_name"] = job_name
        self.store.update(**changes)

    def load(self) -> Staging | None:
        """The staging recorded in the job state (this try resumes after a deferral or a restart)."""
        self.staging = self._staging_of(self.store.load(), warn=True)
        return self.staging

    def _staging_of(self, state: JobState | None, warn: bool = False) -> Staging | None:
        data = state.staging if state is not None else None
        if not data or not data.get("base_name"):
            return None
        try:
            return Staging.from_dict(data, self.job_kind)
        except (KeyError, TypeError, ValueError):
            if warn:
                self.log.warning("Unreadable staging record in the task state; waiting without windows")
            return None

    def begin(self, submitted: InstancePreferenceList, job_name: str, total: float | None) -> Staging | None:
        """The staging of this try: continued from the job state, or started when the list has windows."""
        staging = self._staging_of(self.store.load(), warn=True)
        if staging is None and len(plan_stages(submitted)) > 1:
            staging = Staging(submitted=submitted, stage=1, base_name=job_name, total=total)
            self.staging = staging
            self.save()
            for stage in staging.stages:
                self.log.info(
                    "Stage %d%s offers %s",
                    stage.number,
                    f" (from {format_duration(stage.opens_at)} of waiting)" if stage.opens_at else "",
                    stage.preferences(submitted).describe(),
                )
        self.staging = staging
        self.progress.stages = list(staging.history) if staging else None
        return staging

    def continues(self, state: JobState, describe: Mapping[str, Any]) -> bool:
        """Whether an ended job of an earlier try is a stage the escalation goes on from."""
        staging = self._staging_of(state)
        if staging is None:
            return False
        try:
            last = staging.current.is_last
        except IndexError:
            return False
        if last:
            return False
        error = terminal_error(self.job_kind, describe)
        return staging.escalating or isinstance(error, errors.CapacityUnavailableError)

    def note_origin(self, describe: Mapping[str, Any] | None) -> None:
        """Stage 1's CreationTime starts the total wait (the service's clock, so restarts keep it)."""
        staging = self.staging
        if staging is None or staging.origin is not None or staging.stage != 1:
            return
        created = as_datetime((describe or {}).get("CreationTime"))
        if created is not None:
            staging.origin = created.isoformat()
            self.save()

    def failed_stage(self, received: CapacityEvent) -> dict[str, Any]:
        """The record of the current stage when the wait ended without capacity."""
        assert self.staging is not None
        timed_out = received.error_type == errors.CapacityTimeoutError.__name__
        no_capacity = received.error_type == errors.CapacityUnavailableError.__name__
        ended = StageEnd.TIMED_OUT if timed_out else StageEnd.NO_CAPACITY if no_capacity else StageEnd.FAILED
        return StageRecord(
            stage=self.staging.stage,
            entries=self.staging.current.preferences(self.staging.submitted).instance_types,
            job_name=received.job_name,
            pending_seconds=0.0,
            ended=ended.value,
        ).as_dict()

    # -- requests --------------------------------------------------------------------------------------
    def stage_request(self, config: Mapping[str, Any], limits: StageLimits, job_name: str) -> dict[str, Any]:
        """The Create request of the current stage: its entries, and what remains of max_pending."""
        assert self.staging is not None
        base = copy.deepcopy(without_list(self.job_kind, config))
        stopping = dict(base.get("StoppingCondition") or {})
        if stopping.pop("MaxPendingTimeInSeconds", None) is not None:
            base["StoppingCondition"] = stopping
        stage_list = self.staging.current.preferences(self.staging.submitted)
        request, _ = build_request(self.job_kind, base, stage_list.as_list(), limits.server_pending)
        request[self.job_kind.spec.name_field] = job_name
        self.log.info(
            "Stage %d: submitting %s as %s%s",
            self.staging.stage,
            stage_list.describe(),
            job_name,
            f" (MaxPendingTimeInSeconds {limits.server_pending})" if limits.server_pending else "",
        )
        return request

    # -- outcome ---------------------------------------------------------------------------------------
    def with_stages(self, outcome: CapacityOutcome) -> CapacityOutcome:
        """The outcome with its stages; ``pending_seconds`` becomes the total from stage 1's creation."""
        staging = self.staging
        if staging is None:
            return outcome
        final = StageRecord(
            stage=staging.stage,
            entries=staging.current.preferences(staging.submitted).instance_types,
            job_name=outcome.job_name,
            pending_seconds=outcome.pending_seconds,
            ended=StageEnd.SELECTED.value,
            created_at=outcome.created_at,
        )
        offset = staging.offset({"CreationTime": outcome.created_at})
        return replace(
            outcome,
            stages=[*staging.history, final.as_dict()],
            pending_seconds=round(outcome.pending_seconds + offset, 3),
        )

    def _stage_ended(self, describe: Mapping[str, Any], ended: StageEnd, job_name: str) -> dict[str, Any]:
        assert self.staging is not None
        kind = self.job_kind
        staging = self.staging
        created = as_datetime(describe.get("CreationTime"))
        return StageRecord(
            stage=staging.stage,
            entries=staging.current.preferences(staging.submitted).instance_types,
            job_name=str(describe.get(kind.spec.name_field) or job_name),
            pending_seconds=pending_seconds(kind, describe, service_now(describe)),
            ended=ended.value,
            created_at=created.isoformat() if created else None,
        ).as_dict()

    # -- the escalation --------------------------------------------------------------------------------
    def handles(self, received: CapacityEvent) -> bool:
        """Whether a capacity event is the escalation's business rather than the end of the wait."""
        staging = self.staging
        if staging is None or received.status is EventStatus.SUCCESS:
            return False
        if received.status is EventStatus.ESCALATE:
            return True
        if staging.current.is_last:
            return False
        return staging.escalating or received.error_type == errors.CapacityUnavailableError.__name__

    def escalate(self, job: str) -> KeepJob | NextStage:
        """Look once more at ``job``, stop it if it is still Pending, and record the next stage.

        A job found selected is kept (the escalation is dropped), whatever the window said.

        :raises CapacityTimeoutError: when ``max_pending`` ran out before the next stage.
        """
        staging = self.staging
        assert staging is not None
        kind = self.job_kind
        describe = self.hook.describe_job(kind, job)  # right before Stop
        if describe is None:
            raise errors.JobFailedError(job, None, f"SageMaker has no {kind.value} job named {job!r}")
        phase = phase_of(kind, describe)
        now = service_now(describe)
        if phase in (Phase.RUNNING, Phase.COMPLETED):
            self.log.info(
                "%s got capacity just as stage %d's window closed: keeping it (a job with capacity is "
                "never stopped for escalation)",
                job,
                staging.stage,
            )
            staging.escalating = False
            self.save()
            event = event_from_describe(kind, WaitFor.CAPACITY, describe, phase, staging.submitted, now=now)
            return KeepJob(event.as_payload())
        error = terminal_error(kind, describe, now=now)
        if phase is Phase.WAITING:
            record = self._stage_ended(describe, StageEnd.ESCALATED, job)
            staging.escalating = True
            self.save()  # before Stop: a retry knows the stop was ours
            self.log.info(
                "%s still pending after %s: stopping it (never billed) for stage %d",
                job,
                format_duration(record["pending_seconds"]),
                staging.stage + 1,
            )
            self.hook.stop_job(kind, job)
            after = self._settle(job) or describe
            if selected(kind, after)[0]:
                record["ended"] = StageEnd.STOPPED_AFTER_SELECTION.value
                self.log.warning(
                    "%s was selected (%s) between the last look and the stop; the stop cost that start. "
                    "Stage %d offers the same entries first, so it takes that capacity if it is still free",
                    job,
                    selected(kind, after)[0],
                    staging.stage + 1,
                )
            now = service_now(after)
        elif isinstance(error, errors.CapacityUnavailableError) and not staging.current.is_last:
            record = self._stage_ended(describe, StageEnd.NO_CAPACITY, job)
            self.log.info(
                "%s: no entry of stage %d had capacity (%s); submitting stage %d now",
                job,
                staging.stage,
                error.reason,
                staging.stage + 1,
            )
        elif staging.escalating and phase in (Phase.STOPPING, Phase.STOPPED):
            record = self._stage_ended(describe, StageEnd.ESCALATED, job)  # stopped by an earlier try
        else:
            raise error or errors.JobFailedError(job, None, "the stage ended without capacity")
        return self._next_stage(record, now)

    def _settle(self, job: str) -> dict[str, Any] | None:
        """Describe the stopped job until SageMaker reports it ended (bounded)."""
        deadline = time.monotonic() + STOP_SETTLE_SECONDS
        describe: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            describe = self.hook.describe_job(self.job_kind, job)
            if describe is None or phase_of(self.job_kind, describe).is_terminal():
                return describe
            time.sleep(1.0)
        self.log.warning(
            "%s still stopping after %.0f s; submitting the next stage anyway", job, STOP_SETTLE_SECONDS
        )
        return describe

    def _next_stage(self, record: dict[str, Any], now: datetime) -> NextStage:
        staging = self.staging
        assert staging is not None
        origin = as_datetime(staging.origin)
        elapsed = max(0.0, (now - origin).total_seconds()) if origin else staging.elapsed
        staging.history.append(record)
        staging.stage += 1
        staging.escalating = False
        staging.elapsed = elapsed
        self.progress.stages = list(staging.history)
        limits = staging.limits(self.job_kind, elapsed)
        if limits.exhausted:
            self.save()
            raise errors.CapacityTimeoutError(
                str(record["job_name"]),
                None,
                f"max_pending ({format_duration(staging.total or 0)}) ran out after {staging.stage - 1} "
                f"stage(s) without capacity",
            )
        name = sanitize_job_name(staging.base_name, suffix=stage_suffix(staging.stage))
        self.save(job_name=name)  # before Create: submit-once holds across stages
        return NextStage(name, limits)
