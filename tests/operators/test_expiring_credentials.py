"""Waits that outlive their credentials: dag.test() runs on an assumed role whose sessions expire.

The connection assumes a role (``role_arn``, AssumeRole with ``DurationSeconds`` 900) at the offline
SageMaker's STS, so every call the provider makes, in the task and in the triggerer, is signed with
emulator-issued session credentials that expire on the emulated clock. The clock runs at 600x: a 15
minute session lasts 1.5 real seconds, and the emulator reports ``Expiration`` in host time, so botocore's
refresh (advisory 15 minutes, mandatory 10 minutes before the reported expiry) runs on every call. A
capacity wait of hours on the emulated clock therefore spans many sessions. The emulator counts the
sessions it issued and the requests it refused (``credential_settings()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.preferences import build_request
from tests.assumed_role import LIFETIME, ROLE, assumed_role_connection
from tests.clock import in_background
from tests.operators.test_dag_runs import logs, training_config

pytestmark = [pytest.mark.usefixtures("airflow_db"), pytest.mark.realclock]

G6 = "ml.g6.48xlarge"
TIME_SCALE = 600  # emulated seconds per real second: a session lasts 1.5 real seconds
SCARCE = 4 * 3600  # the only choice has no capacity for 4 emulated hours (24 real seconds) after load
PREFS = [{"instance_type": G6, "instance_count": 2}]


def scarce_then_free(seconds: int = SCARCE) -> dict[str, Any]:
    return {
        "time_scale": TIME_SCALE,
        "job_runtime_seconds": 600,
        "capacity": {G6: [{"from": 0, "to": seconds, "free": 0}, {"from": seconds, "free": 8}]},
    }


#: Scarce for 100 emulated hours (10 real minutes, far longer than a test): capacity frees when the test
#: moves the clock there.
UNTIL_FREED = 100 * 3600


@contextlib.contextmanager
def freed_after_pending(sm: Any, seconds: float = SCARCE) -> Iterator[None]:
    """Free the capacity of :func:`scarce_then_free` (``UNTIL_FREED``) once the job has been Pending
    ``seconds`` on the emulator's own clock: the wait spans that many emulated seconds however long a
    loaded host takes to reach CreateTrainingJob (a window counted from the scenario's load ran out
    before the job existed)."""

    def free(done: threading.Event) -> None:
        while not done.is_set() and not sm.jobs():
            done.wait(0.05)
        created = sm.clock()["elapsed"]
        while not done.is_set() and sm.clock()["elapsed"] < created + seconds:
            done.wait(0.1)
        if not done.is_set():
            sm.advance(max(0.0, UNTIL_FREED - sm.clock()["elapsed"]) + 1)

    with in_background(free):
        yield


def signed_with_sessions(sm: Any) -> set[str]:
    """The access keys SageMaker calls were signed with that are emulator-issued session keys."""
    return {key for key in sm.stats()["access_keys"] if key.startswith("ASIA")}


def report(name: str, sm: Any, started: float, xcom: dict[str, Any] | None) -> dict[str, Any]:
    settings = sm.credential_settings()
    numbers = {
        "test": name,
        "assume_role_sessions": settings["sessions"],
        "refused": settings["refused"],
        "session_keys_on_sagemaker_calls": len(signed_with_sessions(sm)),
        "long_term_key_calls": sum(sm.stats()["access_keys"].get("testing", {}).values()),
        "pending_seconds": None if xcom is None else xcom.get("pending_seconds"),
        "real_seconds": round(time.monotonic() - started, 1),
    }
    print("CREDS", json.dumps(numbers))
    return numbers


def assert_survived(numbers: dict[str, Any], xcom: dict[str, Any] | None) -> None:
    assert xcom is not None
    assert (xcom["selected_instance_type"], xcom["preference_rank"], xcom["fell_back"]) == (G6, 1, False)
    assert xcom["job_status"] == "InProgress" or xcom["job_status"] in ("Completed", "Training")
    # The wait spanned several sessions on the emulated clock, and the provider renewed them.
    assert xcom["pending_seconds"] >= 2 * LIFETIME
    assert numbers["assume_role_sessions"] > 1
    assert numbers["session_keys_on_sagemaker_calls"] > 1
    # Every SageMaker call was signed with a session, never with the long-term keys.
    assert numbers["long_term_key_calls"] == 0
    assert numbers["refused"]["invalid"] == 0


@pytest.fixture
def assume_role_calls(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One entry per AssumeRole the amazon provider makes: True when it ran on a thread whose asyncio
    event loop is running (it then held every wait of that loop for the length of the STS call)."""
    from airflow.providers.amazon.aws.hooks.base_aws import BaseSessionFactory
    from botocore.credentials import AssumeRoleWithWebIdentityCredentialFetcher as WebIdentity

    calls: list[bool] = []

    def recording(original: Any) -> Any:
        def call(self: Any) -> Any:
            try:
                asyncio.get_running_loop()
                calls.append(True)
            except RuntimeError:
                calls.append(False)
            return original(self)

        return call

    monkeypatch.setattr(
        BaseSessionFactory, "_refresh_credentials", recording(BaseSessionFactory._refresh_credentials)
    )
    monkeypatch.setattr(WebIdentity, "_get_credentials", recording(WebIdentity._get_credentials))
    return calls


