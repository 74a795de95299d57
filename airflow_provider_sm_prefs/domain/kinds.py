"""The kinds of what the provider runs: the two SageMaker job kinds that accept instance preferences, with
every fact that differs between them, and the HyperPod instance group.

One frozen :class:`JobKindSpec` per job kind: field names of the Create/Describe/List shapes, the boto3
operations, where the instance settings live, console and CloudWatch paths. Everything that must tell
training from processing reads it here (``kind.spec.name_field``) instead of spelling the names again.
A HyperPod instance group is no SageMaker job (no Create*/Describe* job operations, no spec): it is the
one further kind, :data:`GROUP_KIND`, that capacity records and reconciler reports name.
Pure: no Airflow, no boto.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["GROUP_KIND", "SPECS", "JobKind", "JobKindSpec", "kind_of"]

#: The ``job_kind`` of a HyperPod instance group's outcome and capacity record, and the ``kind`` of its
#: row in a reconciler report (a job's is a :class:`JobKind` value). Persisted in XCom: never changes.
GROUP_KIND = "hyperpod-group"


class JobKind(str, Enum):
    """The two SageMaker job kinds that accept instance preferences."""

    TRAINING = "training"
    PROCESSING = "processing"

    @property
    def spec(self) -> JobKindSpec:
        """Every per-kind fact (see :class:`JobKindSpec`)."""
        return SPECS[self]

    @property
    def cluster_path(self) -> tuple[str, ...]:
        """Where the instance settings live in the Create request and the Describe response."""
        return SPECS[self].cluster_path

    @property
    def cluster_field(self) -> str:
        """:attr:`cluster_path` as one dotted name, for messages."""
        return ".".join(SPECS[self].cluster_path)


@dataclass(frozen=True)
class JobKindSpec:
    """What differs between training and processing jobs in SageMaker's API and console.

    SageMaker names a kind's fields, operations and log group after the kind (``TrainingJobName``,
    ``describe_training_job``, ``/aws/sagemaker/TrainingJobs``): those names follow from ``kind`` and
    ``label`` by that one rule (``tests/test_kinds.py`` checks each against botocore's service model);
    the facts no rule gives are the arguments.

    :param label: ``Training`` / ``Processing``, as AWS writes it in messages.
    :param cluster_path: where the instance settings live (``ResourceConfig`` or
        ``ProcessingResources.ClusterConfig``).
    :param secondary_status: whether Describe and List report ``SecondaryStatus`` (training only); a
        processing job shows its selection only through ``SelectedInstanceType`` in Describe.
    :param console_path: the job's page under the SageMaker console (``#/<path>/<name>``).
    :param pending_limit: whether SageMaker itself bounds the wait for capacity of a list with an
        accelerated entry (``StoppingCondition.MaxPendingTimeInSeconds``, training only); elsewhere the
        provider's client-side deadline does.
    :param training_plans: whether an entry may be backed by a training plan (training only; processing
        uses On-Demand capacity only).
    :param max_instance_count: the largest count SageMaker accepts (None: no documented bound).

    Derived: ``name_field``, the job name's field (``TrainingJobName``) in requests, responses and
    summaries; ``arn_field``, the job ARN's field in Create and Describe responses; ``status_field``, the
    status field in Describe responses and List summaries; ``end_time_field``, when the job ended, in
    Describe responses; ``create``, the boto3 method of Create* (``describe``, ``stop``, ``list``
    likewise); ``summaries_field``, the list of summaries in a List* response; ``log_group``, the job's
    CloudWatch log group.
    """

    kind: JobKind
    label: str
    cluster_path: tuple[str, ...]
    secondary_status: bool
    console_path: str
    pending_limit: bool
    training_plans: bool
    max_instance_count: int | None
    name_field: str = field(init=False)
    arn_field: str = field(init=False)
    status_field: str = field(init=False)
    end_time_field: str = field(init=False)
    create: str = field(init=False)
    describe: str = field(init=False)
    stop: str = field(init=False)
    list: str = field(init=False)
    summaries_field: str = field(init=False)
    log_group: str = field(init=False)

    def __post_init__(self) -> None:
        # Set once here rather than computed on each read: the waits read these for every job they poll.
        label, job = self.label, f"{self.kind.value}_job"
        named = {
            "name_field": f"{label}JobName",
            "arn_field": f"{label}JobArn",
            "status_field": f"{label}JobStatus",
            "end_time_field": f"{label}EndTime",
            "create": f"create_{job}",
            "describe": f"describe_{job}",
            "stop": f"stop_{job}",
            "list": f"list_{job}s",
            "summaries_field": f"{label}JobSummaries",
            "log_group": f"/aws/sagemaker/{label}Jobs",
        }
        for name, value in named.items():
            object.__setattr__(self, name, value)

    def name_of(self, data: Mapping[str, Any]) -> str | None:
        """The job name in a request, Describe response or List summary."""
        name = data.get(self.name_field)
        return str(name) if name else None

    def cluster_of(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """The instance settings of a request or Describe response (empty when absent)."""
        node: Any = data
        for key in self.cluster_path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node if isinstance(node, Mapping) else {}


SPECS: dict[JobKind, JobKindSpec] = {
    JobKind.TRAINING: JobKindSpec(
        kind=JobKind.TRAINING,
        label="Training",
        cluster_path=("ResourceConfig",),
        secondary_status=True,
        console_path="jobs",
        pending_limit=True,
        training_plans=True,
        max_instance_count=None,
    ),
    JobKind.PROCESSING: JobKindSpec(
        kind=JobKind.PROCESSING,
        label="Processing",
        cluster_path=("ProcessingResources", "ClusterConfig"),
        secondary_status=False,
        console_path="processing-jobs",
        pending_limit=False,
        training_plans=False,
        max_instance_count=100,
    ),
}


def kind_of(data: Mapping[str, Any]) -> JobKind | None:
    """The kind of a Describe response or List summary, from the fields it carries; None if neither."""
    for kind, spec in SPECS.items():
        if spec.status_field in data or spec.name_field in data:
            return kind
    return None
