"""The async wait: until SageMaker leaves Pending (capacity acquired), or until the job ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_sm_prefs.hooks.sagemaker import (
    SageMakerPreferenceHook,
    backoff_delay,
    is_transient,
    service_now,
)
from airflow_provider_sm_prefs.outcome import (
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
SAFETY_DESCRIBE_EVERY = 1800.0


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
        is Described only when its summary changed (and every 30 minutes as a safety net). Falls back
        to per-job polling if listing is not permitted. Not used for processing capacity waits: a
        processing summary does not show a selected entry.
    :param aws_conn_id: Airflow AWS connection id.
    :param region_name: AWS region (kept across deferral, never re-derived).
    :param verify: TLS verification setting.
    :param botocore_config: botocore config as a dict.
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
    ) -> None:
        super().__init__()
        self.job_name = job_name
        self.job_kind = JobKind(job_kind).value
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
        hook = self.hook
        kind = self.kind
        preferences = (
            InstancePreferenceList.from_response(self.preferences, kind) if self.preferences else None
        )
        interval = self.poll_interval
        ceiling = max(self.max_poll_interval or self.poll_interval, self.poll_interval)
        transient_attempt = 0
        last_phase: Phase | None = None
        last_log_at: datetime | None = None
        shared = self.shared_poll
        client_key = settings_key(self.aws_conn_id, self.region_name, self.verify, self.botocore_config)
        async with shared_client(client_key, hook.get_async_conn) as client:
            while True:
                try:
                    describe = await hook.describe_job_async(client, kind, self.job_name)
                except Exception as err:
                    if not is_transient(err):
                        raise
                    transient_attempt += 1
                    delay = max(
                        interval, backoff_delay(transient_attempt, base=interval, cap=max(ceiling, 60.0))
                    )
                    self.log.warning(
                        "Describe %s failed transiently (%s); retry %d in %.1fs",
                        self.job_name,
                        type(err).__name__,
                        transient_attempt,
                        delay,
                    )
                    await asyncio.sleep(delay)
                    continue
                transient_attempt = 0
                if describe is None:
                    yield self._event(
                        "error",
                        Phase.FAILED,
                        error_type="JobFailedError",
                        reason=f"SageMaker has no {kind.value} job named {self.job_name!r}",
                    )
                    return
                now = service_now(describe)
                phase = phase_of(kind, describe)
                if self._is_done(phase):
                    yield self._finish(kind, describe, phase, preferences, now)
                    return
                if phase is Phase.WAITING and self.deadline_seconds is not None:
                    waited = waiting_seconds(describe, now)
                    if waited >= self.deadline_seconds:
                        yield await self._deadline_passed(hook, client, kind, describe, waited)
                        return
                if (
                    phase != last_phase
                    or last_log_at is None
                    or (now - last_log_at).total_seconds() >= PROGRESS_LOG_EVERY
                ):
                    self._log_progress(kind, describe, phase, preferences, now)
                    last_log_at = now
                if phase != last_phase:
                    interval = self.poll_interval  # something changed: look again soon
                    last_phase = phase
                if shared and self._listing_helps(kind):
                    try:
                        await self._wait_for_listed_change(hook, kind, describe, now, phase)
                        continue
                    except ListingUnavailable as err:
                        shared = False
                        self.log.warning(
                            "Shared List polling unavailable (%s); polling %s on its own", err, self.job_name
                        )
                await asyncio.sleep(self._sleep_for(interval, describe, now, phase))
                interval = min(ceiling, interval * 1.5)

    def _listing_helps(self, kind: JobKind) -> bool:
        # A processing summary has no secondary status or selected type: only its end is visible.
        return kind is JobKind.TRAINING or self.wait_for == WaitFor.COMPLETION.value

    async def _wait_for_listed_change(
        self,
        hook: SageMakerPreferenceHook,
        kind: JobKind,
        describe: dict[str, Any],
        now: datetime,
        phase: Phase,
    ) -> None:
        """Wait until the shared List loop sees this job change (or the safety/deadline timer fires)."""
        client_key = settings_key(self.aws_conn_id, self.region_name, self.verify, self.botocore_config)
        watcher = watcher_for(kind, client_key, hook.get_async_conn)
        created = describe.get("CreationTime") or now
        if not isinstance(created, datetime):
            created = now
        is_change = capacity_changed if self.wait_for == WaitFor.CAPACITY.value else job_ended
        timeout = self._sleep_for(max(SAFETY_DESCRIBE_EVERY, self.poll_interval), describe, now, phase)
        await watcher.wait_for_change(self.job_name, created, is_change, self.poll_interval, timeout)

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
