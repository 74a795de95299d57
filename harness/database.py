"""The metadata database of a deployment: PostgreSQL (a private server, :mod:`harness.postgres`) or a
SQLite file, its settings for Airflow, ``airflow db migrate``, a dump of everything in it, and reading it
through Airflow's own models in the deployment's environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import postgres
from harness.config import DATABASES, REPO_ROOT, free_port, venv_bin
from harness.errors import DeploymentError

#: Import path of this module: ``[database] sql_alchemy_connect_args`` names an object by it.
_MODULE = "harness.database"
#: sqlite3/aiosqlite connect arguments for every Airflow process (``[database] sql_alchemy_connect_args``
#: names this object). SQLite lets one writer at a time; with 50 tasks deferring and resuming at once, the
#: default 5 s busy timeout made the triggerer and the DAG processor die on "database is locked".
SQLITE_CONNECT_ARGS: dict[str, Any] = {"timeout": 60}


class MetadataDatabase:
    """The database one deployment runs on.

    :param choice: ``postgres``, ``sqlite`` or ``auto`` (PostgreSQL when its binaries and drivers are
        installed, else SQLite); decided by :meth:`start`.
    :param home: ``AIRFLOW_HOME`` (where the SQLite file lives).
    :param log_dir: where the PostgreSQL server's log is copied when it stops.
    """

    def __init__(self, choice: str, home: Path, log_dir: Path) -> None:
        if choice not in DATABASES:
            raise ValueError(f"database: {choice!r} is not one of {', '.join(DATABASES)}")
        self.choice = choice
        self.home = home
        self.log_dir = log_dir
        #: The private PostgreSQL server, while one runs.
        self.postgres: postgres.LocalPostgres | None = None

    def start(self, needs_postgres: str | None = None) -> None:
        """Start PostgreSQL if chosen (or if ``auto`` and it can run); SQLite needs nothing started.

        :param needs_postgres: why the deployment cannot run on SQLite (several schedulers, Celery), if so:
            then PostgreSQL must start, and its absence is an error that says why.
        """
        if needs_postgres is not None and (self.choice == "sqlite" or postgres.missing()):
            raise DeploymentError(
                f"{needs_postgres} needs PostgreSQL: "
                + ("choose database='postgres'" if self.choice == "sqlite" else "; ".join(postgres.missing()))
            )
        if self.choice == "sqlite" or (self.choice == "auto" and postgres.missing()):
            return
        self.postgres = postgres.LocalPostgres(free_port(), log_copy=self.log_dir / "postgres.log").start()

    def stop(self) -> None:
        if self.postgres is not None:
            self.postgres.stop()
            self.postgres = None

    @property
    def backend(self) -> str:
        """``postgres`` or ``sqlite``: what the deployment runs on (decided by :meth:`start`)."""
        return "postgres" if self.postgres is not None else "sqlite"

    def airflow_env(self) -> dict[str, str]:
        """The ``AIRFLOW__DATABASE__*`` settings (and what they need) for every Airflow process."""
        if self.postgres is not None:
            return {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.postgres.url}
        return {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": f"{_MODULE}.SQLITE_CONNECT_ARGS",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": f"{_MODULE}.SQLITE_CONNECT_ARGS",
            # Those settings name an object of this checkout's harness package, which is not installed.
            "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO_ROOT), os.environ.get("PYTHONPATH")))),
        }

    def migrate(self, env: Mapping[str, str], timeout: float) -> None:
        """``airflow db migrate`` with the deployment's environment; its output in ``db-migrate.log``.

        On PostgreSQL, the first migration of an Airflow release leaves its result in
        :func:`migrated_dump` (``pg_dump``, plain SQL): every later deployment on the same Airflow loads it
        in a fraction of a second instead of migrating again (about 30 s of a loaded 2-core machine per
        deployment). The dump holds the schema and the rows a migration seeds, nothing of a run.
        """
        cached = migrated_dump(self.backend)
        if self.postgres is not None and cached is not None and cached.exists():
            self.postgres.restore(cached.read_bytes())
            (self.log_dir / "db-migrate.log").write_text(f"restored the migrated database from {cached}\n")
            return
        log = self.log_dir / "db-migrate.log"
        with log.open("wb") as out:
            result = subprocess.run(
                [venv_bin("airflow"), "db", "migrate"],
                env=dict(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        if result.returncode != 0:
            raise DeploymentError(f"airflow db migrate failed; see {log}")
        if self.postgres is not None and cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_name(f"{cached.name}.{os.getpid()}.partial")
            partial.write_bytes(self.postgres.dump())
            partial.replace(cached)  # atomic: a deployment starting meanwhile reads all of it or none

    def create_teams(self, env: Mapping[str, str], teams: Sequence[str], timeout: float = 120.0) -> None:
        """``airflow teams create`` for each of ``teams`` (after :meth:`migrate`)."""
        for team in teams:
            _run(env, [venv_bin("airflow"), "teams", "create", team], f"airflow teams create {team}", timeout)

    def dump(self) -> bytes:
        """Everything in the database as bytes (pg_dump, or the SQLite file and its WAL)."""
        if self.postgres is not None:
            return self.postgres.dump()
        return b"".join(path.read_bytes() for path in sorted(self.home.glob("airflow.db*")))


#: Where migrated databases are kept (``SM_PREFS_MIGRATED_DB_CACHE``; empty: migrate every time).
MIGRATED_CACHE = REPO_ROOT / "build" / "migrated-db"


def migrated_dump(backend: str) -> Path | None:
    """The dump of a database migrated by this environment's Airflow (its version, its interpreter, the
    PostgreSQL server's binaries), or None when not cached (SQLite, or the cache turned off)."""
    if backend != "postgres":
        return None
    setting = os.environ.get("SM_PREFS_MIGRATED_DB_CACHE")
    if setting == "":
        return None
    from importlib.metadata import version

    key = hashlib.sha256(
        "\0".join((version("apache-airflow"), sys.prefix, str(postgres.bin_dir()))).encode()
    ).hexdigest()[:16]
    return Path(setting or MIGRATED_CACHE) / f"airflow-{version('apache-airflow')}-{key}.sql"


def run_python(env: Mapping[str, str], code: str, timeout: float = 120.0) -> str:
    """Run ``code`` in a Python with a deployment's environment (its DB, keys); returns stdout."""
    return _run(env, [sys.executable, "-c", code], "python in the deployment", timeout)


def _run(env: Mapping[str, str], command: list[str], what: str, timeout: float) -> str:
    """``command`` with ``env``; its stdout, or :class:`DeploymentError` with the end of its stderr."""
    result = subprocess.run(
        command, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise DeploymentError(f"{what} failed: {result.stderr[-3000:]}")
    return result.stdout


def trigger_rows(env: Mapping[str, str]) -> list[dict[str, Any]]:
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
    out = run_python(env, code)
    line = next(line for line in reversed(out.splitlines()) if line.startswith("JSON:"))
    rows: list[dict[str, Any]] = json.loads(line[len("JSON:") :])
    return rows
