"""One retry budget: botocore's standard mode under our single tenacity layer, never multiplied.

The emulator tests count real HTTP requests (the offline SageMaker's statistics) under its throttling
fault. botocore's backoff is made instant (:class:`Storm`) so no test waits or depends on the host's
speed: the counts are what the retry settings allow, whatever the timing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.retries.standard import ExponentialBackoff

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.hooks.logs import SageMakerJobLogsHook
from airflow_provider_sm_prefs.hooks.retry import (
    DEFAULT_MAX_ATTEMPTS,
    TRANSIENT_CODES,
    Retry,
    is_transient,
    retry_async,
    retry_sync,
    with_default_retries,
)
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger

FAST = Retry(attempts=4, base=0.001, cap=0.001)
FOREVER = Retry(attempts=None, base=0.001, cap=0.001)
DESCRIBE = "DescribeTrainingJob"


def client_error(code: str, status: int = 400, **metadata: Any) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": code},
            "ResponseMetadata": {"HTTPStatusCode": status, **metadata},
        },
        "Op",
    )


def flaky(failures: list[BaseException]) -> tuple[list[int], Any]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "ok"

    return calls, call


# -- our layer, without HTTP -------------------------------------------------------------------------
def test_a_wait_retries_throttling_5xx_and_dropped_connections_until_success() -> None:
    calls, call = flaky(
        [
            client_error("ThrottlingException", MaxAttemptsReached=True, RetryAttempts=9),
            client_error("Boom", 503, MaxAttemptsReached=True, RetryAttempts=9),
            EndpointConnectionError(endpoint_url="x"),
        ]
    )
    assert retry_sync(call, "Describe j", FOREVER) == "ok"
    assert len(calls) == 4


def test_a_non_transient_error_is_raised_at_once() -> None:
    calls, call = flaky([client_error("ValidationException")])
    with pytest.raises(ClientError, match="ValidationException"):
        retry_sync(call, "Create j", FAST)
    assert len(calls) == 1


def test_a_bounded_call_never_retries_what_botocore_gave_up_on() -> None:
    for spent in (
        client_error("ThrottlingException", MaxAttemptsReached=True, RetryAttempts=9),
        client_error("ThrottlingException", RetryQuotaReached=True, RetryAttempts=2),
        EndpointConnectionError(endpoint_url="x"),
    ):
        calls, call = flaky([spent])
        with pytest.raises(type(spent)):
            retry_sync(call, "Stop j", FAST)
        assert len(calls) == 1


def test_a_bounded_call_retries_what_botocore_does_not_within_one_shared_budget() -> None:
    # InternalError at HTTP 400: transient for us, not for botocore's standard mode (RetryAttempts 0).
    calls, call = flaky([client_error("InternalError") for _ in range(10)])
    with pytest.raises(ClientError, match="InternalError"):
        retry_sync(call, "Stop j", FAST)
    assert len(calls) == FAST.attempts
    # Requests botocore made inside a call count against the same budget: 2 + 2 = 4.
    calls, call = flaky([client_error("InternalError", RetryAttempts=1) for _ in range(10)])
    with pytest.raises(ClientError):
        retry_sync(call, "Stop j", FAST)
    assert len(calls) == 2


def test_the_async_twin_behaves_the_same() -> None:
    failures: list[BaseException] = [client_error("InternalError"), client_error("InternalError")]

    async def call() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    assert asyncio.run(retry_async(call, "List", FAST)) == "ok"
    assert not failures
    # A lambda or a partial returning an awaitable (as the hooks pass) is awaited too.
    failures.append(client_error("InternalError"))
    assert asyncio.run(retry_async(lambda: call(), "List", FAST)) == "ok"


def test_the_amazon_providers_retriable_codes_are_included() -> None:
    from airflow.providers.amazon.aws.utils.waiter_with_logging import RETRIABLE_ERROR_CODES

    assert set(RETRIABLE_ERROR_CODES) <= TRANSIENT_CODES
    assert is_transient(client_error("TooManyRequestsException")) and not is_transient(
        client_error("ResourceInUse")
    )


# -- botocore's retry mode ---------------------------------------------------------------------------
def test_the_default_mode_is_set_unless_the_user_chose_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_RETRY_MODE", raising=False)
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    default = {"mode": "standard", "total_max_attempts": DEFAULT_MAX_ATTEMPTS}
    assert with_default_retries(None).retries == default
    kept = with_default_retries(Config(read_timeout=7))
    assert kept.retries == default and kept.read_timeout == 7
    assert with_default_retries(Config(retries={"mode": "legacy"})).retries == {"mode": "legacy"}
    monkeypatch.setenv("AWS_RETRY_MODE", "adaptive")
    assert with_default_retries(None).retries is None  # botocore reads the environment


class Storm:
    """botocore's backoff, instant; after ``retries`` retries the emulator's throttling stops."""

    def __init__(self, sm: Any, retries: int | None = None) -> None:
        self.sm, self.retries, self.seen = sm, retries, 0

    def delay(self) -> float:
        self.seen += 1
        if self.retries is not None and self.seen == self.retries:
            self.sm.clear_faults()
        return 0.0


@pytest.fixture
def storm(sm: Any, monkeypatch: pytest.MonkeyPatch) -> Storm:
    """Persistent throttling of every SageMaker call, botocore's backoff instant."""
    monkeypatch.delenv("AWS_RETRY_MODE", raising=False)
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    s = Storm(sm)
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda _backoff, _context: s.delay())
    sm.set_faults(throttle_rate=1.0)
    return s


