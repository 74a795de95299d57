"""The local deployment's optional login: SimpleAuthManager settings, and a REST client that signs in."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from harness.config import (
    FAKE_ACCESS_KEY_ID,
    FAKE_SECRET_ACCESS_KEY,
    SECOND_CONN_ID,
    DeploymentConfig,
    connection_credentials,
)
from harness.errors import DeploymentError
from harness.rest import AirflowRestClient

API = "http://127.0.0.1:9"


class FakeAuthApi:
    """``POST /auth/token`` for one user; any other path wants a current token (``expired`` ones get 401)."""

    def __init__(self, username: str = "admin", password: str = "s3cret") -> None:
        self.credentials = {"username": username, "password": password}
        self.issued: list[str] = []
        self.expired: set[str] = set()
        self.seen: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            if request.method == "GET":
                return httpx.Response(201, json={"access_token": "all-admins"})
            if json.loads(request.content) != self.credentials:
                return httpx.Response(401, json={"detail": "Invalid credentials"})
            self.issued.append(f"jwt-{len(self.issued) + 1}")
            return httpx.Response(201, json={"access_token": self.issued[-1]})
        header = request.headers.get("Authorization")
        self.seen.append(header)
        token = header.removeprefix("Bearer ") if header else None
        if token not in self.issued or token in self.expired:
            return httpx.Response(401, json={"detail": "Not authenticated"})
        return httpx.Response(200, json={"metadatabase": {"status": "healthy"}})


def test_a_client_with_a_login_signs_in_once_and_again_when_its_token_expires() -> None:
    api = FakeAuthApi()
    client = AirflowRestClient(API, login=("admin", "s3cret"), transport=httpx.MockTransport(api))
    assert client.health()["metadatabase"]["status"] == "healthy"
    client.health()
    assert api.issued == ["jwt-1"]
    assert api.seen == ["Bearer jwt-1", "Bearer jwt-1"]
    api.expired.add("jwt-1")
    client.health()
    assert api.issued == ["jwt-1", "jwt-2"]
    assert api.seen[-2:] == ["Bearer jwt-1", "Bearer jwt-2"]
    # The same token for a browser's _token cookie, without signing in again.
    assert client.token() == "jwt-2"
    assert api.issued == ["jwt-1", "jwt-2"]


def test_a_refused_login_names_the_user_not_the_password() -> None:
    client = AirflowRestClient(API, login=("admin", "wrong"), transport=httpx.MockTransport(FakeAuthApi()))
    with pytest.raises(DeploymentError, match="admin") as raised:
        client.health()
    assert "wrong" not in str(raised.value)


def test_without_a_login_nothing_is_sent_and_the_token_is_the_all_admins_one() -> None:
    api = FakeAuthApi()
    client = AirflowRestClient(API, transport=httpx.MockTransport(api))
    with pytest.raises(DeploymentError, match="401"):
        client.health()
    assert api.seen == [None]
    assert client.token() == "all-admins"


def _env(config: DeploymentConfig) -> dict[str, str]:
    return config.airflow_env(emulator_url="http://127.0.0.1:1", region="us-east-1", database_env={})


def test_a_login_turns_off_all_admins_and_names_one_admin_with_its_password_file(tmp_path: Path) -> None:
    config = DeploymentConfig(root=tmp_path, api_port=8999, login=("admin", "s3cret"))
    env = _env(config)
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] == "False"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] == str(config.passwords_file)
    assert json.loads(config.passwords_json()) == {"admin": "s3cret"}
    assert "s3cret" not in json.dumps(env)


def test_by_default_everyone_is_an_admin(tmp_path: Path) -> None:
    env = _env(DeploymentConfig(root=tmp_path, api_port=8999))
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] == "True"
    assert "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS" not in env


@pytest.mark.parametrize("login", [("ad:min", "pw"), ("", "pw"), ("admin", "")])
def test_a_login_that_simple_auth_manager_cannot_hold_is_refused(
    tmp_path: Path, login: tuple[str, str]
) -> None:
    with pytest.raises(ValueError, match="login"):
        DeploymentConfig(root=tmp_path, api_port=8999, login=login)


def test_the_second_connection_has_real_looking_credentials_new_for_every_deployment(tmp_path: Path) -> None:
    config = DeploymentConfig(root=tmp_path, api_port=8999)
    first, again = _env(config), _env(config)
    creds = connection_credentials(first, SECOND_CONN_ID)
    assert re.fullmatch(r"AKIA[A-Z0-9]{16}", creds["aws_access_key_id"])
    assert re.fullmatch(r"[A-Za-z0-9+/]{40}", creds["aws_secret_access_key"])
    assert re.fullmatch(r"[A-Za-z0-9+/]{300,}={0,2}", creds["aws_session_token"])
    connection = json.loads(first[f"AIRFLOW_CONN_{SECOND_CONN_ID.upper()}"])
    assert connection["extra"]["endpoint_url"] == "http://127.0.0.1:1"
    # Nothing to hard-code: every deployment gets new ones.
    assert not set(creds.values()) & set(connection_credentials(again, SECOND_CONN_ID).values())
    # aws_default keeps its fixed fake credentials and has no session token.
    assert connection_credentials(first, "aws_default") == {
        "aws_access_key_id": FAKE_ACCESS_KEY_ID,
        "aws_secret_access_key": FAKE_SECRET_ACCESS_KEY,
    }
