"""Where the reconciler reads the owning task instance's state: the Task SDK inside a task, or the REST API.

:class:`TaskStateSource` is all the reconciler needs: the state of one task instance now (or that it is
gone) and the run ids of a task, to resolve a shortened ``sm-prefs:run-id`` tag. Two implementations:

* :class:`TaskSdkTaskStates`, inside a running task (the maintenance DAG's operator): the supervisor's
  channel, as Airflow 3's ``ExternalTaskSensor`` reads other tasks' states
  (``RuntimeTaskInstance.get_task_states`` and ``get_dr_count``, both in the Task SDK since Airflow
  3.0) and ``xcom_pull`` with ``dag_id``/``run_id`` for a succeeded task's ``return_value``;
* :class:`RestApiTaskStates`, for the command line: Airflow's public REST API v2 with a bearer token.

A state that cannot be read raises :class:`StateUnavailable`: the reconciler then keeps the job.
"""

from __future__ import annotations

import json
from typing import Any, Protocol
from urllib.parse import quote

from airflow_provider_sm_prefs.domain.reconcile import Gone, JobOwner, OwnerState

__all__ = ["RestApiTaskStates", "StateUnavailable", "TaskSdkTaskStates", "TaskStateSource"]

#: Job statuses after which a job no longer runs: a ``job_status`` among them is no hand-off.
_FINAL_JOB_STATUSES = frozenset({"Completed", "Failed", "Stopped"})


class StateUnavailable(Exception):
    """The owning task's state could not be read (the reconciler keeps the job)."""


class TaskStateSource(Protocol):
    """What the reconciler asks Airflow."""

    def task_state(self, owner: JobOwner, run_id: str, job_name: str) -> OwnerState | Gone:
        """The state now of ``owner``'s task instance in ``run_id`` (the resolved run id).

        :raises StateUnavailable: when it cannot be read.
        """

    def run_ids(self, dag_id: str, task_id: str) -> list[str]:
        """Every run id of ``dag_id`` that has ``task_id``.

        :raises StateUnavailable: when they cannot be read.
        """

    def variable(self, key: str) -> str | None:
        """An Airflow Variable's value (None when there is none): the HyperPod scale-up ledger.

        :raises StateUnavailable: when it cannot be read.
        """


def handed_off(job_name: str, returned: Any) -> bool:
    """Whether a succeeded task ended with ``job_name`` still running on purpose.

    ``returned`` is the task's ``return_value``: the operators return their outcome when the try ends,
    with ``job_status`` ``InProgress`` for ``wait_for_completion=False``. A task marked success while it
    waited returned nothing (the per-key ``job_status`` XCom is no proof: it is pushed at selection too,
    before a wait for completion).
    """
    outcome = _decoded(returned)
    if not isinstance(outcome, dict):
        return False
    status = outcome.get("job_status")
    return bool(status) and status not in _FINAL_JOB_STATUSES and outcome.get("job_name") == job_name


def _decoded(value: Any) -> Any:
    """An XCom value as stored: the REST API may answer its JSON serialization as a string."""
    for _ in range(2):
        if not isinstance(value, str):
            return value
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return value


class TaskSdkTaskStates:
    """States through the Task SDK of the running task ``ti`` (its supervisor's channel to the API server).

    ``get_task_states`` answers ``{run_id: {task_id or task_id_mapindex: state}}`` for the filters given;
    a task instance missing from it is gone, and ``get_dr_count`` tells a missing run from a missing task
    instance in the report. Both exist from Airflow 3.0 on; on a Task SDK without them every state is
    unavailable (jobs are kept) and the report says so.
    """

    def __init__(self, ti: Any) -> None:
        self.ti = ti

    @staticmethod
    def _runtime() -> Any:
        try:
            from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
        except ImportError as err:  # not inside a task of Airflow 3
            raise StateUnavailable(f"the Task SDK is not available here: {err}") from err
        for call in ("get_task_states", "get_dr_count"):
            if not hasattr(RuntimeTaskInstance, call):
                raise StateUnavailable(f"this Airflow's Task SDK has no RuntimeTaskInstance.{call}")
        return RuntimeTaskInstance

    def task_state(self, owner: JobOwner, run_id: str, job_name: str) -> OwnerState | Gone:
        runtime = self._runtime()
        try:
            states = runtime.get_task_states(
                dag_id=owner.dag_id, task_ids=[owner.task_id], run_ids=[run_id], map_index=owner.map_index
            )
        except Exception as err:
            raise StateUnavailable(f"get_task_states failed: {type(err).__name__}: {err}") from err
        key = owner.task_id if owner.map_index < 0 else f"{owner.task_id}_{owner.map_index}"
        run_states = (states or {}).get(run_id) or {}
        if key not in run_states:
            return Gone(self._missing(runtime, owner, run_id))
        raw = run_states[key]
        state = "none" if raw is None else str(getattr(raw, "value", raw))
        return OwnerState(
            state=state, handed_off=self._handed_off(owner, run_id, job_name) if state == "success" else None
        )

    @staticmethod
    def _missing(runtime: Any, owner: JobOwner, run_id: str) -> str:
        try:
            runs = runtime.get_dr_count(dag_id=owner.dag_id, run_ids=[run_id])
        except Exception as err:
            raise StateUnavailable(f"get_dr_count failed: {type(err).__name__}: {err}") from err
        if not runs:
            return f"no DAG run {run_id!r} of DAG {owner.dag_id!r} (the run or the DAG was deleted)"
        return f"no task instance {owner.task_id!r} (map index {owner.map_index}) in run {run_id!r}"

    def _handed_off(self, owner: JobOwner, run_id: str, job_name: str) -> bool | None:
        try:
            returned = self.ti.xcom_pull(
                task_ids=owner.task_id,
                dag_id=owner.dag_id,
                run_id=run_id,
                key="return_value",
                map_indexes=owner.map_index,
            )
        except Exception:  # unknown: the decision keeps the job
            return None
        return handed_off(job_name, returned)

    def run_ids(self, dag_id: str, task_id: str) -> list[str]:
        runtime = self._runtime()
        try:
            states = runtime.get_task_states(dag_id=dag_id, task_ids=[task_id])
        except Exception as err:
            raise StateUnavailable(f"get_task_states failed: {type(err).__name__}: {err}") from err
        return sorted(states or {})

    def variable(self, key: str) -> str | None:
        try:
            from airflow.sdk import Variable

            value = Variable.get(key, default=None)
        except Exception as err:
            raise StateUnavailable(f"Variable {key}: {type(err).__name__}: {err}") from err
        return None if value is None else str(value)


