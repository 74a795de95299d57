"""Capacity pools of the offline SageMaker: how many instances exist when, who holds them, who waits.

A pool is On-Demand capacity of one instance type (sized by the scenario's capacity windows, possibly
repeating every ``capacity_period``) or one training plan (its ``count`` within its window). Jobs and
HyperPod instance groups draw from the same On-Demand pools. What waits for capacity (a job, or a
group short of its target) is indexed by the pools it could use, so a release only re-examines the
waiters that could take the freed instances, in creation (FIFO) order. That keeps a thousand concurrent
jobs cheap.

No lifecycle here: :mod:`.engine` and :mod:`.clusters` decide what a job or a group does once it gets
(or does not get) capacity.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from offline_sagemaker.clock import EmulatedClock
from offline_sagemaker.cluster_models import InstanceGroup, Node
from offline_sagemaker.models import Choice, Job, JobKind, PoolKey
from offline_sagemaker.scenario_types import CapacityWindow, Scenario

__all__ = ["Boundary", "CapacityPools", "Waiter"]

#: What waits for capacity: a job in Pending, or an instance group short of its target.
Waiter = Job | InstanceGroup

#: A capacity boundary event: ``("od-pattern", capacity key, (cycle, offset) if periodic)`` or
#: ``("plan", plan ARN, None)``.
Boundary = tuple[str, str, tuple[int, float] | None]
_Windows = tuple[tuple[float, float, int], ...]


class CapacityPools:
    """The pools of one world (rebuilt on every reset).

    :param scenario: the scenario in force.
    :param clock: the world's clock (window boundaries are converted by it, see :meth:`EmulatedClock.at`).
    """

    def __init__(self, scenario: Scenario, clock: EmulatedClock) -> None:
        self._scenario = scenario
        self._clock = clock
        self._in_use: dict[PoolKey, int] = {}
        self._held_by_kind: dict[tuple[JobKind, str], int] = {}
        self._held_by_clusters: dict[str, int] = {}
        self._waiting: dict[int, Waiter] = {}
        self._waiting_by_key: dict[PoolKey, set[int]] = {}
        self._windows_cache: dict[str, Any] = {}
        self._pool_cache: dict[str, _Windows | None] = {}

    # ------------------------------------------------------------------------------------ boundaries

    def boundaries(self) -> Iterator[tuple[float, Boundary]]:
        """The first wake-up of every capacity and plan window boundary after the start."""
        scenario = self._scenario
        period = scenario.capacity_period
        for cap_key, windows in scenario.capacity.items():
            boundaries = {b for w in windows for b in (w.start, w.end) if not math.isinf(b)}
            if period is not None:
                # Seconds into each period; the period's end is the next period's start (offset 0).
                for boundary in {b % period for b in boundaries}:
                    cycle = 0 if boundary > 0 else 1
                    yield self._clock.cycle_at(cycle, boundary), ("od-pattern", cap_key, (cycle, boundary))
                continue
            for boundary in boundaries:
                if boundary > 0:
                    yield self._clock.at(boundary), ("od-pattern", cap_key, None)
        for plan in scenario.training_plans:
            for boundary in (plan.start, plan.end):
                if not math.isinf(boundary) and boundary > 0:
                    yield self._clock.at(boundary), ("plan", plan.arn, None)

    def on_boundary(self, ref: Boundary) -> tuple[tuple[float, Boundary] | None, list[PoolKey]]:
        """A boundary passed: its next occurrence (periodic windows) and the pools that may have grown."""
        kind, name, periodic = ref
        if kind == "plan":
            return None, [("plan", name)]
        following = None
        if periodic is not None:  # a periodic boundary: the same one in the next period
            cycle, boundary = periodic
            following = (self._clock.cycle_at(cycle + 1, boundary), (kind, name, (cycle + 1, boundary)))
        # A capacity key may be a glob: every waited-on type whose windows come from it.
        keys = [
            key
            for key in self._waiting_by_key
            if key[0] == "od" and self._windows_for(key[1]) is self._scenario.capacity.get(name)
        ]
        return following, keys

    # ------------------------------------------------------------------------------------ holding

    def utilization(self, kind: JobKind, instance_type: str) -> int:
        """Instances of ``instance_type`` held right now by jobs of ``kind`` (for quota checks)."""
        return self._held_by_kind.get((kind, instance_type), 0)

    def cluster_utilization(self, instance_type: str) -> int:
        """Instances of ``instance_type`` held right now by HyperPod cluster nodes (for quota checks)."""
        return self._held_by_clusters.get(instance_type, 0)

    def in_use(self, key: PoolKey) -> int:
        """Instances of a pool held right now."""
        return self._in_use.get(key, 0)

    def available(self, key: PoolKey, when: float) -> float:
        """Free instances in a pool (``inf`` when unlimited) at emulated time ``when``."""
        return self._limit(key, when) - self._in_use.get(key, 0)

    def find_choice(self, job: Job, now: float) -> tuple[Choice, dict[PoolKey, int]] | None:
        """The job's first choice whose pools all have enough free instances now, with what it needs."""
        for choice in job.spec.choices:
            needs = _needs(choice)
            if all(self.available(key, now) >= n for key, n in needs.items()):
                return choice, needs
        return None

    def take(self, job: Job, choice: Choice, needs: dict[PoolKey, int]) -> None:
        """``job`` holds the instances of ``choice`` until :meth:`release`."""
        for key, n in needs.items():
            self._in_use[key] = self._in_use.get(key, 0) + n
        for instance_type, count in choice.groups:
            kind_key = (job.kind, instance_type)
            self._held_by_kind[kind_key] = self._held_by_kind.get(kind_key, 0) + count
        job.held = needs

    def release(self, job: Job) -> list[PoolKey]:
        """Give back what ``job`` holds; returns the pools that grew."""
        for key, n in job.held.items():
            self._in_use[key] -= n
        if job.selected is not None:
            for instance_type, count in job.selected.groups:
                self._held_by_kind[(job.kind, instance_type)] -= count
        released = list(job.held)
        job.held = {}
        return released

    def take_node(self, node: Node) -> None:
        """``node`` holds one instance of its type's On-Demand pool until :meth:`release_node`."""
        key = ("od", node.instance_type)
        self._in_use[key] = self._in_use.get(key, 0) + 1
        self._held_by_clusters[node.instance_type] = self._held_by_clusters.get(node.instance_type, 0) + 1

    def release_node(self, node: Node) -> PoolKey:
        """Give back the instance ``node`` holds; returns the pool that grew."""
        key = ("od", node.instance_type)
        self._in_use[key] -= 1
        self._held_by_clusters[node.instance_type] -= 1
        return key

    # ------------------------------------------------------------------------------------ waiting

    def wait(self, waiter: Waiter) -> None:
        """``waiter`` waits for any of the pools it could use (a no-op if it already waits)."""
        if waiter.seq in self._waiting:
            return
        self._waiting[waiter.seq] = waiter
        for key in _waited_keys(waiter):
            self._waiting_by_key.setdefault(key, set()).add(waiter.seq)

    def unwait(self, waiter: Waiter) -> None:
        """``waiter`` no longer waits (served, stopped, expired); a no-op if it was not waiting."""
        if self._waiting.pop(waiter.seq, None) is None:
            return
        for key in _waited_keys(waiter):
            seqs = self._waiting_by_key.get(key)
            if seqs is not None:
                seqs.discard(waiter.seq)
                if not seqs:
                    del self._waiting_by_key[key]

    def ready(self, keys: Iterable[PoolKey], now: float) -> Iterator[Waiter]:
        """Capacity in ``keys`` may have grown: the waiters that could use it, in creation order.

        The caller tries each (and :meth:`unwait` s what it serves) before asking for the next one, as
        later waiters see the capacity that is left.
        """
        keys = list(keys)
        candidates: set[int] = set()
        for key in keys:
            candidates.update(self._waiting_by_key.get(key, ()))
        for seq in sorted(candidates):
            # A waiter could not be served when last checked, and only ``keys`` changed since, so once
            # those pools are empty no later candidate can be served either.
            if all(self.available(key, now) <= 0 for key in keys):
                break
            waiter = self._waiting.get(seq)
            if waiter is not None:
                yield waiter

    # ------------------------------------------------------------------------------------ pool sizes

    def _windows_for(self, instance_type: str) -> Any:
        try:
            return self._windows_cache[instance_type]
        except KeyError:
            windows = self._scenario.capacity_windows(instance_type)
            self._windows_cache[instance_type] = windows
            return windows

    def _pool_windows(self, instance_type: str) -> _Windows | None:
        """The type's windows as ``(epoch from, epoch to, free)``, converted like their events."""
        try:
            return self._pool_cache[instance_type]
        except KeyError:
            windows = self._windows_for(instance_type)
            at = self._clock.at
            pool = None if windows is None else tuple((at(w.start), at(w.end), w.free) for w in windows)
            self._pool_cache[instance_type] = pool
            return pool

    def _periodic_limit(self, windows: tuple[CapacityWindow, ...], now: float) -> float:
        """Pool size at ``now`` when windows repeat every ``capacity_period`` (ends compared as scheduled)."""
        period = self._scenario.capacity_period
        assert period is not None
        cycle_at = self._clock.cycle_at
        cycle = max(0, math.floor((now - self._clock.start_epoch) / period))
        # Float rounding may put ``now`` on the wrong side of a period start: settle on the period whose
        # start, computed as the boundary events compute it, is the last one at or before ``now``.
        while cycle > 0 and cycle_at(cycle, 0.0) > now:
            cycle -= 1
        while cycle_at(cycle + 1, 0.0) <= now:
            cycle += 1
        for window in windows:
            start = cycle_at(cycle, window.start)
            end = cycle_at(cycle + 1, 0.0) if window.end >= period else cycle_at(cycle, window.end)
            if start <= now < end:
                return window.free
        return 0

    def _limit(self, key: PoolKey, now: float) -> float:
        # ``now`` is an emulated epoch; boundaries are compared as epochs (see ``EmulatedClock.at``),
        # never as ``now - start_epoch``, so the instant a boundary event fires is inside its window.
        kind, name = key
        if kind == "plan":
            plan = self._scenario.plan(name)
            if plan is None or plan.status not in (None, "Active"):
                return 0
            if not (self._clock.at(plan.start) <= now < self._clock.at(plan.end)):
                return 0
            return plan.count
        if self._scenario.capacity_period is not None:
            periodic = self._windows_for(name)
            return math.inf if periodic is None else self._periodic_limit(periodic, now)
        windows = self._pool_windows(name)
        if windows is None:
            return math.inf
        for start, end, free in windows:
            if start <= now < end:
                return free
        return 0


def _waited_keys(waiter: Waiter) -> list[PoolKey]:
    """The pools a waiter could use: every choice of a job, every listed type of a group."""
    match waiter:
        case Job():
            return [key for choice in waiter.spec.choices for key in _keys(choice)]
        case InstanceGroup():
            return [("od", instance_type) for instance_type in waiter.spec.types]


def _keys(choice: Choice) -> list[PoolKey]:
    if choice.plan_arn is not None:
        return [("plan", choice.plan_arn)]
    return [("od", instance_type) for instance_type, _ in choice.groups]


def _needs(choice: Choice) -> dict[PoolKey, int]:
    needs: dict[PoolKey, int] = {}
    if choice.plan_arn is not None:
        needs[("plan", choice.plan_arn)] = sum(count for _, count in choice.groups)
        return needs
    for instance_type, count in choice.groups:
        key = ("od", instance_type)
        needs[key] = needs.get(key, 0) + count
    return needs
