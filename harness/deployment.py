"""A real, local Airflow deployment wired to the offline SageMaker: ``make airflow`` and the e2e tests.

:class:`LocalAirflow` builds a throw-away ``AIRFLOW_HOME``, starts the offline SageMaker
(``sm-prefs-emulator``) on a free loopback port, points the ``aws_default`` connection at it for every
Airflow process, migrates a metadata database (a private PostgreSQL server when one can be started,
see :mod:`.postgres`, else SQLite) and starts ``api-server``, ``scheduler`` (LocalExecutor),
``dag-processor`` and ``triggerer`` as separate processes, each in its own session with its output in
``AIRFLOW_HOME/logs/<component>.log``. The REST API v2 is open without a login
(``simple_auth_manager_all_admins``), so this is for a developer's machine only; everything binds
127.0.0.1.

    python -m harness.deployment up --port 8080

Test helpers (REST calls, waits, killing and restarting components, killing a task's process) live
on the class so the e2e tests read as scenarios.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

#: Components started by :meth:`LocalAirflow.start`, in start order (the emulator comes first).
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
EMULATOR = "emulator"
#: Task-instance states in which a task is still looking after its SageMaker job.
ACTIVE_TI_STATES = frozenset(
    {"scheduled", "queued", "running", "deferred", "up_for_retry", "up_for_reschedule", "restarting"}
)
TERMINAL_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
TERMINAL_RUN_STATES = frozenset({"success", "failed"})
#: Access key id and secret of the deployment's ``aws_default`` connection. The emulator accepts any
#: credentials; the secret is distinctive so tests can prove it never leaks into logs, XComs or the DB.
FAKE_ACCESS_KEY_ID = "AKIASMPREFSLOCALTEST"
FAKE_SECRET_ACCESS_KEY = "smprefs-FAKE-secret-9f3c2a71-do-not-leak"

_REPO_ROOT = Path(__file__).resolve().parents[1]
#: Import path of this module, also when it runs as ``python -m`` (where ``__name__`` is ``__main__``).
_MODULE = "harness.deployment"

#: sqlite3/aiosqlite connect arguments for every Airflow process (``[database] sql_alchemy_connect_args``
#: names this object). SQLite lets one writer at a time; with 50 tasks deferring and resuming at once, the
#: default 5 s busy timeout made the triggerer and the DAG processor die on "database is locked".
SQLITE_CONNECT_ARGS: dict[str, Any] = {"timeout": 60}


class DeploymentError(RuntimeError):
    """The local deployment did not start, or a wait ran out; the message names the log to read."""


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bin(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


def _fernet_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def default_dags_folders() -> list[Path]:
    """The example DAGs and the test suite's DAGs of this checkout (the ones ``make airflow`` loads)."""
    return [p for p in (_REPO_ROOT / "dags_examples", _REPO_ROOT / "tests" / "dags") if p.is_dir()]