@pytest.mark.parametrize(
    ("dag_id", "web_identity"),
    [("t_train_capacity", False), ("t_train_sync", False), ("t_train_capacity", True)],
    ids=["deferrable", "in-worker", "deferrable-web-identity"],
)
def test_capacity_wait_outlives_many_sessions(
    sm: Any,
    run_test_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    assume_role_calls: list[bool],
    tmp_path: Path,
    dag_id: str,
    web_identity: bool,
) -> None:
    """Deferrable (triggerer) and in-worker waits both renew their credentials for hours of waiting,
    and no renewal blocks the triggerer's event loop."""
    sm.load_scenario(scarce_then_free(UNTIL_FREED))
    assumed_role_connection(sm, monkeypatch, tmp_path / "web-identity-token" if web_identity else None)
    started = time.monotonic()
    with freed_after_pending(sm):
        states, xcom = run_test_dag(
            dag_id, config=training_config(), prefs=PREFS, max_pending=UNTIL_FREED + 20 * 3600
        )
    numbers = report(dag_id, sm, started, xcom)
    print("CREDS assume_role calls", len(assume_role_calls), "on the event loop", sum(assume_role_calls))
    assert states == {"job": "success", "consume": "success"}
    assert_survived(numbers, xcom)
    assert len(assume_role_calls) == numbers["assume_role_sessions"]
    assert not any(assume_role_calls), "AssumeRole ran on the event loop thread"


def test_sensor_wait_outlives_many_sessions(
    sm: Any, run_test_dag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm.load_scenario(scarce_then_free())
    assumed_role_connection(sm, monkeypatch)
    request, _ = build_request("training", training_config("external-creds"), PREFS, 12 * 3600)
    sm.boto3_client("sagemaker").create_training_job(**request)
    started = time.monotonic()
    states, xcom = run_test_dag("t_sensor", job_name="external-creds")
    numbers = report("t_sensor", sm, started, xcom)
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None and xcom["job_name"] == "external-creds"
    assert (xcom["selected_instance_type"], xcom["preference_rank"]) == (G6, 1)
    assert numbers["assume_role_sessions"] > 1
    assert numbers["refused"]["invalid"] == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dag_id", ["t_train_capacity", "t_train_sync"], ids=["deferrable", "in-worker"])
def test_revoked_role_fails_the_wait_naming_the_connection(
    sm: Any,
    run_test_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    dag_id: str,
) -> None:
    """The role is revoked while the job waits: once its session expires the wait fails, it never hangs,
    the error names the connection, and no secret is logged."""
    # Capacity comes after 8 emulated hours (48 real seconds): a task that did not fail on the revoked
    # role would succeed then.
    sm.load_scenario(scarce_then_free(8 * 3600))
    assumed_role_connection(sm, monkeypatch)
    capfd.readouterr()

    def revoke(done: threading.Event) -> None:
        # Mid-wait: the job exists, and the wait (in the trigger or the worker) has gone on for a few
        # sessions' lifetimes.
        while not done.is_set() and not sm.jobs():
            done.wait(0.05)
        done.wait(3)
        if not done.is_set():
            sm.revoke_role(ROLE)

    started = time.monotonic()
    with in_background(revoke):
        states, _ = run_test_dag(dag_id, config=training_config(), prefs=PREFS, max_pending=24 * 3600)
    out = logs(capfd) + caplog.text
    report(f"revoked-{dag_id}", sm, started, None)
    assert states["job"] == "failed"
    assert sm.credential_settings()["revoked_roles"] == [ROLE]
    # The failure names the connection and the role, and says what AWS answered.
    assert (
        f"AWS connection 'aws_default' could not renew its credentials for role {ROLE}: AccessDenied" in out
    )
    # No secret of any session in the log: neither a session token nor a secret key.
    assert "SecretAccessKey" not in out and "SessionToken" not in out
    assert not re.search(r"T2ZmbGluZVNhZ2VNYWtlcg[\w-]{20,}", out)
    assert sm.job("nightly")["status"] in ("InProgress", "Stopping", "Stopped")
