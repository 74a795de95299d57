"""When the shared List loop plans its next pass as event mode starts or stops.

The pass after the first measures the service clock's rate (a window on a compressed clock closes on
that rate). Events starting to flow slow the loop down to the safety cadence, but must not drop that
measuring pass: before it, the loop would read an offline SageMaker's clock at 240x as the host's.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.hooks.clock import ServiceClock
from airflow_provider_sm_prefs.triggers.eventbridge_queue import EventQueueConsumer
from airflow_provider_sm_prefs.triggers.watcher import JobListWatcher

SAFETY = 600.0
MEASURING_PASS = ServiceClock.MIN_SPAN + 0.5


def after_first_pass() -> tuple[JobListWatcher, EventQueueConsumer, float]:
    """A watcher whose first pass answered just now, in event mode whose queue is not read yet."""
    loop = asyncio.get_running_loop()
    watcher = JobListWatcher(("settings", "training"), lambda: None, JobKind.TRAINING)
    consumer = EventQueueConsumer(("settings", "queue"), lambda: None, "http://queue")
    watcher._events, watcher._safety_seconds = consumer, SAFETY
    consumer.on_health_change(watcher._events_health_changed)
    started = loop.time()
    watcher.clock.observe(datetime(2026, 9, 15, tzinfo=timezone.utc), started)
    watcher._pass_started = started
    watcher._schedule_next(started, 1)
    return watcher, consumer, started


def test_events_that_start_flowing_keep_the_pass_that_measures_the_clock() -> None:
    async def main() -> None:
        watcher, consumer, started = after_first_pass()
        assert watcher._next_pass == started + MEASURING_PASS
        consumer._set_healthy(True)  # the queue's first receive succeeded
        assert watcher._next_pass == started + MEASURING_PASS

    asyncio.run(main())


def test_once_the_clock_is_measured_flowing_events_bring_the_safety_cadence() -> None:
    async def main() -> None:
        watcher, consumer, started = after_first_pass()
        second = started + MEASURING_PASS
        watcher.clock.observe(datetime(2026, 9, 15, tzinfo=timezone.utc) + timedelta(seconds=3), second)
        assert watcher.clock.measured
        watcher._pass_started = second
        watcher._schedule_next(second, 1)
        consumer._set_healthy(True)
        assert watcher._next_pass == second + SAFETY
        consumer._set_healthy(False)  # the queue cannot be read: back to the List cadence
        assert watcher._next_pass is not None and watcher._next_pass < second + SAFETY

    asyncio.run(main())
