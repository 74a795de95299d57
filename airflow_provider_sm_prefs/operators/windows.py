"""The operators' side of acceptance windows: submit in stages, stop a still-Pending stage, go on.

The stages themselves are decided in :mod:`airflow_provider_sm_prefs.domain.windows`; :class:`AcceptanceWindows`
keeps their state in the task state store (next to the submit-once record), so a retry, a worker kill or a
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
from airflow_provider_sm_prefs.domain.events import CapacityEvent, EventStatus, event_from_describe
from airflow_provider_sm_prefs.domain.identity import OwnerClaim
from airflow_provider_sm_prefs.domain.job_state import JobState, JobStateStore
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import (
    CapacityOutcome,
    format_duration,
    pending_seconds,
    terminal_error,
)
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList, build_request, without_list
from airflow_provider_sm_prefs.domain.regions import FailoverRegion, region_request
from airflow_provider_sm_prefs.domain.status import Phase, WaitFor, as_datetime, phase_of, selected
from airflow_provider_sm_prefs.domain.windows import (
    Stage,
    StageEnd,
    StageLimits,
    StageRecord,
    plan_stages,
    stage_limits,
    stage_records,
    stage_suffix,
)
from airflow_provider_sm_prefs.hooks.sagemaker import sanitize_job_name, service_now
from airflow_provider_sm_prefs.operators.identity import job_claim
from airflow_provider_sm_prefs.operators.submission import JobStart
from airflow_provider_sm_prefs.recording import TryProgress

#: Longest the task waits, after stopping a Pending stage, for SageMaker to report it Stopped before
#: submitting the next one (a Pending job holds no instances; this only keeps the order of events clean).
STOP_SETTLE_SECONDS = 60.0


@dataclass
class StageState:
    """Where a task with acceptance windows stands. Stored under ``staging`` in the task's state.

    :param submitted: the list as submitted (after the guardrails), with its windows.
    :param stage: the current stage number (1-based).
    :param base_name: stage 1's job name; stage N runs as ``<base_name>-sN``.
    :param origin: stage 1's CreationTime (ISO 8601): the start of the total wait.
    :param total: ``max_pending`` in seconds (None: no bound).
    :param history: the stages that ended (``StageRecord.as_dict()``).
    :param stopping_for_next: the current stage is being stopped for the next one (stored as ``escalating``).
    :param elapsed: seconds of total waiting when the current stage was submitted.
    :param regions: the regions after the task's own, each the last stages of the escalation.
    """

    submitted: InstancePreferenceList
    stage: int
    base_name: str
    origin: str | None = None
    total: float | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    stopping_for_next: bool = False
    elapsed: float = 0.0
    regions: tuple[FailoverRegion, ...] = ()

    @property
    def stages(self) -> list[Stage]:
        return plan_stages(self.submitted, self.regions)

    @property
    def current(self) -> Stage:
        return self.stages[self.stage - 1]

    @property
    def listed(self) -> InstancePreferenceList:
        """The list the current stage's outcome reports against (a region's own, or the one submitted)."""
        return self.current.listed(self.submitted)

    @property
    def region(self) -> FailoverRegion | None:
        """The region the current stage runs in (None: the task's own)."""
        return self.current.region

    def as_dict(self) -> dict[str, Any]:
        return {
            "submitted": self.submitted.as_list(),
            "stage": self.stage,
            "base_name": self.base_name,
            "origin": self.origin,
            "total": self.total,
            "history": list(self.history),
            "escalating": self.stopping_for_next,  # the stored form's key
            "elapsed": self.elapsed,
            **({"regions": [r.as_dict() for r in self.regions]} if self.regions else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], kind: JobKind) -> StageState:
        return cls(
            submitted=InstancePreferenceList.from_response(data.get("submitted") or [], kind),
            stage=int(data.get("stage") or 1),
            base_name=str(data["base_name"]),
            origin=data.get("origin"),
            total=float(data["total"]) if data.get("total") is not None else None,
            history=[r.as_dict() for r in stage_records(data.get("history"))],
            stopping_for_next=bool(data.get("escalating")),
            elapsed=float(data.get("elapsed") or 0.0),
            regions=tuple(FailoverRegion.from_dict(r, kind) for r in data.get("regions") or []),
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
        """(window closes after, client deadline) in seconds from the current job's CreationTime."""
        offset = self.offset(describe)
        closes = self.current.closes_at
        window_closes = None if closes is None else max(0.0, closes - offset)
        limits = self.limits(kind, offset)
        deadline = 0.001 if limits.exhausted else limits.client_deadline
        return window_closes, deadline


@dataclass(frozen=True)
class KeepJob:
    """The answer when the job got capacity as its window closed: resume with this event."""

    event: dict[str, Any]


@dataclass(frozen=True)
class NextStage:
    """The answer when the next stage is to be submitted: its name is already recorded."""

    job_name: str
    limits: StageLimits


class AcceptanceWindows:
    """Acceptance windows (``accept_after``) as submission stages, for one task try.

    Keeps the :class:`StageState` in the job state, so a retry, a worker kill or a triggerer restart
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
        self.state: StageState | None = None

    # -- state -----------------------------------------------------------------------------------------
    def save(self, job_name: str | None = None) -> None:
        """Store the stage state in the job state (``job_name``: the next stage's, recorded before Create)."""
        if self.state is None:
            return
        changes: dict[str, Any] = {"staging": self.state.as_dict()}
        if job_name is not None:
            changes["job_name"] = job_name
        self.store.update(**changes)

    def claim(self, job: str) -> OwnerClaim:
        """What proves stage job ``job`` this task instance's (the identity tags recorded at its Create)."""
        return job_claim(self.store.load_or_none(), job, None, self.progress.identity_tags)

    def recorded(self) -> StageState | None:
        """The stage state recorded in the job state, not taken up (where a try's recorded job is)."""
        return self._stages_of(self.store.load_or_none())

    def load(self) -> StageState | None:
        """The stage state recorded in the job state (this try resumes after a deferral or a restart)."""
        self.state = self._stages_of(self.store.load(), warn=True)
        return self.state

    def _stages_of(self, state: JobState | None, warn: bool = False) -> StageState | None:
        data = state.staging if state is not None else None
        if not data or not data.get("base_name"):
            return None
        try:
            return StageState.from_dict(data, self.job_kind)
        except (KeyError, TypeError, ValueError):
            if warn:
                self.log.warning(
                    "Unreadable stage record (staging) in the task state; waiting without windows"
                )
            return None

    def begin(
        self,
        submitted: InstancePreferenceList,
        job_name: str,
        total: float | None,
        regions: tuple[FailoverRegion, ...] = (),
    ) -> StageState | None:
        """The stages of this try: continued from the job state, or started when the list has windows or
        the task has regions to move to."""
        stage_state = self._stages_of(self.store.load(), warn=True)
        if stage_state is None and len(plan_stages(submitted, regions)) > 1:
            stage_state = StageState(
                submitted=submitted, stage=1, base_name=job_name, total=total, regions=regions
            )
            self.state = stage_state
            self.save()
            for stage in stage_state.stages:
                self.log.info(
                    "Stage %d%s offers %s%s",
                    stage.number,
                    f" (from {format_duration(stage.opens_at)} of waiting)" if stage.opens_at else "",
                    stage.preferences(submitted).describe(),
                    f" in {stage.region.region}" if stage.region else "",
                )
        self.state = stage_state
        self.progress.stages = list(stage_state.history) if stage_state else None
        return stage_state

    def continues(self, state: JobState, describe: Mapping[str, Any]) -> bool:
        """Whether an ended job of an earlier try is a stage these windows go on from."""
        stage_state = self._stages_of(state)
        if stage_state is None:
            return False
        try:
            last = stage_state.current.is_last
        except IndexError:
            return False
        if last:
            return False
        error = terminal_error(self.job_kind, describe)
        return stage_state.stopping_for_next or isinstance(error, errors.CapacityUnavailableError)

    def note_origin(self, describe: Mapping[str, Any] | None) -> None:
        """Stage 1's CreationTime starts the total wait (the service's clock, so restarts keep it)."""
        stage_state = self.state
        if stage_state is None or stage_state.origin is not None or stage_state.stage != 1:
            return
        created = as_datetime((describe or {}).get("CreationTime"))
        if created is not None:
            stage_state.origin = created.isoformat()
            self.save()

    def failed_stage(self, received: CapacityEvent) -> dict[str, Any]:
        """The record of the current stage when the wait ended without capacity."""
        assert self.state is not None
        timed_out = received.error_type == errors.CapacityTimeoutError.__name__
        no_capacity = received.error_type == errors.CapacityUnavailableError.__name__
        ended = StageEnd.TIMED_OUT if timed_out else StageEnd.NO_CAPACITY if no_capacity else StageEnd.FAILED
        return StageRecord(
            stage=self.state.stage,
            entries=self.state.current.preferences(self.state.submitted).instance_types,
            job_name=received.job_name,
            pending_seconds=0.0,
            ended=ended.value,
            region=self._region_name(),
        ).as_dict()

    def _region_name(self) -> str | None:
        region = self.state.region if self.state is not None else None
        return region.region if region is not None else None

    # -- requests --------------------------------------------------------------------------------------
    def stage_request(self, config: Mapping[str, Any], limits: StageLimits, job_name: str) -> dict[str, Any]:
        """The Create request of the current stage: its entries, and what remains of max_pending."""
        assert self.state is not None
        region = self.state.region
        base = copy.deepcopy(without_list(self.job_kind, config))
        if region is not None:
            base = region_request(base, region)
        stopping = dict(base.get("StoppingCondition") or {})
        if stopping.pop("MaxPendingTimeInSeconds", None) is not None:
            base["StoppingCondition"] = stopping
        stage_list = self.state.current.preferences(self.state.submitted)
        request, _ = build_request(self.job_kind, base, stage_list, limits.server_pending)
        request[self.job_kind.spec.name_field] = job_name
        self.log.info(
            "Stage %d: submitting %s as %s%s%s",
            self.state.stage,
            stage_list.describe(),
            job_name,
            f" in {region.region}" if region is not None else "",
            f" (MaxPendingTimeInSeconds {limits.server_pending})" if limits.server_pending else "",
        )
        return request

    def stage_start(self, config: Mapping[str, Any], limits: StageLimits, job_name: str) -> JobStart:
        """The current stage's job to start: Create offers the stage's entries; the wait reports against
        the whole list as submitted."""
        assert self.state is not None
        request = self.stage_request(config, limits, job_name)
        offered = self.state.current.preferences(self.state.submitted)
        return JobStart(job_name, self.state.listed, None, request=request, offered=offered)

    # -- outcome ---------------------------------------------------------------------------------------
    def with_stages(self, outcome: CapacityOutcome) -> CapacityOutcome:
        """The outcome with its stages; ``pending_seconds`` becomes the total from stage 1's creation."""
        stage_state = self.state
        if stage_state is None:
            return outcome
        final = StageRecord(
            stage=stage_state.stage,
            entries=stage_state.current.preferences(stage_state.submitted).instance_types,
            job_name=outcome.job_name,
            pending_seconds=outcome.pending_seconds,
            ended=StageEnd.SELECTED.value,
            created_at=outcome.created_at,
            region=self._region_name(),
        )
        offset = stage_state.offset({"CreationTime": outcome.created_at})
        region = stage_state.region
        moved: dict[str, Any] = {}
        if region is not None:
            # Not the first choice as written, whatever the entry's rank in the region's list.
            moved = {"region_rank": stage_state.regions.index(region) + 2, "fell_back": True}
        return replace(
            outcome,
            stages=[*stage_state.history, final.as_dict()],
            pending_seconds=round(outcome.pending_seconds + offset, 3),
            **moved,
        )

    def _stage_ended(self, describe: Mapping[str, Any], ended: StageEnd, job_name: str) -> dict[str, Any]:
        assert self.state is not None
        kind = self.job_kind
        stage_state = self.state
        created = as_datetime(describe.get("CreationTime"))
        return StageRecord(
            stage=stage_state.stage,
            entries=stage_state.current.preferences(stage_state.submitted).instance_types,
            job_name=str(describe.get(kind.spec.name_field) or job_name),
            pending_seconds=pending_seconds(kind, describe, service_now(describe)),
            ended=ended.value,
            created_at=created.isoformat() if created else None,
            region=self._region_name(),
        ).as_dict()

    # -- a window closes -------------------------------------------------------------------------------
    def ends_stage(self, received: CapacityEvent) -> bool:
        """Whether a capacity event ends the current stage (its window closed, or it found no capacity and
        a later stage remains) rather than the wait."""
        stage_state = self.state
        if stage_state is None or received.status is EventStatus.SUCCESS:
            return False
        if received.status is EventStatus.WINDOW_CLOSED:
            return True
        if stage_state.current.is_last:
            return False
        return (
            stage_state.stopping_for_next or received.error_type == errors.CapacityUnavailableError.__name__
        )

    def close_window(self, job: str) -> KeepJob | NextStage:
        """Look once more at ``job``, stop it if it is still Pending, and record the next stage.

        A job found selected is kept (the next stage is not submitted), whatever the window said.

        :raises CapacityTimeoutError: when ``max_pending`` ran out before the next stage.
        """
        stage_state = self.state
        assert stage_state is not None
        kind = self.job_kind
        describe = self.hook.describe_job(kind, job)  # right before Stop
        if describe is None:
            raise errors.JobFailedError(job, None, f"SageMaker has no {kind.value} job named {job!r}")
        phase = phase_of(kind, describe)
        now = service_now(describe)
        if phase in (Phase.RUNNING, Phase.COMPLETED):
            self.log.info(
                "%s got capacity just as stage %d's window closed: keeping it (a job with capacity is "
                "never stopped when a window closes)",
                job,
                stage_state.stage,
            )
            stage_state.stopping_for_next = False
            self.save()
            event = event_from_describe(kind, WaitFor.CAPACITY, describe, phase, stage_state.listed, now=now)
            return KeepJob(event.as_payload())
        error = terminal_error(kind, describe, now=now)
        if phase is Phase.WAITING:
            record = self._stage_ended(describe, StageEnd.WINDOW_CLOSED, job)
            stage_state.stopping_for_next = True
            self.save()  # before Stop: a retry knows the stop was ours
            self.log.info(
                "%s still pending after %s: stopping it (never billed) for stage %d",
                job,
                format_duration(record["pending_seconds"]),
                stage_state.stage + 1,
            )
            self.hook.stop_job(kind, job, self.claim(job))
            after = self._settle(job) or describe
            if selected(kind, after)[0]:
                record["ended"] = StageEnd.STOPPED_AFTER_SELECTION.value
                self.log.warning(
                    "%s was selected (%s) between the last look and the stop; the stop cost that start. "
                    "Stage %d offers the same entries first, so it takes that capacity if it is still free",
                    job,
                    selected(kind, after)[0],
                    stage_state.stage + 1,
                )
            now = service_now(after)
        elif isinstance(error, errors.CapacityUnavailableError) and not stage_state.current.is_last:
            record = self._stage_ended(describe, StageEnd.NO_CAPACITY, job)
            self.log.info(
                "%s: no entry of stage %d had capacity (%s); submitting stage %d now",
                job,
                stage_state.stage,
                error.reason,
                stage_state.stage + 1,
            )
        elif stage_state.stopping_for_next and phase in (Phase.STOPPING, Phase.STOPPED):
            record = self._stage_ended(describe, StageEnd.WINDOW_CLOSED, job)  # stopped by an earlier try
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
        stage_state = self.state
        assert stage_state is not None
        origin = as_datetime(stage_state.origin)
        elapsed = max(0.0, (now - origin).total_seconds()) if origin else stage_state.elapsed
        stage_state.history.append(record)
        stage_state.stage += 1
        stage_state.stopping_for_next = False
        stage_state.elapsed = elapsed
        self.progress.stages = list(stage_state.history)
        limits = stage_state.limits(self.job_kind, elapsed)
        if limits.exhausted:
            self.save()
            raise errors.CapacityTimeoutError(
                str(record["job_name"]),
                None,
                f"max_pending ({format_duration(stage_state.total or 0)}) ran out after {stage_state.stage - 1} "
                f"stage(s) without capacity",
            )
        name = sanitize_job_name(stage_state.base_name, suffix=stage_suffix(stage_state.stage))
        self.save(job_name=name)  # before Create: submit-once holds across stages
        return NextStage(name, limits)
