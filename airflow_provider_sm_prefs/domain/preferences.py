"""Instance preference lists: the value types, every documented client-side rule, and rendering.

Pure Python: no Airflow, no boto. DAG authors import it at parse time::

    from airflow_provider_sm_prefs.domain.preferences import InstancePreference, InstancePreferenceList

    prefs = InstancePreferenceList(
        [
            InstancePreference("ml.g6e.48xlarge", 2),
            {"instance_type": "ml.g5.48xlarge", "instance_count": 4},
            {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": "2"},  # Jinja renders strings
        ],
        kind="training",
    )

Rules follow the SageMaker guides (rule numbers R1..R14 as in the README's "Rules checked before any
AWS call"). SageMaker's own
client validation only checks minimums, so everything here is what makes a bad list fail before a
single AWS call instead of after a round trip, or worse, after a retry storm.

The module is over 500 lines on purpose: it is the one pure module a DAG imports at parse time, and
each rule sits next to the value type it checks (entry rules by ``InstancePreference``, list and
request rules by ``InstancePreferenceList``), so a rule, its field path and its message read in one place.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import difflib
import functools
import json
import marshal
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, TypeGuard, overload

from airflow_provider_sm_prefs.domain import service_model
from airflow_provider_sm_prefs.domain.catalog import is_accelerated_type as is_accelerated
from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.kinds import JobKind as JobKind
from airflow_provider_sm_prefs.domain.requirements import WorkloadRequirements as WorkloadRequirements

MAX_ENTRIES = 5
MIN_PENDING_SECONDS = 1800
MAX_PENDING_SECONDS = 2_419_200
PROCESSING_MAX_COUNT = 100
FIELD = "instance_preferences"

TRAINING_PLAN_ARN = re.compile(r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.+$")

# Settings that apply to whichever entry is selected (R12): they belong to the job, never to an entry.
_JOB_LEVEL_SETTINGS = ("VolumeSizeInGB", "VolumeKmsKeyId", "KeepAlivePeriodInSeconds")
_SNAKE_KEYS = {"instance_type", "instance_count", "training_plan_arn", "training_plan_arns"}
_API_KEYS = {"InstanceType", "InstanceCount", "TrainingPlanArns"}
#: Ours, never sent to AWS: how long the task must have waited before the entry becomes acceptable.
#: Allowed next to either key style (a list in config's API form may carry it too).
ACCEPT_AFTER = "accept_after"


def _is_int_like(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _to_int(value: Any) -> int | None:
    """Cast a count given as int or numeric string (Jinja renders strings); None if not an integer."""
    if _is_int_like(value):
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


@dataclass(frozen=True)
class InstancePreference:
    """One acceptable instance type, optionally with its own count and a reserved training plan.

    :param instance_type: e.g. ``ml.g6e.48xlarge``.
    :param instance_count: instances for this entry; leave None for a uniform, job-level count.
    :param training_plan_arn: a SageMaker training plan whose reserved capacity backs this entry
        (training only). The plan's instance type must equal ``instance_type``.
    :param accept_after: the entry becomes acceptable only once the task has waited this long in total
        (timedelta or seconds; see :mod:`airflow_provider_sm_prefs.domain.escalation`). Never sent to AWS.
    """

    instance_type: str
    instance_count: int | None = None
    training_plan_arn: str | None = None
    accept_after: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.accept_after, timedelta):
            object.__setattr__(self, "accept_after", self.accept_after.total_seconds())

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe snake_case form; round-trips through :meth:`from_value`."""
        out: dict[str, Any] = {
            "instance_type": self.instance_type,
            "instance_count": self.instance_count,
            "training_plan_arn": self.training_plan_arn,
        }
        if self.accept_after is not None:
            out[ACCEPT_AFTER] = self.accept_after
        return out

    def as_api(self) -> dict[str, Any]:
        """The entry exactly as SageMaker's API expects it."""
        entry: dict[str, Any] = {"InstanceType": self.instance_type}
        if self.instance_count is not None:
            entry["InstanceCount"] = self.instance_count
        if self.training_plan_arn is not None:
            entry["TrainingPlanArns"] = [self.training_plan_arn]
        return entry

    def label(self, default_count: int | None = None) -> str:
        """Short human form, e.g. ``ml.g6e.48xlarge×2``."""
        count = self.instance_count if self.instance_count is not None else default_count
        text = self.instance_type if count is None else f"{self.instance_type}×{count}"
        text += " (plan)" if self.training_plan_arn else ""
        return text + (f" (after {_duration(self.accept_after)})" if self.accept_after else "")

    @classmethod
    def from_value(cls, value: Any, where: str = FIELD) -> InstancePreference:
        """Build one entry from an object, a snake_case dict, an API dict or a bare type string.

        :raises InvalidInstancePreferencesError: naming ``where`` and every problem of the entry.
        """
        entry, problems = _parse_entry(value, where)
        if problems or entry is None:
            raise InvalidInstancePreferencesError(problems)
        return entry


