"""IAM's policy simulation: ``SimulatePrincipalPolicy`` (the SageMaker Python SDK checks its role with it
before staging) and ``SimulateCustomPolicy`` (a policy document checked without AWS).

moto implements neither (its server answers an HTML 500 that botocore cannot parse), so the emulator
answers them in AWS's query-protocol XML, one evaluation result per action and resource.
``SimulatePrincipalPolicy``: ``allowed`` unless the scenario lists the action under
``iam_denied_actions`` (then ``implicitDeny``). ``SimulateCustomPolicy``: the given policies, the
optional resource policy with its ``CallerArn``, and the ``ContextEntries`` evaluated as AWS evaluates
them (:mod:`.iam_policy`). IAM requests carry no ``X-Amz-Target``; :func:`is_simulate_request`
recognises them by their form body. Above :mod:`.iam_policy` only.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from collections.abc import Collection
from typing import Any
from xml.sax.saxutils import escape

from offline_sagemaker.iam_policy import Request, decide

__all__ = ["is_simulate_request", "simulate", "simulate_custom_policy", "simulate_principal_policy"]

_ACTION = "SimulatePrincipalPolicy"
_CUSTOM = "SimulateCustomPolicy"
_NAMESPACE = "https://iam.amazonaws.com/doc/2010-05-08/"


def is_simulate_request(method: str, content_type: str, body: bytes) -> bool:
    """Whether a request is IAM's ``SimulatePrincipalPolicy`` or ``SimulateCustomPolicy``
    (form-encoded ``Action=...``)."""
    if method != "POST" or "x-www-form-urlencoded" not in content_type:
        return False
    action = urllib.parse.parse_qs(body.decode("utf-8", "replace")).get("Action")
    return action in ([_ACTION], [_CUSTOM])


def simulate(body: bytes, denied: Collection[str] = ()) -> tuple[int, str]:
    """``(HTTP status, XML)`` for either simulation request (see :func:`is_simulate_request`)."""
    form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    if form.get("Action") == [_CUSTOM]:
        return simulate_custom_policy(body)
    return simulate_principal_policy(body, denied)


def _members(form: dict[str, list[str]], name: str) -> list[str]:
    """``Name.member.1``, ``Name.member.2``... in order."""
    numbered = [
        (int(key.rsplit(".", 1)[1]), values[0])
        for key, values in form.items()
        if key.startswith(f"{name}.member.")
    ]
    return [value for _, value in sorted(numbered)]


def simulate_principal_policy(body: bytes, denied: Collection[str] = ()) -> tuple[int, str]:
    """``(HTTP status, XML)`` for a ``SimulatePrincipalPolicy`` request body."""
    form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    actions = _members(form, "ActionNames")
    if not form.get("PolicySourceArn") or not actions:
        missing = "policySourceArn" if not form.get("PolicySourceArn") else "actionNames"
        return 400, _error(
            "ValidationError",
            f"1 validation error detected: Value null at '{missing}' failed to satisfy constraint: Member must not be null",
        )
    resources = _members(form, "ResourceArns") or ["*"]
    results = "".join(
        "<member>"
        f"<EvalActionName>{escape(action)}</EvalActionName>"
        f"<EvalResourceName>{escape(resource)}</EvalResourceName>"
        f"<EvalDecision>{'implicitDeny' if action in denied else 'allowed'}</EvalDecision>"
        "<MatchedStatements/><MissingContextValues/>"
        "</member>"
        for action in actions
        for resource in resources
    )
    return 200, (
        f'<SimulatePrincipalPolicyResponse xmlns="{_NAMESPACE}">'
        f"<SimulatePrincipalPolicyResult><IsTruncated>false</IsTruncated>"
        f"<EvaluationResults>{results}</EvaluationResults></SimulatePrincipalPolicyResult>"
        f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
        "</SimulatePrincipalPolicyResponse>"
    )


def _context(form: dict[str, list[str]]) -> tuple[tuple[str, str], ...]:
    """``ContextEntries.member.N``: each key with its values (a multivalued key repeats)."""
    entries = sorted({int(key.split(".")[2]) for key in form if key.startswith("ContextEntries.member.")})
    context: list[tuple[str, str]] = []
    for n in entries:
        name = (form.get(f"ContextEntries.member.{n}.ContextKeyName") or [""])[0]
        values = _members(form, f"ContextEntries.member.{n}.ContextKeyValues")
        context.extend((name, value) for value in values)
    return tuple(context)


def simulate_custom_policy(body: bytes) -> tuple[int, str]:
    """``(HTTP status, XML)`` for a ``SimulateCustomPolicy`` request body: each action on each resource
    decided by the policies given (and the resource policy, for ``CallerArn``)."""
    form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    actions = _members(form, "ActionNames")
    texts = _members(form, "PolicyInputList")
    if not texts or not actions:
        missing = "policyInputList" if not texts else "actionNames"
        return 400, _error(
            "ValidationError",
            f"1 validation error detected: Value null at '{missing}' failed to satisfy constraint: Member must not be null",
        )
    try:
        policies: list[dict[str, Any]] = [json.loads(text) for text in texts]
        resource_text = next(iter(form.get("ResourcePolicy") or []), None)
        resource_policy = json.loads(resource_text) if resource_text else None
    except ValueError as err:
        return 400, _error("MalformedPolicyDocument", f"A policy is not valid JSON: {err}")
    caller = next(iter(form.get("CallerArn") or []), None)
    context = _context(form)
    results = "".join(
        "<member>"
        f"<EvalActionName>{escape(action)}</EvalActionName>"
        f"<EvalResourceName>{escape(resource)}</EvalResourceName>"
        f"<EvalDecision>{decide(policies, Request(action, resource, context), resource_policy, caller)}"
        "</EvalDecision>"
        "<MatchedStatements/><MissingContextValues/>"
        "</member>"
        for action in actions
        for resource in _members(form, "ResourceArns") or ["*"]
    )
    return 200, (
        f'<SimulateCustomPolicyResponse xmlns="{_NAMESPACE}">'
        f"<SimulateCustomPolicyResult><IsTruncated>false</IsTruncated>"
        f"<EvaluationResults>{results}</EvaluationResults></SimulateCustomPolicyResult>"
        f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
        "</SimulateCustomPolicyResponse>"
    )


def _error(code: str, message: str) -> str:
    return (
        f'<ErrorResponse xmlns="{_NAMESPACE}"><Error><Type>Sender</Type><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>"
    )
