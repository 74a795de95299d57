"""What the capacity page shows, computed from capacity records (pure: no Airflow, no database).

The input is a list of :class:`Entry`: a record read back from XCom plus the time of its DAG run
(``run_after``, the time the run was due — the natural axis for a nightly pipeline). :func:`summarize`
turns them into the JSON the page draws:

- ``fallback``: per time bucket and per DAG/task, the share of capacity decisions not on the first entry;
- ``time_to_capacity``: per selected instance type, median, p95 and a histogram of the seconds waited;
- ``configurations``: per type × count, how many jobs, their wait, runtime and billable time (and cost
  when the records carry one);
- ``failures``: per time bucket, timeouts, quota rejections, CPU-only "no capacity" and other failures;
- ``jobs``: the newest records first, one page of them;
- ``groups``: HyperPod instance groups (records of job kind ``hyperpod-group``): how many reached their
  count, how many of those fell back (a node on a type other than the first choice), and the newest
  tries, each with its node mix (``2 × ml.p5.48xlarge + 6 × ml.p4d.24xlarge``), one page's size of them.

Every figure but ``groups`` is the jobs' alone: a group's record never counts as a job. A job reported by
more than one record (an operator's retry that re-attached to its job, or a sensor watching it too)
counts once: the newest record of each job name wins. Records without a job (rejected before anything
was created) count one per try. A group counts once per task instance (its newest try wins: a retry
waits for the same request).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from airflow_provider_sm_prefs.domain.hyperpod_outcome import node_mix
from airflow_provider_sm_prefs.domain.record import CapacityRecord, FailureKind

__all__ = [
    "FAILURE_SERIES",
    "GROUP_FIELDS",
    "JOB_FIELDS",
    "WAIT_BINS",
    "Entry",
    "Filters",
    "dedupe",
    "nodes_of",
    "percentile",
    "split",
    "summarize",
]

#: Upper bounds (seconds) of the wait histogram's bins; the last bin is open-ended.
WAIT_BINS: tuple[float, ...] = (60, 300, 900, 1800, 3600, 7200, 14400)
#: The failure series the page draws, in order; anything else is "other".
FAILURE_SERIES: tuple[str, ...] = (
    FailureKind.CAPACITY_TIMEOUT.value,
    FailureKind.QUOTA.value,
    FailureKind.NO_CAPACITY.value,
    "other",
)
#: The record fields that name a task's try: both tables' rows start with them.
_TRY_FIELDS: tuple[str, ...] = ("dag_id", "task_id", "run_id", "map_index", "try_number", "job_kind")
#: The record fields each row of the job table carries as they are (the page's script reads them by
#: these names); ``tests/test_schema.py`` checks each is a field of the record. The other columns are
#: computed from the record (``entries``, ``reason``, the costs, ``has_job``) or added (the links).
JOB_FIELDS: tuple[str, ...] = (
    *_TRY_FIELDS,
    "job_name",
    "region",
    "selected_instance_type",
    "selected_instance_count",
    "preference_rank",
    "pending_seconds",
    "training_seconds",
    "billable_seconds",
    "job_status",
    "failure_kind",
    "identity_tags",
)
#: Likewise for each row of the cluster group table; ``nodes``, ``mix``, ``entries`` and ``reason`` are
#: computed from the record.
GROUP_FIELDS: tuple[str, ...] = (
    *_TRY_FIELDS,
    "region",
    "cluster_name",
    "group_name",
    "phase",
    "target_count",
    "current_count",
    "min_count",
    "fell_back",
    "seconds_to_in_service",
    "accelerators_total",
    "job_status",
    "failure_kind",
)
_MAX_SERIES = 12
_REASON_CHARS = 300


@dataclass(frozen=True)
class Entry:
    """One record and the time of its DAG run."""

    record: CapacityRecord
    run_after: datetime

    @property
    def job_key(self) -> tuple[str, ...]:
        r = self.record
        if r.is_group:
            return ("group", r.dag_id, r.task_id, r.run_id, str(r.map_index))
        if r.job_name:
            return ("job", r.job_name)
        return ("try", r.dag_id, r.task_id, r.run_id, str(r.map_index), str(r.try_number))


@dataclass(frozen=True)
class Filters:
    """The page's query: a time range and optional DAG/task, plus which page of the job table."""

    since: datetime
    until: datetime
    dag_id: str | None = None
    task_id: str | None = None
    page: int = 1
    page_size: int = 25

    def as_dict(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "dag_id": self.dag_id,
            "task_id": self.task_id,
            "page": self.page,
            "page_size": self.page_size,
        }


def dedupe(entries: Iterable[Entry]) -> list[Entry]:
    """One entry per job (the newest record wins), newest first."""
    newest: dict[tuple[str, ...], Entry] = {}
    for entry in entries:
        kept = newest.get(entry.job_key)
        if kept is None or _order(entry) > _order(kept):
            newest[entry.job_key] = entry
    return sorted(newest.values(), key=_order, reverse=True)