def _parse_entry(value: Any, where: str) -> tuple[InstancePreference | None, list[str]]:
    """Parse one raw entry; return it (or None) with every problem found."""
    if isinstance(value, InstancePreference):
        value = value.as_dict()
    if isinstance(value, str):
        return InstancePreference(value.strip()), []
    if not isinstance(value, Mapping):
        return None, [
            f"{where}: expected a dict like {{'instance_type': 'ml.g5.48xlarge', 'instance_count': 2}}, "
            f"an InstancePreference or an instance type string, got {type(value).__name__} {value!r}"
        ]
    keys = set(value) - {ACCEPT_AFTER}
    # Keys all of one style (the usual case) leave nothing for _key_problems to report.
    problems = [] if keys <= _SNAKE_KEYS or keys <= _API_KEYS else _key_problems(keys, where)

    instance_type = value.get("instance_type", value.get("InstanceType"))
    if not isinstance(instance_type, str) or not instance_type.strip():
        problems.append(f"{where}: instance_type is required, e.g. 'ml.g5.48xlarge' (got {instance_type!r})")
        instance_type = None
    else:
        instance_type = instance_type.strip()

    count = _count_of(value, where, problems)
    plan = _plan_of(value, where, problems)
    window = _window_of(value, where, problems)

    if instance_type is None:
        return None, problems
    return InstancePreference(instance_type, count, plan, window), problems


def _window_of(value: Mapping[str, Any], where: str, problems: list[str]) -> float | None:
    """The entry's ``accept_after`` in seconds (None if it gives none): a timedelta or a number >= 0."""
    raw = value.get(ACCEPT_AFTER)
    if raw is None or raw == "":
        return None
    if isinstance(raw, timedelta):
        seconds: float | None = raw.total_seconds()
    elif isinstance(raw, bool):
        seconds = None
    elif isinstance(raw, (int, float)):
        seconds = float(raw)
    elif isinstance(raw, str):
        try:
            seconds = float(raw.strip())
        except ValueError:
            seconds = None
    else:
        seconds = None
    if seconds is None or seconds != seconds or seconds in (float("inf"), float("-inf")):
        problems.append(
            f"{where}.{ACCEPT_AFTER}: {raw!r} is not a duration; give a timedelta or a number of seconds, "
            f"e.g. timedelta(hours=2) or 7200"
        )
        return None
    if seconds < 0:
        problems.append(f"{where}.{ACCEPT_AFTER}: {raw!r} is negative; give 0 or more seconds")
        return None
    return seconds


