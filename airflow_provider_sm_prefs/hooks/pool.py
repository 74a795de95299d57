"""One aiobotocore client per connection settings and event loop, shared by every trigger of a process.

Creating a botocore client is CPU work (service model, config files, event hooks) plus a connection
lookup; a triggerer holding 1,000 waits would spend most of its CPU on that. The client is opened on
first use and closed when its last user leaves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

#: Per-job calls in flight at once on a shared client (botocore pools 10 connections by default).
DESCRIBE_CONCURRENCY = 8


class _SharedClient:
    def __init__(self, key: tuple[Any, ...], opener: Callable[[], Any]) -> None:
        self.key = key
        self._opener = opener
        self._ctx: Any = None
        self.client: Any = None
        self.users = 0
        self._lock = asyncio.Lock()
        #: Bounds concurrent per-job calls so a burst of wake-ups queues here, not in the event loop.
        self.slots = asyncio.Semaphore(DESCRIBE_CONCURRENCY)

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


class shared_client:
    """Borrow the process's client for ``key`` (see ``AwsSettings.pool_key``); ``opener`` opens one.

    ``opener`` is ``hook.get_async_conn``, called once per process and settings by the first user.
    """

    def __init__(self, key: tuple[Any, ...], opener: Callable[[], Any]) -> None:
        entry = _CLIENTS.get(key)
        if entry is None:
            entry = _CLIENTS[key] = _SharedClient(key, opener)
        self._entry = entry

    @property
    def slots(self) -> asyncio.Semaphore:
        """Hold one of these around a per-job call (see :data:`DESCRIBE_CONCURRENCY`)."""
        return self._entry.slots

    async def __aenter__(self) -> Any:
        return await self._entry.acquire()

    async def __aexit__(self, *exc: Any) -> None:
        await self._entry.release()
