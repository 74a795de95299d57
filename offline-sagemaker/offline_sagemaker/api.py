"""The SageMaker operations the emulator answers itself: JSON params in, JSON-ready dict out.

Shapes follow botocore's service model (``DescribeTrainingJobResponse`` etc.). Timestamps are emulated
epoch seconds, which botocore's JSON parser turns into datetimes. For jobs created with
``InstancePreferences`` the top-level ``InstanceType`` is never returned and ``SelectedInstanceType`` /
``SelectedInstanceCount`` appear only once an entry is selected; plain jobs are echoed as requested.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from offline_sagemaker.account_api import AccountApi
from offline_sagemaker.botocore_model import service_model
from offline_sagemaker.cluster_api import ClusterApi
from offline_sagemaker.engine import Engine
from offline_sagemaker.exceptions import (
    AccessDenied,
    SerializationError,
    UnknownOperation,
    ValidationError,
)
from offline_sagemaker.logs_api import LogsApi
from offline_sagemaker.models import Job, JobKind
from offline_sagemaker.operations import OPERATIONS, SERVICE_OF
from offline_sagemaker.region_rules import check_regions
from offline_sagemaker.responses import page_offset, page_token
from offline_sagemaker.rules import (
    check_quotas,
    processing_job_spec,
    training_job_spec,
    validate_shape,
)
from offline_sagemaker.tagging import TagApi, tag_map

__all__ = ["OPERATIONS", "SageMakerApi"]

DEFAULT_STOPPING_CONDITION = {"MaxRuntimeInSeconds": 86400}
DEFAULT_LIST_MAX_RESULTS = 10


def _echo_keys(request_shape: str, response_shape: str, computed: set[str]) -> tuple[str, ...]:
    model = service_model()
    request = set(model.shape_for(request_shape).members)
    response = model.shape_for(response_shape).members
    return tuple(k for k in response if k in request and k not in computed)


_TRAINING_ECHO = _echo_keys(
    "CreateTrainingJobRequest",
    "DescribeTrainingJobResponse",
    {"TrainingJobName", "ResourceConfig", "StoppingCondition"},
)
_PROCESSING_ECHO = _echo_keys(
    "CreateProcessingJobRequest",
    "DescribeProcessingJobResponse",
    {"ProcessingJobName", "ProcessingResources"},
)


def _ts(value: float) -> float:
    # AWS returns millisecond precision; rounding keeps JSON short and stable.
    return round(value, 3)


class SageMakerApi:
    """Operation handlers over an :class:`Engine`. Callers hold the engine lock and call ``sync`` first.

    :param engine: the simulation.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._handlers: dict[str, Callable[[dict[str, Any], float], dict[str, Any]]] = {
            "CreateTrainingJob": self._create_training,
            "DescribeTrainingJob": self._describe_training,
            "StopTrainingJob": self._stop_training,
            "ListTrainingJobs": self._list_training,
            "CreateProcessingJob": self._create_processing,
            "DescribeProcessingJob": self._describe_processing,
            "StopProcessingJob": self._stop_processing,
            "ListProcessingJobs": self._list_processing,
        }
        # Training plans, Service Quotas and the Price List API: what clients check before a Create.
        self._handlers.update(AccountApi(engine).handlers())
        # The CloudWatch Logs reads of the jobs' log streams.
        self._handlers.update(LogsApi(engine).handlers())
        # HyperPod clusters, drawing from the same capacity as the jobs.
        self._handlers.update(ClusterApi(engine).handlers())
        # Tags of jobs and clusters, and Search of training jobs by tag.
        self._handlers.update(TagApi(engine, self.describe_training).handlers())

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Run one operation at the emulated now; raises :class:`~.exceptions.ApiError` for client errors."""
        handler = self._handlers.get(operation)
        if handler is None:
            raise UnknownOperation(f"Operation {operation} is not emulated")
        if not isinstance(params, dict):
            raise SerializationError("Request body must be a JSON object")
        if operation in self.engine.scenario.access_denied:
            action = f"{SERVICE_OF[operation]}:{operation}"
            raise AccessDenied(
                f"User: arn:aws:iam::{self.engine.scenario.account_id}:user/offline is not authorized to perform: "
                f"{action} because no identity-based policy allows the {action} action"
            )
        now = self.engine.sync()
        return handler(params, now)

    # -------------------------------------------------------------------------------------- helpers

    def _arn(self, kind: JobKind, name: str) -> str:
        scenario = self.engine.scenario
        return f"arn:aws:sagemaker:{scenario.region}:{scenario.account_id}:{kind.value}-job/{name}"

    def _name(self, params: Mapping[str, Any], key: str) -> str:
        name = params.get(key)
        if not isinstance(name, str) or not name:
            raise ValidationError(f"{key}: required")
        return name

    def _job_level_count(self, cluster: dict[str, Any], selected_count: int) -> None:
        """With per-entry counts the request has no job-level ``InstanceCount``; AWS does not say whether
        Describe adds one, so the scenario decides (``describe_instance_count``)."""
        if self.engine.scenario.describe_instance_count == "selected":
            cluster.setdefault("InstanceCount", selected_count)

    # ------------------------------------------------------------------------------------- training

    def _create_training(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("CreateTrainingJob", params)
        scenario = self.engine.scenario
        spec = training_job_spec(params, scenario)
        tags = tag_map(params.get("Tags"))
        self._ensure_new(JobKind.TRAINING, spec.name)
        check_regions(JobKind.TRAINING, params, scenario.region, scenario.account_id)
        check_quotas(spec, scenario, self.engine.utilization)
        job = self.engine.submit(spec, params, self._arn(JobKind.TRAINING, spec.name), now)
        job.tags = tags
        return {"TrainingJobArn": job.arn}

    def _ensure_new(self, kind: JobKind, name: str) -> None:
        # Checked before quotas so that a retried Create of an existing job reports ResourceInUse, which
        # clients treat as "already submitted", rather than a quota error caused by the job itself.
        job = self.engine.find_kind(kind, name)
        if job is not None:
            raise self.engine.name_in_use(job)

    def _describe_training(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        job = self.engine.get(JobKind.TRAINING, self._name(params, "TrainingJobName"))
        return self.describe_training(job)

    def describe_training(self, job: Job) -> dict[str, Any]:
        """``DescribeTrainingJob`` response for ``job``."""
        request = job.request
        out: dict[str, Any] = {
            "TrainingJobName": job.name,
            "TrainingJobArn": job.arn,
            "TrainingJobStatus": job.status.value,
            "SecondaryStatus": job.secondary_status,
        }
        for key in _TRAINING_ECHO:
            if key in request:
                out[key] = request[key]
        resource_config = dict(request.get("ResourceConfig") or {})
        if job.spec.has_preferences:
            resource_config.pop("InstanceType", None)
            if job.selected is not None:
                resource_config["SelectedInstanceType"] = job.selected.instance_type
                resource_config["SelectedInstanceCount"] = job.selected.count
                self._job_level_count(resource_config, job.selected.count)
        out["ResourceConfig"] = resource_config
        out["StoppingCondition"] = {**DEFAULT_STOPPING_CONDITION, **(request.get("StoppingCondition") or {})}
        out["CreationTime"] = _ts(job.created_at)
        out["LastModifiedTime"] = _ts(job.last_modified)
        if job.start_time is not None:
            out["TrainingStartTime"] = _ts(job.start_time)
        if job.end_time is not None and job.start_time is not None:
            out["TrainingEndTime"] = _ts(job.end_time)
            seconds = max(1, round(job.end_time - job.start_time))
            out["TrainingTimeInSeconds"] = seconds
            # AWS bills per instance-second but reports the job's seconds; we report seconds x 1.
            out["BillableTimeInSeconds"] = seconds
        if job.failure_reason is not None:
            out["FailureReason"] = job.failure_reason
        if job.status.value == "Completed":
            output_path = str((request.get("OutputDataConfig") or {}).get("S3OutputPath", "")).rstrip("/")
            out["ModelArtifacts"] = {"S3ModelArtifacts": f"{output_path}/{job.name}/output/model.tar.gz"}
        out["SecondaryStatusTransitions"] = [
            {k: (_ts(v) if k in ("StartTime", "EndTime") else v) for k, v in t.items()}
            for t in job.transitions
        ]
        return out

    def _stop_training(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        self.engine.stop(JobKind.TRAINING, self._name(params, "TrainingJobName"), now)
        return {}

    def _list_training(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("ListTrainingJobs", params)

        def summary(job: Job) -> dict[str, Any]:
            item: dict[str, Any] = {
                "TrainingJobName": job.name,
                "TrainingJobArn": job.arn,
                "CreationTime": _ts(job.created_at),
                "LastModifiedTime": _ts(job.last_modified),
                "TrainingJobStatus": job.status.value,
                "SecondaryStatus": job.secondary_status,
            }
            if job.end_time is not None:
                item["TrainingEndTime"] = _ts(job.end_time)
            if job.selected is not None and job.selected.plan_arn is not None:
                item["TrainingPlanArn"] = job.selected.plan_arn
            return item

        plan = params.get("TrainingPlanArnEquals")
        extra = (lambda job: job.selected is not None and job.selected.plan_arn == plan) if plan else None
        return self._list(JobKind.TRAINING, params, summary, "TrainingJobSummaries", extra)

    # ----------------------------------------------------------------------------------- processing

    def _create_processing(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("CreateProcessingJob", params)
        scenario = self.engine.scenario
        spec = processing_job_spec(params, scenario)
        tags = tag_map(params.get("Tags"))
        self._ensure_new(JobKind.PROCESSING, spec.name)
        check_regions(JobKind.PROCESSING, params, scenario.region, scenario.account_id)
        check_quotas(spec, scenario, self.engine.utilization)
        job = self.engine.submit(spec, params, self._arn(JobKind.PROCESSING, spec.name), now)
        job.tags = tags
        return {"ProcessingJobArn": job.arn}

    def _describe_processing(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        job = self.engine.get(JobKind.PROCESSING, self._name(params, "ProcessingJobName"))
        return self.describe_processing(job)

    def describe_processing(self, job: Job) -> dict[str, Any]:
        """``DescribeProcessingJob`` response for ``job``."""
        request = job.request
        out: dict[str, Any] = {
            "ProcessingJobName": job.name,
            "ProcessingJobArn": job.arn,
            "ProcessingJobStatus": job.status.value,
        }
        for key in _PROCESSING_ECHO:
            if key in request:
                out[key] = request[key]
        resources = dict(request.get("ProcessingResources") or {})
        cluster = dict(resources.get("ClusterConfig") or {})
        if job.spec.has_preferences:
            cluster.pop("InstanceType", None)
            if job.selected is not None:
                cluster["SelectedInstanceType"] = job.selected.instance_type
                cluster["SelectedInstanceCount"] = job.selected.count
                self._job_level_count(cluster, job.selected.count)
        resources["ClusterConfig"] = cluster
        out["ProcessingResources"] = resources
        out["CreationTime"] = _ts(job.created_at)
        out["LastModifiedTime"] = _ts(job.last_modified)
        if job.start_time is not None:
            out["ProcessingStartTime"] = _ts(job.start_time)
        if job.terminal:
            out["ProcessingEndTime"] = _ts(job.end_time if job.end_time is not None else job.last_modified)
        if job.failure_reason is not None:
            out["FailureReason"] = job.failure_reason
        if job.exit_message is not None:
            out["ExitMessage"] = job.exit_message
        return out

    def _stop_processing(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        self.engine.stop(JobKind.PROCESSING, self._name(params, "ProcessingJobName"), now)
        return {}

    def _list_processing(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("ListProcessingJobs", params)

        def summary(job: Job) -> dict[str, Any]:
            item: dict[str, Any] = {
                "ProcessingJobName": job.name,
                "ProcessingJobArn": job.arn,
                "CreationTime": _ts(job.created_at),
                "LastModifiedTime": _ts(job.last_modified),
                "ProcessingJobStatus": job.status.value,
            }
            if job.terminal:
                item["ProcessingEndTime"] = _ts(
                    job.end_time if job.end_time is not None else job.last_modified
                )
            if job.failure_reason is not None:
                item["FailureReason"] = job.failure_reason
            if job.exit_message is not None:
                item["ExitMessage"] = job.exit_message
            return item

        return self._list(JobKind.PROCESSING, params, summary, "ProcessingJobSummaries", None)

    # ---------------------------------------------------------------------------------------- lists

    def _list(
        self,
        kind: JobKind,
        params: Mapping[str, Any],
        summary: Callable[[Job], dict[str, Any]],
        key: str,
        extra: Callable[[Job], bool] | None,
    ) -> dict[str, Any]:
        """One page of ListTrainingJobs / ListProcessingJobs: the page is cut, then filtered.

        ListTrainingJobs' API reference: "When StatusEquals and MaxResults are set at the same time, the
        MaxResults number of training jobs are first retrieved ignoring the StatusEquals parameter and
        then they are filtered by the StatusEquals parameter". So the page is cut first from the jobs
        that meet the query conditions (:func:`_queried`), in sort order; the filters
        (:func:`_page_filters`) then drop entries from it. A page holds 0..MaxResults summaries, and
        NextToken is returned whenever jobs remain beyond the page, even when the filtered page is
        empty. The token is the offset into the queried, sorted jobs.
        """
        max_results = _max_results(params)
        offset = page_offset(params.get("NextToken"))
        jobs = _queried(self.engine.jobs(kind), params)
        filters = _page_filters(params) + ([extra] if extra is not None else [])
        page = [j for j in jobs[offset : offset + max_results] if all(keep(j) for keep in filters)]
        out: dict[str, Any] = {key: [summary(j) for j in page]}
        if offset + max_results < len(jobs):
            out["NextToken"] = page_token(offset + max_results)
        return out


def _max_results(params: Mapping[str, Any]) -> int:
    # Neither API reference states a default; 10 is the one SageMaker's other List* calls document.
    max_results = params.get("MaxResults")
    if max_results is None:
        return DEFAULT_LIST_MAX_RESULTS
    if isinstance(max_results, bool) or not isinstance(max_results, int) or not 1 <= max_results <= 100:
        raise ValidationError(f"MaxResults: must be between 1 and 100, got {max_results!r}")
    return max_results


def _queried(jobs: list[Job], params: Mapping[str, Any]) -> list[Job]:
    """The jobs a List* call pages through: the query conditions applied, in sort order.

    Query conditions (before the page is cut): CreationTimeAfter/Before, LastModifiedTimeAfter/Before.
    AWS does not say when it applies them; its note names StatusEquals alone as applied after the cut,
    and the public reports of empty pages involve NameContains or StatusEquals, not the time filters.

    Default sort: SortBy CreationTime, SortOrder Ascending, as both API references state ("The default
    is CreationTime.", "The default is Ascending."). The StatusEquals note's example describes its page
    as "sorted according to the creation time, from the most current to the oldest", but its other
    parameters are elided ("{ ... MaxResults: 100, StatusEquals: InProgress ... }"); the parameter's own
    documentation wins. Clients that need an order pass SortOrder.
    """
    for param, attr, after in (
        ("CreationTimeAfter", "created_at", True),
        ("CreationTimeBefore", "created_at", False),
        ("LastModifiedTimeAfter", "last_modified", True),
        ("LastModifiedTimeBefore", "last_modified", False),
    ):
        bound = params.get(param)
        if bound is None:
            continue
        limit = _epoch(bound, param)
        jobs = [j for j in jobs if (getattr(j, attr) > limit if after else getattr(j, attr) < limit)]
    sort_by = params.get("SortBy") or "CreationTime"
    sort_key: Callable[[Job], Any]
    if sort_by == "Name":
        sort_key = lambda j: (j.name, j.seq)  # noqa: E731
    elif sort_by == "Status":
        sort_key = lambda j: (j.status.value, j.seq)  # noqa: E731
    else:
        sort_key = lambda j: (j.created_at, j.seq)  # noqa: E731
    return sorted(jobs, key=sort_key, reverse=params.get("SortOrder") == "Descending")


def _page_filters(params: Mapping[str, Any]) -> list[Callable[[Job], bool]]:
    """The filters applied to a page after it is cut.

    - StatusEquals: documented so for ListTrainingJobs. ListProcessingJobs' reference says nothing
      about the order; it is treated the same, because a client that pages through the stricter order
      correctly (following NextToken until there is none) also pages through the kinder one correctly,
      and not the other way round.
    - NameContains: AWS documents nothing either way, but users report empty pages with a NextToken
      from ListTrainingJobs called with NameContains and MaxResults only, the matching jobs turning up
      on later pages (boto/boto3#2838; also #3347), and the service team acknowledged the same for
      ListModels (aws/aws-sdk#701).
    - TrainingPlanArnEquals (passed by the caller): an attribute filter like StatusEquals, undocumented,
      applied after the cut for the same reason.
    """
    filters: list[Callable[[Job], bool]] = []
    contains = params.get("NameContains")
    if contains:
        # Guess: AWS does not say whether NameContains is case-sensitive; the console search is not.
        needle = str(contains).lower()
        filters.append(lambda j: needle in j.name.lower())
    status = params.get("StatusEquals")
    if status:
        filters.append(lambda j: j.status.value == status)
    return filters


def _epoch(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValidationError(f"{field}: must be a timestamp")
    try:
        return float(value)
    except ValueError:
        from botocore.utils import parse_timestamp

        try:
            return float(parse_timestamp(value).timestamp())
        except (ValueError, TypeError) as exc:
            raise ValidationError(f"{field}: must be a timestamp, got {value!r}") from exc
