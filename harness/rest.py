"""A client of Airflow's REST API v2 for a deployment without login: health, DAG runs (trigger, read,
fail), task instances, XComs, task logs, and what a user does to a task in the UI (set its state).
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from harness.errors import DeploymentError

#: Task-instance states in which a task is still looking after its SageMaker job.
ACTIVE_TI_STATES = frozenset(
    {"scheduled", "queued", "running", "deferred", "up_for_retry", "up_for_reschedule", "restarting"}
)
TERMINAL_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
TERMINAL_RUN_STATES = frozenset({"success", "failed"})


class AirflowRestClient:
    """Calls to ``api_url`` (``http://127.0.0.1:PORT``); the HTTP connection opens on first use.

    Every method raises :class:`DeploymentError` with the response's text on an error answer.
    """

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url
        self._http: httpx.Client | None = None

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(
                base_url=self.api_url, timeout=30.0, headers={"Accept": "application/json"}
            )
        return self._http

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
            logical_date = datetime.now(UTC)
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
