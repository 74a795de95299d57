"""The job's own log lines in the task log, once the job has ended.

:class:`JobLogPrinter` is the operators' ``print_log`` and ``max_log_lines``: when a wait ends with the job
ended (completed, failed or stopped after it started), the worker reads the job's CloudWatch streams
(:class:`~airflow_provider_sm_prefs.hooks.logs.SageMakerJobLogsHook`) and writes their last lines into the
task log, interleaved by time and prefixed by instance. A failure's exception carries the last lines.
Whichever ends the task reads them: the worker's resume, or the trigger when it ends the task itself
(:mod:`airflow_provider_sm_prefs.triggers.finish`, in a thread: the read is blocking).

Reading logs never fails a task: a missing log group, missing permissions or any other error becomes a
warning that says how to fix it. Nothing of the request (hyperparameters, environment) is logged here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from botocore.exceptions import ClientError

from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.events import CapacityEvent
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.hooks.logs import JobLogs, SageMakerJobLogsHook
from airflow_provider_sm_prefs.hooks.retry import error_code, error_message
from airflow_provider_sm_prefs.links import job_urls

__all__ = ["DEFAULT_MAX_LOG_LINES", "FAILURE_TAIL_LINES", "JobLogPrinter"]

#: How many of the job's last lines the task log shows by default.
DEFAULT_MAX_LOG_LINES = 2000
#: How many of the last lines a failure's exception message carries.
FAILURE_TAIL_LINES = 20
#: Errors that end a wait before any instance ran: the job has no logs to read.
_NO_INSTANCE_ERRORS = frozenset(
    cls.__name__
    for cls in (
        errors.CapacityTimeoutError,
        errors.CapacityUnavailableError,
        errors.QuotaExceededError,
        errors.JobSubmissionError,
    )
)
_LOG_ACTIONS = "logs:DescribeLogStreams and logs:GetLogEvents"


@dataclass(eq=False)
class JobLogPrinter:
    """Writes an ended job's log lines into the task log.

    :meth:`outcome_with_logs` stands in for ``CapacityEvent.outcome_or_raise`` where a wait's event is
    read: it prints the job's logs first when the job has ended.

    :param job_kind: the kind of the jobs whose logs are read.
    :param logs_hook: makes the CloudWatch Logs hook, the first time logs are read.
    :param print_log: once the job has ended (completed, failed or stopped after it started), write its
        CloudWatch log lines into the task log, interleaved by time and prefixed by instance
        (``[algo-2]``); a failure's exception carries the last lines. Read by whichever ends the task
        (worker or triggerer); a log read error only warns.
    :param max_log_lines: the most lines written (the last ones); the task log says how many earlier
        lines were cut and links them.
    :param log: the task's logger.
    """

    job_kind: JobKind
    logs_hook: Callable[[], SageMakerJobLogsHook]
    print_log: bool
    max_log_lines: int
    log: Any

    @cached_property
    def _hook(self) -> SageMakerJobLogsHook:
        """The CloudWatch Logs hook, made once, when logs are first read (never for a job without them)."""
        return self.logs_hook()

    def outcome_with_logs(self, received: CapacityEvent) -> CapacityOutcome:
        """The event's outcome, or its domain exception with the job's last lines in the message.

        With ``print_log`` and a job that has ended after it started, the job's logs go to the task log
        first.
        """
        if not self.print_log or not received.job_ended or received.error_type in _NO_INSTANCE_ERRORS:
            return received.outcome_or_raise()
        tail = self.print_job_logs(received.job_name)
        try:
            return received.outcome_or_raise()
        except errors.SageMakerJobError as err:
            err.add_log_tail(tail[-FAILURE_TAIL_LINES:])
            raise

    def print_job_logs(self, job_name: str) -> list[str]:
        """Write the job's last lines into the task log; returns them as written (empty on any error)."""
        group = self.job_kind.spec.log_group
        try:
            logs = self._hook.read_job_logs(self.job_kind, job_name, self.max_log_lines)
        except ClientError as err:
            self._warn_unreadable(job_name, group, err)
            return []
        except Exception as err:  # logs are a report; never fail the task for them
            self.log.warning(
                "Could not read the logs of job %s from %s (%s: %s); the job's outcome is unaffected",
                job_name,
                group,
                type(err).__name__,
                err,
            )
            return []
        if not logs.streams:
            self.log.info("Job %s wrote no log streams to %s", job_name, group)
            return []
        self.log.info(
            "Logs of job %s (%d instance stream%s in %s), oldest first:",
            job_name,
            len(logs.streams),
            "" if len(logs.streams) == 1 else "s",
            group,
        )
        if logs.truncated:
            self._say_cut(job_name, logs)
        rendered = [line.render() for line in logs.lines]
        for line in rendered:
            self.log.info("%s", line)
        self.log.info("End of the logs of job %s", job_name)
        return rendered

    def _say_cut(self, job_name: str, logs: JobLogs) -> None:
        # Lines read but dropped, plus at least one a stream holds further back that was not read.
        earlier = f"at least {logs.cut + 1}" if logs.more_before else str(logs.cut)
        self.log.warning(
            "max_log_lines=%d: showing the last %d lines; %s earlier lines of job %s are not shown here. "
            "All lines: %s",
            self.max_log_lines,
            len(logs.lines),
            earlier,
            job_name,
            self._logs_url(job_name),
        )

    def _logs_url(self, job_name: str) -> str:
        hook = self._hook
        try:
            return job_urls(
                self.job_kind.value,
                job_name,
                region_name=hook.conn_region_name,
                aws_partition=hook.conn_partition,
                endpoint_url=hook.conn_config.get_service_endpoint_url("sagemaker"),
            )[1]
        except Exception:  # a link is a convenience; say where instead
            return f"CloudWatch log group {self.job_kind.spec.log_group}, streams {job_name}/*"

    def _warn_unreadable(self, job_name: str, group: str, err: ClientError) -> None:
        code = error_code(err)
        if code == "ResourceNotFoundException":
            self.log.warning(
                "No logs for job %s: log group %s does not exist in this account and region (SageMaker "
                "creates it when a job's container first writes). The job's outcome is unaffected.",
                job_name,
                group,
            )
        elif code in ("AccessDeniedException", "AccessDenied", "UnauthorizedOperation"):
            self.log.warning(
                "Cannot read the logs of job %s: %s. Grant %s on arn:aws:logs:<region>:<account>:log-group:%s:* "
                "to this connection's identity (see docs/iam-policy.json), or set print_log=False. "
                "The job's outcome is unaffected.",
                job_name,
                error_message(err) or code,
                _LOG_ACTIONS,
                group,
            )
        else:
            self.log.warning(
                "Could not read the logs of job %s from %s (%s: %s); the job's outcome is unaffected",
                job_name,
                group,
                code,
                error_message(err),
            )