class RestApiTaskStates:
    """States through Airflow's public REST API v2.

    :param base_url: the API server's URL (``http://airflow.example.com:8080``).
    :param token: a JWT for ``Authorization: Bearer`` (``POST /auth/token`` of the API server).
    :param client: an ``httpx.Client`` to send requests with (default: a new one with ``timeout``).
    """

    def __init__(
        self, base_url: str, token: str | None = None, client: Any = None, timeout: float = 30.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        if client is None:
            import httpx

            client = httpx.Client(timeout=timeout)
        self.client = client

    def _get(self, path: str, **params: Any) -> Any:
        """The JSON answer of ``GET /api/v2<path>``; None for 404."""
        url = f"{self.base_url}/api/v2{path}"
        try:
            response = self.client.get(url, headers=self.headers, params=params or None)
        except Exception as err:
            raise StateUnavailable(f"GET {url}: {type(err).__name__}: {err}") from err
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise StateUnavailable(f"GET {url}: HTTP {response.status_code} {response.text[:200]}")
        return response.json()

    def check(self) -> str:
        """The API server's version; raises :class:`StateUnavailable` when the URL or token is wrong."""
        answer = self._get("/version")
        if not isinstance(answer, dict) or "version" not in answer:
            raise StateUnavailable(f"{self.base_url} does not answer as Airflow's REST API v2")
        # /version needs no login: prove the token too, or every answer later is a 401.
        self._get("/dags", limit=1)
        return str(answer["version"])

    def variable(self, key: str) -> str | None:
        """An Airflow Variable's value (None when there is none)."""
        found = self._get(f"/variables/{_q(key)}")
        value = (found or {}).get("value")
        return str(value).strip() or None if value is not None else None

    def task_state(self, owner: JobOwner, run_id: str, job_name: str) -> OwnerState | Gone:
        base = f"/dags/{_q(owner.dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(owner.task_id)}"
        found = self._get(base if owner.map_index < 0 else f"{base}/{owner.map_index}")
        if found is None:
            return Gone(self._missing(owner, run_id))
        state = found.get("state") or "none"
        try_number = found.get("try_number")
        handed = None
        if state == "success":
            returned = self._get(f"{base}/xcomEntries/return_value", map_index=owner.map_index)
            handed = handed_off(job_name, (returned or {}).get("value"))
        return OwnerState(
            state=str(state),
            try_number=try_number if isinstance(try_number, int) else None,
            handed_off=handed,
        )

    def _missing(self, owner: JobOwner, run_id: str) -> str:
        if self._get(f"/dags/{_q(owner.dag_id)}") is None:
            return f"no DAG {owner.dag_id!r} (deleted)"
        if self._get(f"/dags/{_q(owner.dag_id)}/dagRuns/{_q(run_id)}") is None:
            return f"no DAG run {run_id!r} of DAG {owner.dag_id!r} (deleted)"
        return f"no task instance {owner.task_id!r} (map index {owner.map_index}) in run {run_id!r}"

    def run_ids(self, dag_id: str, task_id: str) -> list[str]:
        found: list[str] = []
        offset, limit = 0, 100
        while True:
            page = self._get(f"/dags/{_q(dag_id)}/dagRuns", limit=limit, offset=offset)
            runs = (page or {}).get("dag_runs") or []
            found += [str(run["dag_run_id"]) for run in runs]
            offset += len(runs)
            if not runs or offset >= int((page or {}).get("total_entries") or 0):
                return found


def _q(segment: str) -> str:
    return quote(segment, safe="")
