"""The async wait: until SageMaker leaves Pending (capacity acquired), or until the job ends.

The wait itself is :meth:`SageMakerCapacityTrigger._wait`, a look and a pause per turn; what the wait is
given (and serializes) is its :class:`~airflow_provider_sm_prefs.triggers.capacity_spec.CapacityWaitSpec`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property, partial
from typing import Any

from airflow.triggers.base import TriggerEvent

from airflow_provider_sm_prefs.compat import TRIGGER_ON_KILL
from airflow_provider_sm_prefs.domain.events import CapacityEvent, deadline_passed, event_from_describe
from airflow_provider_sm_prefs.domain.exceptions import JobFailedError, NotOursError
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import format_duration
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.domain.status import (
    JobSnapshot,
    JobStamp,
    Phase,
    WaitFor,
    as_datetime,
    cluster_of,
    is_done,
    waiting_seconds,
)
from airflow_provider_sm_prefs.hooks.clock import ServiceClock
from airflow_provider_sm_prefs.hooks.logs import SageMakerJobLogsHook
from airflow_provider_sm_prefs.hooks.pool import shared_client
from airflow_provider_sm_prefs.hooks.retry import Retry, retry_async
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook, service_now
from airflow_provider_sm_prefs.triggers.capacity_spec import CapacityWaitSpec
from airflow_provider_sm_prefs.triggers.dwell import hold_after_deferral
from airflow_provider_sm_prefs.triggers.eventbridge_mode import event_mode_for
from airflow_provider_sm_prefs.triggers.finish import FinishPlan, end_task, warm_up
from airflow_provider_sm_prefs.triggers.kill import stop_unless_moved
from airflow_provider_sm_prefs.triggers.spec import SpecTrigger
from airflow_provider_sm_prefs.triggers.watcher import (
    ListingUnavailable,
    Observation,
    listed_change,
    watcher_for,
)

__all__ = ["CapacityWaitSpec", "SageMakerCapacityTrigger", "WaitFor", "creation_time_of"]

#: Log a "still waiting" line at most this often (seconds of service time), plus on every change.
PROGRESS_LOG_EVERY = 300.0
#: With shared polling, Describe the job anyway this often: a safety net under the List loop.
SAFETY_DESCRIBE_EVERY = 3600.0
#: Trigger kwargs renamed since an earlier release, old name → new (:attr:`CapacityWaitSpec.renamed`).
RENAMED_KWARGS = CapacityWaitSpec.renamed


def creation_time_of(describe: Mapping[str, Any] | None) -> str | None:
    """The job's CreationTime from a Describe* response, as trigger kwargs carry it (ISO 8601)."""
    created = as_datetime((describe or {}).get("CreationTime"))
    return created.isoformat() if created else None


