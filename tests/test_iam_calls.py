"""Every AWS action the provider's code can call is granted by docs/iam-policy.json, found by reading the code.

tests/test_iam_policy.py checks the calls a run makes; this one reads the package source (not the
offline SageMaker's) for every operation of the services the provider talks to — an attribute such as
``conn.describe_training_plan`` or a name kept in a string (``JobKindSpec.describe``,
``self._call("get_log_events", ...)``) — so a new feature cannot forget the policy even where no test
runs its call.
"""

from __future__ import annotations

import ast
import fnmatch
import json
from pathlib import Path

import botocore.session
from botocore import xform_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "airflow_provider_sm_prefs"
POLICY = ROOT / "docs" / "iam-policy.json"
#: botocore service name -> IAM action prefix, for the services the provider calls.
SERVICES = {"sagemaker": "sagemaker", "pricing": "pricing", "service-quotas": "servicequotas", "logs": "logs"}


#: What the provider's code calls AWS clients (``client.get_products``, ``self.conn.describe_training_plan``).
CLIENTS = {"client", "conn"}


def _on_a_client(node: ast.Attribute) -> bool:
    value = node.value
    return (isinstance(value, ast.Name) and value.id in CLIENTS) or (
        isinstance(value, ast.Attribute) and value.attr in CLIENTS
    )


def names_in_code() -> set[str]:
    """Methods called on clients, and string constants, of the package (the offline SageMaker left out)."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if "testing" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and _on_a_client(node):
                names.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
    return names


def called_actions() -> set[str]:
    session = botocore.session.get_session()
    names = names_in_code()
    actions = set()
    for service, prefix in SERVICES.items():
        model = session.get_service_model(service)
        for operation in model.operation_names:
            if xform_name(operation) in names:
                actions.add(f"{prefix}:{operation}")
    return actions


def granted() -> list[str]:
    policy = json.loads(POLICY.read_text())
    out: list[str] = []
    for statement in policy["Statement"]:
        if statement.get("Effect") != "Allow":
            continue
        actions = statement.get("Action", [])
        out.extend([actions] if isinstance(actions, str) else actions)
    return out


def test_every_action_the_code_can_call_is_granted() -> None:
    allowed = granted()
    actions = called_actions()
    missing = sorted(a for a in actions if not any(fnmatch.fnmatch(a, pattern) for pattern in allowed))
    assert missing == [], f"docs/iam-policy.json does not grant: {missing}"


def test_the_extraction_finds_the_calls_made_through_names() -> None:
    # Made through getattr(conn, spec.describe), a lambda, and the logs hook's _call("...").
    assert {
        "sagemaker:DescribeTrainingJob",
        "sagemaker:StopProcessingJob",
        "sagemaker:ListTrainingJobs",
        "sagemaker:DescribeTrainingPlan",
        "pricing:GetProducts",
        "servicequotas:ListServiceQuotas",
        "logs:GetLogEvents",
    } <= called_actions()
