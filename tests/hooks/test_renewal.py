"""Clock skew on assumed-role credentials: a token AWS refuses as expired while botocore takes it for fresh.

Real boto3 and aiobotocore clients from the provider's hooks, assuming a role at the offline SageMaker's
STS, over HTTP. The emulated clock is frozen, so botocore, reading ``Expiration`` on the host's clock, never
renews by itself; the emulator's skew (``set_credentials(skew_seconds=...)``) expires sessions before their
reported ``Expiration``, and the test moves the clock when the code under test has made its first call.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.hooks.base import AwsCredentialsError
from airflow_provider_sm_prefs.hooks.pool import DESCRIBE_CONCURRENCY, shared_client
from airflow_provider_sm_prefs.hooks.renewal import AwsTokenExpiredError
from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings, SageMakerPreferenceHook
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger
from offline_sagemaker.jobs import training_config
from tests.assumed_role import LIFETIME, ROLE, assumed_role_connection
from tests.clock import advancing_once_served

G6 = "ml.g6.48xlarge"
PREFS = [{"instance_type": G6, "instance_count": 2}]
SKEW = 600  # emulated seconds by which AWS's clock is ahead of the host's
LATER = LIFETIME - SKEW  # emulated seconds after which a session is refused, though reported fresh
TOKEN = re.compile(r"T2ZmbGluZVNhZ2VNYWtlcg[\w-]{20,}")


def frozen(capacity_from: int = 0) -> dict[str, Any]:
    """A frozen clock; G6 has capacity from ``capacity_from`` emulated seconds on."""
    windows = [{"from": capacity_from, "free": 8}]
    if capacity_from:
        windows.insert(0, {"from": 0, "to": capacity_from, "free": 0})
    return {"time_scale": 0, "capacity": {G6: windows}}


def submit(sm: Any, name: str) -> None:
    request, _ = build_request("training", training_config(name, max_runtime_seconds=86400), PREFS, 86400)
    sm.boto3_client("sagemaker").create_training_job(**request)


def sessions(sm: Any) -> int:
    return int(sm.credential_settings()["sessions"])


def refused(sm: Any) -> int:
    return int(sm.credential_settings()["refused"]["expired"])


@pytest.fixture
def assumed(sm: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    sm.load_scenario(frozen())
    assumed_role_connection(sm, monkeypatch)
    return sm


def test_sync_hook_renews_a_token_refused_before_its_reported_expiry(assumed: Any) -> None:
    submit(assumed, "skewed")
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    assert hook.describe_job(JobKind.TRAINING, "skewed") is not None
    assert sessions(assumed) == 1
    assumed.set_credentials(skew_seconds=SKEW)
    assumed.advance(LATER)
    # botocore takes the session for fresh (its Expiration is a year ahead); AWS refuses it as expired.
    described = hook.describe_job(JobKind.TRAINING, "skewed")
    assert described is not None and described["TrainingJobName"] == "skewed"
    assert (refused(assumed), sessions(assumed)) == (1, 2)
    # The renewed session serves the calls after it, without another renewal.
    hook.describe_job(JobKind.TRAINING, "skewed")
    hook.conn.list_training_jobs()
    assert (refused(assumed), sessions(assumed)) == (1, 2)


def test_a_second_refusal_right_after_the_renewal_names_the_connection(
    assumed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    hook.conn.list_training_jobs()
    # AWS's clock a whole session ahead: even a brand-new session is refused.
    assumed.set_credentials(skew_seconds=LIFETIME)
    with pytest.raises(AwsTokenExpiredError) as raised:
        hook.conn.list_training_jobs()
    message = str(raised.value)
    assert message.startswith(
        f"AWS connection 'aws_default' (role {ROLE}): ListTrainingJobs was refused with ExpiredTokenException"
    )
    assert "right after the connection's credentials were renewed" in message
    assert "clock" in message
    # Renewed once, refused twice, then raised: no loop of renewals.
    assert (refused(assumed), sessions(assumed)) == (2, 2)
    assert not TOKEN.search(message + caplog.text)
    assert "SecretAccessKey" not in message + caplog.text
    # The next call is a new call: renewed once more, and raised again.
    with pytest.raises(AwsTokenExpiredError):
        hook.conn.list_training_jobs()
    assert (refused(assumed), sessions(assumed)) == (4, 3)


def test_credentials_that_cannot_be_renewed_fail_as_before(assumed: Any) -> None:
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    hook.conn.list_training_jobs()
    assumed.revoke_role(ROLE)
    assumed.set_credentials(skew_seconds=SKEW)
    assumed.advance(LATER)
    with pytest.raises(AwsCredentialsError, match="could not renew its credentials for role .*AccessDenied"):
        hook.conn.list_training_jobs()
    assert sessions(assumed) == 1


def trigger(name: str) -> SageMakerCapacityTrigger:
    return SageMakerCapacityTrigger(job_name=name, preferences=PREFS, poll_interval=0.2)


async def first_event(t: SageMakerCapacityTrigger) -> dict[str, Any]:
    async for event in t.run():
        return dict(event.payload)
    raise AssertionError("no event")


def test_waiting_triggers_renew_a_refused_token_and_get_their_capacity(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waits share one aiobotocore client, whose session AWS refuses mid-wait: it is renewed (once, as
    the waits' calls come one after another or together) and the waits end on their capacity."""
    # Capacity comes at LATER, when the skew makes the session issued at 0 expire.
    sm.load_scenario(frozen(capacity_from=LATER))
    assumed_role_connection(sm, monkeypatch)
    names = [f"shared-{i}" for i in range(4)]
    for name in names:
        submit(sm, name)
    sm.set_credentials(skew_seconds=SKEW)

    async def main() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(first_event(trigger(name)) for name in names)))

    # The waits have looked at their jobs (Pending) with the session issued when their client opened.
    with advancing_once_served(sm, "DescribeTrainingJob", LATER):
        events = asyncio.run(main())
    assert [e["status"] for e in events] == ["success"] * len(names)
    assert {e["outcome"]["selected_instance_type"] for e in events} == {G6}
    assert refused(sm) >= 1
    assert sessions(sm) == 2


