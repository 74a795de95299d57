"""The keeper: what exits on its own is started again, as an orchestrator would; what is held stays down."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from harness.supervisor import Keeper, Supervisor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def wait_for(check: object, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_an_exited_component_is_restarted_and_a_held_one_is_not(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path, cwd=tmp_path)
    held: set[str] = {"held"}
    seen: list[tuple[str, int]] = []
    try:
        for name in ("crashes", "held", "steady"):
            supervisor.start(name, SLEEPER, {}, cwd=tmp_path / name)
        steady = supervisor.procs["steady"].pid
        with Keeper(
            supervisor, hold=lambda: set(held), on_restart=lambda n, c: seen.append((n, c)), every=0.1
        ):
            supervisor.kill("crashes", signal.SIGKILL)
            supervisor.kill("held", signal.SIGKILL)
            assert wait_for(lambda: supervisor.is_alive("crashes"))
            assert supervisor.starts("crashes") == 2
            time.sleep(1.0)  # ten rounds of the keeper
            assert not supervisor.is_alive("held") and supervisor.starts("held") == 1
            held.clear()
            assert wait_for(lambda: supervisor.is_alive("held"))
        assert seen == [("crashes", -signal.SIGKILL), ("held", -signal.SIGKILL)]
        assert supervisor.procs["steady"].pid == steady and supervisor.starts("steady") == 1
        assert (tmp_path / "crashes").is_dir()
    finally:
        supervisor.stop_all()