def _order(entry: Entry) -> tuple[datetime, str, int]:
    return (entry.run_after, entry.record.recorded_at, entry.record.try_number)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _bucket_size(filters: Filters) -> timedelta:
    return timedelta(hours=1) if filters.until - filters.since <= timedelta(days=2) else timedelta(days=1)


def _bucket(when: datetime, size: timedelta) -> str:
    if size < timedelta(days=1):
        return when.strftime("%Y-%m-%dT%H:00Z")
    return when.strftime("%Y-%m-%d")


def _buckets(filters: Filters) -> list[str]:
    size = _bucket_size(filters)
    start = filters.since.replace(minute=0, second=0, microsecond=0)
    if size >= timedelta(days=1):
        start = start.replace(hour=0)
    labels: list[str] = []
    when = start
    while when < filters.until and len(labels) < 1000:
        labels.append(_bucket(when, size))
        when += size
    return labels


def split(entries: Iterable[Entry]) -> tuple[list[Entry], list[Entry]]:
    """``(jobs' entries, HyperPod instance groups' entries)``."""
    jobs: list[Entry] = []
    groups: list[Entry] = []
    for entry in entries:
        (groups if entry.record.is_group else jobs).append(entry)
    return jobs, groups


def summarize(entries: Sequence[Entry], filters: Filters, skipped: int = 0) -> dict[str, Any]:
    """Everything the page shows for ``entries`` (already limited to the filters' DAGs and range)."""
    entries, group_entries = split(entries)
    jobs = dedupe(entries)
    decided = [e for e in jobs if e.record.preference_rank is not None]
    waits = [e.record.pending_seconds for e in decided if e.record.pending_seconds is not None]
    fell_back = sum(1 for e in decided if e.record.preference_rank != 1)
    failures = Counter(_failure_series(e.record) for e in jobs if e.record.failure_kind)
    return {
        "filters": filters.as_dict(),
        "summary": {
            "records": len(entries),
            "jobs": len(jobs),
            "decisions": len(decided),
            "fell_back": fell_back,
            "fallback_rate": _ratio(fell_back, len(decided)),
            "median_time_to_capacity": _round(percentile(waits, 50)),
            "p95_time_to_capacity": _round(percentile(waits, 95)),
            "failures": {kind: failures.get(kind, 0) for kind in FAILURE_SERIES},
            "skipped_records": skipped,
        },
        "fallback": _fallback_series(decided, filters),
        "time_to_capacity": _time_to_capacity(decided),
        "configurations": _configurations(decided),
        "failures": _failure_buckets(jobs, filters),
        "jobs": _job_page(jobs, filters),
        "groups": _groups(group_entries, filters),
    }


def _ratio(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 4)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _series_name(record: CapacityRecord) -> str:
    return f"{record.dag_id}.{record.task_id}"


def _fallback_series(decided: Sequence[Entry], filters: Filters) -> dict[str, Any]:
    size = _bucket_size(filters)
    labels = _buckets(filters)
    counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    totals: Counter[str] = Counter()
    for entry in decided:
        name = _series_name(entry.record)
        cell = counts[name][_bucket(entry.run_after, size)]
        cell[0] += entry.record.preference_rank != 1
        cell[1] += 1
        totals[name] += 1
    series = []
    for name, _ in totals.most_common(_MAX_SERIES):
        cells = counts[name]
        series.append(
            {
                "name": name,
                "rate": [_ratio(*cells[label]) if label in cells else None for label in labels],
                "jobs": [cells[label][1] if label in cells else 0 for label in labels],
            }
        )
    return {"buckets": labels, "series": series}


def _time_to_capacity(decided: Sequence[Entry]) -> dict[str, Any]:
    waits: dict[str, list[float]] = defaultdict(list)
    ranks: dict[str, Counter[int]] = defaultdict(Counter)
    for entry in decided:
        record = entry.record
        if record.selected_instance_type is None or record.pending_seconds is None:
            continue
        waits[record.selected_instance_type].append(float(record.pending_seconds))
        ranks[record.selected_instance_type][record.preference_rank or 0] += 1
    entries = []
    for instance_type, values in sorted(waits.items(), key=lambda item: -len(item[1])):
        entries.append(
            {
                "instance_type": instance_type,
                "ranks": sorted(ranks[instance_type]),
                "jobs": len(values),
                "median": _round(percentile(values, 50)),
                "p95": _round(percentile(values, 95)),
                "max": _round(max(values)),
                "histogram": _histogram(values),
            }
        )
    return {"bins": [*WAIT_BINS, None], "entries": entries}


def _histogram(values: Iterable[float]) -> list[int]:
    counts = [0] * (len(WAIT_BINS) + 1)
    for value in values:
        index = next((i for i, bound in enumerate(WAIT_BINS) if value < bound), len(WAIT_BINS))
        counts[index] += 1
    return counts


def _median(values: Sequence[float]) -> float | None:
    return _round(statistics.median(values)) if values else None


