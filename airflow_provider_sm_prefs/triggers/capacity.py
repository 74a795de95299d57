"""The async wait: until SageMaker leaves Pending (capacity acquired), or until the job ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from enum import Enum
from functools import cached_property
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_sm_prefs.hooks.sagemaker import (
    SageMakerPreferenceHook,
    backoff_delay,
    is_transient,
    service_now,
)
from airflow_provider_sm_prefs.outcome import (
    as_datetime,
    format_duration,
    outcome_from_describe,
    terminal_error,
    waiting_seconds,
)
from airflow_provider_sm_prefs.preferences import InstancePreferenceList, JobKind
from airflow_provider_sm_prefs.status import Phase, cluster_of, phase_of
from airflow_provider_sm_prefs.triggers.watcher import (
    ListingUnavailable,
    capacity_changed,
    job_ended,
    settings_key,
    shared_client,
    watcher_for,
)

#: Log a "still waiting" line at most this often (seconds of service time), plus on every change.
PROGRESS_LOG_EVERY = 300.0
#: With shared polling, Describe the job anyway this often: a safety net under the List loop.
SAFETY_DESCRIBE_EVERY = 3600.0


def creation_time_of(describe: Mapping[str, Any] | None) -> str | None:
    """The job's CreationTime from a Describe* response, as trigger kwargs carry it (ISO 8601)."""
    created = as_datetime((describe or {}).get("CreationTime"))
    return created.isoformat() if created else None


class WaitFor(str, Enum):
    """What the trigger waits for."""

    CAPACITY = "capacity"  # an entry was selected (or the job already ended)
    COMPLETION = "completion"  # the job reached a terminal status