def test_trigger_fails_naming_the_connection_when_the_renewed_token_is_refused_too(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm.load_scenario(frozen(capacity_from=LATER))
    assumed_role_connection(sm, monkeypatch)
    submit(sm, "refused")
    sm.set_credentials(skew_seconds=LIFETIME)
    with pytest.raises(AwsTokenExpiredError, match="AWS connection 'aws_default' .*DescribeTrainingJob"):
        asyncio.run(first_event(trigger("refused")))
    assert (refused(sm), sessions(sm)) == (2, 2)


def test_calls_refused_together_on_a_shared_client_renew_it_once(
    assumed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls signed with the same session and refused together: the first renews, the others find the
    credentials renewed since they were signed and only send their request again."""
    names = [f"together-{i}" for i in range(DESCRIBE_CONCURRENCY)]
    for name in names:
        submit(assumed, name)
    settings = AwsSettings()

    async def main() -> list[dict[str, Any] | None]:
        connection = shared_client(settings.pool_key(), settings.hook().get_async_conn)
        async with connection as client:
            await client.list_training_jobs()
            await asyncio.to_thread(assumed.set_credentials, skew_seconds=SKEW)
            await asyncio.to_thread(assumed.advance, LATER)
            # Each call is signed before any of them waits on the network: all with the first session.
            return list(
                await asyncio.gather(
                    *(SageMakerPreferenceHook.describe_job_async(client, JobKind.TRAINING, n) for n in names)
                )
            )

    described = asyncio.run(main())
    assert [d["TrainingJobName"] if d else None for d in described] == names
    assert (refused(assumed), sessions(assumed)) == (len(names), 2)