class SageMakerCapacityTrigger(SpecTrigger[CapacityWaitSpec]):
    """Wait, without a worker slot, for a SageMaker job to get capacity (or to end).

    Yields exactly one event, then returns: a :class:`~airflow_provider_sm_prefs.domain.events.CapacityEvent`
    payload (success with the outcome record, or an error naming the domain exception).

    Throttling, 5xx answers and dropped connections are retried with jittered backoff and never end
    the wait. The optional client-side deadline counts from the job's CreationTime on the service's
    clock, so it survives triggerer restarts unchanged.

    Its arguments are the fields of its :class:`~airflow_provider_sm_prefs.triggers.capacity_spec.CapacityWaitSpec`
    (see there what each means): build it with ``SageMakerCapacityTrigger.of(spec)``, or with the same
    names as keyword arguments (Airflow's way of rebuilding it, and earlier releases' rows).
    """

    spec_type = CapacityWaitSpec

    @property
    def hook(self) -> SageMakerPreferenceHook:
        return self.settings.hook()

    @cached_property
    def _parsed_preferences(self) -> InstancePreferenceList | None:
        if not self.spec.preferences:
            return None
        return InstancePreferenceList.from_response(self.spec.preferences, self.spec.kind)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        if self.spec.finish:
            warm_up(FinishPlan.from_dict(self.spec.finish), self.log)
        delivered = False
        try:
            async for event in self._wait():
                ending = await self._ending(event)
                if ending is None:
                    # A worker resumes the task: not before the scheduler has seen the deferral's exit
                    # (apache/airflow#72716). An ended task has no such race: the scheduler's mismatch
                    # check is for a task it finds scheduled, queued or running again, not ended.
                    await hold_after_deferral(
                        self.log, self.spec.job_name, self.spec.deferred_at, self.spec.min_defer_seconds
                    )
                delivered = True
                yield event if ending is None else ending
                return
        except asyncio.CancelledError:
            # A runner that takes the first event and never resumes the generator (dag.test(), a task that
            # does not defer) leaves it suspended at its yield; asyncio.run's shutdown then cancels the
            # generator's finalization, which arrives here. The wait is over and its event delivered: no
            # kill to run.
            if not TRIGGER_ON_KILL and not delivered:
                # Before Airflow 3.3 the triggerer has no on_kill: cancelling run is all it does when the
                # task is marked, cleared or moved to another triggerer, or the triggerer stops. Only a
                # task read as ended (failed, success...) stops the job here.
                await self._kill(stop_if_unknown=False)
            raise

    async def _wait(self) -> AsyncIterator[TriggerEvent]:
        # Nothing heavy before the first await: a triggerer (re)start runs a thousand of these in one
        # event-loop turn. The hook (which builds S3 and Logs hooks too) is made only to open the
        # shared client, stop a job, or not at all; the list is parsed only to report.
        state = self._start_state()
        connection = shared_client(state.client_key, self._open_client)
        async with connection as client:
            while True:
                if state.look:
                    event = await self._look(client, connection.slots, state)
                    if event is not None:
                        yield self._yield(event)
                        return
                await self._pause(state)

    def _start_state(self) -> _WaitState:
        shared = self.spec.shared_poll and self._listing_helps(self.spec.kind)
        created = as_datetime(self.spec.creation_time)
        return _WaitState(
            client_key=self._client_key(),
            interval=self.spec.poll_interval,
            ceiling=max(self.spec.max_poll_interval or self.spec.poll_interval, self.spec.poll_interval),
            shared=shared,
            created=created,
            # The deferring task looked at the job a moment ago; start from the shared listing instead
            # of Describing it again. A client-side timer needs the service clock of a Describe.
            look=not (shared and created is not None and self.spec.timer() is None),
        )

    async def _look(self, client: Any, slots: asyncio.Semaphore, state: _WaitState) -> CapacityEvent | None:
        """Describe the job once (or read the event detail that settled the wait): the event that ends
        the wait, or None (and the state moved on)."""
        kind = self.spec.kind
        job, state.settled = state.settled, None
        if job is None:
            describe = await self._describe(client, kind, slots, state.interval, state.ceiling)
            if describe is None:
                missing = JobFailedError(
                    self.spec.job_name,
                    None,
                    f"SageMaker has no {kind.value} job named {self.spec.job_name!r}",
                )
                return CapacityEvent.failure(kind, self.spec.wait_for, Phase.FAILED, missing)
            job = JobSnapshot.of(kind, describe, service_now(describe))
            state.seen = JobStamp.of(kind, describe).newest(state.seen)
            state.clock.observe(job.now, asyncio.get_running_loop().time())
        if is_done(job.phase, self.spec.wait_for):
            return self._finish(job)
        event = await self._timer_event(client, job)
        if event is not None:
            return event
        changed = state.last is None or job.phase is not state.last.phase
        state.last_log_at = self._progress(job, changed, state.last_log_at)
        if changed:
            state.interval = self.spec.poll_interval  # something changed: look again soon
        state.last, state.created = job, job.created
        return None

    async def _pause(self, state: _WaitState) -> None:
        """Wait until the next look is due: a listed change (shared polling), a timer, or the cadence."""
        job = state.last
        limit = (
            SAFETY_DESCRIBE_EVERY
            if job is None
            else self._sleep_for(max(SAFETY_DESCRIBE_EVERY, self.spec.poll_interval), job, state.clock)
        )
        state.look = True
        if state.shared and state.created is not None:
            try:
                seen = await self._wait_for_listed_change(
                    state.client_key,
                    self.spec.kind,
                    state.created,
                    limit,
                    state.summary,
                    early=job is None,
                    wake_after=self.spec.timer() if job is not None and job.phase is Phase.WAITING else None,
                    stamp=state.seen,
                    arn=None if job is None else job.describe.get(self.spec.kind.spec.arn_field),
                )
                state.summary, state.seen, state.settled = seen.summary, seen.stamp, seen.settled
                return
            except ListingUnavailable as err:
                state.shared, state.summary = False, None
                self.log.warning(
                    "Shared List polling unavailable (%s); polling %s on its own", err, self.spec.job_name
                )
                if job is None:
                    return  # never looked at the job yet: Describe it now
        await asyncio.sleep(self._sleep_for(state.interval, job, state.clock))
        state.interval = min(state.ceiling, state.interval * 1.5)

    def _client_key(self) -> tuple[Any, ...]:
        return self.settings.pool_key()

    def _open_client(self) -> Any:
        """``hook.get_async_conn()``: called once per process and settings, by the first user."""
        return self.hook.get_async_conn()  # type: ignore[no-untyped-call]

    async def _describe(
        self,
        client: Any,
        kind: JobKind,
        slots: asyncio.Semaphore,
        interval: float,
        ceiling: float,
    ) -> dict[str, Any] | None:
        """Describe the job; throttling, 5xx and dropped connections are retried, never raised."""

        async def once() -> dict[str, Any] | None:
            async with slots:
                return await SageMakerPreferenceHook.describe_job_async(client, kind, self.spec.job_name)

        # No attempt limit: a wait never ends on a transient error (deadlines bound it elsewhere).
        policy = Retry(attempts=None, base=min(interval, 2.0), cap=max(ceiling, 60.0))
        return await retry_async(once, f"Describe {self.spec.job_name}", policy)

    def _listing_helps(self, kind: JobKind) -> bool:
        # A processing summary has no secondary status or selected type: only its end is visible.
        return kind.spec.secondary_status or self.spec.wait_for == WaitFor.COMPLETION.value

    async def _wait_for_listed_change(
        self,
        client_key: tuple[Any, ...],
        kind: JobKind,
        created: datetime,
        limit: float,
        summary: dict[str, Any] | None,
        early: bool,
        wake_after: float | None = None,
        stamp: JobStamp | None = None,
        arn: str | None = None,
    ) -> Observation:
        """Wait until the shared List loop or an event shows this job change, or ``limit`` seconds
        (safety/deadline).

        Logs progress every :data:`PROGRESS_LOG_EVERY` from the listed summary, without a call of its
        own. With ``wake_after`` (seconds since ``created``), also returns once the service clock the
        List loop reads passes it — the clock of the deadline, which may run faster than this
        process's (an offline SageMaker with compressed time). Returns what was seen: the last summary
        (to re-register without an early pass; None when the job changed or its timer is due), the
        newest view of the job (``stamp``), and the event detail that ends the wait, if one did (only
        an event that names ``arn``, the job's ARN from its Describe, in its account and region).
        """
        watcher = watcher_for(kind, client_key, self._open_client, partial(event_mode_for, self.settings))
        is_change = listed_change(kind, self.spec.wait_for)
        loop = asyncio.get_running_loop()
        until = loop.time() + limit
        chunk = PROGRESS_LOG_EVERY if wake_after is None else min(PROGRESS_LOG_EVERY, self.spec.poll_interval)
        while (remaining := until - loop.time()) > 0:
            seen = await watcher.wait_for_change(
                self.spec.job_name,
                created,
                is_change,
                self.spec.poll_interval,
                min(remaining, watcher.clock.wait_for(loop.time(), created, wake_after, chunk)),
                summary=summary,
                early=early,
                wait_for=self.spec.wait_for,
                stamp=stamp,
                arn=arn,
            )
            early = False
            stamp = seen.stamp or stamp
            if seen.changed:
                if seen.settled is not None:
                    self.log.info(
                        "A SageMaker event shows %s %s; its detail ends the wait",
                        self.spec.job_name,
                        seen.settled.describe.get("SecondaryStatus") or seen.settled.status,
                    )
                elif seen.by_event:
                    self.log.info(
                        "A SageMaker event shows %s changed; describing it (%s)",
                        self.spec.job_name,
                        seen.doubt,
                    )
                return Observation(True, None, seen.by_event, stamp, seen.settled)
            service = watcher.service_now()
            if (
                wake_after is not None
                and service is not None
                and (service - created).total_seconds() >= wake_after
            ):
                return Observation(True, None, stamp=stamp)
            summary = seen.summary or summary
            if summary is not None and remaining > PROGRESS_LOG_EVERY:
                now = watcher.service_now()
                if now is not None:
                    waited = waiting_seconds(summary, now)
                    preferences = self._parsed_preferences
                    plan = preferences.describe() if preferences else "?"
                    self.log.info(
                        "%s still %s after %s: %s",
                        self.spec.job_name,
                        summary.get("SecondaryStatus") or summary.get(kind.spec.status_field) or "waiting",
                        format_duration(waited),
                        plan,
                    )
        return Observation(False, summary, stamp=stamp)

    async def _timer_event(self, client: Any, job: JobSnapshot) -> CapacityEvent | None:
        """The event of a timer that went off while waiting: the client deadline, or the window's close."""
        passed = deadline_passed(
            job,
            self.spec.wait_for,
            self.spec.job_name,
            self.spec.deadline_seconds,
            self.spec.stop_on_deadline,
        )
        if passed is not None:
            if passed.stop_job:
                try:
                    await self.hook.stop_job_async(client, job.kind, self.spec.job_name, self.spec.claim)
                except NotOursError as err:  # the deadline still ends the wait; the job is not ours to stop
                    self.log.error("%s", err)
            self.log.error("Capacity deadline passed for %s: %s", self.spec.job_name, passed.event.reason)
            return passed.event
        waited = job.timer_passed(self.spec.window_closes_after_seconds)
        if waited is None:
            return None
        self.log.info(
            "%s still pending after %s: the next acceptance window is open",
            self.spec.job_name,
            format_duration(waited),
        )
        return CapacityEvent.window_closed(job.kind, self.spec.job_name, job.status, waited)

    def _sleep_for(
        self, interval: float, job: JobSnapshot | None, clock: ServiceClock | None = None
    ) -> float:
        """Never sleep far past the client deadline or the close of the acceptance window (on the
        service's clock, at the rate it was seen to run)."""
        timer = self.spec.timer()
        if job is not None and job.phase is Phase.WAITING and timer is not None:
            remaining = timer - job.waited
            if clock is not None and clock.rate > 1.0:
                return max(clock.FLOOR, min(interval, remaining / clock.rate))
            return max(0.05, min(interval, remaining + 0.05))
        return interval

    def _finish(self, job: JobSnapshot) -> CapacityEvent:
        event = event_from_describe(
            job.kind, self.spec.wait_for, job.describe, job.phase, self._parsed_preferences, now=job.now
        )
        if event.outcome is None:
            self.log.error("%s", event.error())
        else:
            self.log.info("Capacity acquired: %s", event.outcome_or_raise().summary())
        return event

    async def _ending(self, event: TriggerEvent) -> TriggerEvent | None:
        """The event that ends the task here when the plan allows it; None when a worker resumes it."""
        if not self.spec.finish:
            return None
        received = CapacityEvent.from_payload(event.payload, self.spec.job_name)
        plan = FinishPlan.from_dict(self.spec.finish)
        return await end_task(
            plan, received, self.spec.kind, self.spec.preferences, self._logs_hook, self.log
        )

    def _logs_hook(self) -> SageMakerJobLogsHook:
        return SageMakerJobLogsHook(**self.settings.hook_kwargs())

    @staticmethod
    def _yield(event: CapacityEvent) -> TriggerEvent:
        return TriggerEvent(event.as_payload())  # type: ignore[no-untyped-call]

    def _progress(self, job: JobSnapshot, changed: bool, last_log_at: datetime | None) -> datetime | None:
        """Log progress on every change and every :data:`PROGRESS_LOG_EVERY`; returns when it last logged."""
        if changed or last_log_at is None or (job.now - last_log_at).total_seconds() >= PROGRESS_LOG_EVERY:
            self._log_progress(job, self._parsed_preferences)
            return job.now
        return last_log_at

    def _log_progress(self, job: JobSnapshot, preferences: InstancePreferenceList | None) -> None:
        describe = job.describe
        waited = job.waited
        cluster = cluster_of(job.kind, describe)
        plan = preferences.describe(cluster.get("InstanceCount")) if preferences else "?"
        if job.phase is Phase.WAITING:
            deadline = ""
            limit = self.spec.deadline_seconds or (describe.get("StoppingCondition") or {}).get(
                "MaxPendingTimeInSeconds"
            )
            if limit:
                deadline = f"; deadline in {format_duration(max(0.0, float(limit) - waited))}"
            self.log.info(
                "%s waiting for capacity %s: %s%s",
                self.spec.job_name,
                format_duration(waited),
                plan,
                deadline,
            )
        else:
            self.log.info(
                "%s %s: %s on %s×%s",
                self.spec.job_name,
                job.phase.value,
                describe.get("SecondaryStatus") or job.status,
                cluster.get("SelectedInstanceType") or cluster.get("InstanceType"),
                cluster.get("SelectedInstanceCount") or cluster.get("InstanceCount"),
            )

    async def on_kill(self) -> None:
        """The deferred task was marked failed/success or cleared: stop the job so nothing runs unattended.

        Airflow 3.3 also calls ``on_kill`` on a live triggerer whose trigger was handed to another
        triggerer because its heartbeat lapsed (apache/airflow#73454): the task is still deferred and
        the new owner goes on watching the job. The task's state tells the two apart; when it cannot be
        read, the job is stopped (the documented meaning of ``on_kill``).

        The work is shielded: Airflow 3.3 repeats the cancellation on every sync of the triggerer's loop
        until the trigger has finished, which would cancel an ``on_kill`` still reading the state or
        stopping the job (silently: the triggerer swallows it).
        """
        await self._kill(stop_if_unknown=True)

    async def _kill(self, stop_if_unknown: bool) -> None:
        if self.spec.stop_job_on_kill:
            await stop_unless_moved(self, self.spec.kind, stop_if_unknown)


@dataclass
class _WaitState:
    """What :meth:`SageMakerCapacityTrigger._wait` carries from one look to the next."""

    client_key: tuple[Any, ...]
    #: Seconds between looks when polling on its own; back to ``poll_interval`` on a change.
    interval: float
    ceiling: float
    #: Learning of changes from the shared List loop (False once listing proved unavailable).
    shared: bool
    #: The job's CreationTime: from the deferring task's look, then from each Describe.
    created: datetime | None
    #: Describe the job on the next turn (False only at a start from the shared listing).
    look: bool
    #: The job's last listed summary, to re-register with the List loop without an early pass.
    summary: dict[str, Any] | None = None
    #: The last Describe (None until the first).
    last: JobSnapshot | None = None
    #: The newest view of the job seen so far (Describes, List summaries, event details).
    seen: JobStamp | None = None
    #: An event's detail that ends the wait: the next look reads it instead of Describing the job.
    settled: JobSnapshot | None = None
    #: When progress was last logged (service clock).
    last_log_at: datetime | None = None
    #: The service's clock as the Describes saw it run (its rate follows a compressed clock).
    clock: ServiceClock = field(default_factory=ServiceClock)
