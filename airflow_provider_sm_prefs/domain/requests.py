"""Create requests from a DAG's arguments: where the list comes from, every rule at once, the rendered request.

Pure Python: no Airflow, no boto. :func:`check_request` is what a DAG parse needs (every rule, nothing
built); :func:`build_request` also renders the request the hook sends. A DAG often repeats one literal
list, so the parsed list of a literal is remembered (see :func:`_parse_literal`).
"""

from __future__ import annotations

import contextlib
import functools
import marshal
import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preference_entry import FIELD, to_int
from airflow_provider_sm_prefs.domain.preference_list import InstancePreferenceList, value_at

__all__ = ["build_request", "check_request", "job_level_count", "to_seconds", "without_list"]


def to_seconds(value: timedelta | int | float | str | None, field: str = "max_pending") -> int | None:
    """Seconds from a timedelta or a number (strings allowed: templates render strings)."""
    if value is None or value == "":
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    else:
        number = to_int(value)
        if number is None:
            try:
                seconds = float(value)
            except (TypeError, ValueError):
                raise InvalidInstancePreferencesError(
                    [f"{field}: {value!r} is not a duration; give a timedelta or a number of seconds"]
                ) from None
        else:
            seconds = number
    if not math.isfinite(seconds):
        raise InvalidInstancePreferencesError(
            [f"{field}: {value!r} is not a finite duration; give a timedelta or a number of seconds, or None"]
        )
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
        return InstancePreferenceList.read(raw, kind)
    prefs, known = _parse_marshalled(blob, kind)
    return prefs, list(known)


@functools.lru_cache(maxsize=256)
def _parse_marshalled(blob: bytes, kind: JobKind) -> tuple[InstancePreferenceList, tuple[str, ...]]:
    prefs, problems = InstancePreferenceList.read(marshal.loads(blob), kind)
    return prefs, tuple(problems)


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
    in_config = value_at(config, job_kind.cluster_path + ("InstancePreferences",))
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
    problems: list[str]
    if isinstance(raw, InstancePreferenceList) and raw.kind is job_kind:
        # Already parsed (its construction checked the list's own rules): only the request is checked.
        prefs, problems = raw, []
    else:
        prefs, problems = _parse_literal(raw, job_kind)
    if problems:
        # Also report the request-level rules, so one run shows every problem.
        with contextlib.suppress(Exception):  # the list problems are what matter; never mask them
            problems.extend(p for p in prefs.validate_request(config) if p not in problems)
    else:
        problems = prefs.request_problems(config, max_pending_seconds)
        given = to_int(value_at(config, ("StoppingCondition", "MaxPendingTimeInSeconds")))
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
