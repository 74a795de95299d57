"""Waiting for the best entries first: acceptance windows turned into submission stages (pure).

SageMaker takes the first entry with capacity *now*, and ``MaxPendingTimeInSeconds`` covers the whole
list. An entry's ``accept_after`` is a local policy on top: the entry becomes acceptable only once the
task has waited that long in total. Pending jobs are not billed, so the provider submits in stages:

- stage 1 offers the entries acceptable at t = 0;
- when the next window opens and the job is still Pending, that job is stopped and stage 2 is
  submitted under ``<name>-s2`` with every entry acceptable by then, in the list's order;
- a job that got capacity is never stopped when a window closes;
- ``max_pending`` bounds the whole wait: each stage gets what remains of it.

This module decides the stages, names and per-stage limits; the operator carries them out
(:mod:`airflow_provider_sm_prefs.operators.windows`). No Airflow, no boto.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import (
    MIN_PENDING_SECONDS,
    InstancePreference,
    InstancePreferenceList,
)
from airflow_provider_sm_prefs.domain.regions import FailoverRegion

__all__ = ["Stage", "StageEnd", "StageLimits", "StageRecord", "plan_stages", "stage_limits", "stage_suffix"]


@dataclass(frozen=True)
class Stage:
    """One submission: the entries offered, from when (seconds since the task's first submission).

    :param number: 1-based stage number.
    :param opens_at: seconds of total waiting after which this stage is submitted.
    :param closes_at: when the next stage opens (None for the last stage).
    :param ranks: 1-based ranks (in the submitted list) of the entries offered.
    """

    number: int
    opens_at: float
    closes_at: float | None
    ranks: tuple[int, ...]
    #: The region this stage moves the job to (None: the task's own region).
    region: FailoverRegion | None = None

    def listed(self, submitted: InstancePreferenceList) -> InstancePreferenceList:
        """The list this stage's outcome reports against: the region's own list, else the one submitted."""
        own = self.region.instance_preferences if self.region is not None else None
        return own if own is not None else submitted

    def preferences(self, submitted: InstancePreferenceList) -> InstancePreferenceList:
        """This stage's list, as sent to AWS (windows are ours: they are dropped)."""
        listed = self.listed(submitted)
        entries: list[InstancePreference] = [replace(listed[r - 1], accept_after=None) for r in self.ranks]
        return InstancePreferenceList._from_parsed(entries, listed.kind)  # entries of a checked list

    @property
    def is_last(self) -> bool:
        return self.closes_at is None


def plan_stages(submitted: InstancePreferenceList, regions: Sequence[FailoverRegion] = ()) -> list[Stage]:
    """The stages of a list: one per distinct window (a list without windows is a single stage), then one
    per region after the task's own, each offering the region's own list or every entry submitted."""
    windows = submitted.windows
    home = sorted(set(windows))
    opens = home + [region.after for region in regions]
    stages: list[Stage] = []
    for number, at in enumerate(opens, start=1):
        closes = opens[number] if number < len(opens) else None
        region = regions[number - len(home) - 1] if number > len(home) else None
        if region is None:
            ranks = tuple(rank for rank, window in enumerate(windows, start=1) if window <= at)
        else:
            ranks = tuple(range(1, len(region.instance_preferences or submitted) + 1))
        stages.append(Stage(number, at, closes, ranks, region))
    return stages


def stage_suffix(number: int) -> str:
    """The job-name suffix of a stage: none for stage 1, ``-s2``... after it."""
    return "" if number <= 1 else f"-s{number}"


@dataclass(frozen=True)
class StageLimits:
    """How long a stage's job may wait.

    :param server_pending: ``StoppingCondition.MaxPendingTimeInSeconds`` to send (None: do not send).
    :param client_deadline: seconds from the stage job's CreationTime after which the provider stops
        it (where SageMaker enforces less or nothing).
    :param exhausted: ``max_pending`` ran out before this stage could be submitted.
    """

    server_pending: int | None
    client_deadline: float | None
    exhausted: bool = False


def stage_limits(
    kind: JobKind, stage_list: InstancePreferenceList, max_pending: float | None, elapsed: float
) -> StageLimits:
    """What remains of ``max_pending`` after ``elapsed`` seconds, for a stage offering ``stage_list``.

    A training stage that waits for capacity gets the rest as MaxPendingTimeInSeconds while that is at
    least SageMaker's minimum (1,800 s); below it, the minimum is sent and a client-side deadline
    enforces the rest. Processing and CPU-only stages, where SageMaker enforces nothing, get a
    client-side deadline only.
    """
    if max_pending is None:
        return StageLimits(None, None)
    remaining = float(max_pending) - max(0.0, elapsed)
    if remaining <= 0:
        return StageLimits(None, None, exhausted=True)
    if kind.spec.pending_limit and stage_list.waits_for_capacity:
        if remaining >= MIN_PENDING_SECONDS:
            return StageLimits(int(remaining), None)
        return StageLimits(MIN_PENDING_SECONDS, remaining)
    return StageLimits(None, remaining)


class StageEnd(str, Enum):
    """How a stage ended."""

    # The values are the stored form (XCom ``stages``, capacity records, the task state): never renamed.
    SELECTED = "selected"  # SageMaker selected an entry: the last stage
    WINDOW_CLOSED = "escalated"  # still Pending when the next window opened: stopped, never billed
    STOPPED_AFTER_SELECTION = "stopped-after-selection"  # selected between the last look and the stop
    NO_CAPACITY = "no-capacity"  # a CPU-only stage found nothing free and failed at once
    TIMED_OUT = "timed-out"  # max_pending ran out during the stage
    FAILED = "failed"  # ended any other way
    ESCALATED = "escalated"  # the name of earlier releases: an alias of WINDOW_CLOSED


@dataclass(frozen=True)
class StageRecord:
    """One stage as the outcome record reports it.

    :param stage: 1-based stage number.
    :param entries: the instance types offered, in order.
    :param job_name: the stage's SageMaker job.
    :param pending_seconds: how long that job waited, from AWS's timestamps.
    :param ended: a :class:`StageEnd` value.
    :param created_at: the job's CreationTime (ISO 8601), when known.
    :param region: the region the stage ran in, when it moved the job out of the task's own region.
    """

    stage: int
    entries: list[str]
    job_name: str
    pending_seconds: float
    ended: str
    created_at: str | None = None
    region: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.region is None:
            del data["region"]  # the stored form of a stage in the task's own region, as it always was
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageRecord:
        return cls(
            stage=int(data["stage"]),
            entries=[str(e) for e in data.get("entries") or []],
            job_name=str(data["job_name"]),
            pending_seconds=float(data.get("pending_seconds") or 0.0),
            ended=str(data.get("ended") or StageEnd.FAILED.value),
            created_at=data.get("created_at"),
            region=data.get("region"),
        )


def stage_records(raw: Sequence[Mapping[str, Any]] | None) -> list[StageRecord]:
    """Stage records read back from the task state store (anything malformed is dropped)."""
    out: list[StageRecord] = []
    for item in raw or []:
        try:
            out.append(StageRecord.from_dict(item))
        except (KeyError, TypeError, ValueError):
            continue
    return out
