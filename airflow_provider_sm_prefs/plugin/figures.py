"""The figure helpers every section of the capacity insights shares (pure): how many records a figure rests
on and whether that is enough, rounding, medians and shares, and the deployment's time zone.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from airflow_provider_sm_prefs.domain.record import CapacityRecord
from airflow_provider_sm_prefs.plugin.stats import percentile

__all__ = [
    "MIN_RECORDS",
    "as_utc",
    "figure",
    "is_utc",
    "median_of",
    "number",
    "resolve_timezone",
    "rounded",
    "share",
    "task_key",
    "wait_figure",
]

#: Fewer records than this back no conclusion: the figure says so instead.
MIN_RECORDS = 5
#: IANA names (upper case) of zones that are UTC under another name.
_UTC_BASE = ("UTC", "UCT", "ZULU", "UNIVERSAL", "GMT", "GMT0", "GMT+0", "GMT-0", "GREENWICH")
_UTC_NAMES = frozenset({"Z", *_UTC_BASE, *(f"ETC/{name}" for name in _UTC_BASE)})
_OFFSET = re.compile(r"^([+-])(\d{2}):?(\d{2})$")


def figure(records: int) -> dict[str, Any]:
    """How many records a figure rests on, whether that is enough, and a note when it is not."""
    if records >= MIN_RECORDS:
        return {"records": records, "enough": True, "note": None}
    noun = "record" if records == 1 else "records"
    return {
        "records": records,
        "enough": False,
        "note": f"{records} {noun}; at least {MIN_RECORDS} are needed to draw a conclusion",
    }


def resolve_timezone(name: str) -> tzinfo:
    """The zone named ``name``: an IANA name (``UTC`` in any case), or a fixed offset like ``+05:30``.

    :raises ValueError: for a name that is neither.
    """
    cleaned = name.strip()
    if cleaned.upper() in _UTC_NAMES:
        return timezone.utc
    offset = _OFFSET.match(cleaned)
    if offset:
        sign = -1 if offset[1] == "-" else 1
        delta = timedelta(hours=int(offset[2]), minutes=int(offset[3]))
        return timezone.utc if not delta else timezone(sign * delta, cleaned)
    try:
        return ZoneInfo(cleaned)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"tz: unknown time zone {name!r}") from None


def is_utc(name: str) -> bool:
    """Whether ``name`` is UTC under one of its names (a zone that only sometimes is UTC is not)."""
    return resolve_timezone(name) is timezone.utc


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def rounded(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits) + 0.0  # + 0.0: no "-0.0"


def median_of(values: Sequence[float]) -> float | None:
    return rounded(statistics.median(values)) if values else None


def share(part: int, whole: int) -> float | None:
    """``part / whole``, a conclusion: only when ``whole`` is enough records."""
    return round(part / whole, 4) if whole >= MIN_RECORDS else None


def task_key(record: CapacityRecord) -> tuple[str, str]:
    return (record.dag_id, record.task_id)


def as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def wait_figure(waits: Sequence[float], p95: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"median": median_of(waits)}
    if p95:
        out["p95"] = rounded(percentile(waits, 95))
    return {**out, **figure(len(waits))}
