"""A SageMaker job's CloudWatch log streams: find them, read their last lines, merge them by time.

SageMaker writes one stream per instance into ``/aws/sagemaker/TrainingJobs`` or
``/aws/sagemaker/ProcessingJobs`` (:attr:`JobKindSpec.log_group`), named ``<job name>/algo-<n>-<epoch>``.
:meth:`SageMakerJobLogsHook.read_job_logs` lists them (DescribeLogStreams, botocore's paginator),
reads the last lines of each (GetLogEvents from the end, paging backwards until it has enough) and
merges them by timestamp, keeping the last ``max_lines``. Reading from the end keeps a long job's cost bounded by the
cap, not by the job's length, and keeps the lines that explain a failure.

Calls: ``logs:DescribeLogStreams`` and ``logs:GetLogEvents`` on the job kind's log group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.hooks.base import ProviderAwsHook
from airflow_provider_sm_prefs.hooks.retry import retry_sync

__all__ = ["JobLogLine", "JobLogs", "SageMakerJobLogsHook", "host_of"]

#: GetLogEvents answers at most this many events per call.
MAX_EVENTS_PER_CALL = 10000
#: DescribeLogStreams answers at most this many streams per call.
MAX_STREAMS_PER_CALL = 50
_EPOCH_SUFFIX = re.compile(r"-\d+$")


def host_of(job_name: str, stream_name: str) -> str:
    """The instance a stream belongs to: ``algo-2`` for ``<job>/algo-2-1700000000``."""
    rest = stream_name[len(job_name) + 1 :] if stream_name.startswith(job_name + "/") else stream_name
    return _EPOCH_SUFFIX.sub("", rest) or rest


@dataclass(frozen=True)
class JobLogLine:
    """One line of a job's logs: when (epoch milliseconds), which instance, what."""

    timestamp: int
    host: str
    message: str

    def render(self) -> str:
        """``[algo-1] 2026-11-30T18:28:07.102Z message``, as the task log shows it."""
        when = datetime.fromtimestamp(self.timestamp / 1000, tz=timezone.utc)
        return (
            f"[{self.host}] {when.isoformat(timespec='milliseconds').replace('+00:00', 'Z')} {self.message}"
        )


@dataclass(frozen=True)
class JobLogs:
    """The last lines of a job's streams, merged by time.

    :param lines: at most the requested number of lines, oldest first.
    :param streams: every stream of the job.
    :param cut: lines read but left out (the oldest ones).
    :param more_before: a stream may hold still earlier lines that were not read at all.
    """

    group: str
    lines: list[JobLogLine] = field(default_factory=list)
    streams: list[str] = field(default_factory=list)
    cut: int = 0
    more_before: bool = False

    @property
    def truncated(self) -> bool:
        return self.cut > 0 or self.more_before


class SageMakerJobLogsHook(ProviderAwsHook):
    """CloudWatch Logs reads of SageMaker jobs' streams, on the amazon provider's ``AwsBaseHook``.

    :param aws_conn_id: Airflow connection of type ``aws`` (its extra may set ``endpoint_url``).
    :param region_name: AWS region; defaults to the connection's.
    :param verify: TLS verification, as for every amazon provider hook.
    :param config: botocore config dict or object.
    """

    hook_name = "Amazon SageMaker job logs"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["client_type"] = "logs"
        super().__init__(*args, **kwargs)

    def stream_names(self, kind: JobKind, job_name: str) -> list[str]:
        """Every stream of the job, by name (DescribeLogStreams, all pages)."""

        def read() -> list[str]:
            # A transient error lists again from the first page: a job has one stream per instance.
            pages = self.conn.get_paginator("describe_log_streams").paginate(
                logGroupName=kind.spec.log_group,
                logStreamNamePrefix=f"{job_name}/",
                orderBy="LogStreamName",
                PaginationConfig={"PageSize": MAX_STREAMS_PER_CALL},
            )
            return [str(s["logStreamName"]) for page in pages for s in page.get("logStreams", [])]

        return retry_sync(read, f"DescribeLogStreams {job_name}")

    def last_events(self, group: str, stream: str, count: int) -> tuple[list[dict[str, Any]], bool]:
        """The last ``count`` events of a stream, oldest first; and whether earlier ones may exist.

        GetLogEvents from the end of the stream, then backwards page by page: one response holds at most
        10,000 events or 1 MB, so fewer than asked does not mean the stream has no more. Paged by hand:
        botocore has no paginator for GetLogEvents, and this one stops at ``count`` and probes once.
        """
        events: list[dict[str, Any]] = []
        token: str | None = None
        while len(events) < count:
            params: dict[str, Any] = {
                "logGroupName": group,
                "logStreamName": stream,
                "limit": min(MAX_EVENTS_PER_CALL, count - len(events)),
            }
            if token:
                params["nextToken"] = token
            else:
                params["startFromHead"] = False
            page = self._get_events(params)
            batch = list(page.get("events", []))
            previous, token = token, page.get("nextBackwardToken")
            events[:0] = batch
            if not batch or not token or token == previous:
                return events, False
        # As many as asked: one event further back tells whether the stream has more.
        probe = self._get_events(
            {"logGroupName": group, "logStreamName": stream, "limit": 1, "nextToken": token}
        )
        return events, bool(probe.get("events"))

    def _get_events(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._call("get_log_events", params, f"GetLogEvents {params['logStreamName']}")

    def _call(self, method: str, params: dict[str, Any], what: str) -> dict[str, Any]:
        """One Logs call with transient retries (throttling, 5xx, dropped connections)."""
        call = getattr(self.conn, method)
        return dict(retry_sync(lambda: call(**params), what))

    def read_job_logs(self, kind: JobKind, job_name: str, max_lines: int) -> JobLogs:
        """The last ``max_lines`` lines of the job's streams, merged by time (see :class:`JobLogs`).

        :raises botocore.exceptions.ClientError: ``ResourceNotFoundException`` when the log group does
            not exist, ``AccessDeniedException`` without the permissions; the caller decides.
        """
        group = kind.spec.log_group
        max_lines = max(1, max_lines)
        streams = self.stream_names(kind, job_name)
        merged: list[JobLogLine] = []
        more_before = False
        for stream in streams:
            events, more = self.last_events(group, stream, max_lines)
            more_before = more_before or more
            host = host_of(job_name, stream)
            merged += [
                JobLogLine(int(e["timestamp"]), host, str(e.get("message", "")).rstrip("\n")) for e in events
            ]
        merged.sort(key=lambda line: line.timestamp)  # stable: each stream's own order within a millisecond
        cut = max(0, len(merged) - max_lines)
        return JobLogs(group, merged[cut:], streams, cut, more_before)
