"""The instance preference list: an ordered, validated value of 1..5 entries for one job kind.

Pure Python: no Airflow, no boto. :class:`InstancePreferenceList` reads its entries
(:mod:`~airflow_provider_sm_prefs.domain.preference_entry`), checks the rules that need the whole list
(R1, R2, duplicates, counts on all entries or none, windows that never decrease), answers questions about
it (ranks, windows, whether SageMaker waits for capacity), and checks and renders the Create request that
carries it (R3, R4, R5, R7, R8, R13). Building a request from a DAG's arguments is
:mod:`~airflow_provider_sm_prefs.domain.requests`.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeGuard, overload

from airflow_provider_sm_prefs.domain.catalog import is_accelerated_type as is_accelerated
from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preference_entry import (
    ACCEPT_AFTER,
    FIELD,
    InstancePreference,
    entry_problems,
    exact_duration,
    parse_entry,
    to_int,
    type_of,
)

__all__ = [
    "MAX_ENTRIES",
    "MAX_PENDING_SECONDS",
    "MIN_PENDING_SECONDS",
    "InstancePreferenceList",
    "value_at",
]

MAX_ENTRIES = 5
MIN_PENDING_SECONDS = 1800
MAX_PENDING_SECONDS = 2_419_200


def _window_problems(entries: Sequence[InstancePreference]) -> list[str]:
    """Acceptance windows: none on the first entry, and never decreasing down the list."""
    problems: list[str] = []
    if entries and entries[0].accept_after:
        problems.append(
            f"{FIELD}[0].{ACCEPT_AFTER}: the first entry is acceptable from the start; "
            f"remove accept_after there (got {entries[0].accept_after:g} s)"
        )
    latest, latest_at = 0.0, 0
    for index, entry in enumerate(entries[1:], start=1):
        if entry.accept_after is None:
            continue
        if entry.accept_after < latest:
            problems.append(
                f"{FIELD}[{index}].{ACCEPT_AFTER}: {exact_duration(entry.accept_after)} is earlier than "
                f"{FIELD}[{latest_at}]'s {exact_duration(latest)}; windows never decrease down the list — "
                f"raise it or reorder the entries"
            )
            continue
        latest, latest_at = entry.accept_after, index
    return problems


def _coerce_list(raw: Any) -> tuple[list[Any] | None, list[str]]:
    """Turn user input into a list of raw entries. Accepts a rendered template string of a list."""
    if isinstance(raw, InstancePreferenceList):
        return list(raw), []
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            # A Jinja-rendered list arrives as its text unless render_template_as_native_obj is set.
            for loader in (json.loads, ast.literal_eval):
                try:
                    parsed = loader(text)
                except (ValueError, SyntaxError):
                    continue
                if isinstance(parsed, list):
                    return parsed, []
            return None, [f"{FIELD}: could not read {text[:80]!r} as a list; render a list or JSON array"]
        return [text], []
    if isinstance(raw, (list, tuple)):
        return list(raw), []
    if isinstance(raw, Iterable) and not isinstance(raw, Mapping):
        return list(raw), []
    return None, [
        f"{FIELD}: expected a list of 1 to {MAX_ENTRIES} entries in order of preference, got {type(raw).__name__}"
    ]


class InstancePreferenceList(Sequence[InstancePreference]):
    """An ordered list of 1..5 acceptable instance types for one job kind.

    Construction parses every entry and checks the rules that need nothing but the list itself
    (R1, R2, R3 within the list, R6/R8 plan shape, R14 types per kind, count ranges); all problems
    are reported at once. :meth:`validate_request` adds the rules that involve the rest of the
    Create request, and :meth:`render` places the list where SageMaker expects it.

    :param entries: InstancePreference objects, snake_case dicts, API-cased dicts or type strings.
    :param kind: ``"training"`` or ``"processing"``.
    """

    def __init__(self, entries: Any, kind: JobKind | str = JobKind.TRAINING) -> None:
        self.kind = JobKind(kind)
        parsed, problems = self._parse(entries, self.kind)
        if problems:
            raise InvalidInstancePreferencesError(problems)
        self._entries: tuple[InstancePreference, ...] = tuple(parsed)

    @classmethod
    def _from_parsed(cls, entries: Iterable[InstancePreference], kind: JobKind) -> InstancePreferenceList:
        """Wrap already-parsed entries without re-checking them."""
        obj = cls.__new__(cls)
        obj.kind, obj._entries = kind, tuple(entries)
        return obj

    @classmethod
    def read(cls, raw: Any, kind: JobKind) -> tuple[InstancePreferenceList, list[str]]:
        """The list with every problem found, without raising (the entries that could be read are kept)."""
        parsed, problems = cls._parse(raw, kind)
        return cls._from_parsed(parsed, kind), problems

    @classmethod
    def from_response(cls, raw: Any, kind: JobKind | str) -> InstancePreferenceList:
        """The list as SageMaker echoes it in a Describe response; lenient (AWS already accepted it)."""
        entries = [parse_entry(item, FIELD)[0] for item in raw or []]
        return cls._from_parsed([e for e in entries if e is not None], JobKind(kind))

    @staticmethod
    def _parse(raw: Any, kind: JobKind) -> tuple[list[InstancePreference], list[str]]:
        items, problems = _coerce_list(raw)
        if items is None:
            return [], problems
        entries: list[InstancePreference] = []
        if not items:
            problems.append(
                f"{FIELD}: the list is empty; give 1 to {MAX_ENTRIES} instance types, most preferred first"
            )
        if len(items) > MAX_ENTRIES:
            problems.append(
                f"{FIELD}: {len(items)} entries given; SageMaker accepts at most {MAX_ENTRIES} — "
                f"drop the least preferred ({', '.join(type_of(i) for i in items[MAX_ENTRIES:])})"
            )
        seen: dict[str, int] = {}
        for index, item in enumerate(items):
            where = f"{FIELD}[{index}]"
            entry, read_problems = parse_entry(item, where)
            problems.extend(read_problems)
            if entry is None:
                continue
            entries.append(entry)
            itype = entry.instance_type
            if itype in seen:
                problems.append(
                    f"{where}: {itype} appears twice (also at {FIELD}[{seen[itype]}]); each instance type may appear once"
                )
            else:
                seen[itype] = index
            problems.extend(entry_problems(entry, where, kind))
        problems.extend(_window_problems(entries))
        counted = [e for e in entries if e.instance_count is not None]
        if counted and len(counted) != len(entries):
            missing = [f"{FIELD}[{i}]" for i, e in enumerate(entries) if e.instance_count is None]
            problems.append(
                f"{', '.join(missing)}: instance_count missing; counts are either on every entry or on none "
                f"(then set the job-level InstanceCount)"
            )
        return entries, problems

    # -- Sequence protocol -------------------------------------------------------------------------
    @overload
    def __getitem__(self, index: int) -> InstancePreference: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[InstancePreference]: ...
    def __getitem__(self, index: int | slice) -> InstancePreference | Sequence[InstancePreference]:
        return self._entries[index]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[InstancePreference]:
        return iter(self._entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InstancePreferenceList):
            return NotImplemented
        return self.kind == other.kind and self._entries == other._entries

    def __hash__(self) -> int:
        return hash((self.kind, self._entries))

    def __repr__(self) -> str:
        return f"InstancePreferenceList({[e.as_dict() for e in self._entries]!r}, kind={self.kind.value!r})"

    # -- facts about the list ---------------------------------------------------------------------
    @functools.cached_property
    def per_entry_counts(self) -> bool:
        """True when counts are on the entries (then the job-level InstanceCount must be absent)."""
        return bool(self._entries) and all(e.instance_count is not None for e in self._entries)

    @functools.cached_property
    def waits_for_capacity(self) -> bool:
        """True when SageMaker waits (Pending) for capacity: at least one accelerated entry.

        A CPU-only list is evaluated once and fails with a capacity error when nothing is free,
        and SageMaker ignores MaxPendingTimeInSeconds for it.
        """
        return any(is_accelerated(e.instance_type) for e in self._entries)

    @property
    def instance_types(self) -> list[str]:
        return [e.instance_type for e in self._entries]

    def rank_of(self, instance_type: str) -> int:
        """1-based rank of ``instance_type`` in the list (1 = first choice)."""
        for rank, entry in enumerate(self._entries, start=1):
            if entry.instance_type == instance_type:
                return rank
        raise KeyError(f"{instance_type} is not in the preference list {self.instance_types}")

    def entry_for(self, instance_type: str) -> InstancePreference:
        return self._entries[self.rank_of(instance_type) - 1]

    def describe(self, default_count: int | None = None) -> str:
        """``ml.g6.48xlarge×2 → ml.g5.48xlarge×4`` for logs."""
        return " → ".join(e.label(default_count) for e in self._entries)

    def as_list(self) -> list[dict[str, Any]]:
        """JSON-safe form for XCom and trigger kwargs; ``InstancePreferenceList(x.as_list(), kind)`` == x."""
        return [e.as_dict() for e in self._entries]

    def as_api(self) -> list[dict[str, Any]]:
        return [e.as_api() for e in self._entries]

    @property
    def windows(self) -> list[float]:
        """Each entry's effective ``accept_after`` in seconds: an entry without one shares the one above."""
        return list(self._windows)

    @functools.cached_property
    def _windows(self) -> tuple[float, ...]:
        out: list[float] = []
        for entry in self._entries:
            previous = out[-1] if out else 0.0
            out.append(max(previous, entry.accept_after or 0.0) if out else 0.0)
        return tuple(out)

    @property
    def has_windows(self) -> bool:
        """True when some entry waits for an acceptance window (the job is submitted in stages)."""
        return any(self._windows)

    #: The earlier name of :attr:`has_windows`.
    escalates = has_windows

    def window_problems(self, max_pending_seconds: int | None) -> list[str]:
        """Windows that open only after ``max_pending`` has run out: their entries could never be used."""
        if max_pending_seconds is None:
            return []
        return [
            f"{FIELD}[{index}].{ACCEPT_AFTER}: {exact_duration(window)} is not before max_pending "
            f"({exact_duration(max_pending_seconds)}), so the entry could never be used; lower it or raise max_pending"
            for index, (entry, window) in enumerate(zip(self._entries, self._windows, strict=True))
            if entry.accept_after and window >= max_pending_seconds
        ]

    def keep(self, ranks: Iterable[int]) -> InstancePreferenceList:
        """The entries at these 1-based ranks, in list order, each keeping its effective window.

        When the first entries are left out (guardrails), the job starts with what remains instead of
        holding nothing pending until a later window opens; later windows keep their times.
        """
        windows = self.windows
        chosen = sorted(set(ranks))
        start = windows[chosen[0] - 1] if chosen else 0.0
        entries = [
            replace(self._entries[r - 1], accept_after=windows[r - 1] if windows[r - 1] > start else None)
            for r in chosen
        ]
        return type(self)._from_parsed(entries, self.kind)

    # -- the request around the list --------------------------------------------------------------
    def validate_request(self, request: Mapping[str, Any]) -> list[str]:
        """Problems of the Create request that carries this list (R3, R4, R5, R7, R8, R13); [] if none."""
        cluster = value_at(request, self.kind.cluster_path) or {}
        if not isinstance(cluster, Mapping):
            return [f"{self.kind.cluster_field}: expected a dict"]
        stopping = request.get("StoppingCondition") or {}
        pending = stopping.get("MaxPendingTimeInSeconds") if isinstance(stopping, Mapping) else None
        return self._problems(request, cluster, cluster.get("InstanceCount"), pending)

    def request_problems(
        self, request: Mapping[str, Any], max_pending_seconds: int | None = None
    ) -> list[str]:
        """Every problem :meth:`render` raises for ``request``, found without copying or rendering it.

        The rules of :meth:`validate_request` apply to the request as rendered (count cast, and
        ``max_pending_seconds`` in place where :meth:`render` puts it), plus the ``max_pending`` rules.
        """
        cluster: Mapping[str, Any] = request
        for key in self.kind.cluster_path:
            node = cluster.get(key)
            if node is None:
                node = {}
            elif not isinstance(node, Mapping):
                return [f"{self.kind.cluster_field}: expected a dict, got {node!r}"]
            cluster = node
        job_count = cluster.get("InstanceCount")
        if job_count is not None and to_int(job_count) is not None:
            job_count = to_int(job_count)  # as rendered
        problems: list[str] = []
        stopping = request.get("StoppingCondition") or {}
        if self._sets_max_pending(max_pending_seconds):
            given = dict(stopping).get("MaxPendingTimeInSeconds")
            if given is not None and to_int(given) != max_pending_seconds:
                problems.append(
                    f"max_pending: {max_pending_seconds}s conflicts with StoppingCondition.MaxPendingTimeInSeconds="
                    f"{given} in config; set it in one place"
                )
            elif max_pending_seconds < MIN_PENDING_SECONDS:
                problems.append(
                    f"max_pending: {max_pending_seconds}s is below SageMaker's minimum MaxPendingTimeInSeconds of "
                    f"{MIN_PENDING_SECONDS}s (30 minutes); use at least timedelta(minutes=30)"
                )
            elif max_pending_seconds > MAX_PENDING_SECONDS:
                problems.append(
                    f"max_pending: {max_pending_seconds}s is above SageMaker's maximum of {MAX_PENDING_SECONDS}s (28 days)"
                )
            pending: Any = max_pending_seconds
        else:
            pending = stopping.get("MaxPendingTimeInSeconds") if isinstance(stopping, Mapping) else None
        problems.extend(self._problems(request, cluster, job_count, pending))
        return problems

    def _sets_max_pending(self, max_pending_seconds: int | None) -> TypeGuard[int]:
        """Whether :meth:`render` writes ``max_pending_seconds`` to MaxPendingTimeInSeconds."""
        return max_pending_seconds is not None and self.kind.spec.pending_limit and self.waits_for_capacity

    def _problems(
        self, request: Mapping[str, Any], cluster: Mapping[str, Any], job_count: Any, pending: Any
    ) -> list[str]:
        """The request-level rules, given the cluster settings, job-level count and pending limit."""
        problems: list[str] = []
        field = self.kind.cluster_field
        if cluster.get("InstanceType") is not None:
            problems.append(
                f"{field}.InstanceType: {cluster['InstanceType']} is set together with {FIELD}; "
                f"remove it — the preference list replaces the job-level instance type"
            )
        problems.extend(self._count_problems(job_count))
        if self.kind is JobKind.TRAINING:
            problems.extend(self._training_problems(request, cluster, pending))
        else:
            problems.extend(_processing_problems(request, cluster, pending))
        return problems

    def _count_problems(self, job_count: Any) -> list[str]:
        """Counts on every entry or once at job level (R3), and a job-level count in range."""
        field = self.kind.cluster_field
        if self.per_entry_counts:
            if job_count is None:
                return []
            return [
                f"{field}.InstanceCount: counts are given both per entry and at job level; "
                f"remove {field}.InstanceCount or the entries' instance_count"
            ]
        if job_count is None:
            return [
                f"{field}.InstanceCount: no count anywhere; set instance_count on every entry "
                f"or {field}.InstanceCount once"
            ]
        count = to_int(job_count)
        limit = self.kind.spec.max_instance_count
        if count is None or count < 1 or (limit is not None and count > limit):
            bound = f"1..{limit}" if limit else "at least 1"
            return [f"{field}.InstanceCount: {job_count!r} is not a valid count; use {bound}"]
        return []

    def _training_problems(
        self, request: Mapping[str, Any], cluster: Mapping[str, Any], pending: Any
    ) -> list[str]:
        """R5 (no groups, placement or Spot), R7 (one kind of plan) and R13 (pending limit range)."""
        problems: list[str] = []
        field = self.kind.cluster_field
        for key in ("InstanceGroups", "InstancePlacementConfig"):
            if cluster.get(key):
                problems.append(
                    f"{field}.{key}: cannot be combined with {FIELD}; use one or the other "
                    f"(heterogeneous clusters and placement configs are not supported with preferences)"
                )
        if request.get("EnableManagedSpotTraining"):
            problems.append(
                f"EnableManagedSpotTraining: Spot capacity cannot be combined with {FIELD}; "
                f"preferences use On-Demand or training-plan capacity — set it to False"
            )
        if cluster.get("TrainingPlanArn") and any(e.training_plan_arn for e in self._entries):
            problems.append(
                f"{field}.TrainingPlanArn: a job-level training plan cannot be combined with per-entry "
                f"plans; keep one of them"
            )
        if pending is not None:
            value = to_int(pending)
            if value is None or not MIN_PENDING_SECONDS <= value <= MAX_PENDING_SECONDS:
                problems.append(
                    f"StoppingCondition.MaxPendingTimeInSeconds: {pending!r} is outside "
                    f"{MIN_PENDING_SECONDS}..{MAX_PENDING_SECONDS} seconds (30 minutes to 28 days)"
                )
        return problems

    def render(self, request: Mapping[str, Any], max_pending_seconds: int | None = None) -> dict[str, Any]:
        """A copy of ``request`` with this list in place, counts cast, ready for Create*.

        For a training list that waits for capacity, ``max_pending_seconds`` becomes
        ``StoppingCondition.MaxPendingTimeInSeconds`` (SageMaker ignores it for CPU-only lists, and
        processing has no such field: callers enforce those deadlines themselves).

        :raises InvalidInstancePreferencesError: if the rendered request breaks a rule.
        """
        problems = self.request_problems(request, max_pending_seconds)
        if problems:
            raise InvalidInstancePreferencesError(problems)
        return self._rendered(request, max_pending_seconds)

    def _rendered(self, request: Mapping[str, Any], max_pending_seconds: int | None) -> dict[str, Any]:
        """:meth:`render` for a request that :meth:`request_problems` found nothing wrong with."""
        out = copy.deepcopy(dict(request))
        cluster = out
        for key in self.kind.cluster_path:
            cluster[key] = dict(cluster.get(key) or {})
            cluster = cluster[key]
        cluster["InstancePreferences"] = self.as_api()
        if cluster.get("InstanceCount") is not None and to_int(cluster["InstanceCount"]) is not None:
            cluster["InstanceCount"] = to_int(cluster["InstanceCount"])
        if self._sets_max_pending(max_pending_seconds):
            stopping = dict(out.get("StoppingCondition") or {})
            stopping["MaxPendingTimeInSeconds"] = max_pending_seconds
            out["StoppingCondition"] = stopping
        return out


def _processing_problems(request: Mapping[str, Any], cluster: Mapping[str, Any], pending: Any) -> list[str]:
    """R8 (On-Demand only) and R13 (no MaxPendingTimeInSeconds) for processing requests."""
    problems: list[str] = []
    if pending is not None:
        problems.append(
            "StoppingCondition.MaxPendingTimeInSeconds: processing jobs have no such field; "
            "use the operator's max_pending to bound the wait client-side"
        )
    if request.get("TrainingPlanArn") or cluster.get("TrainingPlanArn"):
        problems.append("TrainingPlanArn: processing jobs use On-Demand capacity only; remove the plan")
    return problems


def value_at(request: Mapping[str, Any], path: Sequence[str]) -> Any:
    node: Any = request
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node
