"""SageMaker calls for jobs submitted with instance preferences: submit once, describe, stop, classify.

The hook makes the calls about one job: Create, Describe and Stop for the operators, the sensor and the
failure callback, and the trigger's Describe and Stop (async, on a client the trigger passes in). The
guardrails' look-ups about the account (Service Quotas, Pricing, DescribeTrainingPlan) are
:class:`~.preflight.PreflightLookups`, on the hook's connection (:attr:`SageMakerPreferenceHook.lookups`).
Callers build the hook from their :class:`AwsSettings` and never spell operation or field names
themselves (those come from :mod:`airflow_provider_sm_prefs.domain.kinds`).

Three places call AWS without it, each for calls that are about no single job:

* the shared List loop (:mod:`airflow_provider_sm_prefs.triggers.watcher`) pages ListTrainingJobs or
  ListProcessingJobs on the client the triggers of a process share (:mod:`.pool`). A pass serves every
  waiting trigger of the process and outlives any one of them; its windows and paging are the loop's
  own logic. The operation and field names still come from :mod:`~airflow_provider_sm_prefs.domain.kinds`;
* event mode's consumer (:mod:`airflow_provider_sm_prefs.triggers.eventbridge_queue`) receives, deletes and
  sends SQS messages on an SQS client of the same connection (opened in
  :mod:`airflow_provider_sm_prefs.triggers.eventbridge_mode`): another service, one long-poll per process;
* :class:`~.logs.SageMakerJobLogsHook` reads a job's CloudWatch log streams (another service, its own
  hook).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from botocore.exceptions import ClientError

from airflow_provider_sm_prefs.domain.exceptions import JobSubmissionError, QuotaExceededError
from airflow_provider_sm_prefs.domain.guardrails import Facts
from airflow_provider_sm_prefs.domain.identity import OwnerCheck, OwnerClaim, Ownership, check_owner
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.hooks.base import ProviderAwsHook
from airflow_provider_sm_prefs.hooks.clock import service_now
from airflow_provider_sm_prefs.hooks.preflight import PreflightLookups
from airflow_provider_sm_prefs.hooks.retry import (
    error_code,
    error_message,
    is_not_found,
    is_transient,
    retry_async,
    retry_sync,
)

__all__ = [
    "AwsSettings",
    "SageMakerPreferenceHook",
    "derive_job_name",
    "error_code",
    "is_not_found",
    "is_transient",
    "sanitize_job_name",
    "service_now",
]

_QUOTA_TYPE = re.compile(r"'(ml\.[a-z0-9.\-]+) for (?:training|processing) job usage'")
MAX_JOB_NAME = 63
_MAX_RESUBMIT_SUFFIX = "-r999"
#: ListTags' page size.
_TAGS_PAGE = 100
_NAME_BAD_CHARS = re.compile(r"[^a-zA-Z0-9-]+")


def sanitize_job_name(name: str, suffix: str = "", max_length: int = MAX_JOB_NAME) -> str:
    """A valid SageMaker job name (``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``) keeping ``suffix`` intact."""
    base = _NAME_BAD_CHARS.sub("-", name).strip("-")
    base = re.sub(r"-{2,}", "-", base) or "job"
    base = base[: max_length - len(suffix)].rstrip("-")
    return f"{base}{suffix}"


def derive_job_name(
    dag_id: str, task_id: str, run_id: str, map_index: int = -1, deployment_id: str | None = None
) -> str:
    """The job name for a task instance whose config gives none: readable, unique per run, stable per try.

    ``<dag>-<task>[-<map index>]-<10 hex digits>``: the digits hash DAG, task, map index, run id and
    deployment together, so two runs, two DAGs whose readable part is cut short, or the same DAG run in
    two deployments of one account never share a name, while every try of one task instance computes
    the same one (submit-once reattaches by name). The readable part is cut to leave room for a
    resubmission suffix (``-r2`` ... ``-r999``) within the 63-character limit.
    """
    owner = f"{dag_id}\x00{task_id}\x00{map_index}\x00{run_id}"
    if deployment_id:
        owner += f"\x00{deployment_id}"
    digest = hashlib.sha256(owner.encode()).hexdigest()[:10]
    readable = f"{dag_id}-{task_id}" + (f"-{map_index}" if map_index >= 0 else "")
    return sanitize_job_name(
        readable, suffix=f"-{digest}", max_length=MAX_JOB_NAME - len(_MAX_RESUBMIT_SUFFIX)
    )


@dataclass(frozen=True)
class AwsSettings:
    """How a task reaches SageMaker: the four settings every operator, sensor and trigger carries.

    The one place a hook is built from them (:meth:`hook`), and the key under which the triggers of a
    process share one async client (:meth:`pool_key`).
    """

    aws_conn_id: str | None = "aws_default"
    region_name: str | None = None
    verify: bool | str | None = None
    botocore_config: dict[str, Any] | None = None

    @classmethod
    def of(cls, holder: Any) -> AwsSettings:
        """The settings of an operator, sensor or trigger (attributes of the same names)."""
        return cls(
            aws_conn_id=getattr(holder, "aws_conn_id", "aws_default"),
            region_name=getattr(holder, "region_name", None),
            verify=getattr(holder, "verify", None),
            botocore_config=getattr(holder, "botocore_config", None),
        )

    def hook_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of any amazon provider hook built from these settings."""
        return {
            "aws_conn_id": self.aws_conn_id,
            "region_name": self.region_name,
            "verify": self.verify,
            "config": self.botocore_config,
        }

    def hook(self) -> SageMakerPreferenceHook:
        return SageMakerPreferenceHook(**self.hook_kwargs())

    def pool_key(self) -> tuple[Any, ...]:
        """What makes two waits' clients interchangeable, on the running event loop."""
        return (
            id(asyncio.get_running_loop()),
            self.aws_conn_id,
            self.region_name,
            str(self.verify),
            json.dumps(self.botocore_config, sort_keys=True, default=str) if self.botocore_config else None,
        )


