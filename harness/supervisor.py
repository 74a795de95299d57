"""Processes of a local deployment: start each in a session of its own with its output in a log file,
signal a whole session, kill and restart, stop everything; and find the processes of one task instance.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from harness.errors import DeploymentError


@dataclass(frozen=True)
class _Spec:
    command: list[str]
    env: dict[str, str]
    cwd: Path


class Supervisor:
    """Named processes, each its own session (process group leader) logging to ``log_dir/<name>.log``.

    :param log_dir: where each process's stdout and stderr go (appended, so a restart keeps the story).
    :param cwd: working directory of every process that :meth:`start` is not given one for.
    """

    def __init__(self, log_dir: Path, cwd: Path) -> None:
        self.log_dir = log_dir
        self.cwd = cwd
        #: Running (or exited, not yet stopped) processes by name, in start order.
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._specs: dict[str, _Spec] = {}
        self._log_files: dict[str, IO[bytes]] = {}
        self._starts: dict[str, int] = {}

    def log(self, name: str) -> Path:
        """The file a process's stdout/stderr goes to."""
        return self.log_dir / f"{name}.log"

    def start(
        self, name: str, command: Sequence[str], env: Mapping[str, str], cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``command`` as process ``name`` (in ``cwd``, created if missing); :meth:`restart` starts
        the same command again."""
        workdir = cwd or self.cwd
        workdir.mkdir(parents=True, exist_ok=True)
        self._specs[name] = _Spec(list(command), dict(env), workdir)
        return self._spawn(name)

    def starts(self, name: str) -> int:
        """How many times ``name`` was started (its first start and every restart)."""
        return self._starts.get(name, 0)

    def _spawn(self, name: str) -> subprocess.Popen[bytes]:
        spec = self._specs[name]
        self._starts[name] = self._starts.get(name, 0) + 1
        handle = self.log(name).open("ab")
        old = self._log_files.pop(name, None)
        if old is not None:
            old.close()
        self._log_files[name] = handle
        # Own session = own process group: killing the group takes the component's children with it
        # (task supervisors, the triggerer's runner, gunicorn/uvicorn workers).
        proc = subprocess.Popen(
            spec.command,
            env=spec.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=spec.cwd,
        )
        self.procs[name] = proc
        return proc

    def is_alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def check_running(self) -> None:
        """Raise :class:`DeploymentError` naming the log of the first process that has exited."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise DeploymentError(f"{name} exited with {proc.returncode}; see {self.log(name)}")

    def members(self, name: str) -> list[int]:
        """PIDs of every process ``name`` started, itself included.

        Each process is a session leader (``start_new_session``) and everything it forks inherits the
        session, even the task processes that the task supervisor moves into process groups of their own;
        so the session, not the process group, is what "the scheduler and all its tasks" means.
        """
        import psutil

        proc = self.procs.get(name)
        if proc is None:
            return []
        pids: list[int] = []
        for candidate in psutil.process_iter(["pid"]):
            pid = int(candidate.info["pid"])
            with contextlib.suppress(OSError):
                if os.getsid(pid) == proc.pid:
                    pids.append(pid)
        return pids

    def send_signal(self, name: str, sig: int) -> list[int]:
        """Send ``sig`` to every member of ``name``'s session; returns the PIDs signalled."""
        pids = self.members(name)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        return pids

    def terminate(self, name: str, grace: float = 10.0) -> None:
        """SIGTERM the whole session, then SIGKILL whatever is left after ``grace`` seconds."""
        proc = self.procs.get(name)
        if proc is None:
            return
        self.send_signal(name, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
        # Whatever outlived the leader (forked workers, task processes, the trigger runner) goes now.
        self.send_signal(name, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> list[int]:
        """Send ``sig`` to every process of ``name`` (``kill -9`` of the triggerer: ``SIGKILL``).

        Returns the PIDs signalled. With SIGKILL/SIGTERM, waits until the session leader is gone.
        """
        pids = self.send_signal(name, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.procs[name].wait(15)
        return pids

    def restart(self, name: str) -> None:
        """Start ``name`` again with its command (after :meth:`kill`; a running one is stopped first)."""
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            self.terminate(name)
        elif proc is not None:
            self.send_signal(name, signal.SIGKILL)
        self._spawn(name)

    def stop_all(self) -> None:
        """Terminate every process, last started first, and close the log files."""
        for name in reversed(list(self.procs)):
            self.terminate(name)
        self.procs.clear()
        for handle in self._log_files.values():
            with contextlib.suppress(OSError):
                handle.close()
        self._log_files.clear()


def task_pids(ti_id: str) -> dict[str, int]:
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
            found["supervisor"] = int(proc.info["pid"])
        elif cmdline.startswith("airflow worker -- "):
            found["task"] = int(proc.info["pid"])
    return found


def kill_task_process(ti_id: str, sig: int = signal.SIGKILL, which: str = "task") -> int:
    """``kill -9`` the process running a task instance (``which``: ``task`` or ``supervisor``)."""
    pids = task_pids(ti_id)
    if which not in pids:
        raise DeploymentError(f"no {which} process for task instance {ti_id} (found {pids})")
    os.kill(pids[which], sig)
    return pids[which]


class Keeper:
    """Restarts any process of ``supervisor`` that exits, as Kubernetes (``restartPolicy: Always``),
    systemd or the Helm chart's pods do: a scheduler exits when its database goes away, and production
    starts it again. A thread; a context manager.

    :param hold: names not to restart right now (a component deliberately down for a while).
    :param on_restart: called with ``(name, exit code)`` after each restart.
    """

    def __init__(
        self,
        supervisor: Supervisor,
        hold: Callable[[], set[str]] = set,
        on_restart: Callable[[str, int], None] | None = None,
        every: float = 1.0,
    ) -> None:
        self.supervisor = supervisor
        self.hold = hold
        self.on_restart = on_restart
        self.every = every
        #: ``(name, exit code)`` of every restart, in order.
        self.restarts: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="keeper", daemon=True)

    def __enter__(self) -> Keeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            held = self.hold()
            for name, proc in list(self.supervisor.procs.items()):
                code = proc.poll()
                if code is None or name in held:
                    continue
                self.supervisor.restart(name)
                self.restarts.append((name, code))
                if self.on_restart is not None:
                    self.on_restart(name, code)
                time.sleep(0.1)
