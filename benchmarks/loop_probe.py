"""A probe of the triggerer's event loop, deferred by one task of a benchmark DAG.

:class:`LoopLagTrigger` sleeps ``interval`` seconds in a loop inside the triggerer, next to the triggers
being measured, and records how late every sleep ends (the overshoot: how long the loop was busy with
something else). Python's garbage collections in the process are timed too (``gc.callbacks``): a full
collection of a triggerer's heap stops its loop, and the event says how long the longest of each
generation took and when. It fires one event when ``stop_file`` exists (or after ``max_seconds``) with the worst
lag, the p50/p99, the samples over ``counted`` seconds, and each minute's worst lag; :class:`LoopLagProbe`
is the operator that defers to it and returns that event as its XCom.

The triggerer imports the trigger by its classpath (``benchmarks.loop_probe.LoopLagTrigger``): the
deployment's processes need the checkout on ``PYTHONPATH``.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from array import array
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.triggers.base import BaseTrigger, TriggerEvent

CLASSPATH = "benchmarks.loop_probe.LoopLagTrigger"
#: Slow samples kept with their time (the event travels through the metadata database).
KEEP_SLOW = 500


class GcTimer:
    """Times the process's garbage collections (``gc.callbacks``) while installed."""

    def __init__(self) -> None:
        self._start = 0.0
        #: ``generation -> [count, total seconds, longest seconds, epoch of the longest]``.
        self.by_generation: dict[int, list[float]] = {}

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        took = time.perf_counter() - self._start
        entry = self.by_generation.setdefault(int(info.get("generation", -1)), [0, 0.0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += took
        if took > entry[2]:
            entry[2], entry[3] = took, time.time()

    def summary(self) -> dict[str, Any]:
        return {
            str(gen): {
                "count": int(n),
                "total_ms": round(total * 1000, 1),
                "max_ms": round(longest * 1000, 1),
                "max_epoch": round(when, 3),
            }
            for gen, (n, total, longest, when) in sorted(self.by_generation.items())
        }


def lag_summary(
    lags: Sequence[float], slow: Sequence[tuple[float, float]], counted: float, started: float
) -> dict[str, Any]:
    """The event of a probe: ``lags`` (seconds, in order), ``slow`` (``(epoch, lag)`` over ``counted``)."""
    ordered = sorted(lags)

    def quantile(q: float) -> float | None:
        return round(ordered[int(q * (len(ordered) - 1))] * 1000, 2) if ordered else None

    return {
        "samples": len(ordered),
        "max_ms": round(ordered[-1] * 1000, 2) if ordered else None,
        "p50_ms": quantile(0.5),
        "p99_ms": quantile(0.99),
        "counted_ms": counted * 1000,
        "over_counted": sum(1 for lag in ordered if lag > counted),
        "slow": [[round(t, 3), round(lag * 1000, 1)] for t, lag in slow[:KEEP_SLOW]],
        "started_epoch": round(started, 3),
        "ended_epoch": round(time.time(), 3),
    }


class LoopLagTrigger(BaseTrigger):
    """Sleeps ``interval`` seconds at a time until ``stop_file`` exists; fires the lag it measured.

    :param stop_file: the probe ends once this file exists (checked about once a second).
    :param interval: seconds of each sleep.
    :param counted: lags over this many seconds are counted and kept with their time.
    :param max_seconds: the probe ends after this many seconds whatever happens.
    """

    def __init__(
        self, stop_file: str, interval: float = 0.02, counted: float = 0.05, max_seconds: float = 7200.0
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.stop_file = stop_file
        self.interval = interval
        self.counted = counted
        self.max_seconds = max_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return CLASSPATH, {
            "stop_file": self.stop_file,
            "interval": self.interval,
            "counted": self.counted,
            "max_seconds": self.max_seconds,
        }

    async def run(self) -> AsyncIterator[TriggerEvent]:
        lags = array("d")
        slow: list[tuple[float, float]] = []
        started = time.time()
        until = time.monotonic() + self.max_seconds
        check_every = max(1, round(1.0 / self.interval))
        timer = GcTimer()
        gc.callbacks.append(timer)
        try:
            await self._sample(lags, slow, until, check_every)
        finally:
            gc.callbacks.remove(timer)
        summary = lag_summary(lags, slow, self.counted, started)
        summary["gc"] = timer.summary()
        yield TriggerEvent(summary)  # type: ignore[no-untyped-call]

    async def _sample(
        self, lags: array[float], slow: list[tuple[float, float]], until: float, check_every: int
    ) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(self.interval)
            lag = max(0.0, time.monotonic() - before - self.interval)
            lags.append(lag)
            if lag > self.counted:
                slow.append((time.time() - lag, lag))
            # os.path.exists is one stat() call: microseconds, once a second.
            if len(lags) % check_every == 0 and (os.path.exists(self.stop_file) or time.monotonic() > until):
                return


class LoopLagProbe(BaseOperator):
    """Defers to :class:`LoopLagTrigger`; returns its event (the XCom ``return_value``)."""

    def __init__(self, *, stop_file: str, interval: float = 0.02, max_seconds: float = 7200.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.stop_file = stop_file
        self.interval = interval
        self.max_seconds = max_seconds

    def execute(self, context: Context) -> Any:
        self.defer(
            trigger=LoopLagTrigger(self.stop_file, self.interval, max_seconds=self.max_seconds),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        return event
