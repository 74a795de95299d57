"""The one retry helper: transient errors are retried with backoff, anything else is raised at once."""

from __future__ import annotations

import asyncio

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from airflow_provider_sm_prefs.hooks.retry import (
    TRANSIENT_CODES,
    Retry,
    is_transient,
    retry_async,
    retry_sync,
)

FAST = Retry(attempts=4, base=0.001, cap=0.001)


def client_error(code: str, status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op"
    )


def flaky(failures: list[BaseException]) -> tuple[list[int], object]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "ok"

    return calls, call


def test_throttling_5xx_and_dropped_connections_are_retried_until_success() -> None:
    calls, call = flaky(
        [
            client_error("ThrottlingException"),
            client_error("Boom", 503),
            EndpointConnectionError(endpoint_url="x"),
        ]
    )
    assert retry_sync(call, "Describe j", FAST) == "ok"  # type: ignore[arg-type]
    assert len(calls) == 4


def test_a_non_transient_error_is_raised_at_once() -> None:
    calls, call = flaky([client_error("ValidationException")])
    with pytest.raises(ClientError, match="ValidationException"):
        retry_sync(call, "Create j", FAST)  # type: ignore[arg-type]
    assert len(calls) == 1


def test_the_last_transient_error_is_raised_when_the_policy_gives_up() -> None:
    calls, call = flaky([client_error("ThrottlingException") for _ in range(10)])
    with pytest.raises(ClientError, match="ThrottlingException"):
        retry_sync(call, "Stop j", FAST)  # type: ignore[arg-type]
    assert len(calls) == FAST.attempts


def test_the_async_twin_behaves_the_same() -> None:
    failures: list[BaseException] = [
        client_error("RequestLimitExceeded"),
        client_error("InternalFailure", 500),
    ]

    async def call() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    assert asyncio.run(retry_async(call, "List", FAST)) == "ok"
    assert not failures


def test_the_amazon_providers_retriable_codes_are_included() -> None:
    from airflow.providers.amazon.aws.utils.waiter_with_logging import RETRIABLE_ERROR_CODES

    assert set(RETRIABLE_ERROR_CODES) <= TRANSIENT_CODES
    assert is_transient(client_error("TooManyRequestsException")) and not is_transient(
        client_error("ResourceInUse")
    )
