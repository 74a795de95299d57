"""Which AWS errors are worth another try, and the retry budget of every call the provider makes.

Two mechanisms, never multiplied:

* **botocore's retry mode** retries every request: :func:`with_default_retries` gives each client the
  provider builds ``standard`` mode with :data:`DEFAULT_MAX_ATTEMPTS` requests per call, unless the user
  set ``retries`` in the connection's ``config_kwargs``, the task's ``botocore_config`` or the
  ``AWS_RETRY_MODE`` / ``AWS_MAX_ATTEMPTS`` environment variables (theirs is kept as is; note that
  botocore's ``retries.max_attempts`` counts retries, ``total_max_attempts`` and ``AWS_MAX_ATTEMPTS``
  count requests).
* **our layer** (:func:`retry_sync`, :func:`retry_async`, on tenacity) does only what botocore does not:

  - a bounded :class:`Retry` (``attempts`` set) shares one budget with botocore: an error botocore gave
    up on (its attempts or its retry quota spent, or a connection error it already retried) is raised
    at once; an error its mode does not retry (a transient code at a 4xx status) is tried again while
    the call has made fewer than ``attempts`` requests in all, botocore's counted
    (``ResponseMetadata.RetryAttempts``). Under persistent throttling a call makes exactly
    ``max_attempts`` requests, whatever the mix at most ``attempts`` (or the user's ``max_attempts``);
  - an unbounded :class:`Retry` (``attempts=None``) is for waits that must never end on a transient
    error (the triggers' Describe): each try is one botocore call with its own retries, then a
    backoff; a deadline elsewhere bounds the wait.

A session token AWS refuses as expired before its reported expiry (:data:`EXPIRED_TOKEN_CODES`) is neither
layer's: :mod:`.renewal` renews the credentials and has botocore send the request once more.

Throttling, 5xx answers and dropped connections never fail a wait by themselves; every other error is
the caller's to handle. The retriable codes are the amazon provider's (``RETRIABLE_ERROR_CODES``) plus
the few more SageMaker and other JSON services answer with. docs/limits.md "Retries" states the budget.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow.providers.amazon.aws.utils.waiter_with_logging import RETRIABLE_ERROR_CODES
from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_never,
    wait_random_exponential,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Error codes meaning "slow down" or "try again": the amazon provider's list and SageMaker's extras.
TRANSIENT_CODES = frozenset(RETRIABLE_ERROR_CODES) | {
    "ThrottledException",
    "InternalError",
    "ServiceUnavailableException",
}
NOT_FOUND_MESSAGE = "Requested resource not found"
#: Error codes of a session token AWS takes for expired (the list the AWS SDK for Go treats so): never
#: retried as they are; the connection's credentials are renewed once and the request sent again
#: (:mod:`.renewal`, in botocore's retry step).
EXPIRED_TOKEN_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "RequestExpired"})

#: botocore's retry mode for every client the provider builds: the mode every AWS SDK shares
#: (throttling and 5xx retried with capped full-jitter backoff, a client-wide retry quota that stops
#: retrying when most calls fail). ``adaptive`` adds client-side rate limiting, still marked
#: experimental by botocore, and would make one throttled job slow every wait on a shared client.
DEFAULT_RETRY_MODE = "standard"
#: Requests per call, the first included: standard mode's backoff before the n-th retry is at most
#: min(2 ** (n - 1), 20) s, so ten requests keep trying for up to 111 s (about a minute on average).
DEFAULT_MAX_ATTEMPTS = 10
#: botocore reads these when a client's config sets no ``retries``: a user who set them chose a mode.
RETRY_ENVIRONMENT = ("AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS")


def with_default_retries(config: Config | None, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> Config:
    """``config`` with ``retries`` set to :data:`DEFAULT_RETRY_MODE` and ``max_attempts``, unless the
    user chose theirs (``retries`` in ``config``, or :data:`RETRY_ENVIRONMENT`): then ``config`` as is.
    """
    config = config or Config()
    if config.retries or any(os.environ.get(name) for name in RETRY_ENVIRONMENT):
        return config
    # total_max_attempts counts the first request; botocore's max_attempts counts only the retries.
    return config.merge(Config(retries={"mode": DEFAULT_RETRY_MODE, "total_max_attempts": max_attempts}))


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


def requests_made(error: BaseException) -> int | None:
    """Requests botocore sent for the call that raised ``error``; None when it spent its whole budget.

    botocore reports its retries in ``ResponseMetadata`` (``RetryAttempts``, and ``MaxAttemptsReached``
    or ``RetryQuotaReached`` when it stopped for that reason). A connection error or timeout reaches the
    caller only after botocore retried it as far as its mode allows.
    """
    if not isinstance(error, ClientError):
        return None
    metadata: Mapping[str, Any] = error.response.get("ResponseMetadata", {})
    if metadata.get("MaxAttemptsReached") or metadata.get("RetryQuotaReached"):
        return None
    return int(metadata.get("RetryAttempts") or 0) + 1


def backoff_delay(attempt: int, base: float = 1.0, cap: float = 60.0) -> float:
    """Full-jitter exponential backoff (AWS Architecture Blog's), for loops that are not one call's
    retries (the List pass, the event queue's reads)."""
    return random.uniform(0, min(cap, base * (2 ** min(attempt, 16))))


@dataclass(frozen=True)
class Retry:
    """How far our layer retries a call, on top of botocore's retry mode.

    :param attempts: requests the logical call may make in all, botocore's retries included (None:
        tries until it succeeds — for waits that must never end on a transient error, where a deadline
        elsewhere bounds them).
    :param base: first backoff step of our layer, seconds (full jitter, doubling).
    :param cap: longest single backoff of our layer, seconds.
    """

    attempts: int | None = DEFAULT_MAX_ATTEMPTS
    base: float = 1.0
    cap: float = 20.0


#: Calls a worker or callback makes once (Create, Describe, Stop): the same budget as botocore's.
CALL = Retry(attempts=DEFAULT_MAX_ATTEMPTS, base=1.0, cap=20.0)


class _RequestBudget:
    """tenacity stop condition: the logical call has made ``attempts`` requests (one per call)."""

    def __init__(self, attempts: int) -> None:
        self.left = attempts

    def __call__(self, state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        made = requests_made(error) if error is not None else None
        self.left -= made if made is not None else self.left
        return self.left <= 0


def _controls(policy: Retry, what: str, retriable: Callable[[BaseException], bool]) -> dict[str, Any]:
    """The tenacity settings of one logical call (a fresh budget each time)."""
    stop: Callable[[RetryCallState], bool]
    if policy.attempts is None:
        retry, stop = retry_if_exception(retriable), stop_never
    else:
        # An error botocore gave up on is not retried again: that would multiply its budget.
        retry = retry_if_exception(lambda err: retriable(err) and requests_made(err) is not None)
        stop = _RequestBudget(policy.attempts)

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s failed transiently (%s); retry %d in %.1fs",
            what,
            _describe(error),
            state.attempt_number,
            delay,
        )

    return {
        "retry": retry,
        "stop": stop,
        "wait": wait_random_exponential(multiplier=policy.base, max=policy.cap),
        "before_sleep": before_sleep,
        "reraise": True,
    }


def retry_sync(
    call: Callable[[], T],
    what: str,
    policy: Retry = CALL,
    retriable: Callable[[BaseException], bool] = is_transient,
) -> T:
    """``call()`` until it succeeds, retrying what ``policy`` allows (see the module); others raised at once.

    :raises Exception: the first error not retried, or the last one when the budget is spent.
    """
    return Retrying(**_controls(policy, what, retriable))(call)


async def retry_async(
    call: Callable[[], Awaitable[T]],
    what: str,
    policy: Retry = CALL,
    retriable: Callable[[BaseException], bool] = is_transient,
) -> T:
    """Async twin of :func:`retry_sync` (the same settings, on tenacity's ``AsyncRetrying``)."""

    async def attempt() -> T:
        # tenacity awaits only what it recognises as a coroutine function; a lambda or a partial
        # returning an awaitable would be taken for a sync call.
        return await call()

    return await AsyncRetrying(**_controls(policy, what, retriable))(attempt)


def _describe(err: BaseException | None) -> str:
    return error_code(err) if isinstance(err, ClientError) else type(err).__name__
