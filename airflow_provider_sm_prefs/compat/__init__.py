"""Every difference between the Airflow 3 minors the provider runs on (3.0 to 3.3), in one place.

The rest of the package imports the names below (and the capacity page's login from :mod:`.page`, which
only the api-server loads) and never asks which Airflow it runs on. Where
``apache-airflow-providers-common-compat`` already offers a shim it is used; the rest is here:

=================================  ==========================================  ===========================
mechanism                          3.3                                         before
=================================  ==========================================  ===========================
exceptions, ``Context``, metrics   ``airflow.sdk``                             common-compat's ``sdk`` shim
task state store (job state)       ``context["task_state_store"]``             one Airflow Variable per
                                                                               task instance
                                                                               (:class:`VariableStateStore`)
``BaseTrigger.on_kill``            called by the triggerer                     the trigger runs the same
                                                                               code when its ``run`` is
                                                                               cancelled (:data:`TRIGGER_ON_KILL`)
UI links to the capacity page      ``external_views`` (3.1+)                   none: by URL and extra link
page login (:mod:`.page`)          the api-server's ``get_user`` (3.1+)        the UI's token, read from
                                                                               the header or a page cookie
                                                                               (3.0)
an XCom whose value is None        stored (3.1+)                               not pushed: 3.0's execution
                                                                               API refuses it; a pull
                                                                               reads None all the same
a trigger that ends its task       ``TaskFailedEvent`` goes to up_for_retry    always failed, retries or
(``TaskSuccessEvent`` with XComs)  when a retry remains (3.3)                  not: the provider ends a
                                                                               task failed in the
                                                                               triggerer only when no
                                                                               retry remains, on every
                                                                               minor
XComs a trigger stores for its     sent together (``XCom.aset``)               one after the other, in a
task (``triggers/finish.py``)                                                  thread
=================================  ==========================================  ===========================

docs/compatibility.md is the user's side of this table: what each minor gives and what it loses.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from airflow.providers.common.compat.sdk import (
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
    Stats,
    TaskDeferred,
)
from airflow.providers.common.compat.version_compat import (
    AIRFLOW_V_3_1_PLUS,
    AIRFLOW_V_3_2_PLUS,
    AIRFLOW_V_3_3_PLUS,
)

from airflow_provider_sm_prefs.domain.job_state import STATE_KEY, JobStateStore

__all__ = [
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "EXTERNAL_VIEWS",
    "TRIGGER_ON_KILL",
    "AirflowFailException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "Stats",
    "TaskDeferred",
    "VariableStateStore",
    "runs_triggers_inline",
    "set_variable",
    "variable_key",
    "xcom_push",
]

log = logging.getLogger(__name__)

#: Whether the triggerer calls ``BaseTrigger.on_kill`` (Airflow 3.3). Before, a trigger runs its kill
#: path itself when the triggerer cancels its ``run`` (the task was marked, cleared, or moved).
TRIGGER_ON_KILL = AIRFLOW_V_3_3_PLUS

#: Whether plugins can add ``external_views`` (nav, DAG and task tabs) to the UI (Airflow 3.1).
EXTERNAL_VIEWS = AIRFLOW_V_3_1_PLUS

#: Whether the execution API stores an XCom whose value is None. Airflow 3.0's answers 422 ("Field
#: required": the Task SDK sends no body), which would fail the task after its job was selected.
NULL_XCOM = AIRFLOW_V_3_1_PLUS


def runs_triggers_inline() -> bool:
    """Whether this task runs in process with its triggers (``dag.test()``, ``airflow tasks test``).

    There the trigger runs inline and its event resumes the task whatever the event is: an event that
    ends the task (``TaskSuccessEvent``) would reach the task as the bare word ``success``, its XComs
    lost. Every minor 3.0 to 3.3 runs such tasks with the Task SDK's in-process supervisor.
    """
    try:
        from airflow.sdk.execution_time import task_runner
    except ImportError:  # pragma: no cover - the Task SDK ships with every Airflow 3
        return False
    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    return type(comms).__name__ == "InProcessSupervisorComms"


def xcom_push(ti: Any, key: str, value: Any) -> None:
    """``ti.xcom_push(key, value)``; where Airflow cannot store None, a None value is not pushed.

    A pull of a key never pushed returns None, so a reader sees the same value on every minor; only the
    key's row is missing from the XCom list of the UI and the REST API.
    """
    if value is None and not NULL_XCOM:
        return
    ti.xcom_push(key=key, value=value)


def variable_key(dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    """The Variable that keeps one task instance's job state where Airflow has no task state store.

    ``sm_prefs_job.<dag_id>.<digest>``: the digest (of DAG, task, map index and run) keeps the key within
    the characters the Task SDK's variable route takes (no ``/``) and within 250 characters; the DAG id
    lets a user find a DAG's entries, and the Variable's description names the task instance.
    """
    identity = "\n".join((dag_id, task_id, str(map_index), run_id))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:32]
    return f"{STATE_KEY}.{dag_id[:200]}.{digest}"


class VariableStateStore:
    """A task instance's key-value state in one Airflow Variable (Airflow 3.0 to 3.2).

    The task state store of Airflow 3.3 keeps the job state across a task's tries and clears; before 3.3
    a Variable does, read and written through the Task SDK (task process, triggerer and DAG processor
    all serve it). It holds the job name, ARN and submission bookkeeping, never credentials. A failed
    write raises: submit-once must not go on believing the name is recorded when it is not.

    Reads go through the public ``Variable.get``. Writes call the Task SDK's ``_set_variable``, what
    ``Variable.set`` calls, directly: on the minors this store serves (Task SDK 1.0 to 1.2),
    ``Variable.set`` catches the ``AirflowRuntimeError`` of a refused write, logs it and returns, so the
    caller could not tell a lost write from a kept one (1.3's raises, but Airflow 3.3 keeps the job state
    in its task state store). The signature is the same on every minor.
    """

    def __init__(self, key: str, description: str = "") -> None:
        self.key = key
        self.description = description

    def _all(self) -> dict[str, Any]:
        from airflow.sdk import Variable

        value = Variable.get(self.key, default=None)
        if value is None:
            return {}
        try:
            data = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            log.warning("Variable %s does not hold JSON; treating it as empty", self.key)
            return {}
        return dict(data) if isinstance(data, Mapping) else {}

    def get(self, key: str) -> Any:
        return self._all().get(key)

    def set(self, key: str, value: Any) -> None:
        data = self._all()
        data[key] = value
        set_variable(
            self.key,
            json.dumps(data, sort_keys=True),
            self.description or "SageMaker job state of one task instance (airflow-provider-sm-prefs)",
        )

    def __repr__(self) -> str:
        return f"VariableStateStore({self.key!r})"


def set_variable(key: str, value: str, description: str) -> None:
    """Write an Airflow Variable through the Task SDK, raising when the write is refused (see
    :class:`VariableStateStore` for why not ``Variable.set``)."""
    from airflow.sdk.execution_time.context import _set_variable

    _set_variable(key, value, description, serialize_json=False)


def variable_state_store(context: Mapping[str, Any]) -> VariableStateStore | None:
    """The Variable-backed store of the task instance whose context this is; None without one."""
    ti = context.get("ti") or context.get("task_instance")
    dag_id, run_id, task_id = (getattr(ti, name, None) for name in ("dag_id", "run_id", "task_id"))
    if not (isinstance(dag_id, str) and isinstance(run_id, str) and isinstance(task_id, str)):
        return None
    if not (dag_id and run_id and task_id):
        return None
    raw_index = getattr(ti, "map_index", None)
    map_index = -1 if raw_index is None else int(raw_index)
    where = task_id if map_index < 0 else f"{task_id}[{map_index}]"
    return VariableStateStore(
        variable_key(dag_id, run_id, task_id, map_index),
        f"SageMaker job state of {dag_id}.{where}, run {run_id} (airflow-provider-sm-prefs)",
    )


if not AIRFLOW_V_3_3_PLUS:
    JobStateStore.fallback = variable_state_store
