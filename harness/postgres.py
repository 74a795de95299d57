"""A private, throw-away PostgreSQL server for a local Airflow deployment (loopback only, trust auth).

SQLite serialises every write; a LocalExecutor deployment with dozens of tasks deferring and resuming
at once stalls on it ("database is locked", API requests timing out, a triggerer that looks dead). This
starts the machine's own PostgreSQL binaries (Debian's ``postgresql`` package: ``.ci/postgres.sh``
installs it) on a free 127.0.0.1 port with its data in a temporary directory, and removes it on stop.
The Python side needs ``psycopg2`` and ``asyncpg`` (Airflow's async engine).

``SM_PREFS_POSTGRES_OPTIONS`` adds server options to diagnose a run, e.g.
``"-c log_lock_waits=on -c deadlock_timeout=200ms -c log_min_duration_statement=500"``; the server log is
copied to the deployment's ``logs/postgres.log`` on stop.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

#: Durability off: this database lives for one test session.
_SERVER_OPTIONS = (
    "-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off "
    "-c max_connections=300 -c shared_buffers=64MB"
)


def _server_options() -> str:
    return f"{_SERVER_OPTIONS} {os.environ.get('SM_PREFS_POSTGRES_OPTIONS', '')}".strip()


class PostgresUnavailable(RuntimeError):
    """PostgreSQL binaries or the Python drivers are missing; the message says what to install."""


def bin_dir() -> Path | None:
    """Directory of ``initdb``/``pg_ctl``: on PATH, else the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None


def missing() -> list[str]:
    """What is missing for :class:`LocalPostgres`; empty when it can run."""
    problems = []
    if bin_dir() is None:
        problems.append(
            "PostgreSQL server binaries (initdb, pg_ctl): run .ci/postgres.sh or apt-get install postgresql"
        )
    for module, package in (("psycopg2", "psycopg2-binary"), ("asyncpg", "asyncpg")):
        if importlib.util.find_spec(module) is None:
            problems.append(f"Python package {package} (module {module})")
    return problems


class LocalPostgres:
    """One PostgreSQL server in a temporary data directory.

    :param port: TCP port on 127.0.0.1.
    :param log_copy: where to copy the server log on stop (the data directory is removed).
    """

    user = "airflow"
    database = "airflow"

    def __init__(self, port: int, log_copy: Path | None = None) -> None:
        self.port = port
        self.log_copy = log_copy
        self.data: Path | None = None
        self._bin = bin_dir()
        # The server refuses to run as root; as root, run every server command as the postgres user.
        self._as: list[str] = []
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError as err:
                raise PostgresUnavailable("running as root needs the 'postgres' system user") from err
            self._as = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def _run(self, *command: str, timeout: float = 120.0) -> None:
        assert self._bin is not None
        result = subprocess.run(
            [*self._as, str(self._bin / command[0]), *command[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd="/",
        )
        if result.returncode != 0:
            raise PostgresUnavailable(f"{command[0]} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")

    def start(self) -> LocalPostgres:
        problems = missing()
        if problems:
            raise PostgresUnavailable("cannot start PostgreSQL; missing: " + "; ".join(problems))
        # Under /tmp, not under the caller's (possibly root-only) directory: the server user must reach it.
        self.data = Path(tempfile.mkdtemp(prefix="sm-prefs-pg-"))
        if self._as:
            shutil.chown(self.data, "postgres", "postgres")
        pgdata = str(self.data / "data")
        self._run("initdb", "-D", pgdata, "-U", self.user, "--auth=trust", "--encoding=UTF8", "--no-sync")
        options = f"{_server_options()} -p {self.port} -c unix_socket_directories={self.data}"
        self._run("pg_ctl", "-D", pgdata, "-l", str(self.data / "server.log"), "-o", options, "-w", "start")
        deadline = time.monotonic() + 30
        while True:
            try:
                self._run("createdb", *self._connect(), self.database)
                return self
            except PostgresUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _connect(self) -> list[str]:
        """A PostgreSQL client's options that connect it to this server."""
        return ["-h", "127.0.0.1", "-p", str(self.port), "-U", self.user]

    def _client(self, tool: str, *args: str) -> list[str]:
        """The command line of a PostgreSQL client ``tool`` connected to this server."""
        assert self._bin is not None
        return [*self._as, str(self._bin / tool), *self._connect(), *args]

    def dump(self) -> bytes:
        """``pg_dump`` of the whole database, e.g. to prove a secret is stored nowhere in it."""
        command = self._client("pg_dump", self.database)
        return subprocess.run(command, capture_output=True, timeout=120, check=True, cwd="/").stdout

    def restore(self, dump: bytes) -> None:
        """Load a :meth:`dump` (plain SQL) into this server's empty database; stops at the first error."""
        command = self._client("psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.database)
        result = subprocess.run(command, input=dump, capture_output=True, timeout=120, check=False, cwd="/")
        if result.returncode != 0:
            raise PostgresUnavailable(
                f"psql restore failed: {result.stderr[-2000:].decode(errors='replace')}"
            )

    def kill(self) -> int:
        """``kill -9`` of the server: the postmaster and every backend at once, as a crash; returns how many
        processes. :meth:`start_again` brings it back on the same port and data (crash recovery)."""
        import psutil

        assert self.data is not None
        leader = psutil.Process(int((self.data / "data" / "postmaster.pid").read_text().split()[0]))
        members = [leader, *leader.children(recursive=True)]
        for proc in members:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(members, timeout=15)
        return len(members)

    def start_again(self) -> None:
        """Start the server on its data directory again (after :meth:`kill`); returns once it accepts."""
        assert self.data is not None
        pgdata = str(self.data / "data")
        options = f"{_server_options()} -p {self.port} -c unix_socket_directories={self.data}"
        self._run("pg_ctl", "-D", pgdata, "-l", str(self.data / "server.log"), "-o", options, "-w", "start")

    def stop(self) -> None:
        if self.data is None:
            return
        with contextlib.suppress(PostgresUnavailable, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self.data / "data"), "-m", "immediate", "stop", timeout=30)
        if self.log_copy is not None:
            with contextlib.suppress(OSError):
                shutil.copyfile(self.data / "server.log", self.log_copy)
        shutil.rmtree(self.data, ignore_errors=True)
        self.data = None
