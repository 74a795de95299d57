"""Peak memory of a local deployment's components, sampled in a thread while a long run goes on.

Its own module because more than one long run reports it (the soak, :mod:`harness.soak`, and the chaos
run, :mod:`harness.chaos`): each component's figure is the sum over every process of its session.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.config import COMPONENTS
from harness.emulator import EMULATOR

if TYPE_CHECKING:
    from harness.deployment import LocalAirflow

#: Components whose peak memory is reported, in this order.
MEMORY_COMPONENTS = (*COMPONENTS, EMULATOR, "postgres")
#: Real seconds between two samples.
SAMPLE_EVERY = 1.5


class MemorySampler:
    """Peak RSS (sum over a component's processes) of every component, sampled in a thread."""

    def __init__(
        self, af: LocalAirflow, every: float = SAMPLE_EVERY, components: Sequence[str] = MEMORY_COMPONENTS
    ) -> None:
        self.af = af
        self.every = every
        self.components = tuple(components)
        self.peak: dict[str, int] = dict.fromkeys(self.components, 0)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-memory", daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _postgres_pids(self) -> set[int]:
        pg = self.af.postgres
        if pg is None or pg.data is None:
            return set()
        pidfile = pg.data / "data" / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError):
            import psutil

            leader = int(pidfile.read_text().split()[0])
            proc = psutil.Process(leader)
            return {leader, *(child.pid for child in proc.children(recursive=True))}
        return set()

    def sample(self) -> dict[str, int]:
        import psutil

        leaders = {proc.pid: name for name, proc in list(self.af.supervisor.procs.items())}
        postgres = self._postgres_pids()
        totals: Counter[str] = Counter()
        for proc in psutil.process_iter(["pid", "memory_info"]):
            pid = int(proc.info["pid"])
            mem = proc.info.get("memory_info")
            if mem is None:
                continue
            if pid in postgres:
                totals["postgres"] += mem.rss
                continue
            with contextlib.suppress(OSError):
                name = leaders.get(os.getsid(pid))
                if name is not None:
                    totals[name] += mem.rss
        for name, rss in totals.items():
            self.peak[name] = max(self.peak.get(name, 0), rss)
        self.samples += 1
        return dict(totals)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                self.sample()
            self._stop.wait(self.every)

    def peak_mib(self) -> dict[str, float]:
        return {name: round(self.peak.get(name, 0) / 2**20, 1) for name in self.components}