class SageMakerCapacityTrigger(BaseTrigger):
    """Wait, without a worker slot, for a SageMaker job to get capacity (or to end).

    Yields exactly one event, then returns. Every event has the same shape::

        {"status": "success" | "error", "job_name", "job_kind", "wait_for", "phase",
         "outcome": <CapacityOutcome.as_dict()> | None, "error_type": <exception class name> | None,
         "job_status", "reason"}

    Throttling, 5xx answers and dropped connections are retried with jittered backoff and never end
    the wait. The optional client-side deadline counts from the job's CreationTime on the service's
    clock, so it survives triggerer restarts unchanged.

    :param job_name: SageMaker job name.
    :param job_kind: ``training`` or ``processing``.
    :param wait_for: ``capacity`` (leave Pending) or ``completion`` (terminal status).
    :param preferences: the submitted list (``InstancePreferenceList.as_list()``), for rank and logs.
    :param poll_interval: seconds between Describe calls at first.
    :param max_poll_interval: the cadence grows by 1.5× per poll up to this while nothing changes
        (defaults to ``poll_interval``: a fixed cadence).
    :param deadline_seconds: client-side capacity deadline from CreationTime; when it passes with no
        entry selected the job is stopped (if ``stop_on_deadline``) and a capacity-timeout error is
        yielded. Used where SageMaker enforces none (processing, CPU-only lists).
    :param stop_on_deadline: stop the job when the client-side deadline passes.
    :param stop_job_on_kill: stop the job when the deferred task is marked failed/success or cleared.
    :param shared_poll: learn about changes from one paginated List* loop shared by every trigger of
        this process (same connection and region) instead of one Describe per job per poll; the job
        is Described only when its summary changed (and every hour as a safety net). Falls back
        to per-job polling if listing is not permitted. Not used for processing capacity waits: a
        processing summary does not show a selected entry.
    :param aws_conn_id: Airflow AWS connection id.
    :param region_name: AWS region (kept across deferral, never re-derived).
    :param verify: TLS verification setting.
    :param botocore_config: botocore config as a dict.
    :param creation_time: the job's CreationTime (ISO 8601) from the deferring task's last Describe.
        With it, a shared-poll wait starts from the shared List loop instead of Describing the job
        again; without it the trigger Describes the job first.
    """

    def __init__(
        self,
        job_name: str,
        job_kind: str = JobKind.TRAINING.value,
        wait_for: str = WaitFor.CAPACITY.value,
        preferences: list[dict[str, Any]] | None = None,
        poll_interval: float = 30.0,
        max_poll_interval: float | None = None,
        deadline_seconds: float | None = None,
        stop_on_deadline: bool = True,
        stop_job_on_kill: bool = True,
        shared_poll: bool = True,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        creation_time: str | None = None,
    ) -> None:
        super().__init__()
        self.job_name = job_name
        self.job_kind = JobKind(job_kind).value
        self.creation_time = creation_time
        self.wait_for = WaitFor(wait_for).value
        self.preferences = list(preferences or [])
        self.poll_interval = float(poll_interval)
        self.max_poll_interval = float(max_poll_interval) if max_poll_interval else None
        self.deadline_seconds = float(deadline_seconds) if deadline_seconds else None
        self.stop_on_deadline = stop_on_deadline
        self.stop_job_on_kill = stop_job_on_kill
        self.shared_poll = shared_poll
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.verify = verify
        self.botocore_config = botocore_config

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_name": self.job_name,
                "job_kind": self.job_kind,
                "creation_time": self.creation_time,
                "wait_for": self.wait_for,
                "preferences": self.preferences,
                "poll_interval": self.poll_interval,
                "max_poll_interval": self.max_poll_interval,
                "deadline_seconds": self.deadline_seconds,
                "stop_on_deadline": self.stop_on_deadline,
                "stop_job_on_kill": self.stop_job_on_kill,
                "shared_poll": self.shared_poll,
                "aws_conn_id": self.aws_conn_id,
                "region_name": self.region_name,
                "verify": self.verify,
                "botocore_config": self.botocore_config,
            },
        )

    @property
    def hook(self) -> SageMakerPreferenceHook:
        return SageMakerPreferenceHook(
            aws_conn_id=self.aws_conn_id,
            region_name=self.region_name,
            verify=self.verify,
            config=self.botocore_config,
        )

    @cached_property
    def _parsed_preferences(self) -> InstancePreferenceList | None:
        if not self.preferences:
            return None
        return InstancePreferenceList.from_response(self.preferences, self.kind)

    @property
    def kind(self) -> JobKind:
        return JobKind(self.job_kind)

    def _event(self, status: str, phase: Phase | str, **fields: Any) -> TriggerEvent:
        payload: dict[str, Any] = {
            "status": status,
            "job_name": self.job_name,
            "job_kind": self.job_kind,
            "wait_for": self.wait_for,
            "phase": Phase(phase).value,
            "outcome": None,
            "error_type": None,
            "job_status": None,
            "reason": None,
        }
        payload.update(fields)
        return TriggerEvent(payload)

    def _is_done(self, phase: Phase) -> bool:
        if phase.is_terminal():
            return True
        return self.wait_for == WaitFor.CAPACITY.value and phase is Phase.RUNNING

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # Nothing heavy before the first await: a triggerer (re)start runs a thousand of these in one
        # event-loop turn. The hook (which builds S3 and Logs hooks too) is made only to open the
        # shared client, stop a job, or not at all; the list is parsed only to report.
        kind = self.kind
        client_key = self._client_key()
        interval = self.poll_interval
        ceiling = max(self.max_poll_interval or self.poll_interval, self.poll_interval)
        last_phase: Phase | None = None
        last_log_at: datetime | None = None
        shared = self.shared_poll and self._listing_helps(kind)
        created = as_datetime(self.creation_time)
        # The deferring task looked at the job a moment ago; start from the shared listing instead of
        # Describing it again. A client-side deadline needs the service clock of a Describe.
        look = not (shared and created is not None and self.deadline_seconds is None)
        summary: dict[str, Any] | None = None
        describe: dict[str, Any] = {}
        now, phase = utcnow(), Phase.WAITING
        connection = shared_client(client_key, self._open_client)
        async with connection as client:
            while True:
                if look:
                    looked = await self._describe(client, kind, connection.slots, interval, ceiling)
                    if looked is None:
                        yield self._event(
                            "error",
                            Phase.FAILED,
                            error_type="JobFailedError",
                            reason=f"SageMaker has no {kind.value} job named {self.job_name!r}",
                        )
                        return
                    describe = looked
                    now = service_now(describe)
                    phase = phase_of(kind, describe)
                    if self._is_done(phase):
                        yield self._finish(kind, describe, phase, self._parsed_preferences, now)
                        return
                    if phase is Phase.WAITING and self.deadline_seconds is not None:
                        waited = waiting_seconds(describe, now)
                        if waited >= self.deadline_seconds:
                            yield await self._deadline_passed(self.hook, client, kind, describe, waited)
                            return
                    if (
                        phase != last_phase
                        or last_log_at is None
                        or (now - last_log_at).total_seconds() >= PROGRESS_LOG_EVERY
                    ):
                        self._log_progress(kind, describe, phase, self._parsed_preferences, now)
                        last_log_at = now
                    if phase != last_phase:
                        interval = self.poll_interval  # something changed: look again soon
                        last_phase = phase
                    created = as_datetime(describe.get("CreationTime")) or now
                    limit = self._sleep_for(
                        max(SAFETY_DESCRIBE_EVERY, self.poll_interval), describe, now, phase
                    )
                else:
                    limit = SAFETY_DESCRIBE_EVERY
                look = True
                if shared and created is not None:
                    try:
                        summary = await self._wait_for_listed_change(
                            client_key, kind, created, limit, summary, early=last_phase is None
                        )
                        continue
                    except ListingUnavailable as err:
                        shared = False
                        summary = None
                        self.log.warning(
                            "Shared List polling unavailable (%s); polling %s on its own", err, self.job_name
                        )
                        if last_phase is None:
                            continue  # never looked at the job yet: Describe it now
                await asyncio.sleep(self._sleep_for(interval, describe, now, phase))
                interval = min(ceiling, interval * 1.5)

    def _client_key(self) -> tuple[Any, ...]:
        return settings_key(self.aws_conn_id, self.region_name, self.verify, self.botocore_config)

    def _open_client(self) -> Any:
        """``hook.get_async_conn()``: called once per process and settings, by the first user."""
        return self.hook.get_async_conn()

    async def _describe(
        self,
        client: Any,
        kind: JobKind,
        slots: asyncio.Semaphore,
        interval: float,
        ceiling: float,
    ) -> dict[str, Any] | None:
        """Describe the job; throttling, 5xx and dropped connections are retried, never raised."""
        attempt = 0
        while True:
            try:
                async with slots:
                    return await SageMakerPreferenceHook.describe_job_async(client, kind, self.job_name)
            except Exception as err:
                if not is_transient(err):
                    raise
                attempt += 1
                delay = backoff_delay(attempt, base=min(interval, 2.0), cap=max(ceiling, 60.0))
                self.log.warning(
                    "Describe %s failed transiently (%s); retry %d in %.1fs",
                    self.job_name,
                    type(err).__name__,
                    attempt,
                    delay,
                )
                await asyncio.sleep(delay)

    def _listing_helps(self, kind: JobKind) -> bool:
        # A processing summary has no secondary status or selected type: only its end is visible.
        return kind is JobKind.TRAINING or self.wait_for == WaitFor.COMPLETION.value

    async def _wait_for_listed_change(
        self,
        client_key: tuple[Any, ...],
        kind: JobKind,
        created: datetime,
        limit: float,
        summary: dict[str, Any] | None,
        early: bool,
    ) -> dict[str, Any] | None:
        """Wait until the shared List loop sees this job change, or ``limit`` seconds (safety/deadline).

        Logs progress every :data:`PROGRESS_LOG_EVERY` from the listed summary, without a call of its
        own. Returns the last summary seen (to re-register without an early pass).
        """
        watcher = watcher_for(kind, client_key, self._open_client)
        is_change = capacity_changed if self.wait_for == WaitFor.CAPACITY.value else job_ended
        loop = asyncio.get_running_loop()
        until = loop.time() + limit
        while (remaining := until - loop.time()) > 0:
            seen = await watcher.wait_for_change(
                self.job_name,
                created,
                is_change,
                self.poll_interval,
                min(remaining, PROGRESS_LOG_EVERY),
                summary=summary,
                early=early,
            )
            early = False
            if seen.changed:
                return None
            summary = seen.summary or summary
            if summary is not None and remaining > PROGRESS_LOG_EVERY:
                now = watcher.service_now()
                if now is not None:
                    waited = waiting_seconds(summary, now)
                    preferences = self._parsed_preferences
                    plan = preferences.describe() if preferences else "?"
                    self.log.info(
                        "%s still %s after %s: %s",
                        self.job_name,
                        summary.get("SecondaryStatus") or summary.get("TrainingJobStatus") or "waiting",
                        format_duration(waited),
                        plan,
                    )
        return summary

    def _sleep_for(self, interval: float, describe: dict[str, Any], now: datetime, phase: Phase) -> float:
        """Never sleep far past the client deadline."""
        if phase is Phase.WAITING and self.deadline_seconds is not None:
            remaining = self.deadline_seconds - waiting_seconds(describe, now)
            return max(0.05, min(interval, remaining + 0.05))
        return interval

    def _finish(
        self,
        kind: JobKind,
        describe: dict[str, Any],
        phase: Phase,
        preferences: InstancePreferenceList | None,
        now: datetime,
    ) -> TriggerEvent:
        status = describe.get("TrainingJobStatus") or describe.get("ProcessingJobStatus")
        error = terminal_error(kind, describe, now=now)
        if error is not None:
            self.log.error("%s", error)
            return self._event(
                "error", phase, error_type=type(error).__name__, job_status=status, reason=error.reason
            )
        outcome = outcome_from_describe(kind, describe, preferences, now=now)
        self.log.info("Capacity acquired: %s", outcome.summary())
        return self._event("success", phase, outcome=outcome.as_dict(), job_status=status)

    async def _deadline_passed(
        self,
        hook: SageMakerPreferenceHook,
        client: Any,
        kind: JobKind,
        describe: dict[str, Any],
        waited: float,
    ) -> TriggerEvent:
        reason = (
            f"no entry of the preference list got capacity within max_pending={format_duration(self.deadline_seconds or 0)} "
            f"(waited {format_duration(waited)})"
        )
        if self.stop_on_deadline:
            await hook.stop_job_async(client, kind, self.job_name)
            reason += "; the job was stopped"
        self.log.error("Capacity deadline passed for %s: %s", self.job_name, reason)
        return self._event(
            "error",
            Phase.STOPPING,
            error_type="CapacityTimeoutError",
            job_status=describe.get("TrainingJobStatus") or describe.get("ProcessingJobStatus"),
            reason=reason,
        )

    def _log_progress(
        self,
        kind: JobKind,
        describe: dict[str, Any],
        phase: Phase,
        preferences: InstancePreferenceList | None,
        now: datetime,
    ) -> None:
        waited = waiting_seconds(describe, now)
        cluster = cluster_of(kind, describe)
        plan = preferences.describe(cluster.get("InstanceCount")) if preferences else "?"
        if phase is Phase.WAITING:
            deadline = ""
            limit = self.deadline_seconds or (describe.get("StoppingCondition") or {}).get(
                "MaxPendingTimeInSeconds"
            )
            if limit:
                deadline = f"; deadline in {format_duration(max(0.0, float(limit) - waited))}"
            self.log.info(
                "%s waiting for capacity %s: %s%s", self.job_name, format_duration(waited), plan, deadline
            )
        else:
            self.log.info(
                "%s %s: %s on %s×%s",
                self.job_name,
                phase.value,
                describe.get("SecondaryStatus")
                or describe.get("TrainingJobStatus")
                or describe.get("ProcessingJobStatus"),
                cluster.get("SelectedInstanceType") or cluster.get("InstanceType"),
                cluster.get("SelectedInstanceCount") or cluster.get("InstanceCount"),
            )

    async def on_kill(self) -> None:
        """The deferred task was marked failed/success or cleared: stop the job so nothing runs unattended."""
        if not self.stop_job_on_kill:
            return
        hook = self.hook
        async with await hook.get_async_conn() as client:
            await hook.stop_job_async(client, self.kind, self.job_name)


def utcnow() -> datetime:
    return datetime.now(UTC)
