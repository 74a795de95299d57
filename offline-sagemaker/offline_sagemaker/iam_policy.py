"""IAM policy evaluation, as AWS documents it, for the policies the provider publishes (pure, a leaf).

:func:`decide` answers one request against identity policies (and a resource policy): an explicit Deny
in any wins, else an Allow in any grants (for a caller of the resource's own account), else the request
is implicitly denied. It covers ``Action``/``NotAction``, ``Resource``/``NotResource`` with ``*`` and
``?`` wildcards, ``Principal`` in a resource policy, and the ``String*``, ``Arn*``, ``Bool`` and ``Null``
condition operators with ``ForAllValues``/``ForAnyValue`` and ``...IfExists``. A missing key makes a
condition false, except under ``Null``, ``...IfExists``, a negated operator or ``ForAllValues`` (see
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html).
Anything it does not know makes a condition false: an Allow with it grants nothing, a Deny with it
refuses nothing. :mod:`.iam_api` answers IAM's ``SimulateCustomPolicy`` with it; the provider's policy
tests ask it directly too.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ALLOWED", "EXPLICIT_DENY", "IMPLICIT_DENY", "Request", "allows", "decide"]

ALLOWED, EXPLICIT_DENY, IMPLICIT_DENY = "allowed", "explicitDeny", "implicitDeny"


@dataclass(frozen=True)
class Request:
    """One IAM authorisation request: action, resource ARN and the condition context AWS would set."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        extra = "".join(f" [{k}={v}]" for k, v in self.context)
        return f"{self.action} on {self.resource}{extra}"


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _matches(patterns: Sequence[str], value: str) -> bool:
    # IAM wildcards are * and ?, matched case-sensitively except for the action's service prefix.
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


#: Condition operators by base name: whether a context value matches one policy value.
_OPERATORS: Mapping[str, Any] = {
    "StringEquals": lambda value, wanted: value == wanted,
    "StringEqualsIgnoreCase": lambda value, wanted: value.lower() == wanted.lower(),
    "StringLike": fnmatch.fnmatchcase,
    # ARN operators compare segment by segment with wildcards; a whole-string match is the same for
    # the ARNs these policies name (no ``:`` inside a wildcard's reach changes the outcome).
    "ArnEquals": fnmatch.fnmatchcase,
    "ArnLike": fnmatch.fnmatchcase,
    "Bool": lambda value, wanted: value.lower() == str(wanted).lower(),
}
#: Negated operators: true when no policy value matches, and true when the key is missing.
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}


def _one_condition(operator: str, key: str, expected: Any, context: Mapping[str, list[str]]) -> bool:
    """One key under one operator, as IAM evaluates it (see
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html
    and ..._condition-single-vs-multi-valued-context-keys.html).

    A missing key makes a condition false, except under ``Null``, an ``...IfExists`` operator, a negated
    operator, or ``ForAllValues`` (true for an empty set). An operator this does not know is false.
    """
    qualifier, _, name = operator.rpartition(":")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    values = context.get(key.lower())
    wanted = [str(w) for w in (expected if isinstance(expected, list) else [expected])]
    if name == "Null":
        if qualifier:
            return False
        return (values is None) == (wanted[0].lower() == "true")
    negated = name in _NEGATED
    test = _OPERATORS.get(_NEGATED.get(name, name))
    if test is None or qualifier not in ("", "ForAllValues", "ForAnyValue"):
        return False
    if values is None:
        return if_exists or negated or qualifier == "ForAllValues"

    def hit(value: str) -> bool:
        return any(test(value, w) for w in wanted) != negated

    if qualifier == "ForAllValues":
        return all(hit(v) for v in values)
    if qualifier == "ForAnyValue":
        return any(hit(v) for v in values)
    if len(values) != 1:
        return False  # a single-valued operator on a multivalued key: never a match
    return hit(values[0])


def _conditions_hold(condition: Mapping[str, Any], context: Mapping[str, list[str]]) -> bool:
    """Every operator's every key holds (AND); a key's several values are alternatives (OR)."""
    return all(
        _one_condition(operator, key, expected, context)
        for operator, tests in (condition or {}).items()
        for key, expected in (tests or {}).items()
    )


def _principal_matches(statement: Mapping[str, Any], principal: str | None) -> bool:
    """A resource policy's ``Principal``: ``*``, ``{"AWS": ...}`` or ``{"Service": ...}``. An identity
    policy has none (``principal`` None: the caller is whoever holds the policy)."""
    named = statement.get("Principal")
    if principal is None:
        return named is None
    if named is None:
        return False
    if named == "*":
        return True
    if not isinstance(named, Mapping):
        return False
    return any(_matches(_as_list(v), principal) or _as_list(v) == ["*"] for v in named.values())


def _effects(policy: Mapping[str, Any], request: Request, principal: str | None) -> set[str]:
    """The ``Effect`` of every statement of ``policy`` that matches ``request``."""
    context: dict[str, list[str]] = {}
    for key, value in request.context:
        context.setdefault(key.lower(), []).append(value)
    return {
        str(statement.get("Effect"))
        for statement in _as_list_of_statements(policy)
        if _principal_matches(statement, principal)
        and _applies_to(statement, request)
        and _conditions_hold(statement.get("Condition") or {}, context)
    }


def decide(
    policies: Sequence[Mapping[str, Any]],
    request: Request,
    resource_policy: Mapping[str, Any] | None = None,
    caller: str | None = None,
) -> str:
    """:data:`ALLOWED`, :data:`EXPLICIT_DENY` or :data:`IMPLICIT_DENY` for ``request`` by the holder of
    the identity ``policies``, with the resource's own ``resource_policy`` (its statements match
    ``caller``: an IAM ARN or a service principal such as ``events.amazonaws.com``)."""
    effects: set[str] = set()
    for policy in policies:
        effects |= _effects(policy, request, None)
    if resource_policy is not None:
        effects |= _effects(resource_policy, request, caller or "")
    if "Deny" in effects:
        return EXPLICIT_DENY
    return ALLOWED if "Allow" in effects else IMPLICIT_DENY


def allows(policy: Mapping[str, Any], request: Request, principal: str | None = None) -> bool:
    """True if an Allow statement of ``policy`` grants ``request`` and no Deny statement refuses it.

    :param principal: for a resource policy (a queue's), who calls: an IAM ARN or a service principal
        (``events.amazonaws.com``); None for an identity policy.
    """
    effects = _effects(policy, request, principal)
    return "Allow" in effects and "Deny" not in effects


def _applies_to(statement: Mapping[str, Any], request: Request) -> bool:
    """The statement's ``Action``/``NotAction`` and ``Resource``/``NotResource`` cover the request."""
    action = request.action.lower()
    if "Action" in statement:
        if not _matches([a.lower() for a in _as_list(statement["Action"])], action):
            return False
    elif "NotAction" not in statement or _matches(
        [a.lower() for a in _as_list(statement["NotAction"])], action
    ):
        return False
    if "Resource" in statement:
        return _matches(_as_list(statement["Resource"]), request.resource)
    return "NotResource" in statement and not _matches(_as_list(statement["NotResource"]), request.resource)


def _as_list_of_statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statements = policy.get("Statement") or []
    return [statements] if isinstance(statements, Mapping) else list(statements)
