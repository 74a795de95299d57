"""One List* loop per (connection, region, job kind) shared by every waiting trigger in the process.

A triggerer may hold hundreds of capacity waits at once. Describing each job every 30 s costs one
call per job per poll and runs into SageMaker's per-account rate limits; one paginated
``ListTrainingJobs`` call returns up to 100 jobs with their status and secondary status, which is
all a waiter needs to know that something changed. Each trigger registers the job it waits for;
the watcher wakes it when the job's summary shows it left Starting/Pending (or ended), and only
then does that trigger Describe its job.

Nothing here is persisted: after a triggerer restart the triggers register again and the first
List round re-reads the truth from SageMaker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from airflow_provider_sm_prefs.hooks.sagemaker import backoff_delay, is_transient
from airflow_provider_sm_prefs.preferences import JobKind
from airflow_provider_sm_prefs.status import WAITING_SECONDARY

log = logging.getLogger(__name__)

PAGE_SIZE = 100
#: A job missing from the listing this many rounds in a row wakes its trigger (it Describes to know why).
MISSING_ROUNDS = 3
#: Stop the loop (and close its client) after this long with nothing registered.
IDLE_GRACE = 60.0

_LIST = {
    JobKind.TRAINING: ("list_training_jobs", "TrainingJobSummaries", "TrainingJobName", "TrainingJobStatus"),
    JobKind.PROCESSING: (
        "list_processing_jobs",
        "ProcessingJobSummaries",
        "ProcessingJobName",
        "ProcessingJobStatus",
    ),
}


class _SharedClient:
    """One aiobotocore client per connection settings and event loop, shared by every trigger.

    Creating a botocore client costs tens of milliseconds of CPU (service model, config files,
    event hooks) and a connection lookup; a triggerer holding 1,000 waits would spend most of its
    CPU on that. The client is opened on first use and closed when its last user leaves.
    """

    def __init__(self, key: tuple[Any, ...], opener: Callable[[], Any]) -> None:
        self.key = key
        self._opener = opener
        self._ctx: Any = None
        self.client: Any = None
        self.users = 0
        self._lock = asyncio.Lock()

    async def acquire(self) -> Any:
        async with self._lock:
            if self.client is None:
                self._ctx = await self._opener()
                self.client = await self._ctx.__aenter__()
            self.users += 1
            return self.client

    async def release(self) -> None:
        async with self._lock:
            self.users -= 1
            if self.users > 0 or self.client is None:
                return
            ctx, self._ctx, self.client = self._ctx, None, None
            _CLIENTS.pop(self.key, None)
        await ctx.__aexit__(None, None, None)


_CLIENTS: dict[tuple[Any, ...], _SharedClient] = {}


def settings_key(
    aws_conn_id: str | None,
    region_name: str | None,
    verify: bool | str | None,
    botocore_config: dict[str, Any] | None,
) -> tuple[Any, ...]:
    """What makes two triggers' clients interchangeable, on the running event loop."""
    return (
        id(asyncio.get_running_loop()),
        aws_conn_id,
        region_name,
        str(verify),
        json.dumps(botocore_config, sort_keys=True, default=str),
    )


class shared_client:
    """Borrow the process's client for these settings; ``opener`` is ``hook.get_async_conn``."""

    def __init__(self, key: tuple[Any, ...], opener: Callable[[], Any]) -> None:
        entry = _CLIENTS.get(key)
        if entry is None:
            entry = _CLIENTS[key] = _SharedClient(key, opener)
        self._entry = entry

    async def __aenter__(self) -> Any:
        return await self._entry.acquire()

    async def __aexit__(self, *exc: Any) -> None:
        await self._entry.release()


class ListingUnavailable(RuntimeError):
    """Listing failed for a non-transient reason (e.g. no ListTrainingJobs permission)."""


@dataclass
class _Waiter:
    job_name: str
    created: datetime
    interval: float
    is_change: Callable[[dict[str, Any]], bool]
    future: asyncio.Future[dict[str, Any] | None]
    missing_rounds: int = 0


@dataclass
class WatcherStats:
    list_calls: int = 0
    pages: int = 0
    transient_errors: int = 0
    wakeups: int = 0
    rounds: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def capacity_changed(summary: dict[str, Any]) -> bool:
    """A training summary shows the job left Starting/Pending, or ended."""
    status = summary.get("TrainingJobStatus") or summary.get("ProcessingJobStatus")
    if status != "InProgress":
        return True
    secondary = summary.get("SecondaryStatus")
    return bool(secondary) and secondary not in WAITING_SECONDARY


def job_ended(summary: dict[str, Any]) -> bool:
    status = summary.get("TrainingJobStatus") or summary.get("ProcessingJobStatus")
    return status not in ("InProgress", "Stopping")