def _duration(seconds: float | None) -> str:
    """A window or bound in a validation message, exact to the second ("1h0m5s", "2h").

    Not :func:`~airflow_provider_sm_prefs.domain.outcome.format_duration`: that one rounds past an hour for
    logs, and a message comparing 3605 s with 3610 s must not read "1h00m is earlier than 1h00m".
    """
    seconds = int(seconds or 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


def _count_of(value: Mapping[str, Any], where: str, problems: list[str]) -> int | None:
    """The entry's count (None if it gives none); a count that is not a whole number is a problem."""
    raw_count = value.get("instance_count", value.get("InstanceCount"))
    if raw_count is None:
        return None
    count = _to_int(raw_count)
    if count is None:
        problems.append(
            f"{where}.instance_count: {raw_count!r} is not a whole number; give an integer such as 2"
        )
    return count


def _plan_of(value: Mapping[str, Any], where: str, problems: list[str]) -> str | None:
    """The entry's one training plan ARN, from ``training_plan_arn`` or ``training_plan_arns``."""
    plan: Any = None
    arns = value.get("training_plan_arns", value.get("TrainingPlanArns"))
    if arns is not None:  # None: no plan, as for the other optional members of an entry
        if isinstance(arns, str):
            arns = [arns]
        if not isinstance(arns, (list, tuple)) or len(arns) != 1:
            n = len(arns) if isinstance(arns, (list, tuple)) else "a non-list"
            problems.append(
                f"{where}.training_plan_arn: an entry takes exactly one training plan ARN, got {n}; "
                f"list the other plan's instance type as its own entry"
            )
        else:
            plan = arns[0]
    if "training_plan_arn" in value and value["training_plan_arn"] is not None:
        if plan is not None:
            problems.append(f"{where}: give training_plan_arn or training_plan_arns, not both")
        plan = value["training_plan_arn"]
    if plan is not None and not isinstance(plan, str):
        problems.append(f"{where}.training_plan_arn: expected an ARN string, got {type(plan).__name__}")
        return None
    return plan


def _entry_problems(entry: InstancePreference, where: str, kind: JobKind) -> list[str]:
    """One parsed entry against the rules for ``kind``: a valid type, a count in range, a valid plan."""
    problems: list[str] = []
    itype = entry.instance_type
    if not service_model.accepts_instance_type(kind.value, itype):
        problems.append(f"{where}: {_unknown_type_message(itype, kind)}")
    if entry.instance_count is not None:
        low, high = (1, PROCESSING_MAX_COUNT) if kind is JobKind.PROCESSING else (1, None)
        if entry.instance_count < low or (high is not None and entry.instance_count > high):
            bound = f"{low}..{high}" if high else f"at least {low}"
            problems.append(f"{where}.instance_count: {entry.instance_count} is out of range; use {bound}")
    plan = entry.training_plan_arn
    if plan is not None:
        if kind is JobKind.PROCESSING:
            problems.append(
                f"{where}.training_plan_arn: processing jobs use On-Demand capacity only; remove the plan"
            )
        elif not TRAINING_PLAN_ARN.match(plan) or not (50 <= len(plan) <= 2048):
            problems.append(
                f"{where}.training_plan_arn: {plan!r} is not a training plan ARN "
                f"(arn:aws:sagemaker:REGION:ACCOUNT:training-plan/NAME)"
            )
    return problems


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
                f"{FIELD}[{index}].{ACCEPT_AFTER}: {_duration(entry.accept_after)} is earlier than "
                f"{FIELD}[{latest_at}]'s {_duration(latest)}; windows never decrease down the list — "
                f"raise it or reorder the entries"
            )
            continue
        latest, latest_at = entry.accept_after, index
    return problems