def _configurations(decided: Sequence[Entry]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int], list[CapacityRecord]] = defaultdict(list)
    for entry in decided:
        record = entry.record
        if record.selected_instance_type is not None:
            groups[(record.selected_instance_type, record.selected_instance_count or 1)].append(record)
    rows: list[dict[str, Any]] = []
    for (instance_type, count), records in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
        billable = [float(r.billable_seconds) for r in records if r.billable_seconds is not None]
        costs = [c for c in (_number(r.estimated_cost) for r in records) if c is not None]
        rows.append(
            {
                "instance_type": instance_type,
                "instance_count": count,
                "jobs": len(records),
                "ranks": sorted({r.preference_rank for r in records if r.preference_rank is not None}),
                "median_pending_seconds": _median(
                    [float(r.pending_seconds) for r in records if r.pending_seconds is not None]
                ),
                "median_training_seconds": _median(
                    [float(r.training_seconds) for r in records if r.training_seconds is not None]
                ),
                "median_billable_seconds": _median(billable),
                "billable_instance_hours": round(sum(billable) * count / 3600, 2),
                "hourly_cost": _number(records[0].hourly_cost),
                "median_estimated_cost": _median(costs),
            }
        )
    return rows


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _failure_series(record: CapacityRecord) -> str:
    return record.failure_kind if record.failure_kind in FAILURE_SERIES else "other"


def _failure_buckets(jobs: Sequence[Entry], filters: Filters) -> dict[str, Any]:
    size = _bucket_size(filters)
    labels = _buckets(filters)
    index = {label: i for i, label in enumerate(labels)}
    series = {kind: [0] * len(labels) for kind in FAILURE_SERIES}
    for entry in jobs:
        if not entry.record.failure_kind:
            continue
        position = index.get(_bucket(entry.run_after, size))
        if position is not None:
            series[_failure_series(entry.record)][position] += 1
    return {"buckets": labels, "series": [{"name": k, "counts": v} for k, v in series.items()]}


def _job_page(jobs: Sequence[Entry], filters: Filters) -> dict[str, Any]:
    start = (filters.page - 1) * filters.page_size
    rows = [_job_row(entry) for entry in jobs[start : start + filters.page_size]]
    pages = max(1, math.ceil(len(jobs) / filters.page_size))
    return {
        "page": filters.page,
        "page_size": filters.page_size,
        "pages": pages,
        "total": len(jobs),
        "rows": rows,
    }


def _reason(r: CapacityRecord) -> str | None:
    return r.reason if r.reason is None or len(r.reason) <= _REASON_CHARS else r.reason[:_REASON_CHARS] + "…"


def _job_row(entry: Entry) -> dict[str, Any]:
    r = entry.record
    reason = _reason(r)
    return {
        "run_after": entry.run_after.isoformat(),
        **{name: getattr(r, name) for name in JOB_FIELDS},
        "entries": len(r.preferences),
        "reason": reason,
        "hourly_cost": _number(r.hourly_cost),
        "estimated_cost": _number(r.estimated_cost),
        "has_job": r.job_status not in (None, "Rejected") or r.preference_rank is not None,
        "ti_url": "",
        "job_url": "",
    }


# -- HyperPod instance groups ---------------------------------------------------------------------------


def nodes_of(record: CapacityRecord) -> list[dict[str, Any]]:
    """The record's nodes per type in list order, ``{instance_type, rank, count}`` (unreadable items left out)."""
    out = []
    for node in record.nodes:
        if not isinstance(node, dict):  # the reader checks the list, not its items
            continue
        count, rank = node.get("count"), node.get("rank")
        if not isinstance(node.get("instance_type"), str) or type(count) is not int:
            continue
        out.append(
            {
                "instance_type": node["instance_type"],
                "rank": rank if type(rank) is int else None,
                "count": count,
            }
        )
    return out


def _groups(entries: Sequence[Entry], filters: Filters) -> dict[str, Any]:
    tries = dedupe(entries)
    reached = [e for e in tries if e.record.failure_kind is None and e.record.nodes]
    fell_back = sum(1 for e in reached if e.record.fell_back)
    return {
        "summary": {
            "records": len(entries),
            "tries": len(tries),
            "groups": len({(e.record.cluster_name, e.record.group_name) for e in tries}),
            "reached": len(reached),
            "fell_back": fell_back,
            "fallback_rate": _ratio(fell_back, len(reached)),
            "failures": sum(1 for e in tries if e.record.failure_kind),
        },
        "total": len(tries),
        "rows": [_group_row(entry) for entry in tries[: filters.page_size]],
    }


def _group_row(entry: Entry) -> dict[str, Any]:
    r = entry.record
    nodes = nodes_of(r)
    return {
        "run_after": entry.run_after.isoformat(),
        **{name: getattr(r, name) for name in GROUP_FIELDS},
        "nodes": nodes,
        "mix": node_mix(nodes) if nodes else "",
        "entries": len(r.preferences),
        "reason": _reason(r),
        "hourly_cost": _number(r.hourly_cost),
        "first_choice_hourly_cost": _number(r.first_choice_hourly_cost),
        "has_job": False,
        "ti_url": "",
        "job_url": "",
    }
