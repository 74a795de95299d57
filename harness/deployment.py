"""A real, local Airflow deployment wired to the offline SageMaker: ``make airflow`` and the e2e tests.

:class:`LocalAirflow` builds a throw-away ``AIRFLOW_HOME``, starts the offline SageMaker
(``sm-prefs-emulator``) on a free loopback port, points the ``aws_default`` connection at it for every
Airflow process, migrates a metadata database (a private PostgreSQL server when one can be started,
see :mod:`harness.postgres`, else SQLite) and starts ``api-server``, ``scheduler`` (LocalExecutor),
``dag-processor`` and ``triggerer`` as separate processes, each in its own session with its output in
``AIRFLOW_HOME/logs/<component>.log`` (with ``triggerers=2``, Airflow's triggerer HA mode, a second
triggerer ``triggerer-2`` beside the first).

With ``executor="celery"`` (``up --executor celery``) it is the production topology of Amazon MWAA, Astronomer
and the official Helm chart: the CeleryExecutor with a private Redis broker (:mod:`harness.redis`, a
supervised process named ``redis``), Celery workers ``worker`` and ``worker-2`` as process groups of their
own, each with its own working directory, pid file and output log (they share the DAG folders, the database,
the broker, and the task-log folder the api-server reads, as the Helm chart's logs volume is shared), two
schedulers (``scheduler``, ``scheduler-2``: Airflow's HA scheduler, on PostgreSQL) and two triggerers. By default the REST API v2 and the UI are open without a login
(``simple_auth_manager_all_admins``), so this is for a developer's machine only; everything binds
127.0.0.1. With ``login=("admin", "secret")`` the deployment requires that login instead (one Admin
user of SimpleAuthManager): the REST client signs in with it (Bearer token), :meth:`LocalAirflow.token`
hands the same token to a browser (the UI's ``_token`` cookie), and the UI shows its login form.

With ``emulator_url`` it starts no offline SageMaker of its own and points its connections at the one
already running there (another deployment's): two deployments of one AWS account, each with its own
``AIRFLOW_HOME``, metadata database and processes, sharing one SageMaker (``make chaos
CHAOS_DEPLOYMENTS=2``). The scenario is then the running emulator's, set by whoever started it.

    python -m harness.deployment up --port 8080

``LocalAirflow`` only composes the parts, each its own module: :mod:`harness.config` (options,
environment, command lines), :mod:`harness.supervisor` (processes), :mod:`harness.emulator`,
:mod:`harness.database`, :mod:`harness.rest` (REST API v2) and :mod:`harness.waits`. It answers their
calls itself so the e2e tests read as scenarios (``airflow.trigger_dag(...)``, ``airflow.wait_for_run(...)``).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from harness import database as metadata_db
from harness import redis, supervisor
from harness.config import (
    COMPONENTS,
    FAKE_ACCESS_KEY_ID,
    FAKE_SECRET_ACCESS_KEY,
    DeploymentConfig,
    default_dags_folders,
    free_port,
)
from harness.database import MetadataDatabase
from harness.emulator import EMULATOR, start_emulator
from harness.errors import DeploymentError
from harness.postgres import LocalPostgres
from harness.rest import ACTIVE_TI_STATES, TERMINAL_RUN_STATES, TERMINAL_TI_STATES, AirflowRestClient
from harness.supervisor import Supervisor
from harness.waits import Waits, wait_until
from offline_sagemaker import RemoteSageMaker

__all__ = [
    "ACTIVE_TI_STATES",
    "COMPONENTS",
    "EMULATOR",
    "FAKE_ACCESS_KEY_ID",
    "FAKE_SECRET_ACCESS_KEY",
    "TERMINAL_RUN_STATES",
    "TERMINAL_TI_STATES",
    "DeploymentConfig",
    "DeploymentError",
    "LocalAirflow",
    "default_dags_folders",
    "free_port",
    "local_airflow",
    "main",
]

_SUMMARY = "A real, local Airflow deployment wired to the offline SageMaker."


class LocalAirflow:
    """A running Airflow 3 (LocalExecutor, PostgreSQL or SQLite) and the offline SageMaker; a context manager.

    >>> with LocalAirflow(Path("/tmp/af"), scenario="first-choice-scarce") as af:  # doctest: +SKIP
    ...     run_id = af.trigger_dag("sm_prefs_nightly_retrain")
    ...     af.wait_for_run("sm_prefs_nightly_retrain", run_id)

    The parameters are :class:`~harness.config.DeploymentConfig`'s. The parts, for a test that wants
    them: ``config``, ``supervisor`` (processes), ``database``, ``rest`` (REST API v2), ``waits``, ``sm``
    (the offline SageMaker's admin handle, once started). ``emulator_url``: use the offline SageMaker
    already running at that URL (e.g. another deployment's ``emulator_url``) instead of starting one;
    ``scenario`` is then not applied.
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
        login: tuple[str, str] | None = None,
        teams: Sequence[str] = (),
        triggerers: int | None = None,
        executor: str = "local",
        schedulers: int | None = None,
        workers: int = 2,
        worker_concurrency: int = 8,
        emulator_url: str | None = None,
    ) -> None:
        self.config = DeploymentConfig(
            root=Path(root),
            dags_folders=[Path(p) for p in dags_folders or ()],
            scenario=scenario,
            api_port=api_port or 0,
            parallelism=parallelism,
            poll_interval=poll_interval,
            max_poll_interval=max_poll_interval,
            schedules=schedules,
            database=database,
            extra_env=dict(extra_env or {}),
            startup_timeout=startup_timeout,
            login=login,
            teams=tuple(teams),
            # The production topology (Celery) runs two of each: HA schedulers and triggerers.
            triggerers=triggerers if triggerers is not None else (2 if executor == "celery" else 1),
            executor=executor,
            schedulers=schedulers if schedulers is not None else (2 if executor == "celery" else 1),
            workers=workers,
            worker_concurrency=worker_concurrency,
        )
        self.home = self.config.home
        self.log_dir = self.config.log_dir
        self.supervisor = Supervisor(self.log_dir, cwd=self.home)
        self.database = MetadataDatabase(database, self.home, self.log_dir)
        self.rest = AirflowRestClient(self.config.api_url, login=self.config.login)
        self.waits = Waits(self.rest, self.log_dir, self.supervisor.check_running)
        self._sm: RemoteSageMaker | None = None
        self._env: dict[str, str] | None = None
        #: The running offline SageMaker this deployment shares instead of starting its own (None: its own).
        self.shared_emulator_url = emulator_url

        # What the e2e scenarios call, answered by the part that knows.
        self.api = self.rest.api
        self.token = self.rest.token
        self.health = self.rest.health
        self.trigger_dag = self.rest.trigger_dag
        self.active_runs = self.rest.active_runs
        self.fail_active_runs = self.rest.fail_active_runs
        self.dag_run = self.rest.dag_run
        self.task_instances = self.rest.task_instances
        self.task_instance = self.rest.task_instance
        self.jobs = self.rest.jobs
        self.ti_states = self.rest.ti_states
        self.set_task_state = self.rest.set_task_state
        self.clear_task = self.rest.clear_task
        self.xcom = self.rest.xcom
        self.xcom_entries = self.rest.xcom_entries
        self.task_log = self.rest.task_log
        self.all_task_logs = self.rest.all_task_logs
        self.wait_healthy = self.waits.wait_healthy
        self.wait_for_dags = self.waits.wait_for_dags
        self.wait_for_run = self.waits.wait_for_run
        self.wait_for_task = self.waits.wait_for_task
        self.wait_for_tasks = self.waits.wait_for_tasks
        self.trigger_started = self.waits.trigger_started
        self.is_alive = self.supervisor.is_alive
        self.process_log = self.supervisor.log
        self.members = self.supervisor.members
        self.kill_process = self.supervisor.kill
        self.restart = self.supervisor.restart
        self.task_pids = supervisor.task_pids
        self.kill_task_process = supervisor.kill_task_process
        self.database_dump = self.database.dump

    def seed_history(self, runs: int) -> list[dict[str, Any]]:
        """The capacity page's history: ``runs`` dag.test() runs (harness.history) in this deployment."""
        from harness import history

        assert self.emulator_url is not None
        return history.seed(self.env, self.emulator_url, history.plan(runs))

    # -- where things are ----------------------------------------------------------------------------------
    @property
    def api_url(self) -> str:
        return self.config.api_url

    @property
    def ui_url(self) -> str:
        return self.config.ui_url

    @property
    def env(self) -> dict[str, str]:
        """The environment every Airflow process of this deployment runs with."""
        if self._env is None:
            raise DeploymentError("the deployment is not started")
        return self._env

    @property
    def sm(self) -> RemoteSageMaker:
        """Admin handle of the offline SageMaker."""
        if self._sm is None:
            raise DeploymentError("the offline SageMaker is not started")
        return self._sm

    @property
    def emulator_url(self) -> str | None:
        return self._sm.endpoint_url if self._sm is not None else None

    @property
    def postgres(self) -> LocalPostgres | None:
        """The private PostgreSQL server, when the deployment runs on one."""
        return self.database.postgres

    @property
    def database_backend(self) -> str:
        """``postgres`` or ``sqlite``: what this deployment runs on (decided by :meth:`start`)."""
        return self.database.backend

    # -- lifecycle -------------------------------------------------------------------------------------
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
        """Emulator (unless a running one is shared), database, then the Airflow components; returns once
        the API reports them healthy (and, with several triggerers, every one of them alive)."""
        deadline = time.monotonic() + self.config.startup_timeout
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # Last line of defence when the caller forgets stop() or dies of an exception outside a with-block.
        atexit.register(self.stop)
        if self.shared_emulator_url is not None:
            # Another deployment's emulator: it owns the process and the scenario; this one only calls it.
            self._sm = RemoteSageMaker(self.shared_emulator_url)
        else:
            self._sm = start_emulator(self.supervisor, self.config.scenario, deadline)
        if self.config.executor == "celery":
            self.start_broker(deadline - time.monotonic())
        if self.config.login is not None:
            self.config.passwords_file.parent.mkdir(parents=True, exist_ok=True)
            self.config.passwords_file.write_text(self.config.passwords_json() + "\n", encoding="utf-8")
            self.config.passwords_file.chmod(0o600)
        self.database.start(needs_postgres=self.config.needs_postgres)
        self._env = self.config.airflow_env(
            emulator_url=self._sm.endpoint_url,
            region=self._sm.region,
            database_env=self.database.airflow_env(),
        )
        self.database.migrate(self._env, timeout=max(30.0, deadline - time.monotonic()))
        self.database.create_teams(self._env, self.config.teams)
        for name in self.config.components:
            self.supervisor.start(name, self.config.command(name), self._env, cwd=self.config.workdir(name))
        self.waits.wait_healthy(deadline - time.monotonic(), triggerers=self.config.triggerers)
        for name in self.config.worker_names:
            self.wait_worker_ready(name, deadline - time.monotonic())
        return self

    def start_broker(self, timeout: float = 60.0) -> None:
        """Start (or, after a kill, start again) the Celery deployment's Redis broker; returns once it
        answers."""
        port = self.config.broker_port
        if redis.REDIS in self.supervisor.procs:
            self.supervisor.restart(redis.REDIS)
        else:
            self.supervisor.start(redis.REDIS, redis.command(port, self.config.broker_dir), dict(os.environ))
        redis.wait_ready(port, max(5.0, timeout))

    def wait_worker_ready(self, name: str, timeout: float = 120.0) -> None:
        """Until the Celery worker ``name`` has connected to the broker and is ready for tasks (its log
        says so after its latest start)."""
        log = self.supervisor.log(name)
        starts = self.supervisor.starts(name)

        def ready() -> bool:
            text = log.read_text(errors="replace") if log.exists() else ""
            # The log is appended to across restarts: only what this start wrote counts.
            return text.count(" ready.") >= starts

        wait_until(ready, timeout, lambda: f"{name} is not ready; see {log}")

    def stop(self) -> None:
        """Stop every process this deployment started (whole sessions), politely then by force."""
        self.supervisor.stop_all()
        self.database.stop()
        self.rest.close()

    # -- metadata DB, read through Airflow's models --------------------------------------------------------
    def run_python(self, code: str, timeout: float = 120.0) -> str:
        """Run ``code`` in a Python with this deployment's environment (its DB, keys); returns stdout."""
        return metadata_db.run_python(self.env, code, timeout)

    def trigger_rows(self) -> list[dict[str, Any]]:
        """Every row of the ``trigger`` table with its kwargs decrypted (what the triggerer deserializes)."""
        return metadata_db.trigger_rows(self.env)


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
    parser = argparse.ArgumentParser(prog="python -m harness.deployment", description=_SUMMARY)
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
        "--emulator-url",
        default=None,
        help="use the offline SageMaker already running at this URL (e.g. another deployment's) instead of "
        "starting one; --scenario is then the running one's",
    )
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
    up.add_argument(
        "--executor",
        choices=("local", "celery"),
        default="local",
        help="local: LocalExecutor (default). celery: CeleryExecutor on a private Redis broker with two "
        "Celery workers, two schedulers and two triggerers (the production topology)",
    )
    up.add_argument(
        "--triggerers",
        type=int,
        default=None,
        help="triggerer processes (default 1, 2 with --executor celery; 2 or more: Airflow's HA mode)",
    )
    up.add_argument(
        "--schedulers",
        type=int,
        default=None,
        help="scheduler processes (default 1, 2 with --executor celery: Airflow's HA scheduler)",
    )
    up.add_argument(
        "--workers", type=int, default=2, help="Celery workers (default 2; with --executor celery)"
    )
    up.add_argument(
        "--login",
        metavar="USER[:PASSWORD]",
        default=None,
        help="require this login (one Admin user) instead of letting everyone in as admin; "
        "without a password one is generated and printed",
    )
    up.add_argument(
        "--seed-history",
        metavar="RUNS",
        type=int,
        default=0,
        help="once up, seed RUNS (up to 60) runs of the capacity page's history DAGs "
        "(use with --scenario capacity-history; see harness/history.py)",
    )
    args = parser.parse_args(argv)
    login = _login(args.login)

    stop = False

    def _on_signal(signum: int, frame: FrameType | None) -> None:
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
            login=login,
            triggerers=args.triggerers,
            executor=args.executor,
            schedulers=args.schedulers,
            workers=args.workers,
            emulator_url=args.emulator_url,
        ) as af:
            who = f"log in as {login[0]} / {login[1]}" if login else "no login: all users are admin"
            if args.seed_history:
                _seed_history(af, args.seed_history)
            print(f"Airflow UI:         {af.ui_url}  ({who})")
            print(f"REST API:           {af.api_url}/api/v2")
            print(f"offline SageMaker:  {af.emulator_url}  (admin: {af.emulator_url}/_emulator/jobs)")
            print(f"AIRFLOW_HOME:       {af.home}  (component logs in {af.log_dir})")
            print(f"metadata database:  {af.database_backend}")
            print(f"executor:           {_topology(af)}")
            print(f"ready in {time.monotonic() - started:.0f}s; Ctrl-C stops everything", flush=True)
            while not stop:
                for name in af.supervisor.procs:
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


def _topology(af: LocalAirflow) -> str:
    config = af.config
    if config.executor == "local":
        return f"LocalExecutor, {config.schedulers} scheduler(s), {config.triggerers} triggerer(s)"
    return (
        f"CeleryExecutor on Redis {redis.url(config.broker_port)}: {config.workers} workers x "
        f"{config.worker_concurrency} slots, {config.schedulers} schedulers, {config.triggerers} triggerers"
    )


def _login(raw: str | None) -> tuple[str, str] | None:
    """``USER[:PASSWORD]`` of ``--login``; a missing password is generated."""
    if raw is None:
        return None
    username, _, password = raw.partition(":")
    return (username, password or secrets.token_urlsafe(12))


def _seed_history(af: LocalAirflow, runs: int) -> None:
    started = time.monotonic()
    print(f"seeding {runs} runs of the capacity history (a few minutes) ...", flush=True)
    seeded = af.seed_history(runs)
    print(
        f"seeded {len(seeded)} runs in {time.monotonic() - started:.0f}s: {af.api_url}/sm-prefs/", flush=True
    )


if __name__ == "__main__":
    sys.exit(main())