def _key_problems(keys: set[Any], where: str) -> list[str]:
    """Problems with the keys of one entry: job-level settings, unknown keys, mixed styles."""
    problems: list[str] = []
    for key in sorted(keys & set(_JOB_LEVEL_SETTINGS), key=str):
        problems.append(
            f"{where}.{key}: {key} applies to whichever entry is selected; set it once on the job "
            f"(ResourceConfig / ClusterConfig), not per entry"
        )
    unknown = keys - _SNAKE_KEYS - _API_KEYS - set(_JOB_LEVEL_SETTINGS)
    for key in sorted(unknown, key=str):
        close = difflib.get_close_matches(str(key), sorted(_SNAKE_KEYS | _API_KEYS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        problems.append(
            f"{where}: unknown key {key!r}{hint} (an entry takes instance_type, instance_count, training_plan_arn)"
        )
    if (keys & _SNAKE_KEYS) and (keys & _API_KEYS):
        problems.append(
            f"{where}: mixes snake_case and API-cased keys ({sorted(keys & (_SNAKE_KEYS | _API_KEYS))}); use one style"
        )
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
    def from_response(cls, raw: Any, kind: JobKind | str) -> InstancePreferenceList:
        """The list as SageMaker echoes it in a Describe response; lenient (AWS already accepted it)."""
        entries = [_parse_entry(item, FIELD)[0] for item in raw or []]
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
                f"drop the least preferred ({', '.join(_type_of(i) for i in items[MAX_ENTRIES:])})"
            )
        seen: dict[str, int] = {}
        for index, item in enumerate(items):
            where = f"{FIELD}[{index}]"
            entry, entry_problems = _parse_entry(item, where)
            problems.extend(entry_problems)
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
            problems.extend(_entry_problems(entry, where, kind))
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
    def escalates(self) -> bool:
        """True when some entry waits for a window (the job is submitted in stages)."""
        return any(self._windows)

    def window_problems(self, max_pending_seconds: int | None) -> list[str]:
        """Windows that open only after ``max_pending`` has run out: their entries could never be used."""
        if max_pending_seconds is None:
            return []
        return [
            f"{FIELD}[{index}].{ACCEPT_AFTER}: {_duration(window)} is not before max_pending "
            f"({_duration(max_pending_seconds)}), so the entry could never be used; lower it or raise max_pending"
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
        cluster = _get_path(request, self.kind.cluster_path) or {}
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
        if job_count is not None and _to_int(job_count) is not None:
            job_count = _to_int(job_count)  # as rendered
        problems: list[str] = []
        stopping = request.get("StoppingCondition") or {}
        if self._sets_max_pending(max_pending_seconds):
            given = dict(stopping).get("MaxPendingTimeInSeconds")
            if given is not None and _to_int(given) != max_pending_seconds:
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
        return max_pending_seconds is not None and self.kind is JobKind.TRAINING and self.waits_for_capacity

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
        count = _to_int(job_count)
        limit = PROCESSING_MAX_COUNT if self.kind is JobKind.PROCESSING else None
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
            value = _to_int(pending)
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
        if cluster.get("InstanceCount") is not None and _to_int(cluster["InstanceCount"]) is not None:
            cluster["InstanceCount"] = _to_int(cluster["InstanceCount"])
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


def _type_of(item: Any) -> str:
    if isinstance(item, InstancePreference):
        return item.instance_type
    if isinstance(item, Mapping):
        return str(item.get("instance_type", item.get("InstanceType", "?")))
    return str(item)


def _unknown_type_message(instance_type: str, kind: JobKind) -> str:
    other = JobKind.TRAINING if kind is JobKind.PROCESSING else JobKind.PROCESSING
    if service_model.accepts_instance_type(other.value, instance_type):
        if kind is JobKind.PROCESSING:
            return (
                f"{instance_type} is a training-only type; processing accepts fewer types "
                f"(no ml.trn*, ml.p4d/p4de, ml.p5*, ml.p6*, ml.c5n*, ml.p3dn) — pick another type"
            )
        return f"{instance_type} is not a training instance type — pick another type"
    close = difflib.get_close_matches(instance_type, sorted(service_model.instance_types(kind.value)), n=2)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"{instance_type} is not a SageMaker {kind.value} instance type{hint}"


def _get_path(request: Mapping[str, Any], path: Sequence[str]) -> Any:
    node: Any = request
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def to_seconds(value: timedelta | int | float | str | None, field: str = "max_pending") -> int | None:
    """Seconds from a timedelta or a number (strings allowed: templates render strings)."""
    if value is None or value == "":
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    else:
        number = _to_int(value)
        if number is None:
            try:
                seconds = float(value)
            except (TypeError, ValueError):
                raise InvalidInstancePreferencesError(
                    [f"{field}: {value!r} is not a duration; give a timedelta or a number of seconds"]
                ) from None
        else:
            seconds = number
    if seconds < 1:
        # Whole seconds go to AWS: anything below one would become 0, which AWS refuses.
        raise InvalidInstancePreferencesError([f"{field}: {value!r} must be at least 1 second"])
    return int(seconds)


def _parse_literal(raw: Any, kind: JobKind) -> tuple[InstancePreferenceList, list[str]]:
    """The list parsed with its problems, remembered for literal lists (a DAG often repeats one list).

    The key is the list's ``marshal`` bytes, which exist only for trees of exact builtin types and
    differ whenever a value or its type does (``1``, ``1.0`` and ``True`` included), so equal keys mean
    equal lists. The list is immutable and shared; the problems come back as a list the caller may extend.
    """
    try:
        blob = marshal.dumps(raw)
    except ValueError:  # InstancePreference objects, timedeltas...: parse as given
        parsed, problems = InstancePreferenceList._parse(raw, kind)
        return InstancePreferenceList._from_parsed(parsed, kind), problems
    prefs, known = _parse_marshalled(blob, kind)
    return prefs, list(known)


@functools.lru_cache(maxsize=256)
def _parse_marshalled(blob: bytes, kind: JobKind) -> tuple[InstancePreferenceList, tuple[str, ...]]:
    parsed, problems = InstancePreferenceList._parse(marshal.loads(blob), kind)
    return InstancePreferenceList._from_parsed(parsed, kind), tuple(problems)


def check_request(
    kind: JobKind | str,
    config: Mapping[str, Any],
    instance_preferences: Any = None,
    max_pending_seconds: int | None = None,
) -> InstancePreferenceList:
    """Every rule of :func:`build_request`, without building the request (what a DAG parse needs).

    Exactly one place must hold the list. Every problem is reported at once.

    :returns: the parsed list.
    :raises InvalidInstancePreferencesError: naming each broken rule and its fix.
    """
    job_kind = JobKind(kind)
    if not isinstance(config, Mapping):
        raise InvalidInstancePreferencesError(
            [f"config: expected the Create request as a dict, got {type(config).__name__}"]
        )
    in_config = _get_path(config, job_kind.cluster_path + ("InstancePreferences",))
    if instance_preferences is not None and in_config is not None:
        raise InvalidInstancePreferencesError(
            [
                f"{FIELD}: given both as an argument and in config {job_kind.cluster_field}.InstancePreferences; "
                f"keep exactly one"
            ]
        )
    raw = instance_preferences if instance_preferences is not None else in_config
    if raw is None:
        raise InvalidInstancePreferencesError(
            [
                f"{FIELD}: missing; pass instance_preferences=[...] or set {job_kind.cluster_field}.InstancePreferences"
            ]
        )
    prefs, problems = _parse_literal(raw, job_kind)
    if problems:
        # Also report the request-level rules, so one run shows every problem.
        with contextlib.suppress(Exception):  # the list problems are what matter; never mask them
            problems.extend(p for p in prefs.validate_request(config) if p not in problems)
    else:
        problems = prefs.request_problems(config, max_pending_seconds)
        given = _to_int(_get_path(config, ("StoppingCondition", "MaxPendingTimeInSeconds")))
        problems.extend(
            prefs.window_problems(max_pending_seconds if max_pending_seconds is not None else given)
        )
    if problems:
        raise InvalidInstancePreferencesError(problems)
    return prefs


def build_request(
    kind: JobKind | str,
    config: Mapping[str, Any],
    instance_preferences: Any = None,
    max_pending_seconds: int | None = None,
) -> tuple[dict[str, Any], InstancePreferenceList]:
    """Validate (see :func:`check_request`) and render a Create* request.

    :returns: the request to send and the parsed list.
    :raises InvalidInstancePreferencesError: naming each broken rule and its fix.
    """
    prefs = check_request(kind, config, instance_preferences, max_pending_seconds)
    return prefs._rendered(config, max_pending_seconds), prefs


def job_level_count(kind: JobKind, config: Any) -> int | None:
    """The job-level InstanceCount of a request or config (None when absent or unreadable)."""
    if not isinstance(config, Mapping):
        return None
    cluster = kind.spec.cluster_of(config)
    count = cluster.get("InstanceCount") if isinstance(cluster, Mapping) else None
    try:
        return int(count) if count is not None else None
    except (TypeError, ValueError):
        return None


def without_list(kind: JobKind, config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without a preference list inside it (the pruned list is passed as the argument)."""
    out = dict(config)
    node = out
    for key in kind.cluster_path:
        child = dict(node.get(key) or {})
        node[key] = child
        node = child
    node.pop("InstancePreferences", None)
    return out