def requests(sm: Any, operation: str = DESCRIBE) -> int:
    return int(sm.stats()["operations"].get(operation, 0))


def test_persistent_throttling_costs_exactly_the_documented_requests_per_call(sm: Any, storm: Storm) -> None:
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    with pytest.raises(ClientError, match="ThrottlingException"):
        hook.describe_job(JobKind.TRAINING, "storm")
    assert requests(sm) == DEFAULT_MAX_ATTEMPTS  # legacy mode under 12 tries of our own: up to 60
    assert sm.stats()["throttled"][DESCRIBE] == DEFAULT_MAX_ATTEMPTS


def test_a_call_that_outlasts_a_short_storm_succeeds_within_botocores_retries(sm: Any, storm: Storm) -> None:
    storm.retries = 3
    assert SageMakerPreferenceHook(aws_conn_id="aws_default").describe_job(JobKind.TRAINING, "gone") is None
    assert requests(sm) == 4


def test_a_retry_mode_in_the_connection_wins(sm: Any, storm: Storm, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = json.loads(sm.airflow_env(conn_id="aws_mine")["AIRFLOW_CONN_AWS_MINE"])
    # botocore's max_attempts counts retries: 3 retries, 4 requests.
    conn.setdefault("extra", {})["config_kwargs"] = {"retries": {"mode": "standard", "max_attempts": 3}}
    monkeypatch.setenv("AIRFLOW_CONN_AWS_MINE", json.dumps(conn))
    hook = SageMakerPreferenceHook(aws_conn_id="aws_mine")
    with pytest.raises(ClientError, match="ThrottlingException"):
        hook.describe_job(JobKind.TRAINING, "storm")
    assert requests(sm) == 4


def test_a_retry_mode_in_the_tasks_botocore_config_wins(sm: Any, storm: Storm) -> None:
    hook = SageMakerPreferenceHook(
        aws_conn_id="aws_default", config={"retries": {"total_max_attempts": 2, "mode": "standard"}}
    )
    with pytest.raises(ClientError, match="ThrottlingException"):
        hook.describe_job(JobKind.TRAINING, "storm")
    assert requests(sm) == 2


def test_every_hook_and_the_triggers_async_client_get_the_mode(sm: Any) -> None:
    default = {"mode": "standard", "total_max_attempts": DEFAULT_MAX_ATTEMPTS}
    assert SageMakerPreferenceHook(aws_conn_id="aws_default").conn.meta.config.retries == default
    assert SageMakerJobLogsHook(aws_conn_id="aws_default").conn.meta.config.retries == default

    async def async_retries() -> Any:
        trigger = SageMakerCapacityTrigger(job_name="j", poll_interval=0.001)
        async with await trigger._open_client() as client:
            return client.meta.config.retries

    assert asyncio.run(async_retries()) == default


def test_the_triggers_wait_never_ends_on_a_storm_longer_than_botocores_budget(sm: Any, storm: Storm) -> None:
    """Two botocore budgets spent (2 x 10 requests), then the storm ends: the wait's Describe answers."""
    storm.retries = 2 * (DEFAULT_MAX_ATTEMPTS - 1) + 2
    trigger = SageMakerCapacityTrigger(job_name="gone", poll_interval=0.001, max_poll_interval=0.001)

    async def describe() -> Any:
        async with await trigger._open_client() as client:
            return await trigger._describe(client, JobKind.TRAINING, asyncio.Semaphore(1), 0.001, 0.001)

    assert asyncio.run(describe()) is None  # the job does not exist: the first answer after the storm
    assert sm.stats()["throttled"][DESCRIBE] == 2 * DEFAULT_MAX_ATTEMPTS + 2
    assert requests(sm) == 2 * DEFAULT_MAX_ATTEMPTS + 3
