"""The look-up cache of the guardrails: in memory, and in a per-user directory shared by task processes.

Airflow 3 runs every task try in a process of its own, so a cache in memory alone would help only calls
within one task. Entries are also written, one small JSON file each, to a directory only the worker's
user can read (``<tmp>/airflow-sm-prefs-<uid>``), so the tasks of a DAG that run on one worker share the
answers. File names are digests of the keys; values are prices, quota values and failure messages —
never credentials. Expiry uses the wall clock for files (they outlive processes).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["TtlCache", "default_directory"]


def default_directory() -> Path:
    """``<tmp>/airflow-sm-prefs-<uid>`` (``SM_PREFS_CACHE_DIR`` overrides; an empty value turns files off)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(
        os.environ.get("SM_PREFS_CACHE_DIR") or Path(tempfile.gettempdir()) / f"airflow-sm-prefs-{uid}"
    )


# Not cachetools' TTLCache: each entry has its own lifetime (a price a day, a quota ten minutes, a
# failure five), and the entries are shared through files by the task processes of a worker. The keys
# are few (a handful of services and instance types per connection), so no size bound is needed.
class TtlCache:
    """A thread-safe map whose entries expire, backed by files in ``directory`` when one is given.

    :param directory: where entries are shared between processes; None keeps them in memory only.
    :param clock: epoch seconds (injectable for tests).
    """

    def __init__(self, directory: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self._directory = directory
        self._clock = clock
        self._lock = threading.Lock()
        self._items: dict[str, tuple[float, Any]] = {}

    @staticmethod
    def _name(key: tuple[Any, ...]) -> str:
        return hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:40]

    def get(self, key: tuple[Any, ...]) -> tuple[bool, Any]:
        """``(True, value)`` for a live entry, else ``(False, None)``."""
        name = self._name(key)
        with self._lock:
            item = self._items.get(name) or self._read(name)
            if item is None or item[0] <= self._clock():
                self._items.pop(name, None)
                return False, None
            self._items[name] = item
            return True, item[1]

    def put(self, key: tuple[Any, ...], value: Any, ttl: float) -> None:
        name = self._name(key)
        item = (self._clock() + ttl, value)
        with self._lock:
            self._items[name] = item
            self._write(name, item)

    def clear(self) -> None:
        """Forget everything, files included."""
        with self._lock:
            self._items.clear()
            if self._directory is not None and self._directory.is_dir():
                for path in self._directory.glob("*.json"):
                    with contextlib.suppress(OSError):
                        path.unlink()

    def _read(self, name: str) -> tuple[float, Any] | None:
        if self._directory is None:
            return None
        try:
            data = json.loads((self._directory / f"{name}.json").read_text(encoding="utf-8"))
            return float(data["expires"]), data["value"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write(self, name: str, item: tuple[float, Any]) -> None:
        if self._directory is None:
            return
        try:
            self._directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            handle, tmp = tempfile.mkstemp(dir=self._directory, suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({"expires": item[0], "value": item[1]}, out)
            os.replace(tmp, self._directory / f"{name}.json")
        except (OSError, TypeError, ValueError):
            pass  # a cache that cannot write is only slower
