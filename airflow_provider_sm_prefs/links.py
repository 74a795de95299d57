"""Extra links on the operators: the job's page, its logs, and the task's capacity history.

Against AWS they open the SageMaker console and the job's CloudWatch log streams. When the
connection's SageMaker endpoint is not an AWS host (the offline SageMaker, :mod:`offline_sagemaker` of the
``offline-sagemaker`` distribution), they open that endpoint's own page for the job
(``/_emulator/view/jobs/<name>``) instead of a console page for a job that does not exist in AWS.

The capacity history link opens the capacity page (:mod:`airflow_provider_sm_prefs.plugin`) filtered to
the task; its URL follows from the task alone.

Each link keeps one XCom, under its own key, holding the finished URL. It is pushed before the task
defers, so the links work while the task waits for capacity; Airflow pushes the link of every extra link
again under the same key when the task ends, with the same value.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.amazon.aws.links.base_aws import BASE_AWS_CONSOLE_LINK, BaseAwsLink
from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

from airflow_provider_sm_prefs.domain.kinds import JobKind, JobKindSpec

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator, Context
    from airflow.sdk.types import TaskInstanceKey

#: Host suffixes of AWS's own endpoints (commercial, China, GovCloud/ISO partitions, dual-stack).
AWS_HOST_SUFFIXES = (".amazonaws.com", ".amazonaws.com.cn", ".api.aws", ".c2s.ic.gov", ".sc2s.sgov.gov")
#: The offline SageMaker's page for one job, under its endpoint.
OFFLINE_JOB_PATH = "/_emulator/view/jobs/{job_name}"


def is_aws_endpoint(endpoint_url: str | None) -> bool:
    """Whether SageMaker calls go to AWS (no custom endpoint, or one on an AWS host such as a VPC endpoint)."""
    if not endpoint_url:
        return True
    host = (urllib.parse.urlsplit(endpoint_url).hostname or "").lower()
    return host.endswith(AWS_HOST_SUFFIXES)


def job_urls(
    job_kind: str,
    job_name: str,
    *,
    region_name: str,
    aws_partition: str = "aws",
    endpoint_url: str | None = None,
) -> tuple[str, str]:
    """The job page and job logs URLs for ``job_name`` of ``job_kind`` (``training``/``processing``).

    The console path and log group of each kind are :class:`~airflow_provider_sm_prefs.domain.kinds.JobKindSpec`'s.
    """
    if not is_aws_endpoint(endpoint_url):
        assert endpoint_url is not None
        page = endpoint_url.rstrip("/") + OFFLINE_JOB_PATH.format(
            job_name=urllib.parse.quote(job_name, safe="")
        )
        return page, page + "#logs"
    domain = BaseAwsLink.get_aws_domain(aws_partition) or "aws.amazon.com"
    console = BASE_AWS_CONSOLE_LINK.format(aws_domain=domain)
    spec = JobKind(job_kind).spec
    page = f"{console}/sagemaker/home?region={region_name}#/{spec.console_path}/{job_name}"
    logs = (
        f"{console}/cloudwatch/home?region={region_name}#logsV2:log-groups/log-group/"
        f"{_cloudwatch_escape(spec.log_group)}$3FlogStreamNameFilter$3D{job_name}$252F"
    )
    return page, logs


def _cloudwatch_escape(text: str) -> str:
    """``text`` as the CloudWatch console's URL fragment spells it: percent-encoded, then ``%`` as ``$25``."""
    return urllib.parse.quote(text, safe="").replace("%", "$25")


def _kind_where(matches: Callable[[JobKindSpec], bool]) -> JobKind:
    """The kind whose spec ``matches``; processing when none does (as the first release's links read)."""
    return next((kind for kind in JobKind if matches(kind.spec)), JobKind.PROCESSING)


#: The first release stored a link's parts instead of its URL. Per link, the part that names the job
#: kind: how a kind's spec spells it there, and which of :func:`job_urls`' two URLs the link opens.
_FIRST_RELEASE_PARTS: dict[str, tuple[Callable[[JobKindSpec], str], int]] = {
    "console_path": (lambda spec: spec.console_path, 0),
    # The log group's last part (``TrainingJobs``).
    "log_group": (lambda spec: spec.log_group.rpartition("/")[2], 1),
}


