"""A client of Airflow's REST API v2: health, DAG runs (trigger, read, fail), task instances, XComs, task
logs, and what a user does to a task in the UI (set its state).

By default it sends no credentials (a deployment where every request is an admin). Given a ``login``
(username, password) it signs in like Airflow's own clients do: ``POST /auth/token`` for a JWT, sent as
``Authorization: Bearer`` on every call, and signs in again when an answer says the token expired.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from collections.abc import Generator, Mapping
from datetime import datetime, timezone
from typing import Any

import httpx

from harness.errors import DeploymentError

#: Task-instance states in which a task is still looking after its SageMaker job.
ACTIVE_TI_STATES = frozenset(
    {"scheduled", "queued", "running", "deferred", "up_for_retry", "up_for_reschedule", "restarting"}
)
TERMINAL_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
TERMINAL_RUN_STATES = frozenset({"success", "failed"})


#: ``(username, password)`` of a user of the deployment's auth manager.
Login = tuple[str, str]
#: Where Airflow's auth manager hands out a JWT for a username and password (SimpleAuthManager, FAB, ...).
TOKEN_PATH = "/auth/token"


class BearerLogin(httpx.Auth):
    """httpx authentication: a JWT from ``POST /auth/token``, sent as ``Authorization: Bearer``.

    The token is fetched before the first request and again after a 401 (an expired token), once per
    request. A refused login raises :class:`DeploymentError` naming the user (never the password).
    """

    requires_response_body = True

    def __init__(self, token_url: str, login: Login) -> None:
        self.token_url = token_url
        self.username, self._password = login
        #: The current JWT (None until the first request signs in).
        self.token: str | None = None

    def token_request(self) -> httpx.Request:
        return httpx.Request(
            "POST",
            self.token_url,
            json={"username": self.username, "password": self._password},
            headers={"Accept": "application/json"},
        )

    def accept(self, response: httpx.Response) -> str:
        """Keep the token of a ``POST /auth/token`` answer; raise for a refused login."""
        if response.status_code >= 400:
            raise DeploymentError(
                f"POST {TOKEN_PATH} as {self.username!r} -> {response.status_code}: {response.text[:500]}"
            )
        self.token = str(response.json()["access_token"])
        return self.token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self.token is None:
            self.accept((yield self.token_request()))
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code == 401:
            self.accept((yield self.token_request()))
            request.headers["Authorization"] = f"Bearer {self.token}"
            yield request


class AirflowRestClient:
    """Calls to ``api_url`` (``http://127.0.0.1:PORT``); the HTTP connection opens on first use.

    :param login: ``(username, password)`` for a deployment that requires a login (see
        :class:`BearerLogin`); None (the default) sends no credentials.
    :param transport: an httpx transport instead of the network (tests pass ``httpx.MockTransport``).

    Every method raises :class:`DeploymentError` with the response's text on an error answer.
    """

    def __init__(
        self, api_url: str, login: Login | None = None, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.api_url = api_url
        self.login = login
        self._transport = transport
        self._auth = BearerLogin(api_url + TOKEN_PATH, login) if login is not None else None
        self._http: httpx.Client | None = None

    @property
    def http(self) -> httpx.Client:
        """The HTTP client every method uses (it signs in by itself when the client has a login)."""
        if self._http is None:
            self._http = httpx.Client(
                base_url=self.api_url,
                timeout=30.0,
                headers={"Accept": "application/json"},
                auth=self._auth,
                transport=self._transport,
            )
        return self._http

    def token(self) -> str:
        """A JWT for this client's user: what it sends as ``Bearer``, and what the UI keeps in its
        ``_token`` cookie. Without a login, the all-admins token (``GET /auth/token``)."""
        if self._auth is None:
            response = self.http.get(TOKEN_PATH)
            if response.status_code >= 400:
                raise DeploymentError(f"GET {TOKEN_PATH} -> {response.status_code}: {response.text[:500]}")
            return str(response.json()["access_token"])
        return self._auth.token or self._auth.accept(self.http.send(self._auth.token_request(), auth=None))

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def api(
        self, method: str, path: str, *, json_body: Any = None, params: Mapping[str, Any] | None = None
    ) -> Any:
        """One REST call; raises :class:`DeploymentError` with the response text on any non-2xx answer."""
        response = self.http.request(method, path, json=json_body, params=params)
        if response.status_code >= 400:
            raise DeploymentError(f"{method} {path} -> {response.status_code}: {response.text[:2000]}")
        return response.json() if response.content else None

    # -- deployment and DAGs ----------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self.api("GET", "/api/v2/monitor/health")
        return result

    def jobs(self, job_type: str, alive: bool | None = None) -> list[dict[str, Any]]:
        """Airflow's jobs of ``job_type`` (``TriggererJob``, ``SchedulerJob`` ...), newest heartbeat first;
        ``alive``: only those Airflow counts as alive (or dead), by their heartbeat."""
        params: dict[str, Any] = {"job_type": job_type, "limit": 100}
        if alive is not None:
            params["is_alive"] = alive
        jobs: list[dict[str, Any]] = self.api("GET", "/api/v2/jobs", params=params)["jobs"]
        return jobs

    def dag_parsed(self, dag_id: str) -> bool:
        """Whether the DAG processor has serialized ``dag_id`` (its details answer)."""
        return self.http.get(f"/api/v2/dags/{dag_id}/details").status_code == 200

    def import_errors(self) -> list[dict[str, Any]]:
        errors: list[dict[str, Any]] = self.api("GET", "/api/v2/importErrors").get("import_errors", [])
        return errors

    # -- DAG runs -----------------------------------------------------------------------------------------
    def trigger_dag(
        self,
        dag_id: str,
        conf: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        logical_date: datetime | str | None = "now",
    ) -> str:
        """Create a DAG run through ``POST /api/v2/dags/{dag_id}/dagRuns``; returns its run id.

        :param logical_date: a datetime, ``"now"`` (the default), or None for a run without a logical date
            (what Airflow 3's CLI and REST API create by default for manual runs).
        """
        if logical_date == "now":
            logical_date = datetime.now(timezone.utc)
        body: dict[str, Any] = {
            "conf": dict(conf or {}),
            "logical_date": logical_date.isoformat() if isinstance(logical_date, datetime) else None,
        }
        if run_id:
            body["dag_run_id"] = run_id
        result = self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", json_body=body)
        return str(result["dag_run_id"])

    def active_runs(self) -> list[dict[str, Any]]:
        """Every DAG run still queued or running, across all DAGs."""
        page = self.api(
            "GET", "/api/v2/dags/~/dagRuns", params={"state": ["queued", "running"], "limit": 100}
        )
        runs: list[dict[str, Any]] = page["dag_runs"]
        return runs

    def fail_active_runs(self) -> list[str]:
        """Mark every queued or running DAG run failed, as a user abandoning them would; returns their ids."""
        failed = []
        for run in self.active_runs():
            self.api(
                "PATCH",
                f"/api/v2/dags/{run['dag_id']}/dagRuns/{_q(run['dag_run_id'])}",
                json_body={"state": "failed"},
            )
            failed.append(f"{run['dag_id']}/{run['dag_run_id']}")
        return failed

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}")
        return result

    # -- task instances -----------------------------------------------------------------------------------
    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of a run, mapped ones included (one row per map index)."""
        rows: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = self.api(
                "GET",
                f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances",
                params={"limit": 100, "offset": offset},
            )
            rows.extend(page["task_instances"])
            offset += len(page["task_instances"])
            if not page["task_instances"] or offset >= page["total_entries"]:
                return rows

    def task_instance(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
        result: dict[str, Any] = self.api("GET", _ti_path(dag_id, run_id, task_id, map_index))
        return result

    def ti_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        """``{task_id: state}``, with ``task_id[i]`` keys for mapped task instances."""
        states: dict[str, str | None] = {}
        for ti in self.task_instances(dag_id, run_id):
            key = ti["task_id"] if ti["map_index"] < 0 else f"{ti['task_id']}[{ti['map_index']}]"
            states[key] = ti["state"]
        return states

    def set_task_state(
        self, dag_id: str, run_id: str, task_id: str, state: str = "failed", map_index: int = -1
    ) -> Any:
        """What a user does in the UI: ``PATCH .../taskInstances/{task_id}`` with ``new_state``."""
        return self.api("PATCH", _ti_path(dag_id, run_id, task_id, map_index), json_body={"new_state": state})

    def clear_task(self, dag_id: str, run_id: str, task_id: str, downstream: bool = True) -> Any:
        """What a user does with "Clear" on a task: ``POST /dags/{dag_id}/clearTaskInstances``."""
        body = {
            "dry_run": False,
            "dag_run_id": run_id,
            "task_ids": [task_id],
            "only_failed": False,
            "include_downstream": downstream,
            "reset_dag_runs": True,
        }
        return self.api("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances", json_body=body)

    # -- XComs and logs -----------------------------------------------------------------------------------
    def xcom(
        self, dag_id: str, run_id: str, task_id: str, key: str = "return_value", map_index: int = -1
    ) -> Any:
        """An XCom value through the REST API (deserialized); KeyError if absent."""
        response = self.http.get(
            f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/xcomEntries/{key}",
            params={"map_index": map_index, "deserialize": "true", "stringify": "false"},
        )
        if response.status_code == 404:
            raise KeyError(f"{dag_id}/{run_id}/{task_id}[{map_index}] has no XCom {key!r}")
        if response.status_code >= 400:
            raise DeploymentError(f"XCom {key} -> {response.status_code}: {response.text[:1000]}")
        value = response.json()["value"]
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return json.loads(value)
        return value

    def xcom_entries(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every XCom of a run, raw as the API lists them (``~`` task id lists all tasks)."""
        page = self.api(
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/~/xcomEntries",
            params={"limit": 1000},
        )
        entries: list[dict[str, Any]] = page["xcom_entries"]
        return entries

    def task_log(
        self, dag_id: str, run_id: str, task_id: str, try_number: int | None = None, map_index: int = -1
    ) -> str:
        """The task's log for one try (default: its latest), as text; trigger log lines included."""
        if try_number is None:
            try_number = max(1, int(self.task_instance(dag_id, run_id, task_id, map_index)["try_number"]))
        result = self.api(
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/logs/{try_number}",
            params={"map_index": map_index, "full_content": "true"},
        )
        return "\n".join(_log_line(entry) for entry in result.get("content") or [])

    def all_task_logs(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
        """Every try's log, oldest first."""
        tries = max(1, int(self.task_instance(dag_id, run_id, task_id, map_index)["try_number"]))
        return "\n".join(self.task_log(dag_id, run_id, task_id, n, map_index) for n in range(1, tries + 1))


def _q(run_id: str) -> str:
    return urllib.parse.quote(run_id, safe="")


def _ti_path(dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    path = f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}"
    return f"{path}/{map_index}" if map_index >= 0 else path


def _log_line(entry: Any) -> str:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, Mapping):
        rest = {k: v for k, v in entry.items() if k not in ("event", "timestamp")}
        extra = json.dumps(rest, default=str, ensure_ascii=False) if rest else ""
        return f"{entry.get('event', '')} {extra}".rstrip()
    return str(entry)
