"""The control surface of an offline SageMaker, in-process or remote: clients, Airflow env and admin calls.

:class:`EmulatorControls` turns each method into one admin request (``/_emulator/...``, see
:mod:`.admin`); :class:`~.server.OfflineSageMaker` sends them to its service directly and
:class:`~.remote.RemoteSageMaker` over HTTP, so both behave the same.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from offline_sagemaker.admin import ADMIN_PREFIX
from offline_sagemaker.scenario import load_scenario
from offline_sagemaker.scenario_types import Scenario, ScenarioSource

__all__ = ["EmulatorControls"]

_FAKE_KEY = "testing"
_SESSION_LOCK = threading.Lock()
#: The queue's target id on the rule of :meth:`EmulatorControls.create_event_queue`.
_QUEUE_TARGET_ID = "sm-prefs-queue"


class EmulatorControls:
    """Admin methods shared by the in-process server and an attached remote one (via :meth:`_admin`).

    Subclasses provide :meth:`_admin` (one admin request: method, path, JSON body -> status, payload) and
    :attr:`endpoint_url`.
    """

    _region: str = "us-east-1"

    def _admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        raise NotImplementedError

    def _call(self, method: str, route: str, body: Any = None) -> Any:
        status, payload = self._admin(method, f"{ADMIN_PREFIX}/{route}", body)
        if status == 404 and route.startswith("jobs/"):
            raise KeyError(route[len("jobs/") :])
        if status >= 400:
            message = payload.get("error") if isinstance(payload, Mapping) else payload
            raise ValueError(str(message))
        return payload

    @property
    def endpoint_url(self) -> str:
        """``http://host:port`` of the running server."""
        raise NotImplementedError

    @property
    def region(self) -> str:
        """The scenario's region (``us-east-1`` unless the scenario says otherwise)."""
        return self._region

    def boto3_client(self, service_name: str = "sagemaker", **kwargs: Any) -> Any:
        """A boto3 client for ``service_name`` pointed at this endpoint with fake credentials."""
        import boto3
        from botocore.config import Config

        if service_name == "s3" and "config" not in kwargs:
            # moto answers buckets by path; virtual-host style would need DNS for bucket.127.0.0.1.
            kwargs["config"] = Config(s3={"addressing_style": "path"})
        # One session per handle: building a session reloads every service model, which costs far more
        # than the client. Sessions are not thread-safe, hence the lock.
        with _SESSION_LOCK:
            session = self.__dict__.get("_boto3_session")
            if session is None or session.region_name != self.region:
                session = boto3.session.Session(
                    aws_access_key_id=_FAKE_KEY, aws_secret_access_key=_FAKE_KEY, region_name=self.region
                )
                self.__dict__["_boto3_session"] = session
            return session.client(service_name, endpoint_url=self.endpoint_url, **kwargs)

    def create_event_queue(
        self,
        name: str = "sagemaker-job-events",
        job_name_prefix: str | None = None,
        region: str | None = None,
    ) -> str:
        """An SQS queue fed by an EventBridge rule on SageMaker's job state-change events; its URL.

        What the Airflow provider's docs/events.md sets up on AWS, here at this endpoint: the queue, a rule named ``name`` on
        ``source: aws.sagemaker`` and both job detail-types (narrowed to job names starting with
        ``job_name_prefix`` if given), and the queue as its target. Point ``[sm_prefs] event_queue_url``
        (or the connection extra ``sm_prefs_event_queue_url``) at the URL to run triggers in event mode.
        Unlike what else a caller creates at the endpoint, the queue, the rule and the target outlive a
        :meth:`reset` (the queue emptied, at the same URL) until :meth:`remove_event_queue`. ``region``
        (the scenario's by default) is the region whose jobs' events the queue receives.
        """
        where = {"region_name": region} if region else {}
        sqs, events = self.boto3_client("sqs", **where), self.boto3_client("events", **where)
        url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        pattern: dict[str, Any] = {
            "source": ["aws.sagemaker"],
            "detail-type": ["SageMaker Training Job State Change", "SageMaker Processing Job State Change"],
        }
        if job_name_prefix:
            prefix = [{"prefix": job_name_prefix}]
            pattern["detail"] = {"$or": [{"TrainingJobName": prefix}, {"ProcessingJobName": prefix}]}
        event_pattern = json.dumps(pattern)
        events.put_rule(Name=name, EventPattern=event_pattern, State="ENABLED")
        events.put_targets(Rule=name, Targets=[{"Id": _QUEUE_TARGET_ID, "Arn": arn}])
        self._call(
            "POST",
            "event-queues",
            {"queue_arn": arn, "rule": name, "event_pattern": event_pattern, "target_id": _QUEUE_TARGET_ID},
        )
        return url

    def remove_event_queue(self, name: str = "sagemaker-job-events", region: str | None = None) -> None:
        """Undo :meth:`create_event_queue` (of ``region``, the scenario's by default): the rule, its target
        and the queue, which resets no longer put back."""
        self._call("DELETE", "event-queues", {"rule": name})
        where = {"region_name": region} if region else {}
        sqs, events = self.boto3_client("sqs", **where), self.boto3_client("events", **where)
        with contextlib.suppress(Exception):
            events.remove_targets(Rule=name, Ids=[_QUEUE_TARGET_ID])
            events.delete_rule(Name=name)
        with contextlib.suppress(Exception):
            sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=name)["QueueUrl"])

    def airflow_env(self, conn_id: str = "aws_default") -> dict[str, str]:
        """Environment variables defining an Airflow AWS connection to this endpoint, plus fake AWS creds."""
        connection = {
            "conn_type": "aws",
            "login": _FAKE_KEY,
            "password": _FAKE_KEY,
            "extra": {"endpoint_url": self.endpoint_url, "region_name": self.region},
        }
        return {
            f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(connection),
            "AWS_ACCESS_KEY_ID": _FAKE_KEY,
            "AWS_SECRET_ACCESS_KEY": _FAKE_KEY,
            "AWS_DEFAULT_REGION": self.region,
        }

    def stats(self) -> dict[str, Any]:
        """Call counts (see :meth:`EmulatorService.stats`)."""
        result: dict[str, Any] = self._call("GET", "stats")
        return result

    def jobs(self) -> list[dict[str, Any]]:
        """Admin views of all jobs."""
        result: list[dict[str, Any]] = self._call("GET", "jobs")["jobs"]
        return result

    def job(self, name: str, region: str | None = None) -> dict[str, Any]:
        """Admin view of one job (the scenario's region first, then the others; or in ``region`` only);
        KeyError if unknown."""
        if region is not None:
            for view in self.jobs():
                if view["name"] == name and view["region"] == region:
                    return view
            raise KeyError(f"{name} in {region}")
        result: dict[str, Any] = self._call("GET", f"jobs/{name}")
        return result

    def load_scenario(self, scenario: ScenarioSource) -> dict[str, Any]:
        """Replace the scenario and reset the world (as :meth:`reset`); returns the scenario as a dict.

        A :class:`~pathlib.Path` is a file of this process's machine: it is read and validated here and
        sent as the scenario itself. A string is a builtin name or a path the server reads, which it does
        only under a directory it was started to allow (``--scenario-dir``).
        """
        if isinstance(scenario, Scenario):
            source: Any = scenario.as_dict()
        elif isinstance(scenario, Path):
            source = load_scenario(scenario).as_dict()
        else:
            source = scenario
        result: dict[str, Any] = self._call("POST", "scenario", {"scenario": source})
        self._region = str(result.get("region", self._region))
        return result

    def scenario_dict(self) -> dict[str, Any]:
        """The scenario in force, as a dict."""
        result: dict[str, Any] = self._call("GET", "scenario")
        return result

    def reset(self) -> None:
        """A fresh world, scenario unchanged: no jobs, clusters or counters, the emulated clock restarted,
        the scenario's faults and event settings, no STS sessions; and nothing a caller created in the
        services moto answers (S3 buckets, SQS queues, EventBridge rules, CloudWatch Logs groups of their
        own, IAM roles, ...), in any account or region, except the event queues of
        :meth:`create_event_queue` (emptied). moto is one per process: emulators served in one process
        share it, and a reset of one clears it for all."""
        self._call("POST", "reset")

    def now(self) -> float:
        """Emulated epoch seconds."""
        return float(self._call("GET", "clock")["now"])

    def clock(self) -> dict[str, float]:
        """Emulated now, elapsed emulated seconds and time scale."""
        result: dict[str, float] = self._call("GET", "clock")
        return result

    def advance(self, seconds: float) -> float:
        """Jump the emulated clock forward by ``seconds``; returns the new emulated now."""
        return float(self._call("POST", "clock", {"advance": seconds})["now"])

    def set_faults(
        self,
        throttle_rate: float | None = None,
        error_rate: float | None = None,
        latency_ms: float | None = None,
        drop_rate: float | None = None,
        rate_limits: Mapping[str, float] | None = None,
        response_latency_ms: Mapping[str, float] | None = None,
    ) -> dict[str, Any]:
        """Change fault injection for the emulated operations; None keeps a setting.

        ``rate_limits`` (``{operation: calls per second}``) and ``response_latency_ms`` (``{operation:
        milliseconds}`` an answer is held after the call took effect) replace the whole mapping; ``{}``
        clears it. Returns the faults in force.
        """
        body: dict[str, Any] = {
            key: value
            for key, value in {
                "throttle_rate": throttle_rate,
                "error_rate": error_rate,
                "latency_ms": latency_ms,
                "drop_rate": drop_rate,
                "rate_limits": dict(rate_limits) if rate_limits is not None else None,
                "response_latency_ms": dict(response_latency_ms) if response_latency_ms is not None else None,
            }.items()
            if value is not None
        }
        result: dict[str, Any] = self._call("POST", "faults", body)
        return result

    def clear_faults(self) -> dict[str, Any]:
        """Turn every injected fault, rate limit and response latency off."""
        return self.set_faults(
            throttle_rate=0, error_rate=0, latency_ms=0, drop_rate=0, rate_limits={}, response_latency_ms={}
        )

    def set_events(
        self,
        delay_seconds: float | None = None,
        loss_rate: float | None = None,
        duplicate_rate: float | None = None,
        enabled: bool | None = None,
    ) -> dict[str, Any]:
        """Change how job state-change events reach EventBridge (real seconds of delay, probabilities of
        loss and of duplication, on/off); None keeps a setting. Returns the settings in force."""
        body = {
            key: value
            for key, value in {
                "delay_seconds": delay_seconds,
                "loss_rate": loss_rate,
                "duplicate_rate": duplicate_rate,
                "enabled": enabled,
            }.items()
            if value is not None
        }
        result: dict[str, Any] = self._call("POST", "events", body)
        return result

    def event_settings(self) -> dict[str, Any]:
        """The EventBridge event settings in force."""
        result: dict[str, Any] = self._call("GET", "events")
        return result

    def set_credentials(
        self,
        revoked_roles: list[str] | None = None,
        reject_unknown_tokens: bool | None = None,
        skew_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Change the emulated STS: ``revoked_roles`` (role ARNs) replaces the roles that AssumeRole and
        AssumeRoleWithWebIdentity refuse with ``AccessDenied`` (``[]`` clears it; credentials already issued
        stay valid until they expire); ``reject_unknown_tokens`` refuses every session token the emulator
        did not issue (``InvalidClientTokenId``/``UnrecognizedClientException``); ``skew_seconds`` makes
        every issued session, those issued before too, expire that many emulated seconds before the
        ``Expiration`` reported for it (AWS's clock ahead of the host's: refused as expired while the
        client still takes it for fresh). None keeps a setting. Returns the settings in force. A reset
        clears them all and forgets the issued sessions.
        """
        body: dict[str, Any] = {}
        if revoked_roles is not None:
            # A bare string is passed as is, for the service to refuse it.
            body["revoked_roles"] = revoked_roles if isinstance(revoked_roles, str) else list(revoked_roles)
        if reject_unknown_tokens is not None:
            body["reject_unknown_tokens"] = reject_unknown_tokens
        if skew_seconds is not None:
            body["skew_seconds"] = skew_seconds
        result: dict[str, Any] = self._call("POST", "credentials", body)
        return result

    def revoke_role(self, role_arn: str) -> dict[str, Any]:
        """Make AssumeRole of ``role_arn`` fail with ``AccessDenied`` from now on (credentials that cannot be
        renewed); returns the settings in force."""
        revoked = self.credential_settings()["revoked_roles"]
        return self.set_credentials(revoked_roles=sorted({*revoked, role_arn}))

    def credential_settings(self) -> dict[str, Any]:
        """The emulated STS's settings: ``revoked_roles``, ``reject_unknown_tokens``, ``skew_seconds``,
        ``sessions`` issued, requests ``refused``."""
        result: dict[str, Any] = self._call("GET", "credentials")
        return result

    def stop_all_jobs(self) -> int:
        """Stop every non-terminal job; returns how many were asked to stop."""
        return int(self._call("POST", "stop-all-jobs")["stopped"])
