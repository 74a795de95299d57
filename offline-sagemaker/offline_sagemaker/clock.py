"""Emulated time for the offline SageMaker: the clock and the heap of events due at emulated instants.

Nothing runs in the background. The clock maps real monotonic time to emulated epoch seconds (scaled by
the scenario's ``time_scale``, plus manual advances); the engine brings the world up to "now" by popping
the due events of one heap in time order. A leaf below :mod:`.capacity` and :mod:`.engine`.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator
from enum import Enum
from typing import Any

from offline_sagemaker.scenario_types import Scenario

__all__ = ["EmulatedClock", "Event", "EventQueue"]


class Event(Enum):
    """What happens at a scheduled instant: a job's phase ends, a deadline, a capacity boundary, or a
    HyperPod cluster's timer (a node comes up or goes, a group's deadline; see :mod:`.clusters`)."""

    EVALUATE = 1
    DOWNLOADED = 2
    TRAINED = 3
    UPLOADED = 4
    RUN_END = 5
    STOPPED = 6
    PENDING_EXPIRED = 7
    MAX_RUNTIME = 8
    CAPACITY = 9
    CLUSTER = 10


class EmulatedClock:
    """Emulated epoch seconds: ``start_epoch + real elapsed × time_scale + manual advances``.

    :param real_clock: monotonic real seconds (inject a fake for deterministic unit tests).
    :param wall_clock: real epoch seconds, used for the emulated epoch when the scenario gives none.
    """

    def __init__(self, real_clock: Callable[[], float], wall_clock: Callable[[], float]) -> None:
        self._real_clock = real_clock
        self._wall_clock = wall_clock
        self._real_start = 0.0
        self._start_epoch = 0.0
        self._offset = 0.0
        self._time_scale = 1.0
        self._period: float | None = None

    def restart(self, scenario: Scenario) -> None:
        """Start the world again now, at the scenario's epoch (or real time) with its time scale."""
        self._time_scale = scenario.time_scale
        self._period = scenario.capacity_period
        self._real_start = self._real_clock()
        self._start_epoch = scenario.start_epoch if scenario.start_epoch is not None else self._wall_clock()
        self._offset = 0.0

    @property
    def start_epoch(self) -> float:
        """Emulated epoch seconds at which the world started (scenario times are relative to it)."""
        return self._start_epoch

    def now(self) -> float:
        """Emulated epoch seconds now."""
        real_elapsed = self._real_clock() - self._real_start
        return self._start_epoch + real_elapsed * self._time_scale + self._offset

    def advance(self, seconds: float) -> None:
        """Jump forward by ``seconds`` emulated seconds."""
        if seconds < 0 or math.isnan(seconds):
            raise ValueError(f"advance: seconds must be >= 0, got {seconds!r}")
        self._offset += seconds

    def at(self, offset: float) -> float:
        """Emulated epoch of a scenario time (``offset`` emulated seconds since the start).

        The one conversion for window boundaries: a boundary's wake-up is scheduled at ``at(boundary)``
        and the capacity pools test ``now`` against that same float, so a window is open at its own
        event. (Comparing ``now - start_epoch`` with the boundary instead is off by float rounding: at
        ~1.8e9 the epoch has 2**-22 s steps, and ``(start + t) - start`` can come out just below ``t``.)
        """
        return self._start_epoch + offset

    def cycle_at(self, cycle: int, offset: float) -> float:
        """Emulated epoch of ``offset`` seconds into period ``cycle`` (``capacity_period`` scenarios).

        Like :meth:`at`, the one expression that both schedules a periodic boundary and tests it.
        """
        period = self._period
        assert period is not None
        return self.at(cycle * period + offset)


class EventQueue:
    """Events ordered by emulated time, then by insertion (ties run in the order they were scheduled)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Event, Any, int]] = []
        self._seq = itertools.count()

    def push(self, when: float, event: Event, ref: Any, token: int = 0) -> None:
        """Schedule ``event`` about ``ref`` (a job, or a capacity boundary) at ``when``.

        :param token: the job's token when scheduled; a changed token marks the event stale.
        """
        heapq.heappush(self._heap, (when, next(self._seq), event, ref, token))

    def pop_due(self, now: float) -> Iterator[tuple[float, Event, Any, int]]:
        """Pop events due at or before ``now`` in order, including any pushed meanwhile that are due."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            when, _, event, ref, token = heapq.heappop(heap)
            yield when, event, ref, token
