"""Capacity insights: what the fallbacks cost, which entries ever win, when, and how windows play out (pure).

Each section is its own function below (the HyperPod groups' in :mod:`~.insights_groups`); the figure
helpers they share are :mod:`~.figures`.

The input is the same list of :class:`~airflow_provider_sm_prefs.plugin.stats.Entry` the page's
:func:`~airflow_provider_sm_prefs.plugin.stats.summarize` reads, deduplicated the same way (the newest
record of each job wins). :func:`insights` returns JSON-ready dicts, in four sections:

- ``fallback_premium_usd``: what running on a fallback cost beyond the first choice. For each job that
  ran on an entry other than the first of the list as written (``preference_rank`` > 1; without a rank,
  the record's ``fell_back``)::

      premium = (hourly_cost - first_choice_hourly_cost) × billable_seconds / 3600

  negative when the fallback was cheaper. ``hourly_cost`` and ``first_choice_hourly_cost`` are USD per
  hour of the whole cluster (list price × instance count) and ``billable_seconds`` is wall-clock time,
  so the product is the cluster's cost. A job without either price or without billable time (still
  running, or no price list) is counted in ``unpriced_jobs`` and never estimated. Beside it, the spend
  ``Σ hourly_cost × billable_seconds / 3600`` of every priced job that ran. Both in total, per DAG/task,
  per selected entry (instance type × count) and per month of the DAG run (UTC, ``YYYY-MM``: the
  page's range filters on the run's time too).
- ``entries``: per DAG/task and position in the list as written (1-based, with the instance type and
  count written there; a ``null`` count is the job's own count): how many jobs offered it (their list
  included it), how many of those selected any entry, how many selected it, how often the guardrails
  excluded it (by kind), the wait when it was selected, and ``never_selected``.
- ``hour_of_day``: per selected instance type × hour of the job's creation (``created_at``), in UTC
  and, when the deployment's time zone is not UTC, in that zone too: selections and median wait.
- ``acceptance_windows``: per DAG/task, for the jobs submitted in stages (``stages``): how often stage
  1 won, how often the job went on past it (``escalated``: the API's name), which stage won, and each
  stage's median wait.
- ``cluster_groups``: per DAG/task and HyperPod instance group (records of job kind ``hyperpod-group``,
  the newest try of each task instance): how many tries reached their count, the fallback share (how
  often a group's nodes were not all the first choice) and the share of nodes on a fallback type, the
  time to InService, the failures by kind, and the node mix over time: per DAG run, oldest first, the
  nodes of each type in list order.

The first four sections are the jobs' alone (a group's record never counts as a job), and so is
``summary``; ``cluster_groups`` counts its own records.

Every figure carries the number of records it rests on (``records``) and whether that is enough
(:data:`MIN_RECORDS`): ``"enough": false`` and a ``note`` when not. Counts, sums and medians stay (they
describe what happened); what would be a conclusion — ``never_selected``, a share of jobs — is ``null``
until enough records back it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from typing import Any

from airflow_provider_sm_prefs.domain.guardrails import ExclusionKind
from airflow_provider_sm_prefs.domain.record import CapacityRecord
from airflow_provider_sm_prefs.domain.windows import StageEnd
from airflow_provider_sm_prefs.plugin.figures import (
    MIN_RECORDS,
    as_utc,
    figure,
    is_utc,
    median_of,
    number,
    resolve_timezone,
    rounded,
    share,
    task_key,
    wait_figure,
)
from airflow_provider_sm_prefs.plugin.insights_groups import cluster_groups
from airflow_provider_sm_prefs.plugin.stats import Entry, Filters, dedupe, split

__all__ = ["MIN_RECORDS", "figure", "insights", "is_utc", "resolve_timezone"]

#: How a first stage ends when the job goes on to (or was about to start) the next stage.
_PAST_STAGE1_ENDS = frozenset(
    {StageEnd.WINDOW_CLOSED.value, StageEnd.STOPPED_AFTER_SELECTION.value, StageEnd.NO_CAPACITY.value}
)


# -- shared ---------------------------------------------------------------------------------------------


def insights(entries: Sequence[Entry], filters: Filters, tz: str = "UTC", skipped: int = 0) -> dict[str, Any]:
    """Every insight of ``entries`` (already limited to the filters' DAGs and range).

    :param tz: the deployment's time zone (Airflow's ``[core] default_timezone``): ``hour_of_day``
        has a section in it too when it is not UTC.
    :param skipped: records that could not be read, reported as they are.
    """
    zone = resolve_timezone(tz)
    entries, groups = split(entries)
    jobs = dedupe(entries)
    return {
        "filters": filters.as_dict(),
        "min_records": MIN_RECORDS,
        "summary": {"records": len(entries), "jobs": len(jobs), "skipped_records": skipped},
        "fallback_premium_usd": _premium(jobs),
        "entries": _entries(jobs),
        "hour_of_day": _hour_of_day(jobs, tz, zone),
        "acceptance_windows": _acceptance_windows(jobs),
        "cluster_groups": cluster_groups(dedupe(groups)),
    }


# -- fallback premium -----------------------------------------------------------------------------------


def _fell_back(record: CapacityRecord) -> bool:
    """Whether the job ran on an entry other than the first of the list as written."""
    if record.preference_rank is not None:
        return record.preference_rank > 1
    return record.fell_back is True


#: What the premium reads of a job that ran: ``(fell back, hourly_cost, first_choice_hourly_cost, hours)``.
_Cost = tuple[bool, float | None, float | None, float | None]


def _cost(record: CapacityRecord) -> _Cost:
    billable = number(record.billable_seconds)
    hours = None if billable is None else billable / 3600
    return (_fell_back(record), number(record.hourly_cost), number(record.first_choice_hourly_cost), hours)


@dataclass
class _Sum:
    """A sum in USD over jobs, and how many jobs it could not price (they are never estimated)."""

    usd: float = 0.0
    records: int = 0
    unpriced: int = 0

    def add(self, amount: float | None) -> None:
        if amount is None:
            self.unpriced += 1
            return
        self.usd += amount
        self.records += 1

    def as_dict(self) -> dict[str, Any]:
        return {"usd": rounded(self.usd, 2) if self.records else None, "unpriced_jobs": self.unpriced}


@dataclass
class _Money:
    """The premium and spend of a group of jobs that ran."""

    jobs: int = 0
    fallback_jobs: int = 0
    premium: _Sum = field(default_factory=_Sum)
    spend: _Sum = field(default_factory=_Sum)

    def add(self, cost: _Cost) -> None:
        fell_back, hourly, first, hours = cost
        self.jobs += 1
        self.spend.add(None if hourly is None or hours is None else hourly * hours)
        if not fell_back:
            return
        self.fallback_jobs += 1
        self.premium.add(
            None if hourly is None or first is None or hours is None else (hourly - first) * hours
        )

    def as_dict(self) -> dict[str, Any]:
        premium, spend = self.premium.as_dict(), self.spend.as_dict()
        return {
            "jobs": self.jobs,
            "premium": {
                "usd": premium["usd"],
                "fallback_jobs": self.fallback_jobs,
                "unpriced_jobs": premium["unpriced_jobs"],
                **figure(self.premium.records),
            },
            "spend": {**spend, **figure(self.spend.records)},
        }


def _premium(jobs: Sequence[Entry]) -> dict[str, Any]:
    total = _Money()
    by: dict[str, dict[tuple[Any, ...], _Money]] = {name: defaultdict(_Money) for name in _PREMIUM_KEYS}
    grouped = [(by[name], key_of) for name, (key_of, _) in _PREMIUM_KEYS.items()]
    for entry in jobs:
        record = entry.record
        if record.selected_instance_type is None:
            continue  # never ran: nothing billed
        cost = _cost(record)
        total.add(cost)
        for groups, key_of in grouped:
            groups[key_of(entry)].add(cost)
    out: dict[str, Any] = {"total": total.as_dict()}
    for name, (_, fields_of) in _PREMIUM_KEYS.items():
        groups = by[name]
        out[name] = [{**fields_of(key), **groups[key].as_dict()} for key in sorted(groups, key=_sort_key)]
    return out


def _sort_key(key: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(
        "" if part is None else f"{part:>12}" if isinstance(part, int) else str(part) for part in key
    )


def _month(entry: Entry) -> tuple[str]:
    moment = as_utc(entry.run_after)
    return (f"{moment.year}-{moment.month:02d}",)  # strftime("%Y-%m"), at a fraction of its cost


def _selected_entry(entry: Entry) -> tuple[str | None, int]:
    return (entry.record.selected_instance_type, entry.record.selected_instance_count or 1)


#: The breakdowns of the premium: the group of a job, and the fields of a group's row.
_PREMIUM_KEYS: dict[
    str, tuple[Callable[[Entry], tuple[Any, ...]], Callable[[tuple[Any, ...]], dict[str, Any]]]
] = {
    "by_task": (lambda e: task_key(e.record), lambda k: {"dag_id": k[0], "task_id": k[1]}),
    "by_entry": (_selected_entry, lambda k: {"instance_type": k[0], "instance_count": k[1]}),
    "by_month": (_month, lambda k: {"month": k[0]}),
}


# -- entries --------------------------------------------------------------------------------------------


def _written(raw: Any) -> tuple[str, int | None] | None:
    """The instance type and count of an entry of ``preferences`` (None for anything unreadable)."""
    if isinstance(raw, str):
        return (raw, None) if raw else None
    if type(raw) is not dict and not isinstance(raw, Mapping):  # a dict, nearly always: no ABC check
        return None
    instance_type = raw.get("instance_type", raw.get("InstanceType"))
    count = raw.get("instance_count", raw.get("InstanceCount"))
    if not isinstance(instance_type, str) or not instance_type:
        return None
    return instance_type, count if isinstance(count, int) and not isinstance(count, bool) else None


def _selected_position(record: CapacityRecord, types: Sequence[str | None]) -> int | None:
    """The 1-based position the job selected in its list as written (``types``), if it selected one."""
    if record.preference_rank is not None:
        return record.preference_rank
    if record.selected_instance_type is None:
        return None
    return types.index(record.selected_instance_type) + 1 if record.selected_instance_type in types else None


@dataclass
class _Offered:
    """One position of a list as written, across the jobs that offered it."""

    offered: int = 0
    decided: int = 0
    selected: int = 0
    waits: list[float] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        never: bool | None = False
        if self.selected == 0:
            never = True if self.offered >= MIN_RECORDS else None
        return {
            "offered": self.offered,
            "decided": self.decided,
            "selected": self.selected,
            "excluded": {**{kind.value: 0 for kind in ExclusionKind}, **self.excluded},
            "excluded_total": sum(self.excluded.values()),
            "wait": wait_figure(self.waits),
            "never_selected": never,
            "runs": self.offered,
            **figure(self.offered),
        }


def _exclusions(record: CapacityRecord, types: Sequence[str | None]) -> Iterable[tuple[int, str]]:
    """``(position, kind)`` of each entry the guardrails left out (``rank`` is in the list as written,
    whose instance types are ``types``)."""
    for item in record.excluded:
        if not isinstance(item, Mapping):
            continue
        kind = str(item.get("kind") or "other")
        rank = item.get("rank")
        if isinstance(rank, int) and not isinstance(rank, bool):
            yield rank, kind
            continue
        if item.get("instance_type") in types:
            yield types.index(item.get("instance_type")) + 1, kind


def _entries(jobs: Sequence[Entry]) -> list[dict[str, Any]]:
    positions: dict[tuple[str, str, int, str, int | None], _Offered] = defaultdict(_Offered)
    for entry in jobs:
        record = entry.record
        written = [_written(raw) for raw in record.preferences]
        types = [item[0] if item else None for item in written]
        chosen = _selected_position(record, types)
        decided = chosen is not None
        # Most jobs had nothing left out: no Counter to build for them.
        excluded = Counter(_exclusions(record, types)) if record.excluded else None
        dag_id, task_id = record.dag_id, record.task_id
        for position, item in enumerate(written, start=1):
            if item is None:
                continue
            stats = positions[(dag_id, task_id, position, item[0], item[1])]
            stats.offered += 1
            stats.decided += decided
            if excluded:
                for (rank, kind), times in excluded.items():
                    if rank == position:
                        stats.excluded[kind] += times
            if chosen == position:
                stats.selected += 1
                if record.pending_seconds is not None:
                    stats.waits.append(float(record.pending_seconds))
    return [
        {"dag_id": k[0], "task_id": k[1], "position": k[2], "instance_type": k[3], "instance_count": k[4]}
        | positions[k].as_dict()
        for k in sorted(positions, key=_sort_key)
    ]


# -- hour of day ----------------------------------------------------------------------------------------


def _created(record: CapacityRecord) -> datetime | None:
    raw = record.created_at
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith("Z") else raw)
    except ValueError:
        return None
    return as_utc(moment)


def _heatmap(selections: Sequence[tuple[str, datetime, float | None]], zone: tzinfo) -> list[dict[str, Any]]:
    cells: dict[str, list[list[float | None]]] = defaultdict(lambda: [[] for _ in range(24)])
    in_utc = zone is timezone.utc  # ``created`` is in UTC already
    for instance_type, created, wait in selections:
        cells[instance_type][created.hour if in_utc else created.astimezone(zone).hour].append(wait)
    rows = []
    for instance_type in sorted(cells, key=lambda t: (-sum(map(len, cells[t])), t)):
        hours = []
        for hour, picked in enumerate(cells[instance_type]):
            waits = [w for w in picked if w is not None]
            hours.append(
                {
                    "hour": hour,
                    "selections": len(picked),
                    "median_wait": median_of(waits),
                    **figure(len(waits)),
                }
            )
        rows.append(
            {
                "instance_type": instance_type,
                "selections": sum(map(len, cells[instance_type])),
                "hours": hours,
            }
        )
    return rows


def _hour_of_day(jobs: Sequence[Entry], tz: str, zone: tzinfo) -> dict[str, Any]:
    selections: list[tuple[str, datetime, float | None]] = []
    undated = 0
    for entry in jobs:
        record = entry.record
        if record.selected_instance_type is None:
            continue
        created = _created(record)
        if created is None:
            undated += 1
            continue
        wait = None if record.pending_seconds is None else float(record.pending_seconds)
        selections.append((record.selected_instance_type, created, wait))
    local = None
    if zone is not timezone.utc:
        local = {"timezone": tz, "rows": _heatmap(selections, zone)}
    return {
        "utc": {"timezone": "UTC", "rows": _heatmap(selections, timezone.utc)},
        "local": local,
        "undated_jobs": undated,
    }


# -- acceptance windows ---------------------------------------------------------------------------------


def _stages(record: CapacityRecord) -> list[tuple[int, float | None, str]]:
    """``(stage, pending_seconds, ended)`` of each readable stage of the record, in stage order."""
    out: list[tuple[int, float | None, str]] = []
    for item in record.stages:
        if not isinstance(item, Mapping):
            continue
        stage = item.get("stage")
        if not isinstance(stage, int) or isinstance(stage, bool) or stage < 1:
            continue
        out.append((stage, number(item.get("pending_seconds")), str(item.get("ended") or "")))
    return sorted(out, key=lambda stage: stage[0])


@dataclass
class _Windows:
    """The staged jobs of one DAG/task."""

    jobs: int = 0
    stage1_won: int = 0
    #: Jobs that went on past stage 1 (reported as ``escalated``, the API's name).
    past_stage1: int = 0
    won_at: Counter[int] = field(default_factory=Counter)
    waits: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, stages: Sequence[tuple[int, float | None, str]]) -> None:
        self.jobs += 1
        won = [number for number, _, ended in stages if ended == StageEnd.SELECTED.value]
        if won:
            self.won_at[won[-1]] += 1
        first = stages[0]
        if first[0] == 1 and first[2] == StageEnd.SELECTED.value:
            self.stage1_won += 1
        elif stages[-1][0] > 1 or (first[0] == 1 and first[2] in _PAST_STAGE1_ENDS):
            self.past_stage1 += 1
        for stage, wait, _ in stages:
            if wait is not None:
                self.waits[stage].append(wait)

    def as_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "stage1_won": self.stage1_won,
            "stage1_won_share": share(self.stage1_won, self.jobs),
            "escalated": self.past_stage1,
            "escalated_share": share(self.past_stage1, self.jobs),
            "other": self.jobs - self.stage1_won - self.past_stage1,
            "won_at_stage": {str(n): self.won_at[n] for n in sorted(self.won_at)},
            "without_capacity": self.jobs - sum(self.won_at.values()),
            "stages": [
                {"stage": number, "wait": wait_figure(self.waits[number], p95=False)}
                for number in sorted(self.waits)
            ],
            **figure(self.jobs),
        }


def _acceptance_windows(jobs: Sequence[Entry]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], _Windows] = defaultdict(_Windows)
    for entry in jobs:
        stages = _stages(entry.record)
        if stages:
            groups[task_key(entry.record)].add(stages)
    return [{"dag_id": k[0], "task_id": k[1], **groups[k].as_dict()} for k in sorted(groups)]


# -- HyperPod instance groups ---------------------------------------------------------------------------