class _StoredUrlLink(BaseOperatorLink):
    """A link whose finished URL is kept in one XCom under :attr:`key`."""

    key: ClassVar[str]
    #: The part that names the job kind in what the first release stored (see ``_FIRST_RELEASE_PARTS``).
    kind_part: ClassVar[str]

    @property
    def xcom_key(self) -> str:
        # Airflow stores every extra link's URL under ``xcom_key`` when the task ends; using the key the
        # operator already wrote keeps one XCom per link instead of two.
        return self.key

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        value: Any = XCom.get_value(key=self.key, ti_key=ti_key)
        if isinstance(value, str):
            return value
        if isinstance(value, dict):  # written by the first release: the console link's parts
            return self._from_parts(value)
        return ""

    def _from_parts(self, parts: dict[str, Any]) -> str:
        """The URL from the parts the first release stored ("" when they do not read)."""
        spelling, which = _FIRST_RELEASE_PARTS[self.kind_part]
        try:
            named = parts[self.kind_part]
            kind = _kind_where(lambda spec: spelling(spec) == named)
            return job_urls(
                kind, parts["job_name"], region_name=parts["region_name"], aws_partition=_partition(parts)
            )[which]
        except (KeyError, TypeError):
            return ""

    @classmethod
    def persist(cls, context: Context, url: str) -> None:
        """Store the URL for the task instance of ``context``."""
        context["ti"].xcom_push(key=cls.key, value=url)


class SageMakerPreferenceJobLink(_StoredUrlLink):
    """The job's page: the SageMaker console (which lists the preferences and marks the selected one)."""

    name = "SageMaker Job"
    key = "sm_prefs_job_link"
    kind_part = "console_path"


class SageMakerPreferenceJobLogsLink(_StoredUrlLink):
    """The job's CloudWatch log streams."""

    name = "SageMaker Job Logs"
    key = "sm_prefs_job_logs_link"
    kind_part = "log_group"


def persist_job_links(context: Context, job_kind: str, job_name: str, hook: Any, log: Any) -> None:
    """Store the job page and logs URLs the task's extra links show, before the task defers.

    ``hook`` is the task's AWS hook (its region, partition and endpoint). Links are a convenience: an
    error resolving them is logged at debug level, never raised.
    """
    try:
        job_url, logs_url = job_urls(
            job_kind,
            job_name,
            region_name=hook.conn_region_name,
            aws_partition=hook.conn_partition,
            endpoint_url=hook.conn_config.get_service_endpoint_url("sagemaker"),
        )
    except Exception:
        log.debug("Could not resolve the job's links", exc_info=True)
        return
    SageMakerPreferenceJobLink.persist(context, job_url)
    SageMakerPreferenceJobLogsLink.persist(context, logs_url)


#: Where the api-server mounts the capacity page's app (:mod:`airflow_provider_sm_prefs.plugin`).
CAPACITY_PAGE_PREFIX = "/sm-prefs"


def capacity_page_path() -> str:
    """The capacity page's path, under the Airflow UI's base path if ``[api] base_url`` has one."""
    from airflow.configuration import conf

    base = urllib.parse.urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    return f"{base}{CAPACITY_PAGE_PREFIX}/"


class CapacityHistoryLink(BaseOperatorLink):
    """The capacity page filtered to this task: every capacity decision it made, run after run."""

    name = "Capacity history"
    key = "sm_prefs_capacity_link"

    @property
    def xcom_key(self) -> str:
        return self.key

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        query = urllib.parse.urlencode({"dag_id": ti_key.dag_id, "task_id": ti_key.task_id})
        return f"{capacity_page_path()}?{query}"


def _partition(parts: dict[str, Any]) -> str:
    domain = parts.get("aws_domain")
    return {"amazonaws.cn": "aws-cn", "amazonaws-us-gov.com": "aws-us-gov"}.get(str(domain), "aws")
