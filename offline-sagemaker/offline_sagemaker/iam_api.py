"""IAM ``SimulatePrincipalPolicy``, which the SageMaker Python SDK calls to check its role before staging.

moto does not implement it (its server answers an HTML 500 that botocore cannot parse), so the emulator
answers it in AWS's query-protocol XML: one evaluation result per action and resource, ``allowed``
unless the scenario lists the action under ``iam_denied_actions`` (then ``implicitDeny``). IAM requests
carry no ``X-Amz-Target``; :func:`is_simulate_request` recognises them by their form body. A leaf.
"""

from __future__ import annotations

import urllib.parse
import uuid
from collections.abc import Collection
from xml.sax.saxutils import escape

__all__ = ["is_simulate_request", "simulate_principal_policy"]

_ACTION = "SimulatePrincipalPolicy"
_NAMESPACE = "https://iam.amazonaws.com/doc/2010-05-08/"


def is_simulate_request(method: str, content_type: str, body: bytes) -> bool:
    """Whether a request is IAM's ``SimulatePrincipalPolicy`` (form-encoded ``Action=...``)."""
    if method != "POST" or "x-www-form-urlencoded" not in content_type:
        return False
    return urllib.parse.parse_qs(body.decode("utf-8", "replace")).get("Action") == [_ACTION]


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


def _error(code: str, message: str) -> str:
    return (
        f'<ErrorResponse xmlns="{_NAMESPACE}"><Error><Type>Sender</Type><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>"
    )
