"""What a local Airflow deployment is made of: its options, its ``AIRFLOW_HOME``, every process's
environment (``airflow.cfg`` as ``AIRFLOW__*`` variables) and each component's command line.

Pure: nothing here starts a process or touches the network (apart from :func:`free_port` probing one).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import string
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Airflow components a deployment runs, in start order (the offline SageMaker starts before them).
#: With ``triggerers=N`` the triggerer is N processes: ``triggerer``, ``triggerer-2`` ... (Airflow's HA mode).
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
DATABASES = ("auto", "postgres", "sqlite")
#: ``local``: the LocalExecutor, task processes are the scheduler's children. ``celery``: the
#: CeleryExecutor on a private Redis broker, task processes run in Celery workers of their own.
EXECUTORS = ("local", "celery")
#: Access key id and secret of the deployment's ``aws_default`` connection. The emulator accepts any
#: credentials; the secret is distinctive so tests can prove it never leaks into logs, XComs or the DB.
FAKE_ACCESS_KEY_ID = "AKIASMPREFSLOCALTEST"
FAKE_SECRET_ACCESS_KEY = "smprefs-FAKE-secret-9f3c2a71-do-not-leak"
#: A second AWS connection of every deployment, to the same offline SageMaker, whose credentials look
#: like real ones (an ``AKIA`` access key id, a 40-character secret, a session token) and are new for
#: every deployment: see :func:`real_looking_credentials`. Tests run DAGs with it and prove that none
#: of them appears in any log, XCom, trigger row, rendered template, page or lineage event.
SECOND_CONN_ID = "aws_sm_prod"
#: A third AWS connection, to the same offline SageMaker with aws_default's credentials, whose tasks wait in
#: event mode: its extra ``sm_prefs_event_queue_url`` names :data:`EVENT_QUEUE` (created by whoever uses it:
#: ``sm.create_event_queue(EVENT_QUEUE)``). An AWS-style URL: the SQS client sends it to the endpoint.
EVENTS_CONN_ID = "aws_sm_events"
EVENT_QUEUE = "sm-prefs-local-events"
#: The checkout this harness belongs to.
REPO_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def venv_bin(name: str) -> str:
    """A console script of the Python environment this runs in (``airflow``, ``sm-prefs-emulator``)."""
    return os.path.join(os.path.dirname(sys.executable), name)


def default_dags_folders() -> list[Path]:
    """The example DAGs and the test suite's DAGs of this checkout (the ones ``make airflow`` loads)."""
    return [p for p in (REPO_ROOT / "dags_examples", REPO_ROOT / "tests" / "dags") if p.is_dir()]


def real_looking_credentials() -> dict[str, str]:
    """Random AWS credentials in the shape of real ones: ``AKIA`` + 16 uppercase letters and digits, a
    40-character secret of base64 characters, and a session token (base64, a few hundred characters)."""
    upper = string.ascii_uppercase + string.digits
    secret = string.ascii_letters + string.digits + "+/"
    return {
        "aws_access_key_id": "AKIA" + "".join(secrets.choice(upper) for _ in range(16)),
        "aws_secret_access_key": "".join(secrets.choice(secret) for _ in range(40)),
        "aws_session_token": base64.b64encode(b"IQoJb3JpZ2luX2Vj" + secrets.token_bytes(240)).decode(),
    }


def connection_credentials(env: Mapping[str, str], conn_id: str) -> dict[str, str]:
    """The credentials of an AWS connection defined in ``env`` (``AIRFLOW_CONN_<ID>`` as JSON): access
    key id, secret access key and, when it has one, session token."""
    connection = json.loads(env[f"AIRFLOW_CONN_{conn_id.upper()}"])
    found = {
        "aws_access_key_id": connection["login"],
        "aws_secret_access_key": connection["password"],
        "aws_session_token": (connection.get("extra") or {}).get("aws_session_token"),
    }
    return {name: str(value) for name, value in found.items() if value}


def triggerer_names(count: int) -> tuple[str, ...]:
    """The process names of ``count`` triggerers: ``triggerer``, then ``triggerer-2``, ``triggerer-3`` ..."""
    return numbered("triggerer", count)


