"""Every AWS action the provider's code can call is granted by a published policy, found by reading the code.

tests/test_iam_policy.py checks the calls a run makes; this one reads the package source (not the
offline SageMaker's) for every operation of the services the provider talks to — an attribute such as
``conn.describe_training_plan`` or a name kept in a string (``JobKindSpec.describe``,
``self._call("get_log_events", ...)``) — so a new feature cannot forget the policy even where no test
runs its call. The task role (docs/iam-policy.json) and the reconciler's (docs/iam-reconciler-policy.json)
together grant every one; no code sends to the event queue, which only the EventBridge rule may.
"""

from __future__ import annotations

import ast
import fnmatch
import json
from pathlib import Path

import botocore.session
from botocore import xform_name

from airflow_provider_sm_prefs.domain.kinds import JobKind

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "airflow_provider_sm_prefs"
POLICIES = [ROOT / "docs" / "iam-policy.json", ROOT / "docs" / "iam-reconciler-policy.json"]
#: botocore service name -> IAM action prefix, for the services the provider calls.
SERVICES = {
    "sagemaker": "sagemaker",
    "pricing": "pricing",
    "service-quotas": "servicequotas",
    "logs": "logs",
    "sqs": "sqs",
    "s3": "s3",
}


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
    # The job kinds are data: their operations are derived names the code calls through getattr(conn, ...).
    for kind in JobKind:
        names.update({kind.spec.create, kind.spec.describe, kind.spec.stop, kind.spec.list})
    return names


def called_actions() -> set[str]:
    session = botocore.session.get_session()
    names = names_in_code()
    actions = set()
    for service, prefix in SERVICES.items():
        model = session.get_service_model(service)
        for operation in model.operation_names:
            if xform_name(operation) in names:
                # SQS authorises a batch call by the action of the single one.
                single = operation.removesuffix("Batch") if service == "sqs" else operation
                actions.add(f"{prefix}:{single}")
    return actions


def granted() -> list[str]:
    out: list[str] = []
    statements = [s for path in POLICIES for s in json.loads(path.read_text())["Statement"]]
    for statement in statements:
        if statement.get("Effect") != "Allow":
            continue
        actions = statement.get("Action", [])
        out.extend([actions] if isinstance(actions, str) else actions)
    return out


def test_every_action_the_code_can_call_is_granted() -> None:
    allowed = granted()
    actions = called_actions()
    missing = sorted(a for a in actions if not any(fnmatch.fnmatch(a, pattern) for pattern in allowed))
    assert missing == [], f"no published policy grants: {missing}"


def test_no_code_sends_to_the_event_queue() -> None:
    """A role that may send to the queue could forge the events that end other tasks' waits."""
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} <= called_actions()
    assert not any(a.startswith("sqs:Send") for a in called_actions())


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
        "s3:GetBucketLocation",
    } <= called_actions()
