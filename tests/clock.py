"""Moving the offline SageMaker's frozen clock from a background thread while the code under test runs.

A test that loads a scenario with ``"time_scale": 0`` decides when emulated time passes: after the code
under test has reached the state it must be seen in, however slow the host is.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def in_background(body: Callable[[threading.Event], None]) -> Iterator[None]:
    """Run ``body(done)`` in a thread for the length of the block; ``done`` is set when the block ends,
    and the block ends when the thread has returned."""
    done = threading.Event()
    thread = threading.Thread(target=body, args=(done,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextlib.contextmanager
def advancing_once(
    sm: Any, ready: Callable[[], bool], seconds: float, deadline: float = 120.0
) -> Iterator[None]:
    """Move the frozen emulated clock ``seconds`` on as soon as ``ready()`` (or after ``deadline`` real
    seconds, so that a wait that never gets ready fails on its own assertions rather than hangs)."""

    def advance(done: threading.Event) -> None:
        give_up = time.monotonic() + deadline
        while not done.wait(0.05):
            if ready() or time.monotonic() > give_up:
                sm.advance(seconds)
                return

    with in_background(advance):
        yield


@contextlib.contextmanager
def advancing_once_served(sm: Any, operation: str, seconds: float) -> Iterator[None]:
    """Move the frozen emulated clock ``seconds`` on as soon as SageMaker has served ``operation``."""
    with advancing_once(sm, lambda: bool(sm.stats()["operations"].get(operation)), seconds):
        yield
