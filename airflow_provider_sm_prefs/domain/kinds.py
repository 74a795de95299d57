"""The two SageMaker job kinds that accept instance preferences, and every fact that differs between them.

One frozen :class:`JobKindSpec` per kind: field names of the Create/Describe/List shapes, the boto3
operations, where the instance settings live, console and CloudWatch paths. Everything that must tell
training from processing reads it here (``kind.spec.name_field``) instead of spelling the names again.
Pure: no Airflow, no boto.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["SPECS", "JobKind", "JobKindSpec", "kind_of"]


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

    :param label: ``Training`` / ``Processing``, as AWS writes it in messages.
    :param name_field: the job name's field (``TrainingJobName``), in requests, responses and summaries.
    :param arn_field: the job ARN's field in Create and Describe responses.
    :param status_field: the status field in Describe responses and List summaries.
    :param end_time_field: when the job ended, in Describe responses.
    :param cluster_path: where the instance settings live (``ResourceConfig`` or
        ``ProcessingResources.ClusterConfig``).
    :param create: boto3 method of Create*; ``describe``, ``stop``, ``list`` likewise.
    :param summaries_field: the list of summaries in a List* response.
    :param secondary_status: whether Describe and List report ``SecondaryStatus`` (training only); a
        processing job shows its selection only through ``SelectedInstanceType`` in Describe.
    :param console_path: the job's page under the SageMaker console (``#/<path>/<name>``).
    :param log_group: the job's CloudWatch log group.
    """

    kind: JobKind
    label: str
    name_field: str
    arn_field: str
    status_field: str
    end_time_field: str
    cluster_path: tuple[str, ...]
    create: str
    describe: str
    stop: str
    list: str
    summaries_field: str
    secondary_status: bool
    console_path: str
    log_group: str

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
        name_field="TrainingJobName",
        arn_field="TrainingJobArn",
        status_field="TrainingJobStatus",
        end_time_field="TrainingEndTime",
        cluster_path=("ResourceConfig",),
        create="create_training_job",
        describe="describe_training_job",
        stop="stop_training_job",
        list="list_training_jobs",
        summaries_field="TrainingJobSummaries",
        secondary_status=True,
        console_path="jobs",
        log_group="/aws/sagemaker/TrainingJobs",
    ),
    JobKind.PROCESSING: JobKindSpec(
        kind=JobKind.PROCESSING,
        label="Processing",
        name_field="ProcessingJobName",
        arn_field="ProcessingJobArn",
        status_field="ProcessingJobStatus",
        end_time_field="ProcessingEndTime",
        cluster_path=("ProcessingResources", "ClusterConfig"),
        create="create_processing_job",
        describe="describe_processing_job",
        stop="stop_processing_job",
        list="list_processing_jobs",
        summaries_field="ProcessingJobSummaries",
        secondary_status=False,
        console_path="processing-jobs",
        log_group="/aws/sagemaker/ProcessingJobs",
    ),
}


def kind_of(data: Mapping[str, Any]) -> JobKind | None:
    """The kind of a Describe response or List summary, from the fields it carries; None if neither."""
    for kind, spec in SPECS.items():
        if spec.status_field in data or spec.name_field in data:
            return kind
    return None