def numbered(name: str, count: int) -> tuple[str, ...]:
    """The process names of ``count`` copies of a component: ``name``, then ``name-2``, ``name-3`` ..."""
    return (name, *(f"{name}-{i}" for i in range(2, count + 1)))


def _fernet_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


@dataclass
class DeploymentConfig:
    """The options of one deployment and what follows from them.

    :param root: directory under which ``AIRFLOW_HOME`` is created (``root/airflow_home``).
    :param dags_folders: folders loaded as DAG bundles (default, also when empty: examples and tests/dags).
    :param scenario: the emulator's scenario (builtin name or file).
    :param api_port: API server / UI port on 127.0.0.1 (default, also when 0: a free one).
    :param parallelism: ``[core] parallelism``: task processes running at once (the LocalExecutor forks
        that many workers). Deferred tasks hold no slot, so many more tasks can wait at the same time.
    :param poll_interval: ``SM_PREFS_POLL_INTERVAL`` for DAGs that read it at parse time.
    :param max_poll_interval: ``SM_PREFS_MAX_POLL_INTERVAL``.
    :param schedules: let the scheduler create scheduled runs. Off by default: a scheduled example DAG
        would submit SageMaker jobs nobody asked for and skew what tests count; trigger runs instead.
    :param database: ``postgres`` (a private server on a loopback port, see :mod:`harness.postgres`),
        ``sqlite`` (a file in AIRFLOW_HOME; fine for a few tasks, it stalls under dozens deferring at
        once), or ``auto``: PostgreSQL when its binaries and drivers are installed, else SQLite.
    :param extra_env: more environment for every Airflow process (e.g. ``AIRFLOW__...`` overrides).
    :param startup_timeout: seconds to wait for the deployment to become healthy.
    :param login: ``(username, password)``: the deployment requires a login. SimpleAuthManager gets one
        user with the Admin role and that password (``simple_auth_manager_all_admins`` off, the password
        in :attr:`passwords_file`); the REST client signs in with it, the UI shows its login form.
        None (the default): no login, every request is an admin.
    :param teams: teams created in the metadata database before the components start (multi-team
        deployments: SimpleAuthManager refuses users of a team that does not exist).
    :param triggerers: triggerer processes (Airflow's HA mode when more than 1): the first is named
        ``triggerer``, the others ``triggerer-2``, ``triggerer-3`` ...; same command and environment, each
        its own ``TriggererJob`` that takes unassigned triggers and those of a triggerer whose heartbeat
        is older than ``[triggerer] triggerer_health_check_threshold`` (10 s here).
    :param executor: ``local`` (LocalExecutor) or ``celery``: CeleryExecutor with a private Redis broker
        (``redis``, :mod:`harness.redis`) and ``workers`` Celery workers.
    :param schedulers: scheduler processes (Airflow's HA scheduler when more than 1; it needs PostgreSQL):
        ``scheduler``, ``scheduler-2`` ...
    :param workers: Celery workers (``worker``, ``worker-2`` ...), each its own process group with its own
        working directory (``root/<name>``), pid file and output log; with ``executor="local"``, none.
    :param worker_concurrency: task processes one Celery worker runs at once.
    :param broker_port: the Redis broker's port (default, also when 0: a free one).
    """

    root: Path
    dags_folders: list[Path] = field(default_factory=default_dags_folders)
    scenario: str = "default"
    api_port: int = 0
    parallelism: int = 32
    poll_interval: float = 1.0
    max_poll_interval: float = 2.0
    schedules: bool = False
    database: str = "auto"
    extra_env: dict[str, str] = field(default_factory=dict)
    startup_timeout: float = 240.0
    login: tuple[str, str] | None = None
    teams: tuple[str, ...] = ()
    triggerers: int = 1
    executor: str = "local"
    schedulers: int = 1
    workers: int = 2
    worker_concurrency: int = 8
    broker_port: int = 0

    def __post_init__(self) -> None:
        if self.triggerers < 1:
            raise ValueError(f"triggerers: at least 1, not {self.triggerers}")
        if self.schedulers < 1:
            raise ValueError(f"schedulers: at least 1, not {self.schedulers}")
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor: {self.executor!r} is not one of {', '.join(EXECUTORS)}")
        if self.executor == "celery" and (self.workers < 1 or self.worker_concurrency < 1):
            raise ValueError("workers and worker_concurrency: at least 1 with executor='celery'")
        if self.executor == "local":
            self.workers = 0
        else:
            self.broker_port = self.broker_port or free_port()
        if self.database not in DATABASES:
            raise ValueError(f"database: {self.database!r} is not one of {', '.join(DATABASES)}")
        if self.login is not None:
            username, password = self.login
            # simple_auth_manager_users is "user:role,user:role".
            if not username or any(c in username for c in ":, ") or not password:
                raise ValueError("login: a username without ':', ',' or spaces, and a password, are required")
            self.login = (username, password)
        self.root = Path(self.root).resolve()
        self.dags_folders = [Path(p).resolve() for p in self.dags_folders or default_dags_folders()]
        self.api_port = self.api_port or free_port()
        self.extra_env = dict(self.extra_env)

    @property
    def components(self) -> tuple[str, ...]:
        """The Airflow processes this deployment runs, in start order (:data:`COMPONENTS`, one name per
        triggerer)."""
        return (
            "api-server",
            *numbered("scheduler", self.schedulers),
            "dag-processor",
            *triggerer_names(self.triggerers),
            *self.worker_names,
        )

    @property
    def needs_postgres(self) -> str | None:
        """Why this deployment cannot run on SQLite, if it cannot."""
        if self.executor == "celery":
            return "the CeleryExecutor"
        if self.schedulers > 1:
            return "more than one scheduler"
        return None

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        return numbered("scheduler", self.schedulers)

    @property
    def worker_names(self) -> tuple[str, ...]:
        """The Celery workers' process names (none with the LocalExecutor)."""
        return numbered("worker", self.workers) if self.workers else ()

    def workdir(self, component: str) -> Path:
        """A component's working directory: a Celery worker's own (``root/<name>``), else AIRFLOW_HOME."""
        return self.root / component if component in self.worker_names else self.home

    @property
    def broker_dir(self) -> Path:
        """The Redis broker's append-only file."""
        return self.root / "redis"

    @property
    def home(self) -> Path:
        """``AIRFLOW_HOME``."""
        return self.root / "airflow_home"

    @property
    def log_dir(self) -> Path:
        """Component logs (``<component>.log``) and Airflow's task logs."""
        return self.home / "logs"

    @property
    def passwords_file(self) -> Path:
        """SimpleAuthManager's passwords (``{"user": "password"}``) when the deployment has a login."""
        return self.home / "simple_auth_manager_passwords.json"

    def passwords_json(self) -> str:
        """What :attr:`passwords_file` holds: the login's password ("{}" without a login)."""
        return json.dumps(dict([self.login]) if self.login is not None else {})

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def ui_url(self) -> str:
        return self.api_url + "/"

    def airflow_env(
        self, *, emulator_url: str, region: str, database_env: Mapping[str, str]
    ) -> dict[str, str]:
        """The environment every Airflow process of the deployment runs with (new secrets each call)."""
        bundles = [
            {
                "name": f"bundle-{i}-{folder.name}",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(folder), "refresh_interval": 0},
            }
            for i, folder in enumerate(self.dags_folders)
        ]
        connection: dict[str, Any] = {
            "conn_type": "aws",
            "login": FAKE_ACCESS_KEY_ID,
            "password": FAKE_SECRET_ACCESS_KEY,
            "extra": {"endpoint_url": emulator_url, "region_name": region},
        }
        second = real_looking_credentials()
        second_connection = {
            "conn_type": "aws",
            "login": second["aws_access_key_id"],
            "password": second["aws_secret_access_key"],
            "extra": {
                "endpoint_url": emulator_url,
                "region_name": region,
                "aws_session_token": second["aws_session_token"],
            },
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
                **self._executor_env(),
                **database_env,
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
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api_url}/execution/",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.api_port),
                "AIRFLOW__API__BASE_URL": self.api_url,
                "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(64),
                "AIRFLOW__API__EXPOSE_CONFIG": "True",
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(64),
                # Airflow 3.0 signs UI and REST tokens with an empty issuer list when none is set, which
                # PyJWT 2.10 and later refuse ("Issuer (iss) must be a string"): every login fails.
                "AIRFLOW__API_AUTH__JWT_ISSUER": "sm-prefs-local-airflow",
                # Airflow 3.0's REST API answers 400 to ?deserialize=true on XCom entries unless this is on
                # (later minors always allow it); the tests read the XCom values users see.
                "AIRFLOW__API__ENABLE_XCOM_DESERIALIZE_SUPPORT": "True",
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
                # Dozens of task processes on 2 cores keep the api-server busy: a task's call to the
                # execution API may take longer than the default 5 s, and then the task fails for it.
                "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
                # A task's calls to the execution API are retried 5 times by default, with waits from 1 s
                # up: they give up within seconds, and a task that starts while the api-server restarts
                # (15-20 s here) fails its try for it. Twelve tries, waits of 1 s up to 10 s, ride out
                # about 80 s of api-server downtime (docs/local-airflow.md).
                "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "12",
                "AIRFLOW__WORKERS__EXECUTION_API_RETRY_WAIT_MAX": "10",
                "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
                "AIRFLOW__LOGGING__COLORED_CONSOLE_LOG": "False",
                "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(connection),
                f"AIRFLOW_CONN_{SECOND_CONN_ID.upper()}": json.dumps(second_connection),
                f"AIRFLOW_CONN_{EVENTS_CONN_ID.upper()}": json.dumps(
                    {
                        **connection,
                        "extra": {
                            **connection["extra"],
                            "sm_prefs_event_queue_url": f"https://sqs.{region}.amazonaws.com/123456789012/{EVENT_QUEUE}",
                        },
                    }
                ),
                # DAG files that read their poll cadence at parse time (the examples, tests/dags).
                "SM_PREFS_POLL_INTERVAL": str(self.poll_interval),
                "SM_PREFS_MAX_POLL_INTERVAL": str(self.max_poll_interval),
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self._auth_env())
        env.update(self.extra_env)
        return env

    def _executor_env(self) -> dict[str, str]:
        if self.executor == "local":
            return {"AIRFLOW__CORE__EXECUTOR": "LocalExecutor"}
        from harness import redis

        return {
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            # Results go to the metadata database (the provider's default: db+ and sql_alchemy_conn).
            "AIRFLOW__CELERY__BROKER_URL": redis.url(self.broker_port),
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.worker_concurrency),
            # A task sent to a worker that died before starting it stays queued until this runs out; the
            # scheduler then sends it again (Airflow's default, 600 s, is long for a test run).
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "120",
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT_CHECK_INTERVAL": "15",
            "AIRFLOW__CELERY__OPERATION_TIMEOUT": "5",
        }

    def _auth_env(self) -> dict[str, str]:
        """SimpleAuthManager's settings: everyone is an admin, or the login's user is the only one."""
        if self.login is None:
            return {"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"}
        return {
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{self.login[0]}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.passwords_file),
        }

    def command(self, component: str) -> list[str]:
        """The command line of one of :attr:`components` (every triggerer runs the same one)."""
        airflow = venv_bin("airflow")
        if component == "api-server":
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
        if component in self.worker_names:
            # Each worker names itself (two on one host) and keeps its pid file in its own directory.
            return [
                airflow,
                "celery",
                "worker",
                "--celery-hostname",
                f"{component}@%h",
                "--concurrency",
                str(self.worker_concurrency),
                "--pid",
                str(self.workdir(component) / "worker.pid"),
                "--skip-serve-logs",
            ]
        if component in (*self.scheduler_names, *triggerer_names(self.triggerers)):
            # No log-serving sidecar: it binds 0.0.0.0, and the API server reads the local log files anyway.
            return [airflow, component.partition("-")[0], "--skip-serve-logs"]
        if component == "dag-processor":
            return [airflow, "dag-processor"]
        raise KeyError(component)
