"""The offline SageMaker as a process of a deployment: ``sm-prefs-emulator`` on a free loopback port,
found by the URL it prints, controlled through :class:`~offline_sagemaker.RemoteSageMaker`.
"""

from __future__ import annotations

import os
import time

from harness.config import venv_bin
from harness.errors import DeploymentError
from harness.supervisor import Supervisor
from offline_sagemaker import RemoteSageMaker

#: The emulator's process name (and log file name) in the supervisor.
EMULATOR = "emulator"


def start_emulator(supervisor: Supervisor, scenario: str, deadline: float) -> RemoteSageMaker:
    """Start the emulator under ``supervisor``; returns its admin handle once it listens.

    :param scenario: builtin scenario name or file.
    :param deadline: ``time.monotonic()`` value by which it must have printed its URL.
    """
    log_path = supervisor.log(EMULATOR)
    # --port 0: the emulator binds a free port itself and prints its URL as the first stdout line.
    command = [venv_bin("sm-prefs-emulator"), "--port", "0", "--host", "127.0.0.1", "--scenario", scenario]
    proc = supervisor.start(
        EMULATOR, command, env={k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    )
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DeploymentError(f"the offline SageMaker exited with {proc.returncode}; see {log_path}")
        first = log_path.read_text(errors="replace").splitlines()[:1] if log_path.exists() else []
        if first and first[0].startswith("http://127.0.0.1:"):
            return RemoteSageMaker(first[0].strip())
        time.sleep(0.1)
    raise DeploymentError(f"the offline SageMaker did not start; see {log_path}")
