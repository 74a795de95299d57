"""SageMaker calls for jobs submitted with instance preferences: submit once, describe, stop, classify."""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from airflow_provider_sm_prefs.exceptions import JobSubmissionError, QuotaExceededError
from airflow_provider_sm_prefs.preferences import InstancePreferenceList, JobKind

#: Error codes SageMaker (or any AWS JSON service) uses for "slow down" and "try again".
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "InternalFailure",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
NOT_FOUND_MESSAGE = "Requested resource not found"
_QUOTA_TYPE = re.compile(r"'(ml\.[a-z0-9.\-]+) for (?:training|processing) job usage'")
MAX_JOB_NAME = 63
_MAX_RESUBMIT_SUFFIX = "-r999"
STOP_ATTEMPTS = 12
_NAME_BAD_CHARS = re.compile(r"[^a-zA-Z0-9-]+")

_OPERATIONS = {
    JobKind.TRAINING: {
        "create": "create_training_job",
        "describe": "describe_training_job",
        "stop": "stop_training_job",
        "name": "TrainingJobName",
        "arn": "TrainingJobArn",
    },
    JobKind.PROCESSING: {
        "create": "create_processing_job",
        "describe": "describe_processing_job",
        "stop": "stop_processing_job",
        "name": "ProcessingJobName",
        "arn": "ProcessingJobArn",
    },
}


def is_transient(error: BaseException) -> bool:
    """Throttling, 5xx and dropped connections: retry them, never fail the task for them."""
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return code in TRANSIENT_CODES or status >= 500 or status == 429
    if isinstance(
        error, (BotoConnectionError, HTTPClientError, asyncio.TimeoutError, ConnectionError, OSError)
    ):
        return True
    # aiohttp's errors, without importing aiohttp here.
    return type(error).__module__.startswith("aiohttp")


def is_not_found(error: BaseException) -> bool:
    return (
        isinstance(error, ClientError)
        and error.response.get("Error", {}).get("Code") == "ValidationException"
        and NOT_FOUND_MESSAGE in error.response.get("Error", {}).get("Message", "")
    )


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", ""))


def backoff_delay(attempt: int, base: float = 1.0, cap: float = 60.0) -> float:
    """Full-jitter exponential backoff (AWS Architecture Blog's recommendation)."""
    return random.uniform(0, min(cap, base * (2 ** min(attempt, 16))))


