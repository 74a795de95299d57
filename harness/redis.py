"""A private Redis server, the Celery deployment's broker (loopback only, no password).

The machine's own ``redis-server`` (Debian's ``redis-server`` package: ``.ci/redis.sh`` installs it) runs
as a supervised process of the deployment (named ``redis``), so it can be killed and restarted like any
component. Its append-only file is written on every command and kept in the deployment's directory: a
restart, even after ``kill -9``, loses no queued Celery message, as a production broker with persistence
does.
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

from harness.errors import DeploymentError

#: The supervisor's name for the broker.
REDIS = "redis"


def missing() -> list[str]:
    """What is missing to run the broker; empty when it can run."""
    return (
        []
        if shutil.which("redis-server")
        else ["redis-server: run .ci/redis.sh or apt-get install redis-server"]
    )


def command(port: int, data_dir: Path, server: str | None = None) -> list[str]:
    """The broker's command line: 127.0.0.1:``port``, its append-only file in ``data_dir``.

    :param server: the ``redis-server`` binary (default: the one on PATH).
    """
    server = server or shutil.which("redis-server")
    if server is None:
        raise DeploymentError("cannot start the Celery broker; missing: " + "; ".join(missing()))
    data_dir.mkdir(parents=True, exist_ok=True)
    return [
        server,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--protected-mode",
        "no",
        "--dir",
        str(data_dir),
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--daemonize",
        "no",
    ]


def url(port: int) -> str:
    """Celery's broker URL for the server on ``port``."""
    return f"redis://127.0.0.1:{port}/0"


def wait_ready(port: int, timeout: float) -> None:
    """Until the server answers ``PING`` on ``port``; :raises DeploymentError: after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(64).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise DeploymentError(
                f"the Redis broker on 127.0.0.1:{port} did not answer within {timeout:.0f}s"
            )
        time.sleep(0.2)
