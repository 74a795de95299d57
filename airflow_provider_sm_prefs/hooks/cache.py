"""The look-up cache of the guardrails: in memory, and in a per-user directory shared by task processes.

Airflow 3 runs every task try in a process of its own, so a cache in memory alone would help only calls
within one task. Entries are also written, one small JSON file each, to a directory only the worker's
user can read (``<tmp>/airflow-sm-prefs-<uid>``), so the tasks of a DAG that run on one worker share the
answers. File names are digests of the keys; values are prices, quota values and failure messages —
never credentials. Expiry uses the wall clock for files (they outlive processes).

The entries feed the guardrails (a price of $0.01 lets an expensive type past ``max_hourly_cost``), so a
file is believed only when no other user could have written it: the directory must be a real directory
(not a symlink) owned by us with no group or other permissions, and each entry a regular file owned by
us, opened without following links and without blocking (a FIFO planted under an entry name must not
hang the task). A directory that fails these checks is not used: the cache warns once, naming the path
and what is wrong, and keeps its entries in memory — a cache only saves look-ups, the guardrails still
run. No entry is believed to live longer than the lifetime the cache gives entries of its kind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["MAX_TTL", "TtlCache", "default_directory"]

log = logging.getLogger(__name__)

#: The longest lifetime an entry may claim (a price's day): an entry file that says it expires later
#: than this from now was not written by this code and is ignored.
MAX_TTL = 24 * 3600.0
#: Entries are a price, a quota table or a message; a larger file is not ours and is not read whole.
MAX_ENTRY_BYTES = 4 * 1024 * 1024
_ENTRY_SUFFIX = ".json"
_TEMP_SUFFIX = ".tmp"
# Open flags that never follow a symlink in the last path component and never wait on a FIFO or device.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# Files need the *at() calls (an open directory as the anchor of every entry operation) and O_NOFOLLOW;
# where the platform lacks them the cache stays in memory.
_FILES_SUPPORTED = bool(_NOFOLLOW and _DIRECTORY) and os.open in os.supports_dir_fd and hasattr(os, "geteuid")


def _uid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else 0


def default_directory() -> Path:
    """``<tmp>/airflow-sm-prefs-<uid>`` (``SM_PREFS_CACHE_DIR`` overrides; an empty value turns files off)."""
    return Path(
        os.environ.get("SM_PREFS_CACHE_DIR") or Path(tempfile.gettempdir()) / f"airflow-sm-prefs-{_uid()}"
    )


class _UnsafeDirectory(Exception):
    """The cache directory could have been written by someone else; its entries must not be believed."""


def _check_directory(path: Path, info: os.stat_result) -> None:
    """Raise :class:`_UnsafeDirectory` unless ``info`` (an ``lstat``/``fstat`` of ``path``) is ours alone."""
    if stat.S_ISLNK(info.st_mode):
        raise _UnsafeDirectory("is a symlink; the cache never follows one")
    if not stat.S_ISDIR(info.st_mode):
        raise _UnsafeDirectory("is not a directory")
    if info.st_uid != _uid():
        raise _UnsafeDirectory(f"is owned by uid {info.st_uid}, not by this process's uid {_uid()}")
    if info.st_mode & 0o077:
        raise _UnsafeDirectory(
            f"has mode {stat.S_IMODE(info.st_mode):04o}; group and others must have no access (0700)"
        )


def _lstat_or_create(path: Path, create: bool) -> os.stat_result | None:
    """``lstat`` of ``path``, made first (mode 0700) when missing and ``create``; None if neither works.

    A directory another task process made at the same moment is returned like any other: the caller
    checks it.
    """
    try:
        return os.lstat(path)
    except FileNotFoundError:
        if not create:
            return None
    except OSError:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None  # cannot create it: the cache is only slower
    try:
        return os.lstat(path)
    except OSError:
        return None


# Not cachetools' TTLCache: each entry has its own lifetime (a price a day, a quota ten minutes, a
# failure five), and the entries are shared through files by the task processes of a worker. The keys
# are few (a handful of services and instance types per connection), so no size bound is needed.
class TtlCache:
    """A thread-safe map whose entries expire, backed by files in ``directory`` when one is given.

    ``directory`` is used only while it is a real directory owned by this process's user with mode 0700
    (it is created so when missing); otherwise the cache logs one warning and keeps entries in memory.

    :param directory: where entries are shared between processes; None keeps them in memory only.
    :param clock: epoch seconds (injectable for tests).
    :param max_ttl: the longest lifetime any entry may have; an entry claiming more is a miss.
    """

    def __init__(
        self,
        directory: Path | None = None,
        clock: Callable[[], float] = time.time,
        max_ttl: float = MAX_TTL,
    ) -> None:
        self._directory = directory if _FILES_SUPPORTED else None
        self._clock = clock
        self._max_ttl = max_ttl
        self._lock = threading.Lock()
        self._items: dict[str, tuple[float, Any]] = {}

    @property
    def directory(self) -> Path | None:
        """Where entries are shared, or None once the cache keeps them in memory only."""
        return self._directory

    @staticmethod
    def _name(key: tuple[Any, ...]) -> str:
        return hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:40]

    def get(self, key: tuple[Any, ...], ttl: float | None = None) -> tuple[bool, Any]:
        """``(True, value)`` for a live entry, else ``(False, None)``.

        :param ttl: the lifetime entries of this key are put with (at most ``max_ttl``); an entry that
            claims to expire later than that from now was not written by this cache and is a miss.
        """
        name = self._name(key)
        now = self._clock()
        horizon = now + (self._max_ttl if ttl is None else min(ttl, self._max_ttl))
        with self._lock:
            item = self._items.get(name) or self._read(name)
            if item is None or not now < item[0] <= horizon:
                self._items.pop(name, None)
                return False, None
            self._items[name] = item
            return True, item[1]

    def put(self, key: tuple[Any, ...], value: Any, ttl: float) -> None:
        name = self._name(key)
        item = (self._clock() + min(ttl, self._max_ttl), value)
        with self._lock:
            self._items[name] = item
            self._write(name, item)

    def clear(self) -> None:
        """Forget everything, files included."""
        with self._lock:
            self._items.clear()
            with self._opened(create=False) as fd:
                if fd is None:
                    return
                for entry in os.listdir(fd):
                    if entry.endswith((_ENTRY_SUFFIX, _TEMP_SUFFIX)):
                        with contextlib.suppress(OSError):
                            os.unlink(entry, dir_fd=fd)

    def _disable(self, path: Path, why: str) -> None:
        """Stop using ``path`` for the life of this cache, and say so once."""
        log.warning(
            "The guardrails' look-up cache directory %s %s, so another user could have written its "
            "entries; it is not used, and look-ups are cached in memory only in this process. To share "
            "them between task processes again, remove it or make it a directory owned by uid %s with "
            "mode 0700, or point SM_PREFS_CACHE_DIR at one.",
            path,
            why,
            _uid(),
        )
        self._directory = None

    @contextlib.contextmanager
    def _opened(self, create: bool) -> Iterator[int | None]:
        """An open descriptor of the cache directory once it proves ours, else None.

        Every entry is opened, replaced and removed relative to this descriptor, so a directory swapped
        for another (or for a symlink) after the check is never used.
        """
        path = self._directory
        if path is None:
            yield None
            return
        fd = self._open_directory(path, create)
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    def _open_directory(self, path: Path, create: bool) -> int | None:
        before = _lstat_or_create(path, create)
        if before is None:
            return None
        try:
            _check_directory(path, before)
            fd = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
        except _UnsafeDirectory as err:
            self._disable(path, str(err))
            return None
        except OSError as err:  # replaced by a symlink or a file between the lstat and the open
            self._disable(path, f"cannot be opened as a directory without following links ({err.strerror})")
            return None
        try:
            after = os.fstat(fd)
            if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                raise _UnsafeDirectory("was replaced while it was being opened")
            _check_directory(path, after)
        except _UnsafeDirectory as err:
            os.close(fd)
            self._disable(path, str(err))
            return None
        return fd

    def _read(self, name: str) -> tuple[float, Any] | None:
        with self._opened(create=False) as directory:
            if directory is None:
                return None
            try:
                fd = os.open(
                    name + _ENTRY_SUFFIX,
                    os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC,
                    dir_fd=directory,
                )
            except OSError:
                return None  # missing, a symlink (ELOOP), or unreadable: a miss
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_uid != _uid() or info.st_size > MAX_ENTRY_BYTES:
                    return None  # a FIFO, device or someone else's file is never read
                with os.fdopen(fd, "rb", closefd=False) as handle:
                    data = json.loads(handle.read(MAX_ENTRY_BYTES + 1).decode("utf-8"))
                return float(data["expires"]), data["value"]
            except (OSError, ValueError, KeyError, TypeError):
                return None
            finally:
                os.close(fd)

    def _write(self, name: str, item: tuple[float, Any]) -> None:
        with self._opened(create=True) as directory:
            if directory is None:
                return
            temp = f".{name}.{secrets.token_hex(8)}{_TEMP_SUFFIX}"
            try:
                body = json.dumps({"expires": item[0], "value": item[1]}).encode("utf-8")
                fd = os.open(
                    temp,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
                    0o600,
                    dir_fd=directory,
                )
            except (OSError, TypeError, ValueError):
                return  # a cache that cannot write is only slower
            try:
                with os.fdopen(fd, "wb") as out:
                    os.fchmod(out.fileno(), 0o600)  # whatever the umask
                    out.write(body)
                # Readers see the old entry or the new one, never half of one.
                os.replace(temp, name + _ENTRY_SUFFIX, src_dir_fd=directory, dst_dir_fd=directory)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=directory)
