"""Waiting on a deployment: until it is healthy, its DAGs are parsed, a run or task reaches a state, or a
trigger has started; each wait polls and, when it runs out, says what it saw last.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from harness.errors import DeploymentError
from harness.rest import TERMINAL_RUN_STATES, AirflowRestClient

T = TypeVar("T")


def wait_until(
    check: Callable[[], T | None], timeout: float, explain: Callable[[], str], every: float = 0.5
) -> T:
    """Poll ``check`` every ``every`` seconds until it returns something truthy; return that.

    :raises DeploymentError: after ``timeout`` seconds, with ``explain()`` (or why it failed) as detail.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except httpx.TimeoutException:
            # An api-server busy with a storm of task callbacks (2 cores) may answer one poll late;
            # that poll saw nothing, the deadline still bounds the wait.
            result = None
        if result:
            return result
        if time.monotonic() >= deadline:
            try:
                detail = explain()
            except Exception as err:  # the explanation must not hide the timeout
                detail = f"(could not describe: {err})"
            raise DeploymentError(f"timed out after {timeout:.0f}s: {detail}")
        time.sleep(every)


class Waits:
    """Waits against one deployment.

    :param rest: its REST client.
    :param log_dir: its log folder (task and trigger logs under ``dag_id=.../run_id=...``).
    :param check_processes: raises if a process of the deployment has exited (a wait for health stops
        there instead of running out).
    """

    def __init__(self, rest: AirflowRestClient, log_dir: Path, check_processes: Callable[[], None]) -> None:
        self.rest = rest
        self.log_dir = log_dir
        self.check_processes = check_processes

    def wait_healthy(
        self,
        timeout: float = 120.0,
        components: Iterable[str] = ("scheduler", "triggerer", "dag_processor"),
        triggerers: int = 1,
    ) -> None:
        """Until the API answers and reports the metadatabase and ``components`` healthy.

        :param triggerers: with more than one, also until that many triggerer jobs are alive (the health
            report's ``triggerer`` is healthy as soon as any one heartbeats).
        """
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            self.check_processes()
            try:
                last = self.rest.health()
            except Exception as err:  # not listening yet
                last = err
            else:
                wanted = ["metadatabase", *components]
                if all((last.get(c) or {}).get("status") == "healthy" for c in wanted):
                    if triggerers <= 1:
                        return
                    alive = self.rest.jobs("TriggererJob", alive=True)
                    if len(alive) >= triggerers:
                        return
                    last = {**last, "alive_triggerer_jobs": [job["id"] for job in alive]}
            time.sleep(0.5)
        raise DeploymentError(f"Airflow not healthy after {timeout:.0f}s: {last!r}; logs in {self.log_dir}")

    def wait_for_dags(self, dag_ids: Iterable[str], timeout: float = 120.0) -> None:
        """Until the DAG processor has serialized every DAG in ``dag_ids``."""
        pending = set(dag_ids)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for dag_id in list(pending):
                if self.rest.dag_parsed(dag_id):
                    pending.discard(dag_id)
            if pending:
                time.sleep(1)
        if pending:
            raise DeploymentError(
                f"DAGs not parsed after {timeout:.0f}s: {sorted(pending)}; "
                f"import errors: {self.rest.import_errors()}"
            )

    def wait_for_run(
        self, dag_id: str, run_id: str, states: Iterable[str] = TERMINAL_RUN_STATES, timeout: float = 180.0
    ) -> str:
        """Until the run's state is in ``states``; returns it."""
        wanted = set(states)

        def check() -> str | None:
            state = self.rest.dag_run(dag_id, run_id)["state"]
            return str(state) if state in wanted else None

        return wait_until(
            check,
            timeout,
            lambda: (
                f"run {dag_id}/{run_id} not in {sorted(wanted)}; tasks: {self.rest.ti_states(dag_id, run_id)}"
            ),
        )

    def wait_for_task(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        states: Iterable[str],
        map_index: int = -1,
        timeout: float = 120.0,
    ) -> dict[str, Any]:
        """Until the task instance's state is in ``states``; returns the task instance."""
        wanted = set(states)

        def check() -> dict[str, Any] | None:
            ti = self.rest.task_instance(dag_id, run_id, task_id, map_index)
            return ti if ti["state"] in wanted else None

        return wait_until(
            check,
            timeout,
            lambda: (
                f"{dag_id}/{run_id}/{task_id}[{map_index}] not in {sorted(wanted)}: "
                f"{self.rest.task_instance(dag_id, run_id, task_id, map_index)['state']}"
            ),
        )

    def wait_for_tasks(
        self,
        dag_id: str,
        run_id: str,
        predicate: Callable[[list[dict[str, Any]]], bool],
        timeout: float = 180.0,
        describe: str = "condition",
    ) -> list[dict[str, Any]]:
        """Until ``predicate(task_instances)`` holds; returns the task instances."""

        def check() -> list[dict[str, Any]] | None:
            tis = self.rest.task_instances(dag_id, run_id)
            return tis if predicate(tis) else None

        return wait_until(
            check,
            timeout,
            lambda: f"{describe} not met for {dag_id}/{run_id}: {self.rest.ti_states(dag_id, run_id)}",
        )

    def trigger_started(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1, try_number: int = 1
    ) -> bool:
        """True once a triggerer has started running the task instance's trigger (its trigger log exists)."""
        folder = self.log_dir / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        if map_index >= 0:
            folder = folder / f"map_index={map_index}"
        for log in folder.glob(f"attempt={try_number}.log.trigger.*.log"):
            if " starting" in log.read_text(errors="replace"):
                return True
        return False
