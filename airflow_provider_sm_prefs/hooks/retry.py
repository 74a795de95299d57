"""Which AWS errors are worth another try, and the one way this provider retries them (sync and async).

Throttling, 5xx answers and dropped connections never fail a task or end a wait by themselves; every
other error is the caller's to handle. The retriable codes are the amazon provider's
(``RETRIABLE_ERROR_CODES``) plus the few more SageMaker and other JSON services answer with.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from airflow.providers.amazon.aws.utils.waiter_with_logging import RETRIABLE_ERROR_CODES
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Error codes meaning "slow down" or "try again": the amazon provider's list and SageMaker's extras.
TRANSIENT_CODES = frozenset(RETRIABLE_ERROR_CODES) | {
    "ThrottledException",
    "InternalError",
    "ServiceUnavailableException",
}
NOT_FOUND_MESSAGE = "Requested resource not found"


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", ""))


def is_transient(error: BaseException) -> bool:
    """Throttling, 5xx and dropped connections: retry them, never fail the task for them."""
    if isinstance(error, ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return error_code(error) in TRANSIENT_CODES or status >= 500 or status == 429
    if isinstance(
        error, (BotoConnectionError, HTTPClientError, asyncio.TimeoutError, ConnectionError, OSError)
    ):
        return True
    # aiohttp's errors, without importing aiohttp here.
    return type(error).__module__.startswith("aiohttp")


def is_not_found(error: BaseException) -> bool:
    """SageMaker's answer for a job name it does not know."""
    return (
        isinstance(error, ClientError)
        and error_code(error) == "ValidationException"
        and NOT_FOUND_MESSAGE in error_message(error)
    )


def backoff_delay(attempt: int, base: float = 1.0, cap: float = 60.0) -> float:
    """Full-jitter exponential backoff (AWS Architecture Blog's recommendation)."""
    return random.uniform(0, min(cap, base * (2 ** min(attempt, 16))))


@dataclass(frozen=True)
class Retry:
    """How long to keep trying a call that fails transiently.

    :param attempts: tries in all (None: until it succeeds — for waits that must never end on a
        transient error, where a deadline elsewhere bounds them).
    :param base: first backoff step, seconds.
    :param cap: longest single backoff, seconds.
    """

    attempts: int | None = 12
    base: float = 1.0
    cap: float = 30.0

    def delay(self, attempt: int) -> float:
        return backoff_delay(attempt, base=self.base, cap=self.cap)

    def gives_up(self, attempt: int) -> bool:
        return self.attempts is not None and attempt >= self.attempts


#: Calls a worker or callback makes once (Create, Describe, Stop): about two minutes of trying.
CALL = Retry(attempts=12, base=1.0, cap=30.0)


def retry_sync(
    call: Callable[[], T],
    what: str,
    policy: Retry = CALL,
    retriable: Callable[[BaseException], bool] = is_transient,
) -> T:
    """``call()`` until it succeeds; transient errors are retried with backoff, others raised at once.

    :raises Exception: the first non-retriable error, or the last retriable one when ``policy`` gives up.
    """
    attempt = 0
    while True:
        try:
            return call()
        except Exception as err:
            attempt += 1
            if not retriable(err) or policy.gives_up(attempt):
                raise
            delay = policy.delay(attempt)
            log.warning("%s failed transiently (%s); retry %d in %.1fs", what, _describe(err), attempt, delay)
            time.sleep(delay)


async def retry_async(
    call: Callable[[], Awaitable[T]],
    what: str,
    policy: Retry = CALL,
    retriable: Callable[[BaseException], bool] = is_transient,
) -> T:
    """Async twin of :func:`retry_sync`."""
    attempt = 0
    while True:
        try:
            return await call()
        except Exception as err:
            attempt += 1
            if not retriable(err) or policy.gives_up(attempt):
                raise
            delay = policy.delay(attempt)
            log.warning("%s failed transiently (%s); retry %d in %.1fs", what, _describe(err), attempt, delay)
            await asyncio.sleep(delay)


def _describe(err: BaseException) -> str:
    return error_code(err) if isinstance(err, ClientError) else type(err).__name__
