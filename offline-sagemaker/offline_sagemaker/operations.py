"""The operations the emulator answers itself (everything else goes to moto). A leaf.

Requests name their operation in the ``X-Amz-Target`` header (``<target prefix>.<Operation>``, AWS's
JSON protocol); :func:`emulated_operation` reads it for both the WSGI app and the request handler's fast
path. Besides the eight SageMaker job operations, the emulator serves HyperPod clusters (the cluster
operations), the tag operations on the ARN of a job or cluster (:data:`RESOURCE_ROUTED`) and Search of
training jobs, what a client checks
before it submits: training plans (SageMaker), Service Quotas and the Price List API, from the same
scenario; and the CloudWatch Logs reads of the jobs' log streams.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "JOB_NAME_PARAM",
    "LOGS_GROUP_ROUTED",
    "LOGS_TARGET_PREFIX",
    "OPERATIONS",
    "RESOURCE_ROUTED",
    "SERVICE_OF",
    "TARGET_PREFIX",
    "TARGET_PREFIXES",
    "access_key_id",
    "emulated_operation",
    "emulated_resource",
    "logs_read",
    "unknown_sagemaker_operation",
]

#: Operations on any SageMaker resource: the emulator answers them for the resources it owns (a job's
#: or a cluster's ARN), moto for the others (see :func:`emulated_resource`).
RESOURCE_ROUTED: frozenset[str] = frozenset({"AddTags", "ListTags", "DeleteTags"})

#: CloudWatch Logs reads the emulator answers for SageMaker's log groups only: the others (groups a
#: caller created) are moto's, and DescribeLogGroups lists both.
LOGS_GROUP_ROUTED: frozenset[str] = frozenset(
    {"DescribeLogGroups", "DescribeLogStreams", "GetLogEvents", "FilterLogEvents"}
)

#: ``X-Amz-Target`` values of CloudWatch Logs operations start with this.
LOGS_TARGET_PREFIX = "Logs_20140328"

#: ``X-Amz-Target`` values of SageMaker operations start with this.
TARGET_PREFIX = "SageMaker."

#: Emulated operations per target prefix, with the IAM service prefix that authorises them.
TARGET_PREFIXES: Mapping[str, tuple[str, frozenset[str]]] = {
    "SageMaker": (
        "sagemaker",
        frozenset(
            {
                "CreateTrainingJob",
                "DescribeTrainingJob",
                "StopTrainingJob",
                "ListTrainingJobs",
                "CreateProcessingJob",
                "DescribeProcessingJob",
                "StopProcessingJob",
                "ListProcessingJobs",
                "DescribeTrainingPlan",
                "ListTrainingPlans",
                "CreateCluster",
                "UpdateCluster",
                "DescribeCluster",
                "DeleteCluster",
                "ListClusters",
                "ListClusterNodes",
                "DescribeClusterNode",
                "BatchDeleteClusterNodes",
                "ListClusterEvents",
                "DescribeClusterEvent",
                "Search",
                *RESOURCE_ROUTED,
            }
        ),
    ),
    "ServiceQuotasV20190624": ("servicequotas", frozenset({"ListServiceQuotas", "GetServiceQuota"})),
    "AWSPriceListService": ("pricing", frozenset({"GetProducts"})),
    # The reads of the jobs' CloudWatch log streams (what log followers call); writes stay moto's.
    LOGS_TARGET_PREFIX: (
        "logs",
        frozenset({"DescribeLogGroups", "DescribeLogStreams", "GetLogEvents", "FilterLogEvents"}),
    ),
}

#: Every emulated operation (names are unique across the services).
OPERATIONS: frozenset[str] = frozenset().union(*(ops for _, ops in TARGET_PREFIXES.values()))

#: The IAM service prefix of each emulated operation (``sagemaker``, ``servicequotas``, ``pricing``, ``logs``).
SERVICE_OF: Mapping[str, str] = {op: service for service, ops in TARGET_PREFIXES.values() for op in ops}

#: The request parameter that names the job, per operation (for per-job call counts).
JOB_NAME_PARAM: Mapping[str, str] = {
    "CreateTrainingJob": "TrainingJobName",
    "DescribeTrainingJob": "TrainingJobName",
    "StopTrainingJob": "TrainingJobName",
    "CreateProcessingJob": "ProcessingJobName",
    "DescribeProcessingJob": "ProcessingJobName",
    "StopProcessingJob": "ProcessingJobName",
}


def emulated_operation(target: str | None) -> str | None:
    """The emulated operation an ``X-Amz-Target`` header names, or None (another service, not emulated,
    or one of :data:`RESOURCE_ROUTED` or :data:`LOGS_GROUP_ROUTED`, which the resource decides)."""
    if not target:
        return None
    prefix, _, operation = target.partition(".")
    entry = TARGET_PREFIXES.get(prefix)
    if entry is None or operation not in entry[1] or operation in RESOURCE_ROUTED:
        return None
    if prefix == LOGS_TARGET_PREFIX and operation in LOGS_GROUP_ROUTED:
        return None
    return operation


def logs_read(target: str | None) -> str | None:
    """The CloudWatch Logs read of :data:`LOGS_GROUP_ROUTED` an ``X-Amz-Target`` header names, or None."""
    prefix, _, operation = (target or "").partition(".")
    return operation if prefix == LOGS_TARGET_PREFIX and operation in LOGS_GROUP_ROUTED else None


#: The resource types of the ARNs the emulator owns: ``arn:aws:sagemaker:<region>:<account>:<type>/<name>``.
_OWNED_RESOURCE = re.compile(
    r"^arn:aws[a-z-]*:sagemaker:[^:]*:[0-9]*:(?:cluster|training-job|processing-job)/"
)


def emulated_resource(arn: object) -> bool:
    """Whether a SageMaker ARN names a resource the emulator owns (a job or a HyperPod cluster)."""
    return isinstance(arn, str) and _OWNED_RESOURCE.match(arn) is not None


def unknown_sagemaker_operation(target: str | None) -> str | None:
    """The operation a ``SageMaker.<Op>`` target names when botocore's SageMaker model has no such operation."""
    if not target or not target.startswith(TARGET_PREFIX):
        return None
    from offline_sagemaker.botocore_model import service_model

    operation = target[len(TARGET_PREFIX) :]
    return None if operation in service_model().operation_names else operation


#: The access key id in a SigV4 ``Authorization`` header: ``... Credential=<key id>/<date>/<region>/...``.
_CREDENTIAL = re.compile(r"\bCredential=([^/,\s]+)/")


def access_key_id(authorization: str | None) -> str | None:
    """The access key id a request was signed with (its SigV4 ``Authorization`` header), or None."""
    match = _CREDENTIAL.search(authorization or "")
    return match.group(1) if match else None
