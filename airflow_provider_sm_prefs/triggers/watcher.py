"""One List* loop per (connection, region, job kind) shared by every waiting trigger in the process.

A triggerer may hold hundreds of capacity waits at once. Describing each job every 30 s costs one
call per job per poll and runs into SageMaker's per-account rate limits; one paginated
``ListTrainingJobs(StatusEquals=InProgress)`` call covers 100 jobs and returns the InProgress ones with
their status and secondary status, which is all a waiter needs to know that something changed. Each
trigger registers the job it waits for; the watcher wakes it when the job's summary shows it left
Starting/Pending, or when the job left the InProgress listing (it ended), and only then does that
trigger Describe its job.

Pages: SageMaker cuts a page of ``MaxResults`` jobs first and filters it by ``StatusEquals`` afterwards
(documented for ListTrainingJobs), so a page may hold anything from none to 100 InProgress jobs. Only a
missing ``NextToken`` ends a pass; neither an empty nor a short page means anything.

Windows and cadence (:mod:`.cadence`): a pass lists only the creation-time windows of the waiting
jobs, so others' jobs created between or after ours cost no page; passes come every ``poll_interval``,
or down to a third of it while List calls stay within a budget of :data:`~.cadence.LIST_COST_SHARE` of
what per-job polling would send.

Event mode (:mod:`.eventbridge_queue`): when an SQS queue of SageMaker's EventBridge events is configured,
each waiter also subscribes to the process's consumer of that queue, and an event whose detail shows a
change wakes it at once: with the detail itself when that detail ends the wait, is newer than what the
waiter has seen and is about the job's ARN as SageMaker answered it, from its account and region
(:func:`~airflow_provider_sm_prefs.domain.event_detail.weigh_event`): no Describe; else asking for one. Passes then come only every
``[sm_prefs] event_safety_list_seconds`` (a safety net under lost events), except while the queue cannot
be read.

Nothing here is persisted: after a triggerer restart the triggers register again and the first
pass re-reads the truth from SageMaker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from airflow_provider_sm_prefs.domain.cadence import ListBudget, cohort_windows, list_cadence
from airflow_provider_sm_prefs.domain.event_detail import Confirm, NoNews, Settled, weigh_event
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.status import JobSnapshot, JobStamp, WaitFor, phase_of, worth_a_look
from airflow_provider_sm_prefs.hooks.clock import ServiceClock
from airflow_provider_sm_prefs.hooks.pool import shared_client
from airflow_provider_sm_prefs.hooks.retry import Retry, backoff_delay, is_transient, retry_async
from airflow_provider_sm_prefs.hooks.sagemaker import service_now
from airflow_provider_sm_prefs.triggers.eventbridge_messages import JobEvent
from airflow_provider_sm_prefs.triggers.eventbridge_mode import EventDetail, EventMode
from airflow_provider_sm_prefs.triggers.eventbridge_queue import EventQueueConsumer

log = logging.getLogger(__name__)

PAGE_SIZE = 100
#: A job never seen in the InProgress listing wakes its trigger after this many passes (it Describes
#: to know why: just created and not listed yet, ended before it was ever listed, or never existed).
#: A job that was listed before and is missing now has ended, and wakes its trigger at once.
MISSING_ROUNDS = 3
#: ... unless it was created this long before the pass (service clock): then the listing has had
#: time to show it, and its absence means it ended before anyone looked (e.g. during a triggerer
#: restart), so it wakes at once.
LISTING_GRACE = timedelta(seconds=60)
#: Stop the loop (and close its client) after this long with nothing registered.
IDLE_GRACE = 60.0
#: A job registered after the last pass started gets an early pass: registrations arriving within
#: this many seconds share it (a triggerer restart registers hundreds at once) ...
EARLY_PASS_GATHER = 0.25
#: ... and no two passes start closer than this (or the poll interval, if shorter).
EARLY_PASS_MIN_GAP = 2.0
#: Waiters woken per event-loop turn, so a pass that finds hundreds of changes does not stall the loop.
WAKE_BATCH = 50
#: A page that fails transiently and that botocore did not retry (see hooks.retry) is retried in place
#: this way, four requests in all, before the whole pass backs off.
PAGE_RETRY = Retry(attempts=4, base=0.5, cap=10.0)


class ListingUnavailable(RuntimeError):
    """Listing failed for a non-transient reason (e.g. no ListTrainingJobs permission)."""


@dataclass
class Observation:
    """What a waiter learned: ``changed`` means Describe the job now."""

    changed: bool
    #: The job's latest summary from a pass (None if it was not listed, or no pass ran yet).
    summary: dict[str, Any] | None
    #: The change came from a SageMaker event (event mode), not from a List pass.
    by_event: bool = False
    #: The newest view of the job the waiter has seen (List summaries, event details), to pass on.
    stamp: JobStamp | None = None
    #: The event's detail read as a Describe, when it ends the wait (no Describe needed).
    settled: JobSnapshot | None = None
    #: Why an event's detail was not enough and the job should be Described (for the log).
    doubt: str | None = None


@dataclass(eq=False)
class _Waiter:
    job_name: str
    created: datetime
    interval: float
    is_change: Callable[[dict[str, Any]], bool]
    future: asyncio.Future[Observation]
    registered: float
    early: bool = False
    seen: bool = False
    missing_rounds: int = 0
    summary: dict[str, Any] | None = None
    unsubscribe: Callable[[], None] | None = None
    #: What the wait waits for: lets an event's detail end it (None: events only wake it).
    wait_for: WaitFor | None = None
    stamp: JobStamp | None = None
    #: The job's ARN as SageMaker answered it (a Describe, a List summary): what an event must name.
    arn: str | None = None


def listed_change(kind: JobKind, wait_for: WaitFor | str) -> Callable[[dict[str, Any]], bool]:
    """Whether a listed summary shows a change worth a Describe, for a wait for ``wait_for``."""
    wanted = WaitFor(wait_for)

    def changed(summary: dict[str, Any]) -> bool:
        return worth_a_look(phase_of(kind, summary), wanted)

    return changed


class JobListWatcher:
    """Polls List* for one connection, region and job kind, and wakes registered waiters.

    :param key: the settings key (``AwsSettings.pool_key``) plus the job kind.
    :param opener: ``hook.get_async_conn`` of the first trigger that asked; used through
        :class:`~airflow_provider_sm_prefs.hooks.pool.shared_client`, so the watcher and the triggers
        share one client.
    :param kind: which List* call to use.
    :param events: resolves the process's event-queue consumer for these settings, or None when event
        mode is off (called once, when the loop starts).
    """

    def __init__(
        self,
        key: tuple[Any, ...],
        opener: Callable[[], Any],
        kind: JobKind,
        events: Callable[[], Awaitable[EventMode | None]] | None = None,
    ) -> None:
        self.key = key
        self.kind = kind
        self._events_source = events
        self._events: EventQueueConsumer | None = None
        self._safety_seconds = 0.0
        self._detail = EventDetail.DATA
        self._last_pages = 1
        self._budget = ListBudget()
        self._client_key = key[:-1]
        self._opener = opener
        self._waiters: dict[str, list[_Waiter]] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        #: loop time the current/last pass started; when the next one is due (None while listing).
        self._pass_started: float | None = None
        self._next_pass: float | None = None
        self.clock = ServiceClock()

    def service_now(self) -> datetime | None:
        """The service clock: the ``Date`` of the last pass advanced at its measured rate; None before."""
        return self.clock.now(asyncio.get_running_loop().time())

    async def wait_for_change(
        self,
        job_name: str,
        created: datetime,
        is_change: Callable[[dict[str, Any]], bool],
        interval: float,
        timeout: float | None,
        *,
        summary: dict[str, Any] | None = None,
        early: bool = False,
        wait_for: WaitFor | str | None = None,
        stamp: JobStamp | None = None,
        arn: str | None = None,
    ) -> Observation:
        """Wait until a pass shows ``is_change(summary)`` or the job gone; or until ``timeout``.

        :param summary: the job's summary from an earlier wait (``Observation.summary``): the job is
            known to be listed, so the next pass counts even if it started before this call.
        :param wait_for: what the caller waits for: in event mode, an event whose detail ends that wait
            and is newer than ``stamp`` comes back as ``Observation.settled``. Without it an event only
            wakes the caller (when ``is_change(detail)``).
        :param stamp: the newest view of the job the caller has seen (``Observation.stamp``, a Describe).
        :param arn: the job's ARN from the caller's Describe (a List pass fills it in otherwise); an
            event settles the wait only if it names this ARN, its account and its region.
        :param early: nobody looked at the job lately (the trigger just started without a
            Describe): ask for an early pass, shared with other newcomers, instead of waiting a
            whole cadence for the first look.
        :raises ListingUnavailable: when listing cannot work here; the caller polls on its own.
        """
        loop = asyncio.get_running_loop()
        waiter = _Waiter(
            job_name,
            created,
            max(0.05, interval),
            is_change,
            loop.create_future(),
            float("-inf") if summary is not None else loop.time(),
            early=early and summary is None,
            seen=summary is not None,
            summary=summary,
            wait_for=None if wait_for is None else WaitFor(wait_for),
            stamp=stamp,
            arn=arn or (summary or {}).get(self.kind.spec.arn_field),
        )
        self._waiters.setdefault(job_name, []).append(waiter)
        self._subscribe(waiter)
        self._ensure_running(waiter)
        try:
            return await asyncio.wait_for(asyncio.shield(waiter.future), timeout)
        except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
            return Observation(False, waiter.summary, stamp=waiter.stamp)
        finally:
            if waiter.unsubscribe is not None:
                waiter.unsubscribe()
            waiters = self._waiters.get(job_name, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._waiters.pop(job_name, None)

    @property
    def events_flowing(self) -> bool:
        """Event mode is on and its queue is being read."""
        return self._events is not None and self._events.healthy

    def _subscribe(self, waiter: _Waiter) -> None:
        """In event mode, wake ``waiter`` on an event whose detail shows a change: with the detail when it
        ends the wait and can be trusted, else to Describe the job."""
        if self._events is None or waiter.unsubscribe is not None:
            return

        def on_event(event: JobEvent) -> None:
            if waiter.future.done():
                return
            if waiter.wait_for is None:
                if waiter.is_change(event.detail):
                    waiter.future.set_result(Observation(True, None, by_event=True))
                return
            self._weigh(waiter, event)

        waiter.unsubscribe = self._events.subscribe(self.kind, waiter.job_name, on_event)

    def _weigh(self, waiter: _Waiter, event: JobEvent) -> None:
        """Settle ``waiter`` from an event's detail, ask it to Describe, or only note what it saw."""
        assert waiter.wait_for is not None
        match weigh_event(
            self.kind, waiter.wait_for, event.detail, waiter.stamp, origin=event.origin, job_arn=waiter.arn
        ):
            case NoNews(seen=seen):
                waiter.stamp = seen
            case Settled(job=job, seen=seen) if self._detail is EventDetail.DATA:
                waiter.future.set_result(Observation(True, None, by_event=True, stamp=seen, settled=job))
            case Settled():
                waiter.future.set_result(
                    Observation(True, None, by_event=True, stamp=waiter.stamp, doubt="event_detail = hint")
                )
            case Confirm(reason=reason):
                waiter.future.set_result(
                    Observation(True, None, by_event=True, stamp=waiter.stamp, doubt=reason)
                )

    async def _start_events(self) -> None:
        """Resolve event mode once; subscribe the waiters registered so far."""
        source, self._events_source = self._events_source, None
        if source is None:
            return
        try:
            found = await source()
        except Exception as err:  # event mode is an optimisation: never fail the waits for it
            log.warning(
                "Event mode unavailable (%s: %s); listing at the usual cadence", type(err).__name__, err
            )
            return
        if found is None:
            return
        self._events, self._safety_seconds, self._detail = (
            found.consumer,
            found.safety_list_seconds,
            found.detail,
        )
        self._events.on_health_change(self._events_health_changed)
        for waiters in self._waiters.values():
            for waiter in waiters:
                self._subscribe(waiter)

    def _events_health_changed(self) -> None:
        """Events stopped (or started) flowing: bring the next pass to the cadence that now applies."""
        if self._next_pass is None or self._pass_started is None:
            return
        started = self._pass_started
        due = self._planned(started, self._last_pages)
        if due < self._next_pass:
            self._next_pass = due
            self._wake.set()
        elif not any(w.early and w.registered >= started for ws in self._waiters.values() for w in ws):
            self._next_pass = due  # events flow now: the pass already planned can wait for the safety cadence

    def _ensure_running(self, waiter: _Waiter) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"sm-prefs-list-{self.kind.value}"
            )
        elif waiter.early and self._next_pass is not None:
            self._request_early_pass(waiter.interval)
        # else: a pass is running; it asks for an early pass when it ends (see _schedule_next).

    def _request_early_pass(self, interval: float) -> None:
        """Bring the next pass forward for a job the last pass did not cover, sharing it with others."""
        if self._next_pass is None:
            return
        now = asyncio.get_running_loop().time()
        early = now + EARLY_PASS_GATHER
        if self._pass_started is not None:
            early = max(early, self._pass_started + min(EARLY_PASS_MIN_GAP, interval))
        if early < self._next_pass:
            self._next_pass = early
            self._wake.set()

    def _poll_and_waiters(self) -> tuple[float, int]:
        waiters = [w for ws in self._waiters.values() for w in ws]
        return min((w.interval for w in waiters), default=30.0), len(waiters)

    def _cadence(self, pages: int) -> float:
        cadence = list_cadence(*self._poll_and_waiters(), pages, self._budget.credit)
        return max(cadence, self._safety_seconds) if self.events_flowing else cadence

    def _planned(self, started: float, pages: int) -> float:
        """When the pass after the one begun at ``started`` is due: at the cadence, or sooner while no
        rate of the service clock is measured (a second pass soon measures it: ServiceClock)."""
        due = started + self._cadence(pages)
        return due if self.clock.measured else min(due, started + self.clock.MIN_SPAN + 0.5)

    async def _run(self) -> None:
        idle_since: float | None = None
        loop = asyncio.get_running_loop()
        attempt = 0
        try:
            await self._start_events()
            async with shared_client(self._client_key, self._opener) as client:
                while True:
                    if not self._waiters:
                        idle_since = idle_since or loop.time()
                        if loop.time() - idle_since > IDLE_GRACE:
                            return
                        await self._sleep_until(loop.time() + 1.0, idle=True)
                        continue
                    idle_since = None
                    started = self._pass_started = loop.time()
                    self._next_pass = None
                    try:
                        summaries, pages = await self.list_all(client)
                        attempt = 0
                    except Exception as err:
                        if not is_transient(err):
                            self._fail_all(ListingUnavailable(f"{type(err).__name__}: {err}"))
                            return
                        attempt += 1
                        poll = self._cadence(1)
                        delay = backoff_delay(attempt, base=poll, cap=max(60.0, poll * 4))
                        log.warning(
                            "Listing %s jobs failed transiently (%s); retrying in %.1fs",
                            self.kind.value,
                            err,
                            delay,
                        )
                        await self._sleep_until(loop.time() + delay)
                        continue
                    await self._dispatch(summaries, started)
                    await self._sleep_until(self._schedule_next(started, pages))
        except Exception as err:  # never leave waiters hanging on an unexpected error
            self._fail_all(ListingUnavailable(f"{type(err).__name__}: {err}"))
        finally:
            _WATCHERS.pop(self.key, None)

    def _schedule_next(self, started: float, pages: int) -> float:
        self._last_pages = pages
        self._budget.spend(started, *self._poll_and_waiters(), pages)
        self._next_pass = self._planned(started, pages)
        newcomers = [w for ws in self._waiters.values() for w in ws if w.early and w.registered >= started]
        if newcomers:
            self._request_early_pass(min(w.interval for w in newcomers))
        return self._next_pass

    async def _sleep_until(self, when: float, idle: bool = False) -> None:
        """Sleep until the next pass is due; an early-pass request moves ``_next_pass`` forward."""
        loop = asyncio.get_running_loop()
        self._next_pass = when
        while (remaining := self._next_pass - loop.time()) > 0:
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=remaining)
            if not self._waiters and not idle:
                return  # everyone left: back to the idle check

    async def list_all(self, client: Any) -> tuple[dict[str, dict[str, Any]], int]:
        """One pass: every InProgress job created in the waiters' windows (:func:`cohort_windows`), by name.

        Follows ``NextToken`` until there is none in each window: pages are filtered after they are cut,
        so an empty or short page is no sign of the end. Returns the summaries and the number of pages.
        """
        spec = self.kind.spec
        windows = cohort_windows(w.created for ws in self._waiters.values() for w in ws)
        summaries: dict[str, dict[str, Any]] = {}
        call = getattr(client, spec.list)
        pages = 0
        for after, before in windows:
            kwargs: dict[str, Any] = {
                "CreationTimeAfter": after,
                "CreationTimeBefore": before,
                "StatusEquals": "InProgress",
                "SortBy": "CreationTime",
                "SortOrder": "Descending",
                "MaxResults": PAGE_SIZE,
            }
            # By hand, not ``client.get_paginator``: a page that fails transiently is retried in place
            # (PAGE_RETRY) before the whole pass backs off. aiobotocore's page iterator is an async
            # generator that ends for good on the first error, and resuming one needs a StartingToken
            # in botocore's own encoding of NextToken (undocumented), or listing the window again
            # from its first page; either costs more than these few lines.
            while True:
                page = await retry_async(partial(call, **kwargs), f"List {self.kind.value} jobs", PAGE_RETRY)
                pages += 1
                if pages == 1:
                    self.clock.observe(service_now(page), asyncio.get_running_loop().time())
                for summary in page.get(spec.summaries_field, []):
                    summaries[summary[spec.name_field]] = summary
                token = page.get("NextToken")
                if not token:
                    break
                kwargs["NextToken"] = token
        return summaries, pages

    async def _dispatch(self, summaries: dict[str, dict[str, Any]], started: float) -> None:
        """Wake the waiters this pass has news for, :data:`WAKE_BATCH` per event-loop turn."""
        wake: list[tuple[_Waiter, Observation]] = []
        listed_at = self.clock.last
        for name, waiters in list(self._waiters.items()):
            summary = summaries.get(name)
            for waiter in waiters:
                if waiter.future.done() or waiter.registered > started:
                    continue  # the pass may have listed before this job existed
                if summary is not None:
                    waiter.seen, waiter.missing_rounds, waiter.summary = True, 0, summary
                    waiter.arn = waiter.arn or summary.get(self.kind.spec.arn_field)
                    waiter.stamp = JobStamp.of(self.kind, summary).newest(waiter.stamp)
                    if waiter.is_change(summary):
                        wake.append((waiter, Observation(True, summary, stamp=waiter.stamp)))
                    continue
                waiter.missing_rounds += 1
                if (
                    waiter.seen
                    or waiter.missing_rounds >= MISSING_ROUNDS
                    or (listed_at is not None and waiter.created < listed_at - LISTING_GRACE)
                ):
                    wake.append((waiter, Observation(True, None, stamp=waiter.stamp)))
        for index, (waiter, observation) in enumerate(wake):
            if index and index % WAKE_BATCH == 0:
                await asyncio.sleep(0)
            if not waiter.future.done():
                waiter.future.set_result(observation)

    def _fail_all(self, error: Exception) -> None:
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.future.done():
                    waiter.future.set_exception(error)


_WATCHERS: dict[tuple[Any, ...], JobListWatcher] = {}


def watcher_for(
    kind: JobKind,
    client_key: tuple[Any, ...],
    opener: Callable[[], Any],
    events: Callable[[], Awaitable[EventMode | None]] | None = None,
) -> JobListWatcher:
    """The process's watcher for these connection settings (``AwsSettings.pool_key``) and job kind.

    :param events: resolves event mode for these settings (see :class:`JobListWatcher`).
    """
    key = (*client_key, kind.value)
    watcher = _WATCHERS.get(key)
    if watcher is None:
        watcher = _WATCHERS[key] = JobListWatcher(key, opener, kind, events)
    return watcher
