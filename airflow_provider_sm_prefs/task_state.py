"""Whether a task goes on without the process being killed: the kill paths' guard against stopping a live job.

Airflow 3.3 runs ``on_kill`` both when a user ends a task and when it merely moved the work elsewhere:

* a triggerer whose heartbeat lapsed finds its triggers handed to another triggerer and cancels them with
  ``Trigger.on_kill`` (apache/airflow#73454) while the task is still ``deferred``;
* a scheduler that lost a task's process, or a starved one that took its own job for dead, resets the task
  (``adopt_or_reset_orphaned_tasks``): the old try's heartbeat is then refused, its supervisor sends SIGTERM
  and the operator's ``on_kill`` runs while the task is already ``scheduled``/``queued`` for its next try,
  which reattaches to the job.

Stopping the job there would fail the task or make its next try submit a second job. The task's current
state, read through the Task SDK (the supervisor's channel, in a task process or a triggerer), tells the
cases apart. When it cannot be read, the kill path stops the job: the documented meaning of ``on_kill``.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

#: The state of a task instance that has none (cleared, or reset by the scheduler).
NO_STATE = "none"
#: States in which the task will run (again) and look after its job itself: a kill of the old process
#: must leave the job alone. ``restarting`` (cleared while running) is not among them: a clear stops the
#: job, as documented, and the cleared try submits a new one.
GOES_ON = frozenset({NO_STATE, "scheduled", "queued", "up_for_retry", "up_for_reschedule", "deferred"})


def current_state(ti: Any) -> str | None:
    """The state of ``ti``'s task instance now (:data:`NO_STATE` for none); None when it cannot be read."""
    if ti is None:
        return None
    try:
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        map_index = getattr(ti, "map_index", None)
        map_index = -1 if map_index is None else int(map_index)
        states = RuntimeTaskInstance.get_task_states(
            dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[ti.run_id], map_index=map_index
        )
        key = ti.task_id if map_index < 0 else f"{ti.task_id}_{map_index}"
        run_states = states.get(ti.run_id) or {}
        if key not in run_states:
            return None
        state = run_states[key]
    except Exception as err:  # whatever the reason, an unreadable state means: stop the job
        log.warning("Could not read the current state of %s: %s", ti, type(err).__name__)
        return None
    return NO_STATE if state is None else str(getattr(state, "value", state))


async def current_state_async(ti: Any) -> str | None:
    """:func:`current_state` from a trigger's event loop (the call blocks on the supervisor's channel)."""
    from asgiref.sync import sync_to_async

    # Not thread-sensitive: the triggers of one triggerer read their states side by side, not in turn.
    return await sync_to_async(current_state, thread_sensitive=False)(ti)


def resumed_by_another_try(context: Any, deferred_by_try: int | None) -> bool:
    """Whether this try was resumed with the trigger event another try deferred for.

    Airflow 3.0 keeps a failed try's ``next_method`` and event when the task goes up for retry (3.1 clears
    them), so the retry starts in the resume method with the old try's event: a stale outcome, or a stage
    the old try already handled. The resume methods then run the try from the beginning instead, which
    reattaches to the recorded job as every retry does. Deferrals of earlier releases carry no try number.
    """
    if deferred_by_try is None:
        return False
    ti = context.get("ti") or context.get("task_instance")
    mine = getattr(ti, "try_number", None)
    if mine is None or int(mine) == int(deferred_by_try):
        return False
    log.warning(
        "Try %s was resumed with the trigger event of try %s (the retry of a deferred task keeps the old "
        "event on Airflow 3.0): starting this try from the beginning",
        mine,
        deferred_by_try,
    )
    return True
