"""Hold a trigger's event that comes right after its task deferred (Airflow's scheduler race).

Airflow 3.3's scheduler fails a task resumed before it has processed the worker's exit from the
deferral ("state mismatch", apache/airflow#72716). A trigger that fires within a scheduler loop of
the deferral (a job that leaves Pending at once) hits it. The trigger therefore yields nothing sooner
than ``min_defer_seconds`` after the deferral; a wait longer than that is not delayed at all.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

from airflow_provider_sm_prefs.domain.status import as_datetime

#: Default of ``min_defer_seconds`` (Airflow config ``[sm_prefs] min_defer_seconds`` overrides it).
DEFAULT_MIN_DEFER_SECONDS = 15.0


def min_defer_seconds(given: float | None) -> float:
    """``given``, else ``[sm_prefs] min_defer_seconds``, else :data:`DEFAULT_MIN_DEFER_SECONDS`.

    Read when the task defers (never at DAG parse time).
    """
    if given is not None:
        return float(given)
    from airflow.configuration import conf

    return conf.getfloat("sm_prefs", "min_defer_seconds", fallback=DEFAULT_MIN_DEFER_SECONDS)


def deferred_now() -> str:
    """The deferral instant as trigger kwargs carry it (ISO 8601 UTC, this process's clock)."""
    return datetime.now(timezone.utc).isoformat()


def deferral(deferring: bool, given: float | None) -> dict[str, Any]:
    """A trigger spec's ``deferred_at`` and ``min_defer_seconds``: now and the hold (``given`` or the
    configured default) for a task that defers; neither for a wait run in the worker (nothing to race)."""
    if not deferring:
        return {"deferred_at": None, "min_defer_seconds": None}
    return {"deferred_at": deferred_now(), "min_defer_seconds": min_defer_seconds(given)}


async def hold_after_deferral(
    log: Any, job_name: str, deferred_at: str | None, seconds: float | None
) -> None:
    """Sleep until ``seconds`` after ``deferred_at``, and never longer than ``seconds`` (clock skew).

    Nothing is held without a deferral instant (a trigger serialized by an earlier release).
    """
    deferred = as_datetime(deferred_at)
    if not seconds or deferred is None:
        return
    since = (datetime.now(timezone.utc) - deferred).total_seconds()
    hold = min(seconds, seconds - since)
    if hold > 0:
        log.info(
            "Reporting %s in %.1f s: its task deferred %.1f s ago, and Airflow's scheduler must first "
            "see that deferral end (min_defer_seconds=%s)",
            job_name,
            hold,
            max(since, 0.0),
            seconds,
        )
        await asyncio.sleep(hold)
