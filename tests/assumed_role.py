"""A connection that assumes a role at the offline SageMaker's STS, for tests of expiring credentials."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROLE = "arn:aws:iam::123456789012:role/airflow-sm-prefs-waits"
LIFETIME = 900  # emulated seconds of one session (AssumeRole's minimum)


def assumed_role_connection(
    sm: Any, monkeypatch: pytest.MonkeyPatch, token_file: Path | None = None, conn_id: str = "aws_default"
) -> None:
    """``conn_id`` assumes :data:`ROLE` at the emulator's STS for every client the provider opens: with
    AssumeRole, or with AssumeRoleWithWebIdentity and the token in ``token_file`` when one is given.

    STS calls go to the connection's ``service_config.sts.endpoint_url`` (the amazon provider never
    sends them to the global ``endpoint_url``); the long-term keys only sign the AssumeRole calls.
    """
    env = sm.airflow_env(conn_id=conn_id)
    name = f"AIRFLOW_CONN_{conn_id.upper()}"
    connection = json.loads(env[name])
    connection["extra"].update(
        role_arn=ROLE,
        assume_role_method="assume_role",
        assume_role_kwargs={"DurationSeconds": LIFETIME},
        service_config={"sts": {"endpoint_url": sm.endpoint_url}},
    )
    if token_file is not None:
        token_file.write_text("header.eyJzdWIiOiAiYWlyZmxvdy13b3JrZXIifQ.signature")
        connection["extra"].update(
            assume_role_method="assume_role_with_web_identity",
            assume_role_with_web_identity_federation="file",
            assume_role_with_web_identity_token_file=str(token_file),
        )
    env[name] = json.dumps(connection)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
