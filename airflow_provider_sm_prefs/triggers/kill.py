"""A trigger's kill path: stop the job of a task that ended, leave it to a task that goes on.

``SageMakerCapacityTrigger.on_kill`` (Airflow 3.3) and, before 3.3, the cancellation of its ``run``
(the only thing the triggerer does there) both come here. The task's current state, read through the
Task SDK, tells the cases apart:

* ``deferred``: the trigger moved to another triggerer (apache/airflow#73454) or the triggerer stops;
  the job keeps running and the new owner watches it;
* ended (``failed``, ``success``...): the task was marked while deferred; the job is stopped;
* unreadable, or a state in which the task goes on (cleared, queued for its next try): ``on_kill`` stops
  the job, its documented meaning; a cancelled ``run`` before 3.3 leaves the job to the task's next try
  (which reattaches, or stops it on a clear) and to its failure callback.

The work is shielded: Airflow 3.3 repeats the cancellation on every sync of the triggerer's loop until
the trigger has finished, which would cancel a kill still reading the state or stopping the job
(silently: the triggerer swallows it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from airflow_provider_sm_prefs.domain.exceptions import NotOursError
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.task_state import GOES_ON, current_state_async

#: Kill work in flight, referenced until done (a shielded task outlives its cancelled awaiter).
KILLS: set[asyncio.Future[None]] = set()


async def shielded(work: Coroutine[Any, Any, None]) -> None:
    """Run a kill path's ``work`` to its end, however often its awaiter is cancelled; referenced until done
    (a shielded task nobody references may be collected mid-way)."""
    future = asyncio.ensure_future(work)
    KILLS.add(future)
    future.add_done_callback(KILLS.discard)
    await asyncio.shield(future)


def task_goes_on(state: str | None, act_if_unknown: bool) -> bool:
    """Whether a cancelled trigger leaves its resource to the task: it moved (``deferred``), or, for a
    cancelled ``run`` (``act_if_unknown`` False), its state is unreadable or one in which it goes on."""
    return state == "deferred" or (not act_if_unknown and (state is None or state in GOES_ON))


async def stop_unless_moved(trigger: Any, kind: JobKind, stop_if_unknown: bool) -> None:
    """Stop ``trigger``'s job unless its task still goes on (see the module docstring); shielded."""
    await shielded(_stop_unless_moved(trigger, kind, stop_if_unknown))


async def _stop_unless_moved(trigger: Any, kind: JobKind, stop_if_unknown: bool) -> None:
    log, job_name = trigger.log, trigger.spec.job_name
    state = await current_state_async(getattr(trigger, "task_instance", None))
    if state == "deferred":
        log.info(
            "Trigger of %s cancelled while its task is still deferred: another triggerer took it over; "
            "the job keeps running",
            job_name,
        )
        return
    if task_goes_on(state, stop_if_unknown):
        log.warning(
            "Trigger of %s cancelled while its task is %s: leaving the job to the task (its next try "
            "reattaches or stops it; its failure callback stops it if the task fails for good)",
            job_name,
            state or "in an unreadable state",
        )
        return
    hook = trigger.hook
    async with await hook.get_async_conn() as client:
        try:
            await hook.stop_job_async(client, kind, job_name, trigger.spec.claim)
        except NotOursError as err:
            log.error("%s", err)
            return
    log.info("Stopped %s: its task was marked or cleared", job_name)