class JobListWatcher:
    """Polls List* for one connection, region and job kind, and wakes registered waiters.

    :param key: the settings key (see :func:`settings_key`) plus the job kind.
    :param opener: ``hook.get_async_conn`` of the first trigger that asked; used through
        :class:`shared_client`, so the watcher and the triggers share one client.
    :param kind: which List* call to use.
    """

    def __init__(self, key: tuple[Any, ...], opener: Callable[[], Any], kind: JobKind) -> None:
        self.key = key
        self.kind = kind
        self._client_key = key[:-1]
        self._opener = opener
        self._waiters: dict[str, list[_Waiter]] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.stats = WatcherStats()

    @property
    def registered(self) -> int:
        return sum(len(v) for v in self._waiters.values())

    async def wait_for_change(
        self,
        job_name: str,
        created: datetime,
        is_change: Callable[[dict[str, Any]], bool],
        interval: float,
        timeout: float | None,
    ) -> dict[str, Any] | None:
        """Return the job's summary once ``is_change(summary)`` holds; None on timeout or when missing.

        :raises ListingUnavailable: when listing cannot work here; the caller polls on its own.
        """
        loop = asyncio.get_running_loop()
        waiter = _Waiter(job_name, created, max(0.05, interval), is_change, loop.create_future())
        self._waiters.setdefault(job_name, []).append(waiter)
        self._ensure_running()
        try:
            return await asyncio.wait_for(asyncio.shield(waiter.future), timeout)
        except TimeoutError:
            return None
        finally:
            waiters = self._waiters.get(job_name, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._waiters.pop(job_name, None)

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"sm-prefs-list-{self.kind.value}"
            )
        else:
            self._wake.set()

    def _interval(self) -> float:
        return min((w.interval for ws in self._waiters.values() for w in ws), default=30.0)

    async def _run(self) -> None:
        idle_since: float | None = None
        loop = asyncio.get_running_loop()
        attempt = 0
        try:
            async with shared_client(self._client_key, self._opener) as client:
                while True:
                    if not self._waiters:
                        idle_since = idle_since or loop.time()
                        if loop.time() - idle_since > IDLE_GRACE:
                            return
                        await self._sleep(1.0)
                        continue
                    idle_since = None
                    started = loop.time()
                    try:
                        summaries = await self._list_all(client)
                        attempt = 0
                    except Exception as err:
                        if not is_transient(err):
                            self._fail_all(ListingUnavailable(f"{type(err).__name__}: {err}"))
                            return
                        attempt += 1
                        self.stats.transient_errors += 1
                        delay = backoff_delay(
                            attempt, base=self._interval(), cap=max(60.0, self._interval() * 4)
                        )
                        log.warning(
                            "Listing %s jobs failed transiently (%s); retrying in %.1fs",
                            self.kind.value,
                            err,
                            delay,
                        )
                        await self._sleep(delay)
                        continue
                    self._dispatch(summaries)
                    self.stats.rounds += 1
                    await self._sleep(max(0.0, self._interval() - (loop.time() - started)))
        except Exception as err:  # never leave waiters hanging on an unexpected error
            self._fail_all(ListingUnavailable(f"{type(err).__name__}: {err}"))
        finally:
            _WATCHERS.pop(self.key, None)

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)

    async def _list_all(self, client: Any) -> dict[str, dict[str, Any]]:
        operation, items_key, name_key, _ = _LIST[self.kind]
        oldest = min(w.created for ws in self._waiters.values() for w in ws) - timedelta(minutes=5)
        kwargs: dict[str, Any] = {
            "CreationTimeAfter": oldest,
            "SortBy": "CreationTime",
            "SortOrder": "Descending",
            "MaxResults": PAGE_SIZE,
        }
        summaries: dict[str, dict[str, Any]] = {}
        call = getattr(client, operation)
        self.stats.list_calls += 1
        while True:
            page = await call(**kwargs)
            self.stats.pages += 1
            for summary in page.get(items_key, []):
                summaries[summary[name_key]] = summary
            token = page.get("NextToken")
            if not token:
                return summaries
            kwargs["NextToken"] = token

    def _dispatch(self, summaries: dict[str, dict[str, Any]]) -> None:
        for name, waiters in list(self._waiters.items()):
            summary = summaries.get(name)
            for waiter in list(waiters):
                if waiter.future.done():
                    continue
                if summary is None:
                    waiter.missing_rounds += 1
                    if waiter.missing_rounds >= MISSING_ROUNDS:
                        waiter.future.set_result(None)
                        self.stats.wakeups += 1
                elif waiter.is_change(summary):
                    waiter.future.set_result(summary)
                    self.stats.wakeups += 1

    def _fail_all(self, error: Exception) -> None:
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.future.done():
                    waiter.future.set_exception(error)


_WATCHERS: dict[tuple[Any, ...], JobListWatcher] = {}


def watcher_for(kind: JobKind, client_key: tuple[Any, ...], opener: Callable[[], Any]) -> JobListWatcher:
    """The process's watcher for these connection settings (``settings_key``) and job kind."""
    key = (*client_key, kind.value)
    watcher = _WATCHERS.get(key)
    if watcher is None:
        watcher = _WATCHERS[key] = JobListWatcher(key, opener, kind)
    return watcher