class SageMakerPreferenceHook(ProviderAwsHook):
    """SageMaker calls for instance preference lists, on the amazon provider's ``AwsBaseHook``.

    The arguments are ``AwsBaseHook``'s, passed through (the client type is always ``sagemaker``):

    - ``aws_conn_id``: Airflow connection of type ``aws`` (its extra may set ``endpoint_url``);
    - ``region_name``: AWS region; defaults to the connection's;
    - ``verify``: TLS verification, as for every amazon provider hook;
    - ``config``: botocore config dict or object.
    """

    hook_name = "Amazon SageMaker (instance preferences)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["client_type"] = "sagemaker"
        super().__init__(*args, **kwargs)

    @cached_property
    def lookups(self) -> PreflightLookups:
        """The guardrails' look-ups (quotas, training plans, prices) on this hook's connection."""
        return PreflightLookups(self)

    def preflight_facts(
        self, kind: JobKind, entries: Iterable[tuple[str, str | None]], **options: Any
    ) -> Facts:
        """:meth:`.PreflightLookups.preflight_facts` of :attr:`lookups` (``checks``, ``prices`` and
        ``known_prices`` as there): the one look-up the operators' guardrails ask the hook for."""
        return self.lookups.preflight_facts(kind, entries, **options)

    # -- sync ----------------------------------------------------------------------------------------
    def create_job(
        self, kind: JobKind, request: dict[str, Any], preferences: InstancePreferenceList
    ) -> dict[str, Any]:
        """Call Create*, retrying transient errors; translate rejections into domain errors.

        ``ResourceInUse`` is re-raised untouched: the caller decides whether the existing job is its own.
        """
        spec = kind.spec
        job_name = str(request[spec.name_field])
        create = getattr(self.conn, spec.create)
        try:
            return dict(retry_sync(lambda: create(**request), f"Create {job_name}"))
        except ClientError as err:
            code = error_code(err)
            if code == "ResourceInUse":
                raise
            if code == "ResourceLimitExceeded":
                raise self.quota_error(job_name, err, preferences) from err
            raise JobSubmissionError(job_name, code or "Rejected", error_message(err)) from err

    @staticmethod
    def quota_error(
        job_name: str, err: ClientError, preferences: InstancePreferenceList
    ) -> QuotaExceededError:
        message = error_message(err)
        match = _QUOTA_TYPE.search(message)
        instance_type = match.group(1) if match else None
        where = ""
        types = preferences.instance_types
        if instance_type and instance_type in types:
            index = types.index(instance_type)
            where = (
                f"instance_preferences[{index}] ({instance_type}) lacks quota; SageMaker checks every entry "
                f"at its count, so raise that quota or drop the entry. "
            )
        return QuotaExceededError(job_name, where + "AWS said: " + message, instance_type)

    def describe_job(self, kind: JobKind, job_name: str) -> dict[str, Any] | None:
        """Describe* with transient retries; None when the job does not exist."""
        spec = kind.spec
        describe = getattr(self.conn, spec.describe)
        try:
            return dict(retry_sync(lambda: describe(**{spec.name_field: job_name}), f"Describe {job_name}"))
        except ClientError as err:
            if is_not_found(err):
                return None
            raise

    def job_tags(self, arn: str) -> dict[str, str] | None:
        """Every tag of ``arn`` (ListTags, every page, transient retries); None when they cannot be read."""
        tags: dict[str, str] = {}
        token: str | None = None
        try:
            while True:
                extra = {"NextToken": token} if token else {}
                page = retry_sync(
                    functools.partial(self.conn.list_tags, ResourceArn=arn, MaxResults=_TAGS_PAGE, **extra),
                    f"ListTags {arn}",
                )
                tags.update({t["Key"]: t.get("Value", "") for t in page.get("Tags") or []})
                token = page.get("NextToken")
                if not token:
                    return tags
        except ClientError as err:
            self.log.warning("Could not read the tags of %s: %s", arn, error_message(err))
            return None

    def check_owner(
        self, kind: JobKind, job_name: str, claim: OwnerClaim, describe: dict[str, Any] | None = None
    ) -> OwnerCheck:
        """Whether job ``job_name`` is ``claim``'s, from its tags read now (see
        :func:`~airflow_provider_sm_prefs.domain.identity.check_owner`)."""
        if not claim.tags:
            return check_owner(job_name, None, claim)
        describe = describe if describe is not None else self.describe_job(kind, job_name)
        arn = (describe or {}).get(kind.spec.arn_field)
        if not arn:
            return OwnerCheck(Ownership.UNPROVEN, job_name, "no such job to read tags of", "unknown")
        return check_owner(job_name, self.job_tags(str(arn)), claim)

    def stop_job(
        self, kind: JobKind, job_name: str, claim: OwnerClaim, describe: dict[str, Any] | None = None
    ) -> bool:
        """Stop the job if ``claim`` proves it ours; True if a stop was requested, False if it had already
        ended. ``describe``: a Describe of the job just made (its ARN is read from it).

        :raises NotOursError: the job's tags, read right before the stop, do not prove it ``claim``'s:
            nothing is stopped.
        :raises Exception: the last transient error when every attempt failed — never a silent
            False that would leave the job running unattended.
        """
        check = self.check_owner(kind, job_name, claim, describe)
        if not check.ours:
            raise check.error("stop")
        spec = kind.spec
        stop = getattr(self.conn, spec.stop)
        try:
            retry_sync(lambda: stop(**{spec.name_field: job_name}), f"Stop {job_name}")
        except ClientError as err:
            return self._stop_not_needed(job_name, err)
        self.log.info("Requested stop of SageMaker %s job %s", kind.value, job_name)
        return True

    def _stop_not_needed(self, job_name: str, err: ClientError) -> bool:
        """False when the job had already ended (Completed/Failed/Stopped or unknown); else re-raise."""
        if error_code(err) != "ValidationException":
            raise err
        self.log.info("Stop of %s not needed: %s", job_name, error_message(err))
        return False

    # -- async ---------------------------------------------------------------------------------------
    @staticmethod
    async def describe_job_async(client: Any, kind: JobKind, job_name: str) -> dict[str, Any] | None:
        """One Describe* call on an aiobotocore client; None when the job does not exist."""
        spec = kind.spec
        try:
            return dict(await getattr(client, spec.describe)(**{spec.name_field: job_name}))
        except ClientError as err:
            if is_not_found(err):
                return None
            raise

    @staticmethod
    async def job_tags_async(client: Any, arn: str) -> dict[str, str] | None:
        """Async twin of :meth:`job_tags`."""
        tags: dict[str, str] = {}
        token: str | None = None
        try:
            while True:
                extra = {"NextToken": token} if token else {}
                page = await retry_async(
                    functools.partial(client.list_tags, ResourceArn=arn, MaxResults=_TAGS_PAGE, **extra),
                    f"ListTags {arn}",
                )
                tags.update({t["Key"]: t.get("Value", "") for t in page.get("Tags") or []})
                token = page.get("NextToken")
                if not token:
                    return tags
        except ClientError:
            return None

    async def check_owner_async(
        self, client: Any, kind: JobKind, job_name: str, claim: OwnerClaim
    ) -> OwnerCheck:
        """Async twin of :meth:`check_owner`."""
        if not claim.tags:
            return check_owner(job_name, None, claim)
        describe = await retry_async(
            lambda: self.describe_job_async(client, kind, job_name), f"Describe {job_name}"
        )
        arn = (describe or {}).get(kind.spec.arn_field)
        if not arn:
            return OwnerCheck(Ownership.UNPROVEN, job_name, "no such job to read tags of", "unknown")
        return check_owner(job_name, await self.job_tags_async(client, str(arn)), claim)

    async def stop_job_async(self, client: Any, kind: JobKind, job_name: str, claim: OwnerClaim) -> bool:
        """Async twin of :meth:`stop_job`."""
        check = await self.check_owner_async(client, kind, job_name, claim)
        if not check.ours:
            raise check.error("stop")
        spec = kind.spec
        stop = getattr(client, spec.stop)
        try:
            await retry_async(lambda: stop(**{spec.name_field: job_name}), f"Stop {job_name}")
        except ClientError as err:
            return self._stop_not_needed(job_name, err)
        self.log.info("Requested stop of SageMaker %s job %s", kind.value, job_name)
        return True