class LocalAirflow:
    """A running Airflow 3 (LocalExecutor, PostgreSQL or SQLite) and the offline SageMaker; a context manager.

    >>> with LocalAirflow(Path("/tmp/af"), scenario="first-choice-scarce") as af:  # doctest: +SKIP
    ...     run_id = af.trigger_dag("sm_prefs_nightly_retrain")
    ...     af.wait_for_run("sm_prefs_nightly_retrain", run_id)

    :param root: directory under which ``AIRFLOW_HOME`` is created (``root/airflow_home``).
    :param dags_folders: folders loaded as DAG bundles (default: examples and tests/dags).
    :param scenario: the emulator's scenario (builtin name or file).
    :param api_port: API server / UI port on 127.0.0.1 (default: a free one).
    :param parallelism: ``[core] parallelism``: task processes running at once (the LocalExecutor forks
        that many workers). Deferred tasks hold no slot, so many more tasks can wait at the same time.
    :param poll_interval: ``SM_PREFS_POLL_INTERVAL`` for DAGs that read it at parse time.
    :param max_poll_interval: ``SM_PREFS_MAX_POLL_INTERVAL``.
    :param schedules: let the scheduler create scheduled runs. Off by default: a scheduled example DAG
        would submit SageMaker jobs nobody asked for and skew what tests count; trigger runs instead.
    :param database: ``postgres`` (a private server on a loopback port, see :mod:`.postgres`), ``sqlite``
        (a file in AIRFLOW_HOME; fine for a few tasks, it stalls under dozens deferring at once), or
        ``auto``: PostgreSQL when its binaries and drivers are installed, else SQLite.
    :param extra_env: more environment for every Airflow process (e.g. ``AIRFLOW__...`` overrides).
    :param startup_timeout: seconds to wait for the deployment to become healthy.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        dags_folders: Sequence[Path | str] | None = None,
        scenario: str = "default",
        api_port: int | None = None,
        parallelism: int = 32,
        poll_interval: float = 1.0,
        max_poll_interval: float = 2.0,
        schedules: bool = False,
        database: str = "auto",
        extra_env: Mapping[str, str] | None = None,
        startup_timeout: float = 240.0,
    ) -> None:
        if database not in ("auto", "postgres", "sqlite"):
            raise ValueError(f"database: {database!r} is not one of auto, postgres, sqlite")
        self.root = Path(root).resolve()
        self.home = self.root / "airflow_home"
        self.log_dir = self.home / "logs"
        self.dags_folders = [Path(p).resolve() for p in (dags_folders or default_dags_folders())]
        self.scenario = scenario
        self.api_port = api_port or free_port()
        self.parallelism = parallelism
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        self.schedules = schedules
        self.database = database
        self.postgres: Any = None
        self.extra_env = dict(extra_env or {})
        self.startup_timeout = startup_timeout
        self.emulator_url: str | None = None
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._log_files: dict[str, Any] = {}
        self._env: dict[str, str] | None = None
        self._http: Any = None
        self._sm: Any = None

    # -- lifecycle -------------------------------------------------------------------------------------
    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def ui_url(self) -> str:
        return self.api_url + "/"

    @property
    def env(self) -> dict[str, str]:
        """The environment every Airflow process of this deployment runs with."""
        if self._env is None:
            raise DeploymentError("the deployment is not started")
        return self._env

    @property
    def sm(self) -> Any:
        """Admin handle of the offline SageMaker (:class:`~.server.RemoteSageMaker`)."""
        if self._sm is None:
            raise DeploymentError("the offline SageMaker is not started")
        return self._sm

    def __enter__(self) -> LocalAirflow:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> LocalAirflow:
        """Emulator, database, then the four Airflow components; returns once the API reports them healthy."""
        deadline = time.monotonic() + self.startup_timeout
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # Last line of defence when the caller forgets stop() or dies of an exception outside a with-block.
        atexit.register(self.stop)
        self._start_emulator(deadline)
        self._start_database()
        self._env = self._build_env()
        migrate = subprocess.run(
            [_bin("airflow"), "db", "migrate"],
            env=self._env,
            stdout=(self.log_dir / "db-migrate.log").open("wb"),
            stderr=subprocess.STDOUT,
            timeout=max(30.0, deadline - time.monotonic()),
            check=False,
        )
        if migrate.returncode != 0:
            raise DeploymentError(f"airflow db migrate failed; see {self.log_dir / 'db-migrate.log'}")
        for name in COMPONENTS:
            self._spawn(name)
        self.wait_healthy(deadline - time.monotonic())
        return self

    def stop(self) -> None:
        """Stop every process this deployment started (whole sessions), politely then by force."""
        for name in reversed([*COMPONENTS, EMULATOR]):
            if name in self.procs:
                self._terminate(name)
        self.procs.clear()
        if self.postgres is not None:
            self.postgres.stop()
            self.postgres = None
        if self._http is not None:
            self._http.close()
            self._http = None
        for handle in self._log_files.values():
            with contextlib.suppress(OSError):
                handle.close()
        self._log_files.clear()

    def _start_emulator(self, deadline: float) -> None:
        log_path = self.log_dir / f"{EMULATOR}.log"
        # --port 0: the emulator binds a free port itself and prints its URL as the first stdout line.
        command = [
            _bin("sm-prefs-emulator"),
            "--port",
            "0",
            "--host",
            "127.0.0.1",
            "--scenario",
            self.scenario,
        ]
        self._popen(
            EMULATOR, command, env={k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        )
        while time.monotonic() < deadline:
            proc = self.procs[EMULATOR]
            if proc.poll() is not None:
                raise DeploymentError(f"the offline SageMaker exited with {proc.returncode}; see {log_path}")
            first = log_path.read_text(errors="replace").splitlines()[:1] if log_path.exists() else []
            if first and first[0].startswith("http://127.0.0.1:"):
                self.emulator_url = first[0].strip()
                break
            time.sleep(0.1)
        else:
            raise DeploymentError(f"the offline SageMaker did not start; see {log_path}")
        from airflow_provider_sm_prefs.testing import OfflineSageMaker

        self._sm = OfflineSageMaker.attach(self.emulator_url)

    @property
    def database_backend(self) -> str:
        """``postgres`` or ``sqlite``: what this deployment runs on (decided by :meth:`start`)."""
        return "postgres" if self.postgres is not None else "sqlite"

    def database_dump(self) -> bytes:
        """Everything in the metadata database as bytes (pg_dump, or the SQLite file and its WAL)."""
        if self.postgres is not None:
            dump: bytes = self.postgres.dump()
            return dump
        return b"".join(path.read_bytes() for path in sorted(self.home.glob("airflow.db*")))

    def _start_database(self) -> None:
        from harness import postgres

        if self.database == "sqlite" or (self.database == "auto" and postgres.missing()):
            return
        self.postgres = postgres.LocalPostgres(free_port(), log_copy=self.log_dir / "postgres.log").start()

    def _database_env(self) -> dict[str, str]:
        if self.postgres is not None:
            return {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.postgres.url}
        return {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": f"{_MODULE}.SQLITE_CONNECT_ARGS",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": f"{_MODULE}.SQLITE_CONNECT_ARGS",
            # Those settings name an object of this checkout's harness package, which is not installed.
            "PYTHONPATH": os.pathsep.join(filter(None, (str(_REPO_ROOT), os.environ.get("PYTHONPATH")))),
        }

    def _build_env(self) -> dict[str, str]:
        assert self.emulator_url is not None
        bundles = [
            {
                "name": f"bundle-{i}-{folder.name}",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(folder), "refresh_interval": 0},
            }
            for i, folder in enumerate(self.dags_folders)
        ]
        connection = {
            "conn_type": "aws",
            "login": FAKE_ACCESS_KEY_ID,
            "password": FAKE_SECRET_ACCESS_KEY,
            "extra": {"endpoint_url": self.emulator_url, "region_name": self.sm.region},
        }
        # Credentials come from the connection only: no AWS_* variable or profile of the developer's may
        # reach a process that talks to an endpoint, and the Airflow settings of the caller (e.g. the test
        # session's own AIRFLOW_HOME) must not leak in either.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AIRFLOW", "AWS_", "SM_PREFS_")) and k not in ("PYTEST_CURRENT_TEST",)
        }
        env.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                **self._database_env(),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folders[0]),
                "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
                # Deferred tasks hold no executor slot: 50+ tasks of one DAG may wait at once.
                "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "128",
                "AIRFLOW__CORE__MAX_ACTIVE_RUNS_PER_DAG": "32",
                "AIRFLOW__CORE__DEFAULT_POOL_TASK_SLOT_COUNT": "256",
                "AIRFLOW__CORE__FERNET_KEY": _fernet_key(),
                # Dozens of task processes importing boto3 and the amazon provider at once on a 2-core
                # machine take longer than the default 30 s to parse a DAG file.
                "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "180",
                "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "240",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api_url}/execution/",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.api_port),
                "AIRFLOW__API__BASE_URL": self.api_url,
                "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(64),
                "AIRFLOW__API__EXPOSE_CONFIG": "True",
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(64),
                "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
                # Pick up DAG files quickly; re-parse each file at most every 30 s (parsing costs CPU).
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "2",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
                "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
                # Scheduler and triggerer react within a second; a dead triggerer's triggers move to a
                # live one after 10 s instead of 30 s.
                "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": str(self.schedules),
                "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.25",
                "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "2",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                "AIRFLOW__SCHEDULER__MAX_TIS_PER_QUERY": "64",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
                "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
                "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
                "AIRFLOW__LOGGING__COLORED_CONSOLE_LOG": "False",
                "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(connection),
                # DAG files that read their poll cadence at parse time (the examples, tests/dags).
                "SM_PREFS_POLL_INTERVAL": str(self.poll_interval),
                "SM_PREFS_MAX_POLL_INTERVAL": str(self.max_poll_interval),
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra_env)
        return env

    def _command(self, name: str) -> list[str]:
        airflow = _bin("airflow")
        if name == "api-server":
            return [
                airflow,
                "api-server",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.api_port),
                "--workers",
                "1",
            ]
        if name in ("scheduler", "triggerer"):
            # No log-serving sidecar: it binds 0.0.0.0, and the API server reads the local log files anyway.
            return [airflow, name, "--skip-serve-logs"]
        if name == "dag-processor":
            return [airflow, "dag-processor"]
        raise KeyError(name)

    def _popen(self, name: str, command: list[str], env: Mapping[str, str]) -> None:
        handle = (self.log_dir / f"{name}.log").open("ab")
        old = self._log_files.pop(name, None)
        if old is not None:
            old.close()
        self._log_files[name] = handle
        # Own session = own process group: killing the group takes the component's children with it
        # (task supervisors, the triggerer's runner, gunicorn/uvicorn workers).
        self.procs[name] = subprocess.Popen(
            command,
            env=dict(env),
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.home,
        )

    def _spawn(self, name: str) -> None:
        self._popen(name, self._command(name), self.env)

    def members(self, name: str) -> list[int]:
        """PIDs of every process a component started, itself included.

        Each component is a session leader (``start_new_session``) and everything it forks inherits the
        session, even the task processes that the task supervisor moves into process groups of their own;
        so the session, not the process group, is what "the scheduler and all its tasks" means.
        """
        import psutil

        proc = self.procs.get(name)
        if proc is None:
            return []
        pids = []
        for candidate in psutil.process_iter(["pid"]):
            with contextlib.suppress(OSError):
                if os.getsid(candidate.info["pid"]) == proc.pid:
                    pids.append(candidate.info["pid"])
        return pids

    def _signal_members(self, name: str, sig: int) -> list[int]:
        pids = self.members(name)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        return pids

    def _terminate(self, name: str, grace: float = 10.0) -> None:
        proc = self.procs.get(name)
        if proc is None:
            return
        self._signal_members(name, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
        # Whatever outlived the leader (forked workers, task processes, the trigger runner) goes now.
        self._signal_members(name, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)

    def kill_process(self, name: str, sig: int = signal.SIGKILL) -> list[int]:
        """Send ``sig`` to every process of a component (``kill -9`` of the triggerer: ``SIGKILL``).

        Returns the PIDs signalled. With SIGKILL/SIGTERM, waits until the component's leader is gone.
        """
        pids = self._signal_members(name, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.procs[name].wait(15)
        return pids

    def restart(self, name: str) -> None:
        """Start a component again (after :meth:`kill_process`; a running one is stopped first)."""
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            self._terminate(name)
        elif proc is not None:
            self._signal_members(name, signal.SIGKILL)
        self._spawn(name)

    def is_alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def process_log(self, name: str) -> Path:
        """The file a component's stdout/stderr goes to."""
        return self.log_dir / f"{name}.log"

    # -- health ------------------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self.api("GET", "/api/v2/monitor/health")
        return result

    def wait_healthy(
        self, timeout: float = 120.0, components: Iterable[str] = ("scheduler", "triggerer", "dag_processor")
    ) -> None:
        """Until the API answers and reports the metadatabase and ``components`` healthy."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise DeploymentError(
                        f"{name} exited with {proc.returncode}; see {self.process_log(name)}"
                    )
            try:
                last = self.health()
            except Exception as err:  # not listening yet
                last = err
            else:
                wanted = ["metadatabase", *components]
                if all((last.get(c) or {}).get("status") == "healthy" for c in wanted):
                    return
            time.sleep(0.5)
        raise DeploymentError(f"Airflow not healthy after {timeout:.0f}s: {last!r}; logs in {self.log_dir}")

    def wait_for_dags(self, dag_ids: Iterable[str], timeout: float = 120.0) -> None:
        """Until the DAG processor has serialized every DAG in ``dag_ids``."""
        pending = set(dag_ids)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for dag_id in list(pending):
                response = self.http.get(f"/api/v2/dags/{dag_id}/details")
                if response.status_code == 200:
                    pending.discard(dag_id)
            if pending:
                time.sleep(1)
        if pending:
            errors = self.api("GET", "/api/v2/importErrors").get("import_errors", [])
            raise DeploymentError(
                f"DAGs not parsed after {timeout:.0f}s: {sorted(pending)}; import errors: {errors}"
            )

    # -- REST API v2 -------------------------------------------------------------------------------------
    @property
    def http(self) -> Any:
        if self._http is None:
            import httpx

            self._http = httpx.Client(
                base_url=self.api_url, timeout=30.0, headers={"Accept": "application/json"}
            )
        return self._http

    def api(
        self, method: str, path: str, *, json_body: Any = None, params: Mapping[str, Any] | None = None
    ) -> Any:
        """One REST call; raises :class:`DeploymentError` with the response text on any non-2xx answer."""
        response = self.http.request(method, path, json=json_body, params=params)
        if response.status_code >= 400:
            raise DeploymentError(f"{method} {path} -> {response.status_code}: {response.text[:2000]}")
        return response.json() if response.content else None

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
        path = f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}"
        if map_index >= 0:
            path += f"/{map_index}"
        result: dict[str, Any] = self.api("GET", path)
        return result

    def ti_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        """``{task_id: state}``, with ``task_id[i]`` keys for mapped task instances."""
        states: dict[str, str | None] = {}
        for ti in self.task_instances(dag_id, run_id):
            key = ti["task_id"] if ti["map_index"] < 0 else f"{ti['task_id']}[{ti['map_index']}]"
            states[key] = ti["state"]
        return states

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

    def set_task_state(
        self, dag_id: str, run_id: str, task_id: str, state: str = "failed", map_index: int = -1
    ) -> Any:
        """What a user does in the UI: ``PATCH .../taskInstances/{task_id}`` with ``new_state``."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}"
        if map_index >= 0:
            path += f"/{map_index}"
        return self.api("PATCH", path, json_body={"new_state": state})

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

    # -- waits -------------------------------------------------------------------------------------------
    def wait_for_run(
        self, dag_id: str, run_id: str, states: Iterable[str] = TERMINAL_RUN_STATES, timeout: float = 180.0
    ) -> str:
        """Until the run's state is in ``states``; returns it."""
        wanted = set(states)
        return str(
            _wait_until(
                lambda: (lambda s: s if s in wanted else None)(self.dag_run(dag_id, run_id)["state"]),
                timeout,
                lambda: (
                    f"run {dag_id}/{run_id} not in {sorted(wanted)}; tasks: {self.ti_states(dag_id, run_id)}"
                ),
            )
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
            ti = self.task_instance(dag_id, run_id, task_id, map_index)
            return ti if ti["state"] in wanted else None

        result: dict[str, Any] = _wait_until(
            check,
            timeout,
            lambda: (
                f"{dag_id}/{run_id}/{task_id}[{map_index}] not in {sorted(wanted)}: "
                f"{self.task_instance(dag_id, run_id, task_id, map_index)['state']}"
            ),
        )
        return result

    def wait_for_tasks(
        self,
        dag_id: str,
        run_id: str,
        predicate: Callable[[list[dict[str, Any]]], bool],
        timeout: float = 180.0,
        describe: str = "condition",
    ) -> list[dict[str, Any]]:
        """Until ``predicate(task_instances)`` holds; returns the task instances."""
        result: list[dict[str, Any]] = _wait_until(
            lambda: (lambda tis: tis if predicate(tis) else None)(self.task_instances(dag_id, run_id)),
            timeout,
            lambda: f"{describe} not met for {dag_id}/{run_id}: {self.ti_states(dag_id, run_id)}",
        )
        return result

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

    # -- task processes ----------------------------------------------------------------------------------
    def task_pids(self, ti_id: str) -> dict[str, int]:
        """PIDs running a task instance: ``supervisor`` (the LocalExecutor worker) and ``task`` (its child).

        Found by process title: the LocalExecutor worker runs ``airflow worker -- LocalExecutor: <ti id>``
        and the task runner it forks ``airflow worker -- <ti id>``.
        """
        import psutil

        found: dict[str, int] = {}
        for proc in psutil.process_iter(["pid", "cmdline"]):
            # setproctitle pads argv with empty strings.
            cmdline = " ".join(part for part in proc.info.get("cmdline") or [] if part).strip()
            if not cmdline.endswith(ti_id):
                continue
            if "LocalExecutor" in cmdline:
                found["supervisor"] = proc.info["pid"]
            elif cmdline.startswith("airflow worker -- "):
                found["task"] = proc.info["pid"]
        return found

    def kill_task_process(self, ti_id: str, sig: int = signal.SIGKILL, which: str = "task") -> int:
        """``kill -9`` the process running a task instance (``which``: ``task`` or ``supervisor``)."""
        pids = self.task_pids(ti_id)
        if which not in pids:
            raise DeploymentError(f"no {which} process for task instance {ti_id} (found {pids})")
        os.kill(pids[which], sig)
        return pids[which]

    # -- metadata DB ---------------------------------------------------------------------------------------
    def run_python(self, code: str, timeout: float = 120.0) -> str:
        """Run ``code`` in a Python with this deployment's environment (its DB, keys); returns stdout."""
        result = subprocess.run(
            [sys.executable, "-c", code],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise DeploymentError(f"python in the deployment failed: {result.stderr[-3000:]}")
        return result.stdout

    def trigger_rows(self) -> list[dict[str, Any]]:
        """Every row of the ``trigger`` table with its kwargs decrypted (what the triggerer deserializes)."""
        code = (
            "import json\n"
            "from sqlalchemy import select\n"
            "from airflow.models.trigger import Trigger\n"
            "from airflow.utils.session import create_session\n"
            "with create_session() as s:\n"
            "    rows = [{'id': t.id, 'classpath': t.classpath, 'kwargs': t.kwargs,"
            " 'encrypted': t.encrypted_kwargs}"
            " for t in s.scalars(select(Trigger))]\n"
            "print('JSON:' + json.dumps(rows, default=str))\n"
        )
        out = self.run_python(code)
        line = next(line for line in reversed(out.splitlines()) if line.startswith("JSON:"))
        rows: list[dict[str, Any]] = json.loads(line[len("JSON:") :])
        return rows


def _q(run_id: str) -> str:
    return urllib.parse.quote(run_id, safe="")


def _log_line(entry: Any) -> str:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, Mapping):
        rest = {k: v for k, v in entry.items() if k not in ("event", "timestamp")}
        extra = json.dumps(rest, default=str, ensure_ascii=False) if rest else ""
        return f"{entry.get('event', '')} {extra}".rstrip()
    return str(entry)


def _wait_until(
    check: Callable[[], Any], timeout: float, explain: Callable[[], str], every: float = 0.5
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            try:
                detail = explain()
            except Exception as err:  # the explanation must not hide the timeout
                detail = f"(could not describe: {err})"
            raise DeploymentError(f"timed out after {timeout:.0f}s: {detail}")
        time.sleep(every)


@contextlib.contextmanager
def local_airflow(root: Path | None = None, **kwargs: Any) -> Iterator[LocalAirflow]:
    """:class:`LocalAirflow` in a temporary directory (removed afterwards unless ``root`` is given)."""
    owned = root is None
    base = Path(tempfile.mkdtemp(prefix="sm-prefs-airflow-")) if root is None else root
    try:
        with LocalAirflow(base, **kwargs) as deployment:
            yield deployment
    finally:
        if owned:
            shutil.rmtree(base, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``up``: start the deployment, print where the UI is, stay up until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m harness.deployment", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start Airflow + the offline SageMaker and stay in the foreground")
    up.add_argument(
        "--dags-folder",
        action="append",
        type=Path,
        help="DAG folder (repeatable; default: examples + tests/dags)",
    )
    up.add_argument("--port", type=int, default=8080, help="API server / UI port on 127.0.0.1 (default 8080)")
    up.add_argument("--scenario", default="local-airflow", help="emulator scenario, builtin name or file")
    up.add_argument(
        "--root",
        type=Path,
        default=None,
        help="directory for AIRFLOW_HOME (default: a temporary one, removed on exit)",
    )
    up.add_argument(
        "--poll-interval", type=float, default=5.0, help="SM_PREFS_POLL_INTERVAL for the example DAGs"
    )
    up.add_argument(
        "--database",
        choices=("auto", "postgres", "sqlite"),
        default="auto",
        help="metadata DB (default: PostgreSQL if installed with its drivers, else SQLite)",
    )
    up.add_argument(
        "--schedules", action="store_true", help="let scheduled DAGs run (default: trigger runs yourself)"
    )
    args = parser.parse_args(argv)

    stop = False

    def _on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _on_signal)
    # Also when started in the background by a shell, which leaves SIGINT ignored.
    signal.signal(signal.SIGINT, _on_signal)
    started = time.monotonic()
    try:
        with local_airflow(
            args.root,
            dags_folders=args.dags_folder,
            api_port=args.port,
            scenario=args.scenario,
            poll_interval=args.poll_interval,
            max_poll_interval=max(args.poll_interval, 30.0),
            schedules=args.schedules,
            database=args.database,
        ) as af:
            print(f"Airflow UI:         {af.ui_url}  (no login: all users are admin)")
            print(f"REST API:           {af.api_url}/api/v2")
            print(f"offline SageMaker:  {af.emulator_url}  (admin: {af.emulator_url}/_emulator/jobs)")
            print(f"AIRFLOW_HOME:       {af.home}  (component logs in {af.log_dir})")
            print(f"metadata database:  {af.database_backend}")
            print(f"ready in {time.monotonic() - started:.0f}s; Ctrl-C stops everything", flush=True)
            while not stop:
                for name in (*COMPONENTS, EMULATOR):
                    if not af.is_alive(name):
                        print(f"{name} exited; see {af.process_log(name)}", file=sys.stderr)
                        return 1
                time.sleep(1)
    except KeyboardInterrupt:
        pass
    except DeploymentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
