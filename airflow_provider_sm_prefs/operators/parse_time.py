"""What an operator does when the DAG is parsed: store the arguments, check the literal ones, cheaply.

Every parse of every DAG file constructs every task, so this runs far more often than ``execute``.
Nothing here touches AWS, a connection or the database. Two shortcuts keep the cost down (see
docs/performance.md): a literal list is stored as plain builtins (``accept_after`` as seconds, JSON-safe
in the serialized DAG), and :func:`plain_literals` lets the operator skip Airflow's search of its template
fields for XComArgs when they hold builtins only.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import (
    ACCEPT_AFTER,
    InstancePreference,
    InstancePreferenceList,
    check_request,
    to_seconds,
)
from airflow_provider_sm_prefs.domain.regions import FailoverRegion, read_regions, region_problems
from airflow_provider_sm_prefs.guardrail_check import GuardrailCheck
from airflow_provider_sm_prefs.operators.templates import has_template

__all__ = [
    "check_literal_arguments",
    "checked_regions",
    "plain_literals",
    "stored_preferences",
    "stored_regions",
]


def stored_preferences(value: Any) -> Any:
    """``instance_preferences`` as the operator stores it: a list of builtins where it is literal."""
    if isinstance(value, InstancePreferenceList):
        return value.as_list()
    return _windows_in_seconds(value)


def _windows_in_seconds(value: Any) -> Any:
    """A literal list with ``accept_after`` as seconds (JSON-safe in the serialized DAG), else as given."""
    if not isinstance(value, list):
        return value
    if plain_literals(value):  # only builtin types inside: no timedelta, no InstancePreference
        return list(value)
    out: list[Any] = []
    for entry in value:
        if isinstance(entry, InstancePreference):
            entry = entry.as_dict()
        if isinstance(entry, Mapping) and isinstance(entry.get(ACCEPT_AFTER), timedelta):
            entry = {**entry, ACCEPT_AFTER: entry[ACCEPT_AFTER].total_seconds()}
        out.append(entry)
    return out


def plain_literals(values: Iterable[Any] | list[Any]) -> bool:
    """Whether ``values`` is a tree of exact builtin types, which cannot hold an XComArg.

    ``marshal`` accepts exactly those and refuses anything else, in C: far cheaper than a Python walk.
    """
    try:
        marshal.dumps(values if isinstance(values, list) else list(values))
    except ValueError:
        return False
    return True


def stored_regions(value: Any) -> Any:
    """``regions`` as the operator stores it: each region a mapping of builtins where it is literal
    (``after`` in seconds: JSON-safe in the serialized DAG), else as given (a template, an XComArg)."""
    if not isinstance(value, list | tuple):
        return value
    out: list[Any] = []
    for item in value:
        if isinstance(item, FailoverRegion):
            item = item.as_dict()
        if isinstance(item, Mapping) and isinstance(item.get("after"), timedelta):
            item = {**item, "after": item["after"].total_seconds()}
        out.append(item)
    return out


def checked_regions(
    kind: JobKind,
    raw: Any,
    request: Mapping[str, Any],
    prefs: InstancePreferenceList,
    home_region: str | None,
) -> tuple[FailoverRegion, ...]:
    """The regions, read and checked against the request and list they move (:mod:`~..domain.regions`).

    :raises InvalidInstancePreferencesError: naming each region, field and fix.
    """
    regions, problems = read_regions(raw, kind)
    if not problems:
        problems = region_problems(kind, request, regions, prefs, home_region)
    if problems:
        raise InvalidInstancePreferencesError(problems)
    return regions


def check_literal_arguments(
    kind: JobKind,
    config: Any,
    instance_preferences: Any,
    max_pending: Any,
    guardrails: tuple[Any, ...],
    log: Any,
    regions: Any = None,
    region_name: Any = None,
) -> InstancePreferenceList | None:
    """Fail the DAG import on literal arguments that break a documented rule; templated ones wait for
    ``execute``.

    :param guardrails: the values of the guardrail arguments, in ``GUARDRAIL_FIELDS`` order.
    :returns: the list, parsed, when the request's arguments are literal (None when templated): the
        operator keeps it rather than parsing the list again.
    """
    request = (config, instance_preferences, max_pending if isinstance(max_pending, str) else None)
    everything_literal = not has_template((request, guardrails))  # one pass for the common case
    prefs = None  # the parsed list, when literal
    if everything_literal or not has_template(request):
        prefs = check_request(kind, config, instance_preferences, to_seconds(max_pending))
    if everything_literal or not has_template(guardrails):
        GuardrailCheck(kind, guardrails, max_pending, log).check_at_parse_time(prefs, config)
    if regions is not None and prefs is not None and not has_template((regions, region_name)):
        checked_regions(kind, regions, config, prefs, region_name)
    return prefs
