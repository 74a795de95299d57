"""Child processes of the benchmark: the offline SageMaker, the trigger process, and their environment."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
FAKE_KEY = "testing"


class ProcessError(RuntimeError):
    """A child process did not start, answer or end as expected."""


def bytecode_env(cache_dir: Path) -> dict[str, str]:
    """Cache compiled bytecode under ``cache_dir`` (not in the venv) for every child.

    Without a cache each fresh process compiles Airflow from source (PYTHONDONTWRITEBYTECODE is set
    here), which would be measured as import cost and slow every run by seconds.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    return {"PYTHONPYCACHEPREFIX": str(cache_dir)}


def airflow_env(airflow_home: Path, endpoint_url: str | None = None) -> dict[str, str]:
    """An isolated Airflow home and, with ``endpoint_url``, an ``aws_default`` connection to the emulator."""
    airflow_home.mkdir(parents=True, exist_ok=True)
    env = {
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AWS_ACCESS_KEY_ID": FAKE_KEY,
        "AWS_SECRET_ACCESS_KEY": FAKE_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    if endpoint_url is not None:
        env["AIRFLOW_CONN_AWS_DEFAULT"] = airflow_env_connection(endpoint_url)
    return env


def airflow_env_connection(endpoint_url: str) -> str:
    """The ``aws_default`` connection (JSON) to the emulator at ``endpoint_url``, signed with fake keys."""
    return json.dumps(
        {
            "conn_type": "aws",
            "login": FAKE_KEY,
            "password": FAKE_KEY,
            "extra": {"endpoint_url": endpoint_url, "region_name": "us-east-1"},
        }
    )


def assumed_role_env(
    endpoint_url: str, role_arn: str, duration_seconds: int, token_file: Path | None = None
) -> dict[str, str]:
    """An ``aws_default`` connection to the emulator that assumes ``role_arn`` at the emulator's STS for
    every client: AssumeRole signed with the long-term keys, or, with ``token_file``,
    AssumeRoleWithWebIdentity with the token in that file (written here). Sessions last
    ``duration_seconds`` emulated seconds (``DurationSeconds``).

    STS calls go to ``service_config.sts.endpoint_url`` (the amazon provider never sends them to the
    connection's ``endpoint_url``).
    """
    connection = json.loads(airflow_env_connection(endpoint_url))
    connection["extra"].update(
        role_arn=role_arn,
        assume_role_method="assume_role",
        assume_role_kwargs={"DurationSeconds": duration_seconds},
        service_config={"sts": {"endpoint_url": endpoint_url}},
    )
    if token_file is not None:
        token_file.parent.mkdir(parents=True, exist_ok=True)
        # A JWT-shaped token; the emulator reads its ``sub`` claim and checks nothing else.
        token_file.write_text("header.eyJzdWIiOiAiYWlyZmxvdy10cmlnZ2VyZXIifQ.signature", encoding="utf-8")
        connection["extra"].update(
            assume_role_method="assume_role_with_web_identity",
            assume_role_with_web_identity_federation="file",
            assume_role_with_web_identity_token_file=str(token_file),
        )
    return {"AIRFLOW_CONN_AWS_DEFAULT": json.dumps(connection)}


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without AWS profiles or connections, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW_CONN_", "AWS_PROFILE")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


class _Lines:
    """Lines of a child's stdout, readable with a timeout."""

    def __init__(self, stream: IO[str]) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def next(self, timeout: float) -> str | None:
        """The next line; None at end of stream. Raises ``queue.Empty`` on timeout."""
        return self._queue.get(timeout=max(0.0, timeout))


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` so far, or None once it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return float(times.user + times.system)


class EmulatorProcess:
    """``sm-prefs-emulator`` in its own process (its CPU is not charged to the trigger process).

    :param env: environment for the child.
    :param log_path: where its stderr goes.
    """

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        script = Path(sys.executable).with_name("sm-prefs-emulator")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "offline_sagemaker.cli"]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [*command, "--port", "0", "--scenario", "default"],
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            text=True,
            env=dict(env),
            cwd=ROOT,
        )
        lines = _Lines(self.proc.stdout)  # type: ignore[arg-type]
        try:
            url = lines.next(60.0)
        except queue.Empty:
            self.close()
            raise ProcessError("the offline SageMaker printed no URL within 60 s") from None
        if not url or not url.startswith("http"):
            self.close()
            raise ProcessError(f"the offline SageMaker did not start (first line {url!r}); see {log_path}")
        self.url = url

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_seconds(self) -> float | None:
        """CPU seconds the emulator has used so far."""
        return process_cpu_seconds(self.proc.pid)

    def close(self) -> None:
        """Terminate the emulator (SIGTERM, then SIGKILL after 10 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


class TriggerProcess:
    """The measured process (``python -m benchmarks.trigger_process``).

    :param spec: what to run (see :mod:`benchmarks.trigger_process`); written to ``spec_path``.
    :param spec_path: where the spec goes.
    :param env: environment for the child.
    :param log_path: where its stderr (Airflow's and the triggers' logs) goes.
    """

    def __init__(self, spec: dict[str, Any], spec_path: Path, env: Mapping[str, str], log_path: Path) -> None:
        spec_path.parent.mkdir(parents=True, exist_ok=True)
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        self.output = Path(spec["output"])
        self._log = log_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.trigger_process", str(spec_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=dict(env),
            cwd=ROOT,
        )
        self._lines = _Lines(self.proc.stdout)  # type: ignore[arg-type]
        self._ready = False
        self.log_path = log_path
        #: The run's ``benchmarks.events.EventRoute`` for a variant in event mode (set by the harness).
        self.event_route: Any = None

    def expect(self, word: str, timeout: float) -> bool:
        """Wait for a line ``word``; False on timeout or if the process ended first."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.next(deadline - time.monotonic())
            except queue.Empty:
                return False
            if line is None:
                return False
            if line.strip() == word:
                return True

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the process has imported everything (its ``READY`` line); at once after that."""
        if not self._ready:
            self._ready = self.expect("READY", timeout)
        return self._ready

    def send(self, word: str) -> None:
        """Send one control line (GO or STOP); ignored if the process has ended."""
        if self.proc.poll() is not None or self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write(word + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def result(self) -> dict[str, Any]:
        """The measurements the process wrote."""
        if not self.output.exists():
            raise ProcessError(f"the trigger process wrote no result; see {self.log_path}")
        data: dict[str, Any] = json.loads(self.output.read_text(encoding="utf-8"))
        return data

    def close(self, timeout: float = 30.0) -> None:
        """Let the process exit (closing stdin), killing it after ``timeout`` seconds."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()


def machine_info() -> dict[str, Any]:
    """nproc, CPU model, RAM, OS, Python and the versions that matter."""
    from importlib import metadata

    # psutil reports no CPU model; Linux names it in /proc/cpuinfo.
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for dist in (
        "apache-airflow",
        "apache-airflow-providers-amazon",
        "airflow-provider-sm-prefs",
        "botocore",
        "aiobotocore",
        "aiohttp",
        "moto",
    ):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": sys.platform,
        "python": sys.version.split()[0],
        "versions": versions,
        "loadavg_start": list(os.getloadavg()),
    }


def git_revision() -> str | None:
    """The checked-out commit (read-only ``git rev-parse``), or None."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        out = subprocess.run(
            [git, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