def service_now(response: Mapping[str, Any]) -> datetime:
    """The service's clock, from the response's ``Date`` header; the local clock if absent.

    Deadlines are computed on the service clock so that a skewed worker clock (or the offline
    SageMaker's accelerated clock) cannot move them.
    """
    headers = (response.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
    date = headers.get("date")
    if date:
        try:
            return parsedate_to_datetime(date).astimezone(UTC)
        except (TypeError, ValueError):
            pass
    return datetime.now(UTC)


def sanitize_job_name(name: str, suffix: str = "", max_length: int = MAX_JOB_NAME) -> str:
    """A valid SageMaker job name (``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``) keeping ``suffix`` intact."""
    base = _NAME_BAD_CHARS.sub("-", name).strip("-")
    base = re.sub(r"-{2,}", "-", base) or "job"
    base = base[: max_length - len(suffix)].rstrip("-")
    return f"{base}{suffix}"


def derive_job_name(dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> str:
    """The job name for a task instance whose config gives none: readable, unique per run, stable per try.

    ``<dag>-<task>[-<map index>]-<10 hex digits>``: the digits hash DAG, task, map index and run id
    together, so two runs (or two DAGs whose readable part is cut short) never share a name, while every
    try of one task instance computes the same one (submit-once reattaches by name). The readable part
    is cut to leave room for a resubmission suffix (``-r2`` ... ``-r999``) within the 63-character limit.
    """
    digest = hashlib.sha256(f"{dag_id}\x00{task_id}\x00{map_index}\x00{run_id}".encode()).hexdigest()[:10]
    readable = f"{dag_id}-{task_id}" + (f"-{map_index}" if map_index >= 0 else "")
    return sanitize_job_name(
        readable, suffix=f"-{digest}", max_length=MAX_JOB_NAME - len(_MAX_RESUBMIT_SUFFIX)
    )


class SageMakerPreferenceHook(SageMakerHook):
    """The amazon provider's SageMaker hook plus what instance preference lists need.

    :param aws_conn_id: Airflow connection of type ``aws`` (its extra may set ``endpoint_url``).
    :param region_name: AWS region; defaults to the connection's.
    :param verify: TLS verification, as for every amazon provider hook.
    :param config: botocore config dict or object.
    """

    hook_name = "Amazon SageMaker (instance preferences)"

    @staticmethod
    def operation(kind: JobKind, what: str) -> str:
        return _OPERATIONS[kind][what]

    @staticmethod
    def name_of(kind: JobKind, request: Mapping[str, Any]) -> str:
        return str(request[_OPERATIONS[kind]["name"]])

    # -- sync ----------------------------------------------------------------------------------------
    def create_job(
        self, kind: JobKind, request: dict[str, Any], preferences: InstancePreferenceList
    ) -> dict[str, Any]:
        """Call Create*, retrying transient errors; translate rejections into domain errors.

        ``ResourceInUse`` is re-raised untouched: the caller decides whether the existing job is its own.
        """
        job_name = self.name_of(kind, request)
        create = getattr(self.conn, self.operation(kind, "create"))
        attempt = 0
        while True:
            try:
                return dict(create(**request))
            except ClientError as err:
                code = error_code(err)
                if code == "ResourceInUse":
                    raise
                if code == "ResourceLimitExceeded":
                    raise self.quota_error(job_name, err, preferences) from err
                if is_transient(err) and attempt < 8:
                    attempt += 1
                    delay = backoff_delay(attempt)
                    self.log.warning("Create %s: %s; retrying in %.1fs", job_name, code, delay)
                    time.sleep(delay)
                    continue
                raise JobSubmissionError(job_name, code or "Rejected", error_message(err)) from err

    @staticmethod
    def quota_error(
        job_name: str, err: ClientError, preferences: InstancePreferenceList
    ) -> QuotaExceededError:
        message = error_message(err)
        match = _QUOTA_TYPE.search(message)
        instance_type = match.group(1) if match else None
        where = ""
        if instance_type and instance_type in preferences.instance_types:
            index = preferences.rank_of(instance_type) - 1
            where = (
                f"instance_preferences[{index}] ({instance_type}) lacks quota; SageMaker checks every entry "
                f"at its count, so raise that quota or drop the entry. "
            )
        return QuotaExceededError(job_name, where + "AWS said: " + message, instance_type)

    def describe_job(self, kind: JobKind, job_name: str) -> dict[str, Any] | None:
        """Describe* with transient retries; None when the job does not exist."""
        describe = getattr(self.conn, self.operation(kind, "describe"))
        attempt = 0
        while True:
            try:
                return dict(describe(**{_OPERATIONS[kind]["name"]: job_name}))
            except ClientError as err:
                if is_not_found(err):
                    return None
                if not is_transient(err) or attempt >= 20:
                    raise
            except Exception as err:
                if not is_transient(err) or attempt >= 20:
                    raise
            attempt += 1
            time.sleep(backoff_delay(attempt, cap=30))

    def stop_job(self, kind: JobKind, job_name: str) -> bool:
        """Stop the job; True if a stop was requested, False if it had already ended.

        :raises Exception: the last transient error when every attempt failed — never a silent
            False that would leave the job running unattended.
        """
        stop = getattr(self.conn, self.operation(kind, "stop"))
        for attempt in range(STOP_ATTEMPTS):
            try:
                stop(**{_OPERATIONS[kind]["name"]: job_name})
                self.log.info("Requested stop of SageMaker %s job %s", kind.value, job_name)
                return True
            except Exception as err:
                if self._stop_not_needed(job_name, err, last=attempt == STOP_ATTEMPTS - 1):
                    return False
            time.sleep(backoff_delay(attempt + 1, cap=10))
        raise AssertionError("unreachable")  # pragma: no cover

    def _stop_not_needed(self, job_name: str, err: Exception, last: bool) -> bool:
        """True when the job had already ended; re-raises what must not be retried (or the last try)."""
        if isinstance(err, ClientError) and error_code(err) == "ValidationException":
            # Already Completed/Failed/Stopped (or unknown): nothing left running.
            self.log.info("Stop of %s not needed: %s", job_name, error_message(err))
            return True
        if last or not is_transient(err):
            raise err
        return False

    # -- async ---------------------------------------------------------------------------------------
    @staticmethod
    async def describe_job_async(client: Any, kind: JobKind, job_name: str) -> dict[str, Any] | None:
        """One Describe* call on an aiobotocore client; None when the job does not exist."""
        describe = getattr(client, _OPERATIONS[kind]["describe"])
        try:
            return dict(await describe(**{_OPERATIONS[kind]["name"]: job_name}))
        except ClientError as err:
            if is_not_found(err):
                return None
            raise

    async def stop_job_async(self, client: Any, kind: JobKind, job_name: str) -> bool:
        """Async twin of :meth:`stop_job`."""
        stop = getattr(client, self.operation(kind, "stop"))
        for attempt in range(STOP_ATTEMPTS):
            try:
                await stop(**{_OPERATIONS[kind]["name"]: job_name})
                self.log.info("Requested stop of SageMaker %s job %s", kind.value, job_name)
                return True
            except Exception as err:
                if self._stop_not_needed(job_name, err, last=attempt == STOP_ATTEMPTS - 1):
                    return False
            await asyncio.sleep(backoff_delay(attempt + 1, cap=10))
        raise AssertionError("unreachable")  # pragma: no cover
