"""Which IAM permissions a set of AWS calls needs, and whether a policy document grants them (pure).

Used by the tests that hold the published policies (``docs/iam-policy.json``, the task role;
``docs/iam-reconciler-policy.json``; ``docs/iam-event-queue-policy.json``) to what the provider really
calls: record every botocore call (:func:`recording_calls`), turn the calls into IAM requests with the
condition context AWS sets (:func:`required`: request tags, the resource's tags, the tagging action)
and check each against a policy (:func:`denied`, :func:`allows`).

The evaluation is the offline SageMaker's (:mod:`offline_sagemaker.iam_policy`, which also answers IAM's
``SimulateCustomPolicy`` there): AWS's documented policy evaluation for what the policies use.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_sagemaker.iam_policy import Request, allows

__all__ = [
    "Call",
    "Request",
    "allows",
    "denied",
    "granted_actions",
    "load_policy",
    "recording_calls",
    "required",
    "tags_after",
]

#: S3 operations botocore sends, and the IAM action each is authorised by.
S3_ACTIONS: Mapping[str, str] = {
    "HeadBucket": "s3:ListBucket",
    "ListObjects": "s3:ListBucket",
    "ListObjectsV2": "s3:ListBucket",
    "CreateBucket": "s3:CreateBucket",
    "PutObject": "s3:PutObject",
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "DeleteObject": "s3:DeleteObject",
}
#: Calls that need no permission at all (AWS answers them for any valid credentials).
UNAUTHORISED_CALLS = frozenset({("sts", "GetCallerIdentity")})
_JOB_RESOURCE = {
    "TrainingJobName": "training-job",
    "ProcessingJobName": "processing-job",
    "TrainingPlanName": "training-plan",
    "ClusterName": "cluster",
}
_TAGGING_CREATES = frozenset({"CreateTrainingJob", "CreateProcessingJob", "CreateCluster"})


@dataclass(frozen=True)
class Call:
    """One AWS API call as botocore saw it."""

    service: str
    operation: str
    params: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)


#: SQS batch calls are authorised by the action of the single call.
SQS_ACTIONS = {
    "DeleteMessageBatch": "sqs:DeleteMessage",
    "SendMessageBatch": "sqs:SendMessage",
    "ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}


def required(
    calls: Iterable[Call],
    region: str = "us-east-1",
    account: str = "123456789012",
    resource_tags: Mapping[str, Mapping[str, str]] | None = None,
) -> set[Request]:
    """The IAM requests AWS would authorise for ``calls``, with the condition context AWS sets.

    A Create* call with ``Tags`` also needs ``sagemaker:AddTags`` on the new job (AWS authorises tagging
    on create separately, with ``sagemaker:TaggingAction`` naming the Create) and every ``RoleArn`` sent
    to SageMaker needs ``iam:PassRole`` on that role. Tags in a request are ``aws:RequestTag/<key>`` and
    ``aws:TagKeys``; a call on an existing SageMaker resource carries that resource's tags as
    ``aws:ResourceTag/<key>``: those ``resource_tags`` gives (by ARN), updated by the Creates and AddTags
    among ``calls`` in their order.
    """
    tags = {arn: dict(t) for arn, t in (resource_tags or {}).items()}
    return _required(calls, region, account, tags)


def tags_after(
    calls: Iterable[Call], region: str = "us-east-1", account: str = "123456789012"
) -> dict[str, dict[str, str]]:
    """The tags of each SageMaker resource ``calls`` created or tagged, by ARN, once they ran: the
    ``resource_tags`` of later calls (a reconciler's) on those resources."""
    tags: dict[str, dict[str, str]] = {}
    _required(calls, region, account, tags)
    return tags


def _required(
    calls: Iterable[Call], region: str, account: str, tags: dict[str, dict[str, str]]
) -> set[Request]:
    requests: set[Request] = set()
    for call in calls:
        if (call.service, call.operation) in UNAUTHORISED_CALLS:
            continue
        if call.service == "s3":
            requests.add(_s3_request(call))
            continue
        if call.service == "sqs":
            requests.add(_sqs_request(call, region, account))
            continue
        if call.service == "logs":
            requests.add(Request(f"logs:{call.operation}", _logs_resource(call.params, region, account)))
            continue
        if call.service != "sagemaker":
            requests.add(Request(f"{call.service}:{call.operation}", "*"))
            continue
        requests.update(_sagemaker_requests(call, region, account, tags))
    return requests


def _request_tags(params: Mapping[str, Any]) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in params.get("Tags") or ()}


