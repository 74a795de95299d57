"""STS at the emulator's endpoint: session credentials that expire on the emulated clock, through real boto3.

AssumeRole and AssumeRoleWithWebIdentity issue credentials valid for DurationSeconds *emulated* seconds;
once the clock passes that, every service refuses the token in its own protocol (SageMaker JSON:
``ExpiredTokenException``; SQS, JSON with awsQueryCompatible: ``ExpiredToken``; STS, query: ``ExpiredToken``).
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import boto3
import botocore.credentials
import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from emulator_support import frozen

from offline_sagemaker import OfflineSageMaker
from offline_sagemaker.sts import FROZEN_EXPIRATION_SECONDS, TOKEN_PREFIX

ROLE = "arn:aws:iam::123456789012:role/Pipelines"
NO_RETRY = Config(retries={"total_max_attempts": 1, "mode": "standard"})


@pytest.fixture
def world(emulator: OfflineSageMaker) -> OfflineSageMaker:
    emulator.load_scenario(frozen())
    return emulator


def _sts(world: OfflineSageMaker, **kwargs: Any) -> Any:
    return world.boto3_client("sts", config=kwargs.pop("config", NO_RETRY), **kwargs)


def _client(world: OfflineSageMaker, service: str, credentials: dict[str, Any], **kwargs: Any) -> Any:
    return boto3.client(
        service,
        endpoint_url=world.endpoint_url,
        region_name=world.region,
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        config=kwargs.pop("config", NO_RETRY),
        **kwargs,
    )


def _assume(world: OfflineSageMaker, duration: int | None = None, role: str = ROLE) -> dict[str, Any]:
    extra = {"DurationSeconds": duration} if duration is not None else {}
    answer = _sts(world).assume_role(RoleArn=role, RoleSessionName="nightly", **extra)
    credentials: dict[str, Any] = answer["Credentials"]
    return credentials


def _code(call: Any, **kwargs: Any) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as raised:
        call(**kwargs)
    error = raised.value.response
    return error["Error"]["Code"], error["Error"]["Message"], error["ResponseMetadata"]["HTTPStatusCode"]


def test_assume_role_then_sagemaker_and_sqs_until_the_emulated_expiry(world: OfflineSageMaker) -> None:
    credentials = _assume(world, duration=900)
    assert credentials["AccessKeyId"].startswith("ASIA")
    assert credentials["SessionToken"].startswith(TOKEN_PREFIX)
    sagemaker = _client(world, "sagemaker", credentials)
    sqs = _client(world, "sqs", credentials)
    sts = _client(world, "sts", credentials)
    assert sagemaker.list_training_jobs()["TrainingJobSummaries"] == []
    sqs.list_queues()
    identity = sts.get_caller_identity()
    assert identity["Arn"] == "arn:aws:sts::123456789012:assumed-role/Pipelines/nightly"
    assert identity["Account"] == "123456789012"

    world.advance(899)
    sagemaker.list_training_jobs()  # one second left
    world.advance(1)
    assert _code(sagemaker.list_training_jobs) == (
        "ExpiredTokenException",
        "The security token included in the request is expired",
        400,
    )
    # Other SageMaker operations (moto's) and the other services refuse it too, in their protocol.
    assert _code(sagemaker.list_models)[0] == "ExpiredTokenException"
    assert _code(sqs.list_queues)[0] == "ExpiredToken"
    assert _code(sts.get_caller_identity)[:2] == (
        "ExpiredToken",
        "The security token included in the request is expired",
    )
    assert _code(_client(world, "logs", credentials).describe_log_groups)[0] == "ExpiredTokenException"


def test_a_token_the_emulator_did_not_issue_is_invalid(world: OfflineSageMaker) -> None:
    forged = {
        "AccessKeyId": "ASIAFORGED0000000000",
        "SecretAccessKey": "s" * 40,
        "SessionToken": TOKEN_PREFIX + "x",
    }
    assert _code(_client(world, "sagemaker", forged).list_training_jobs) == (
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
        400,
    )
    assert _code(_client(world, "sqs", forged).list_queues)[0] == "InvalidClientTokenId"
    assert _code(_client(world, "sts", forged).get_caller_identity)[:2] == (
        "InvalidClientTokenId",
        "The security token included in the request is invalid.",
    )
    # A reset forgets the sessions issued before it.
    credentials = _assume(world)
    world.reset()
    assert (
        _code(_client(world, "sagemaker", credentials).list_training_jobs)[0] == "UnrecognizedClientException"
    )


def test_foreign_tokens_pass_unless_rejected(world: OfflineSageMaker) -> None:
    foreign = {
        "AccessKeyId": "ASIAFOREIGN000000000",
        "SecretAccessKey": "s" * 40,
        "SessionToken": "IQoJb3JpZ2luX2Vj",
    }
    sagemaker = _client(world, "sagemaker", foreign)
    sagemaker.list_training_jobs()
    assert world.set_credentials(reject_unknown_tokens=True)["reject_unknown_tokens"] is True
    assert _code(sagemaker.list_training_jobs)[0] == "UnrecognizedClientException"
    world.reset()
    sagemaker.list_training_jobs()


def test_long_term_keys_work_as_before(world: OfflineSageMaker) -> None:
    world.set_credentials(reject_unknown_tokens=True)
    world.advance(100_000)
    world.boto3_client("sagemaker").list_training_jobs()
    world.boto3_client("sqs").list_queues()
    assert world.boto3_client("sts").get_caller_identity()["Account"] == "123456789012"


@pytest.mark.parametrize(
    ("duration", "constraint"),
    [
        (899, "Member must have value greater than or equal to 900"),
        (43201, "Member must have value less than or equal to 43200"),
    ],
)
def test_duration_out_of_range_is_a_validation_error(
    world: OfflineSageMaker, duration: int, constraint: str
) -> None:
    sts = _sts(world, config=Config(parameter_validation=False, retries={"total_max_attempts": 1}))
    code, message, status = _code(
        sts.assume_role, RoleArn=ROLE, RoleSessionName="s1", DurationSeconds=duration
    )
    assert (code, status) == ("ValidationError", 400)
    assert message == (
        f"1 validation error detected: Value '{duration}' at 'durationSeconds' failed to satisfy constraint: "
        f"{constraint}"
    )
    assert _assume(world, duration=43200)["AccessKeyId"].startswith("ASIA")


def test_role_chaining_is_limited_to_one_hour(world: OfflineSageMaker) -> None:
    chained = _client(world, "sts", _assume(world))
    code, message, _ = _code(chained.assume_role, RoleArn=ROLE, RoleSessionName="s2", DurationSeconds=3601)
    assert code == "ValidationError"
    assert "1 hour session limit for roles assumed by role chaining" in message
    chained.assume_role(RoleArn=ROLE, RoleSessionName="s2", DurationSeconds=3600)


def test_expiration_is_in_host_time_scaled(emulator: OfflineSageMaker) -> None:
    emulator.load_scenario(frozen(time_scale=60))
    before = datetime.datetime.now(datetime.timezone.utc)
    expiration = _assume(emulator, duration=3600)["Expiration"]
    after = datetime.datetime.now(datetime.timezone.utc)
    # 3600 emulated seconds at 60 emulated seconds per real second: one real minute.
    assert before + datetime.timedelta(seconds=58) <= expiration <= after + datetime.timedelta(seconds=61)


def test_expiration_on_a_frozen_clock_is_far_in_host_time(world: OfflineSageMaker) -> None:
    expiration = _assume(world, duration=900)["Expiration"]
    now = datetime.datetime.now(datetime.timezone.utc)
    assert expiration >= now + datetime.timedelta(seconds=FROZEN_EXPIRATION_SECONDS - 60)


def test_a_skew_expires_sessions_before_their_reported_expiration(world: OfflineSageMaker) -> None:
    """AWS's clock ahead of the host's: the token is refused as expired while its reported ``Expiration``
    (what botocore trusts; a year ahead on the frozen clock) is still far off."""
    credentials = _assume(world, duration=3600)
    sagemaker, sqs, sts = (_client(world, name, credentials) for name in ("sagemaker", "sqs", "sts"))
    world.advance(1000)
    sagemaker.list_training_jobs()
    assert world.credential_settings()["skew_seconds"] == 0
    # 2599 seconds of skew on a one-hour session 1000 seconds old: one second left.
    world.set_credentials(skew_seconds=2599)
    sagemaker.list_training_jobs()
    # Sessions issued before the skew was set are judged by it too.
    assert world.set_credentials(skew_seconds=2600)["skew_seconds"] == 2600
    assert _code(sagemaker.list_training_jobs)[0] == "ExpiredTokenException"
    assert _code(sqs.list_queues)[0] == "ExpiredToken"
    assert _code(sts.get_caller_identity)[0] == "ExpiredToken"
    assert credentials["Expiration"] > datetime.datetime.now(datetime.timezone.utc)
    assert world.credential_settings()["refused"]["expired"] == 3
    # A session issued now lasts its duration less the skew.
    fresh = _client(world, "sagemaker", _assume(world, duration=3600))
    world.advance(999)
    fresh.list_training_jobs()
    world.advance(1)
    assert _code(fresh.list_training_jobs)[0] == "ExpiredTokenException"
    # A reset clears it.
    world.reset()
    assert world.credential_settings()["skew_seconds"] == 0


def test_a_skew_leaves_the_reported_expiration_as_it_was(emulator: OfflineSageMaker) -> None:
    emulator.load_scenario(frozen(time_scale=60))
    emulator.set_credentials(skew_seconds=3000)
    before = datetime.datetime.now(datetime.timezone.utc)
    expiration = _assume(emulator, duration=3600)["Expiration"]
    after = datetime.datetime.now(datetime.timezone.utc)
    assert before + datetime.timedelta(seconds=58) <= expiration <= after + datetime.timedelta(seconds=61)


def test_skew_must_be_a_non_negative_number(world: OfflineSageMaker) -> None:
    for bad in (-1, "60", True):
        with pytest.raises(ValueError, match="skew_seconds: must be a number of seconds >= 0"):
            world.set_credentials(skew_seconds=bad)  # type: ignore[arg-type]
    assert world.credential_settings()["skew_seconds"] == 0


def test_web_identity_needs_no_signature(world: OfflineSageMaker) -> None:
    session = botocore.session.get_session()
    sts = session.create_client(
        "sts",
        endpoint_url=world.endpoint_url,
        region_name=world.region,
        config=Config(signature_version=botocore.UNSIGNED, retries={"total_max_attempts": 1}),
    )
    jwt = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YWlyZmxvdyJ9.sig"
    answer = sts.assume_role_with_web_identity(
        RoleArn=ROLE, RoleSessionName="pod", WebIdentityToken=jwt, DurationSeconds=900
    )
    assert answer["SubjectFromWebIdentityToken"] == "system:serviceaccount:airflow"
    assert answer["AssumedRoleUser"]["Arn"] == "arn:aws:sts::123456789012:assumed-role/Pipelines/pod"
    sagemaker = _client(world, "sagemaker", answer["Credentials"])
    sagemaker.list_training_jobs()
    world.advance(900)
    assert _code(sagemaker.list_training_jobs)[0] == "ExpiredTokenException"


def test_a_revoked_role_cannot_be_assumed(world: OfflineSageMaker) -> None:
    issued = _assume(world)
    settings = world.revoke_role(ROLE)
    assert settings["revoked_roles"] == [ROLE]
    code, message, status = _code(_sts(world).assume_role, RoleArn=ROLE, RoleSessionName="again")
    assert (code, status) == ("AccessDenied", 403)
    assert ROLE in message
    # Credentials issued before stay valid until they expire; other roles are not affected.
    _client(world, "sagemaker", issued).list_training_jobs()
    _assume(world, role="arn:aws:iam::123456789012:role/Other")
    assert world.set_credentials(revoked_roles=[])["revoked_roles"] == []
    _assume(world)


def test_refreshable_credentials_renew_after_expiry(emulator: OfflineSageMaker) -> None:
    # 900 emulated seconds per real second: 900-second credentials last one real second.
    emulator.load_scenario(frozen(time_scale=900))
    sts = _sts(emulator)
    issued: list[dict[str, Any]] = []

    def refresh() -> dict[str, Any]:
        credentials = sts.assume_role(RoleArn=ROLE, RoleSessionName="refresh", DurationSeconds=900)[
            "Credentials"
        ]
        issued.append(credentials)
        return {
            "access_key": credentials["AccessKeyId"],
            "secret_key": credentials["SecretAccessKey"],
            "token": credentials["SessionToken"],
            "expiry_time": credentials["Expiration"].isoformat(),
        }

    refreshable = botocore.credentials.RefreshableCredentials.create_from_metadata(
        metadata=refresh(), refresh_using=refresh, method="sts-assume-role"
    )
    session = botocore.session.get_session()
    session._credentials = refreshable
    sagemaker = session.create_client(
        "sagemaker", endpoint_url=emulator.endpoint_url, region_name=emulator.region, config=NO_RETRY
    )
    first = issued[0]
    time.sleep(1.2)  # > 900 emulated seconds
    stale = _client(emulator, "sagemaker", first)
    assert _code(stale.list_training_jobs)[0] == "ExpiredTokenException"
    sagemaker.list_training_jobs()
    assert len(issued) >= 2
    assert issued[-1]["SessionToken"] != first["SessionToken"]


def test_assume_role_provider_profile_refreshes(
    emulator: OfflineSageMaker, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A boto3 profile with ``role_arn``: botocore's AssumeRoleProvider fetches and renews the credentials."""
    emulator.load_scenario(frozen(time_scale=900))
    config = tmp_path / "config"
    config.write_text(
        f"[profile base]\naws_access_key_id = testing\naws_secret_access_key = testing\n"
        f"[profile pipelines]\nrole_arn = {ROLE}\nsource_profile = base\nduration_seconds = 900\n"
        f"endpoint_url = {emulator.endpoint_url}\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    session = boto3.session.Session(profile_name="pipelines", region_name=emulator.region)
    sagemaker = session.client("sagemaker", endpoint_url=emulator.endpoint_url, config=NO_RETRY)
    sagemaker.list_training_jobs()
    before = emulator.credential_settings()["sessions"]
    assert before >= 1
    time.sleep(1.2)
    sagemaker.list_training_jobs()
    assert emulator.credential_settings()["sessions"] > before


def test_admin_route_rejects_unknown_settings(world: OfflineSageMaker) -> None:
    with pytest.raises(ValueError, match="unknown credential setting"):
        world._call("POST", "credentials", {"revoke": [ROLE]})
    with pytest.raises(ValueError, match="revoked_roles"):
        world.set_credentials(revoked_roles=ROLE)  # type: ignore[arg-type]
