"""Short sessions serve calls for half their life: botocore's refresh windows fitted to the session.

botocore renews assumed-role credentials 15 minutes (advisory) and 10 minutes (mandatory) before their
``Expiration``. A 15-minute session (``DurationSeconds`` 900, AssumeRole's minimum) is inside the advisory
window from the moment it is issued, so botocore renewed it on every call: one AssumeRole per SageMaker
call, in the operators and in the triggerer. The provider's hooks fit both windows to each session.

The emulator's clock runs in real time here (``time_scale`` 1): a 900 s session is reported to expire 900
host seconds later, as on AWS.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

import pytest
from botocore.credentials import RefreshableCredentials

from airflow_provider_sm_prefs.hooks.base import (
    ADVISORY_REFRESH_SECONDS,
    MANDATORY_REFRESH_SECONDS,
    fit_refresh_windows,
)
from airflow_provider_sm_prefs.hooks.pool import shared_client
from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings, SageMakerPreferenceHook
from tests.assumed_role import LIFETIME, assumed_role_connection

CALLS = 3
#: Real seconds between calls: STS reports ``Expiration`` in whole seconds, rounded up, so a session is
#: a fraction of a second longer than 900 s when issued and within botocore's window a second later.
APART = 1.2


def credentials(seconds_left: float) -> RefreshableCredentials:
    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds_left)
    metadata = {"access_key": "a", "secret_key": "s", "token": "t", "expiry_time": expiry.isoformat()}
    return RefreshableCredentials.create_from_metadata(metadata, lambda: metadata, "sts-assume-role")


def test_a_fifteen_minute_session_is_due_when_issued_unless_the_windows_are_fitted() -> None:
    fresh = credentials(LIFETIME)
    # botocore's own windows: a brand-new 15-minute session already needs renewing.
    assert fresh.refresh_needed(fresh._advisory_refresh_timeout)
    fit_refresh_windows(fresh, fresh._expiry_time)
    assert fresh._advisory_refresh_timeout == pytest.approx(LIFETIME / 2, abs=2)
    assert fresh._mandatory_refresh_timeout == pytest.approx(LIFETIME / 3, abs=2)
    assert not fresh.refresh_needed(fresh._advisory_refresh_timeout)


@pytest.mark.parametrize("hours", [1, 12])
def test_long_sessions_keep_botocores_windows(hours: int) -> None:
    long = credentials(hours * 3600)
    fit_refresh_windows(long, long._expiry_time)
    assert (long._advisory_refresh_timeout, long._mandatory_refresh_timeout) == (
        ADVISORY_REFRESH_SECONDS,
        MANDATORY_REFRESH_SECONDS,
    )


@pytest.mark.parametrize(
    "expiry", [None, "not a time", datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)]
)
def test_an_unreadable_or_past_expiry_changes_nothing(expiry: Any) -> None:
    fresh = credentials(LIFETIME)
    fit_refresh_windows(fresh, expiry)
    assert (fresh._advisory_refresh_timeout, fresh._mandatory_refresh_timeout) == (
        ADVISORY_REFRESH_SECONDS,
        MANDATORY_REFRESH_SECONDS,
    )


@pytest.fixture(params=[False, True], ids=["assume-role", "web-identity"])
def real_time_role(
    request: pytest.FixtureRequest, sm: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> Any:
    sm.load_scenario({"time_scale": 1})
    assumed_role_connection(sm, monkeypatch, tmp_path / "token" if request.param else None)
    return sm


def test_one_session_serves_the_sync_hooks_calls(real_time_role: Any) -> None:
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    for _ in range(CALLS):
        hook.conn.list_training_jobs()
        time.sleep(APART)
    settings = real_time_role.credential_settings()
    assert (settings["sessions"], settings["refused"]) == (1, {"expired": 0, "invalid": 0})


def test_one_session_serves_the_shared_async_clients_calls(real_time_role: Any) -> None:
    settings = AwsSettings()

    async def main() -> None:
        async with shared_client(settings.pool_key(), settings.hook().get_async_conn) as client:
            for _ in range(CALLS):
                await client.list_training_jobs()
                await asyncio.sleep(APART)
            await asyncio.gather(*(client.list_training_jobs() for _ in range(CALLS)))

    asyncio.run(main())
    settings = real_time_role.credential_settings()
    assert (settings["sessions"], settings["refused"]) == (1, {"expired": 0, "invalid": 0})