def _tag_context(prefix: str, tags: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``aws:RequestTag/<key>`` (with ``aws:TagKeys``) or ``aws:ResourceTag/<key>`` entries, sorted."""
    context = [(f"aws:{prefix}/{key}", value) for key, value in sorted(tags.items())]
    if prefix == "RequestTag":
        context += [("aws:TagKeys", key) for key in sorted(tags)]
    return tuple(context)


def _sagemaker_requests(
    call: Call, region: str, account: str, tags: dict[str, dict[str, str]]
) -> set[Request]:
    """A SageMaker call on the resource it names, plus AddTags for tags on create and PassRole for a role."""
    requests: set[Request] = set()
    resource = "*"
    for param, kind in _JOB_RESOURCE.items():
        if param in call.params:
            value = str(call.params[param])
            # A training plan may be named by its ARN; AWS lower-cases job names in ARNs.
            resource = (
                value
                if value.startswith("arn:")
                else f"arn:aws:sagemaker:{region}:{account}:{kind}/{value.lower()}"
            )
    if "ResourceArn" in call.params:  # AddTags, ListTags, DeleteTags: the resource they name
        resource = str(call.params["ResourceArn"])
    asked = _request_tags(call.params)
    if call.operation in _TAGGING_CREATES:
        requests.add(Request(f"sagemaker:{call.operation}", resource, _tag_context("RequestTag", asked)))
        if asked:
            requests.add(
                Request(
                    "sagemaker:AddTags",
                    resource,
                    (("sagemaker:TaggingAction", call.operation), *_tag_context("RequestTag", asked)),
                )
            )
        tags[resource] = dict(asked)
    else:
        context = _tag_context("ResourceTag", tags.get(resource, {})) if resource != "*" else ()
        if call.operation == "AddTags":
            context += _tag_context("RequestTag", asked)
            tags.setdefault(resource, {}).update(asked)
        requests.add(Request(f"sagemaker:{call.operation}", resource, context))
    # A job's RoleArn; a HyperPod instance group's ExecutionRole.
    roles = [
        call.params.get("RoleArn"),
        *(g.get("ExecutionRole") for g in call.params.get("InstanceGroups") or ()),
    ]
    for role in filter(None, roles):
        requests.add(
            Request("iam:PassRole", str(role), (("iam:PassedToService", "sagemaker.amazonaws.com"),))
        )
    return requests


def _s3_request(call: Call) -> Request:
    """An S3 call on its bucket, or on its object when it names a key (ListBucket: the bucket)."""
    bucket = str(call.params.get("Bucket", "*"))
    key = call.params.get("Key")
    action = S3_ACTIONS.get(call.operation, f"s3:{call.operation}")
    resource = (
        f"arn:aws:s3:::{bucket}/{key}"
        if key is not None and action != "s3:ListBucket"
        else f"arn:aws:s3:::{bucket}"
    )
    return Request(action, resource)


def _sqs_request(call: Call, region: str, account: str) -> Request:
    """An SQS call on the queue its ``QueueUrl`` names (the queue name is the URL's last part)."""
    name = str(call.params.get("QueueUrl", "")).rstrip("/").rsplit("/", 1)[-1] or "*"
    action = SQS_ACTIONS.get(call.operation, f"sqs:{call.operation}")
    return Request(action, f"arn:aws:sqs:{region}:{account}:{name}")


def _logs_resource(params: Mapping[str, Any], region: str, account: str) -> str:
    """The log group (or, for a call that names one, log stream) ARN a CloudWatch Logs call acts on."""
    group = str(params.get("logGroupName") or params.get("logGroupIdentifier") or "*")
    arn = group if group.startswith("arn:") else f"arn:aws:logs:{region}:{account}:log-group:{group}"
    stream = params.get("logStreamName")
    return f"{arn}:log-stream:{stream}" if stream else f"{arn}:*"


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _as_list_of_statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statements = policy.get("Statement") or []
    return [statements] if isinstance(statements, Mapping) else list(statements)


def denied(policy: Mapping[str, Any], requests: Iterable[Request]) -> list[Request]:
    """The requests ``policy`` does not grant, sorted for a readable assertion message."""
    return sorted((r for r in requests if not allows(policy, r)), key=str)


def load_policy(path: Path | str) -> dict[str, Any]:
    policy: dict[str, Any] = json.loads(Path(path).read_text())
    return policy


def granted_actions(policy: Mapping[str, Any]) -> set[str]:
    """Every action named by an Allow statement (no wildcards expanded)."""
    return {
        a
        for s in _as_list_of_statements(policy)
        if s.get("Effect") == "Allow"
        for a in _as_list(s.get("Action"))
    }


@contextlib.contextmanager
def recording_calls() -> Iterator[list[Call]]:
    """Record every botocore and aiobotocore API call made in this process while the block runs."""
    from unittest import mock

    import botocore.client

    calls: list[Call] = []

    def _record(client: Any, operation: str, params: Mapping[str, Any]) -> None:
        model = client.meta.service_model
        service = model.signing_name or model.endpoint_prefix
        calls.append(Call(str(service), operation, dict(params or {})))

    sync_original = botocore.client.BaseClient._make_api_call

    def sync_call(self: Any, operation_name: str, api_params: Mapping[str, Any]) -> Any:
        _record(self, operation_name, api_params)
        return sync_original(self, operation_name, api_params)

    patches = [mock.patch.object(botocore.client.BaseClient, "_make_api_call", sync_call)]
    try:
        import aiobotocore.client

        async_original = aiobotocore.client.AioBaseClient._make_api_call

        async def async_call(self: Any, operation_name: str, api_params: Mapping[str, Any]) -> Any:
            _record(self, operation_name, api_params)
            return await async_original(self, operation_name, api_params)

        patches.append(mock.patch.object(aiobotocore.client.AioBaseClient, "_make_api_call", async_call))
    except ImportError:  # aiobotocore is optional for the sync paths
        pass
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        yield calls
