"""CloudWatch Logs reads of the jobs' log streams: DescribeLogGroups, DescribeLogStreams, GetLogEvents,
FilterLogEvents, in AWS's shapes (botocore's ``logs`` model validates the requests).

The groups are SageMaker's (``/aws/sagemaker/TrainingJobs``, ``/aws/sagemaker/ProcessingJobs``); a group
exists once a job of its kind has started an instance, as on AWS, where SageMaker creates it on first
write. The events are those of :mod:`.job_logs` up to the emulated now. Other Logs operations (writes)
and the reads of other groups (your own, created with CreateLogGroup) are moto's (the WSGI app routes
them by group); DescribeLogGroups lists SageMaker's groups and moto's together, in name order
(:data:`MOTO_LOGS`). Faults and ``access_denied`` apply to every read, whichever group it names.

Pagination: GetLogEvents answers ``nextForwardToken`` / ``nextBackwardToken`` as AWS does, the same token
again at either end of the stream; FilterLogEvents and the Describe calls answer ``nextToken`` while more
remain. ``filterPattern`` supports terms and quoted phrases, all of which a line must contain.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from offline_sagemaker.engine import Engine
from offline_sagemaker.exceptions import ApiError, NotFound
from offline_sagemaker.job_logs import (
    LOG_GROUPS,
    LogEvent,
    LogStream,
    job_streams,
    kind_of_group,
)
from offline_sagemaker.models import JobKind
from offline_sagemaker.responses import page
from offline_sagemaker.rules import validate_shape

__all__ = ["MOTO_LOGS", "LogsApi"]

#: moto's CloudWatch Logs for the read being answered, set by the WSGI app around the call: called with a
#: request of the same operation, it returns moto's answer (an :class:`ApiError` for its refusals). Unset
#: (the emulator's API called directly), groups that are not SageMaker's do not exist.
MOTO_LOGS: ContextVar[Callable[[dict[str, Any]], dict[str, Any]] | None] = ContextVar(
    "moto_logs", default=None
)

Handler = Callable[[dict[str, Any], float], dict[str, Any]]
_TOKEN = re.compile(r"^([fb])/(\d+)$")
_MAX_EVENTS = 10000


def _invalid(message: str) -> ApiError:
    return ApiError("InvalidParameterException", message)


class LogsApi:
    """Handlers for the Logs reads over an :class:`Engine` (the caller holds its lock and synced it)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def handlers(self) -> dict[str, Handler]:
        return {
            "DescribeLogGroups": self._describe_groups,
            "DescribeLogStreams": self._describe_streams,
            "GetLogEvents": self._get_events,
            "FilterLogEvents": self._filter_events,
        }

    # ---------------------------------------------------------------------------------------- helpers

    def _arn(self, group: str) -> str:
        scenario = self.engine.scenario
        return f"arn:aws:logs:{scenario.region}:{scenario.account_id}:log-group:{group}"

    def _streams(self, kind: JobKind, now: float, prefix: str = "") -> list[LogStream]:
        # A stream's name starts with its job's name and a slash: only those jobs can match the prefix.
        job_prefix = prefix.split("/", 1)[0] if prefix else ""
        return sorted(
            (
                stream
                for job in self.engine.jobs(kind)
                if job.name.startswith(job_prefix)
                for stream in job_streams(job, self.engine.scenario)
                if stream.created <= now and stream.name.startswith(prefix)
            ),
            key=lambda stream: stream.name,
        )

    def _group(self, params: Mapping[str, Any], now: float) -> JobKind:
        """The kind whose group the request names; ResourceNotFoundException if it does not exist (yet)."""
        name = params.get("logGroupName") or params.get("logGroupIdentifier")
        if not name:
            raise _invalid("Either logGroupName or logGroupIdentifier must be specified")
        if params.get("logGroupName") and params.get("logGroupIdentifier"):
            raise _invalid("LogGroupName and LogGroupIdentifier are mutually exclusive")
        kind = kind_of_group(str(name))
        if kind is None or not self._streams(kind, now):
            raise NotFound("ResourceNotFoundException", "The specified log group does not exist.")
        return kind

    @staticmethod
    def _moto_groups(prefix: str) -> list[dict[str, Any]]:
        """Every log group moto holds under ``prefix`` (all of its pages)."""
        moto = MOTO_LOGS.get()
        groups: list[dict[str, Any]] = []
        token = None
        while moto is not None:
            answer = moto({k: v for k, v in {"logGroupNamePrefix": prefix, "nextToken": token}.items() if v})
            groups += answer.get("logGroups") or []
            token = answer.get("nextToken")
            if not token:
                break
        return groups

    @staticmethod
    def _moto_read(params: Mapping[str, Any]) -> dict[str, Any] | None:
        """moto's answer when the request names a group that is not SageMaker's, else None."""
        name = params.get("logGroupName") or params.get("logGroupIdentifier")
        moto = MOTO_LOGS.get()
        if moto is None or not isinstance(name, str) or kind_of_group(name) is not None:
            return None
        return moto(dict(params))

    @staticmethod
    def _window(events: list[LogEvent], params: Mapping[str, Any]) -> list[LogEvent]:
        start, end = params.get("startTime"), params.get("endTime")
        return [
            e
            for e in events
            if (start is None or e.timestamp >= start) and (end is None or e.timestamp < end)
        ]

    # ------------------------------------------------------------------------------------ operations

    def _describe_groups(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("DescribeLogGroups", params, service="logs")
        prefix = str(params.get("logGroupNamePrefix") or "")
        pattern = str(params.get("logGroupNamePattern") or "")
        groups = {}
        for kind, name in LOG_GROUPS.items():
            streams = self._streams(kind, now)
            if streams:
                groups[name] = {
                    "logGroupName": name,
                    "creationTime": int(min(s.created for s in streams) * 1000),
                    "metricFilterCount": 0,
                    "arn": self._arn(name) + ":*",
                    "storedBytes": 0,
                    "logGroupClass": "STANDARD",
                    "logGroupArn": self._arn(name),
                }
        for group in self._moto_groups(prefix):
            groups.setdefault(str(group.get("logGroupName")), group)
        listed = [
            groups[name]
            for name in sorted(groups)
            if name.startswith(prefix) and pattern.lower() in name.lower()
        ]
        return self._paged(listed, "logGroups", params, 50)

    def _describe_streams(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("DescribeLogStreams", params, service="logs")
        if (answer := self._moto_read(params)) is not None:
            return answer
        kind = self._group(params, now)
        prefix = str(params.get("logStreamNamePrefix") or "")
        by_time = params.get("orderBy") == "LastEventTime"
        if by_time and prefix:
            raise _invalid("Cannot order by LastEventTime with a logStreamNamePrefix.")
        group = LOG_GROUPS[kind]
        views = []
        for stream in self._streams(kind, now, prefix):
            view: dict[str, Any] = {
                "logStreamName": stream.name,
                "creationTime": int(stream.created * 1000),
                "arn": f"{self._arn(group)}:log-stream:{stream.name}",
                "storedBytes": 0,
            }
            events = stream.visible(now)
            if events:
                view.update(
                    firstEventTimestamp=events[0].timestamp,
                    lastEventTimestamp=events[-1].timestamp,
                    lastIngestionTime=events[-1].timestamp,
                )
            views.append(view)
        if by_time:
            views.sort(key=lambda v: v.get("lastEventTimestamp", 0))
        if params.get("descending"):
            views.reverse()
        return self._paged(views, "logStreams", params, 50)

    def _get_events(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("GetLogEvents", params, service="logs")
        if (answer := self._moto_read(params)) is not None:
            return answer
        kind = self._group(params, now)
        name = str(params["logStreamName"])
        stream = next((s for s in self._streams(kind, now, name) if s.name == name), None)
        if stream is None:
            raise NotFound("ResourceNotFoundException", "The specified log stream does not exist.")
        events = self._window(stream.visible(now), params)
        limit = int(params.get("limit") or _MAX_EVENTS)
        token = params.get("nextToken")
        if token:
            match = _TOKEN.match(str(token))
            if match is None:
                raise _invalid("The specified nextToken is invalid.")
            forward, at = match.group(1) == "f", min(int(match.group(2)), len(events))
        else:
            forward = bool(params.get("startFromHead"))
            at = 0 if forward else len(events)
        first, last = (at, min(at + limit, len(events))) if forward else (max(0, at - limit), at)
        return {
            "events": [
                {"timestamp": e.timestamp, "message": e.message, "ingestionTime": e.timestamp}
                for e in events[first:last]
            ],
            "nextForwardToken": f"f/{last:056d}",
            "nextBackwardToken": f"b/{first:056d}",
        }

    def _filter_events(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("FilterLogEvents", params, service="logs")
        if (answer := self._moto_read(params)) is not None:
            return answer
        kind = self._group(params, now)
        names = params.get("logStreamNames")
        prefix = str(params.get("logStreamNamePrefix") or "")
        if names and prefix:
            raise _invalid("logStreamNames and logStreamNamePrefix are mutually exclusive")
        streams = [s for s in self._streams(kind, now, prefix) if not names or s.name in names]
        terms = _terms(str(params.get("filterPattern") or ""))
        merged = sorted(
            (
                (event.timestamp, stream.name, index, event.message)
                for stream in streams
                for index, event in enumerate(self._window(stream.visible(now), params))
                if all(term in event.message for term in terms)
            )
        )
        events, token = page(merged, params.get("nextToken"), int(params.get("limit") or _MAX_EVENTS))
        out: dict[str, Any] = {
            "events": [
                {
                    "logStreamName": name,
                    "timestamp": timestamp,
                    "message": message,
                    "ingestionTime": timestamp,
                    "eventId": f"{timestamp:020d}{index:016d}",
                }
                for timestamp, name, index, message in events
            ],
            "searchedLogStreams": [{"logStreamName": s.name, "searchedCompletely": True} for s in streams],
        }
        if token:
            out["nextToken"] = token
        return out

    @staticmethod
    def _paged(
        items: list[dict[str, Any]], key: str, params: Mapping[str, Any], default: int
    ) -> dict[str, Any]:
        listed, token = page(items, params.get("nextToken"), int(params.get("limit") or default))
        out: dict[str, Any] = {key: listed}
        if token:
            out["nextToken"] = token
        return out


def _terms(pattern: str) -> list[str]:
    """The terms and quoted phrases of a filter pattern (all must appear in a line)."""
    try:
        return shlex.split(pattern)
    except ValueError as exc:
        raise _invalid(f"Invalid filter pattern: {exc}") from None
