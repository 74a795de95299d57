"""Everything behind the HTTP layer of the offline SageMaker, under one lock: engine, API, faults, stats,
and the EventBridge events of the jobs' state changes (:mod:`.eventbridge`).

:class:`EmulatorService` answers one emulated SageMaker call as a :class:`~.responses.Response` (faults
first, so a faulted call has no side effects; a response latency last, so the call's effect exists
before its answer leaves) and carries the admin operations, reachable both as methods (in-process) and
through :meth:`EmulatorService.admin` (the HTTP routes of :mod:`.admin`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from offline_sagemaker.admin import dispatch
from offline_sagemaker.eventbridge import EventPublisher, put_on_default_bus
from offline_sagemaker.exceptions import ApiError, SerializationError
from offline_sagemaker.faults import Fault, FaultInjector
from offline_sagemaker.models import Job, JobKind
from offline_sagemaker.moto_world import (
    EventQueue,
    forget_event_queue,
    keep_event_queue,
    kept_event_queues,
)
from offline_sagemaker.moto_world import reset as reset_moto
from offline_sagemaker.operations import JOB_NAME_PARAM, access_key_id
from offline_sagemaker.regions import Regions, region_of_arn, signed_region
from offline_sagemaker.responses import Response, dropped, error_response, json_response
from offline_sagemaker.scenario import ScenarioFiles, load_scenario
from offline_sagemaker.scenario_types import Faults, Scenario, ScenarioSource
from offline_sagemaker.stats import Stats
from offline_sagemaker.sts import CredentialStore, refusal

__all__ = ["EmulatorService"]


class EmulatorService:
    """Everything behind the HTTP layer: engine, API, faults, statistics and admin operations.

    Thread-safe: one lock serialises the world. Admin operations are reachable both as methods (in-process)
    and through :meth:`admin` (the HTTP routes and :class:`RemoteSageMaker` use that), so both paths run
    the same code.

    :param scenario: a builtin scenario name, a path, a dict or a :class:`Scenario`.
    :param scenario_dirs: directories whose scenario files the admin route may load (besides the builtins
        and ``scenario`` itself when it is a file); see :class:`~.scenario.ScenarioFiles`.
    :param real_clock: monotonic real seconds, injectable for tests.
    :param wall_clock: real epoch seconds, injectable for tests.
    :param publish_events: record the jobs' EventBridge events for :meth:`pump_events` to deliver (the
        server turns it on and runs the pump; without a pump nobody would take them).

    :attr:`resets_moto` (set by the WSGI app serving moto behind this service) makes :meth:`reset` and
    :meth:`load_scenario` clear moto's state too (see :mod:`.moto_world`).
    """

    def __init__(
        self,
        scenario: ScenarioSource = "default",
        *,
        scenario_dirs: Iterable[str | os.PathLike[str]] = (),
        real_clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        publish_events: bool = False,
    ) -> None:
        #: What ``POST /_emulator/scenario`` may read.
        self.scenario_files = ScenarioFiles.allowing(scenario_dirs, start=scenario)
        self.lock = threading.RLock()
        # Held by the one delivering (outside ``lock``), so events leave in the order they were taken.
        self._delivery_lock = threading.Lock()
        loaded = load_scenario(scenario)
        #: One world per region (see :mod:`.regions`); :attr:`engine` and :attr:`api` are the home one's.
        self.regions = Regions(loaded, real_clock, wall_clock)
        self.engine = self.regions.home
        self.api = self.regions.home_api
        self._injector = FaultInjector(loaded)
        self._stats = Stats()
        self._wall_clock = wall_clock
        #: STS session credentials issued, revoked roles (see :mod:`.sts`).
        self.credentials = CredentialStore()
        self.events = EventPublisher(loaded, self._describe, real_clock=real_clock)
        #: Whether a reset clears moto's backends of this process too (the app that serves moto sets it).
        self.resets_moto = False
        if publish_events:
            self.regions.observe(self.events.record)

    @property
    def scenario(self) -> Scenario:
        """The scenario in force."""
        return self.engine.scenario

    @property
    def faults(self) -> Faults:
        """The fault rates in force."""
        return self._injector.faults

    @property
    def rate_limits(self) -> dict[str, float]:
        """The rate limits in force (calls per real second per operation)."""
        return self._injector.rate_limits

    # ------------------------------------------------------------------------------- SageMaker ops

    def handle_sagemaker(self, operation: str, body: bytes, authorization: str | None = None) -> Response:
        """Answer one emulated SageMaker call (faults first, so a faulted call has no side effects).

        A response latency of ``operation`` holds the answer after the call ran (accepted or rejected),
        outside the lock, counted in :meth:`stats` under ``in_flight`` meanwhile.

        :param authorization: the request's ``Authorization`` header; the region it was signed for picks
            the world that answers (see :mod:`.regions`), the access key id it names is counted in
            :meth:`stats`; the signature is neither checked nor stored.
        """
        params = _json_params(body)
        with self.lock:
            self._stats.called(operation, _job_name(operation, params), access_key_id(authorization))
            fault = self._injector.draw(operation)
            if fault is not None:
                self._stats.faulted(operation, fault.counter)
            delay = self._injector.latency_seconds
            date = self.engine.now()
        if delay > 0:
            time.sleep(delay)
        if fault is Fault.DROP:
            return dropped()
        if fault is not None:
            return error_response(fault.error(), date)
        if params is None:
            return error_response(SerializationError("Request body is not valid JSON"), date)
        result: dict[str, Any] = {}
        error: ApiError | None = None
        with self.lock:
            try:
                result = self.regions.world(signed_region(authorization))[1].call(operation, params)
            except ApiError as rejected:
                self._stats.rejected(operation, rejected.code)
                error = rejected
            date = self.engine.now()
            stats, hold = self._stats, self._injector.response_latency_seconds(operation)
            if hold > 0:
                stats.answer_held(operation)
        if hold > 0:
            self._hold_answer(stats, operation, hold)
        if error is not None:
            return error_response(error, date)
        return json_response(200, result, date)

    def _hold_answer(self, stats: Stats, operation: str, seconds: float) -> None:
        """Hold the answer of a call that took effect for ``seconds``, without the lock; ``stats`` (the
        counters of the world the call ran in, even if a reset replaced them since) counts it meanwhile."""
        try:
            time.sleep(seconds)
        finally:
            with self.lock:
                stats.answer_released(operation)

    # ---------------------------------------------------------------------------------------- STS

    def token_refusal(
        self, token: str | None, target: str | None, authorization: str | None
    ) -> Response | None:
        """The refusal of a request whose ``X-Amz-Security-Token`` is expired (on the emulated clock) or
        invalid, in the protocol of the service called (see :func:`.sts.refusal`); None if it may pass."""
        if not token:
            return None
        with self.lock:
            now = self.engine.now()
            kind = self.credentials.check(token, now)
        return None if kind is None else refusal(kind, target, authorization, now)

    def handle_sts(self, action: str, form: dict[str, str], token: str | None) -> tuple[int, str] | None:
        """``(HTTP status, XML)`` of an STS call the emulator answers, None for moto's (see :mod:`.sts`)."""
        with self.lock:
            return self.credentials.answer(
                action, form, token, self.engine.now(), self.engine.scenario.time_scale, self._wall_clock()
            )

    def set_credentials(
        self,
        revoked_roles: list[str] | None = None,
        reject_unknown_tokens: bool | None = None,
        skew_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Replace the roles AssumeRole refuses (``AccessDenied``), whether session tokens the emulator
        did not issue are refused, and how many emulated seconds before their reported ``Expiration``
        issued sessions expire; None keeps a setting. Returns the settings in force."""
        with self.lock:
            self.credentials.update(revoked_roles, reject_unknown_tokens, skew_seconds)
        return self.credential_settings()

    def credential_settings(self) -> dict[str, Any]:
        """The STS settings in force, and how many sessions were issued since the last reset."""
        with self.lock:
            return self.credentials.settings()

    # ------------------------------------------------------------------------------------- events

    def _describe(self, job: Job) -> dict[str, Any]:
        """The Describe response of ``job`` as it is now: the detail of its EventBridge events."""
        api = self.regions.world(region_of_arn(job.arn))[1]
        if job.kind is JobKind.TRAINING:
            return api.describe_training(job)
        return api.describe_processing(job)

    def pump_events(self) -> int:
        """One tick of the event pump: advance every region to now, then deliver the due events to the
        default bus of the scenario's account in each job's region (outside the lock); returns how many
        were delivered."""
        with self._delivery_lock:
            with self.lock:
                self.regions.sync()
                due = self.events.take_due()
            for envelope, epoch in due:
                put_on_default_bus(envelope, epoch, envelope["account"], envelope["region"])
        return len(due)

    # ----------------------------------------------------------------------------- admin (methods)

    def stats(self) -> dict[str, Any]:
        """Call counts: every call received, throttled, injected 5xx, dropped, rejected, per job, per access
        key, and the calls whose answer a response latency holds (``in_flight``); and the EventBridge
        event counters under ``events``."""
        with self.lock:
            return {**self._stats.snapshot(), "events": self.events.snapshot()}

    def jobs(self) -> list[dict[str, Any]]:
        """Admin views of all jobs: the scenario's region's in creation order, then each other region's."""
        with self.lock:
            self.regions.sync()
            return [job.view(self.engine.start_epoch) for job in self.regions.jobs()]

    def job(self, name: str, region: str | None = None) -> dict[str, Any]:
        """Admin view of one job (training first, then processing) in ``region`` (None: the scenario's
        region first, then the others); KeyError if unknown."""
        with self.lock:
            self.regions.sync()
            job = self.regions.find(name, region)
            if job is None:
                raise KeyError(name)
            return job.view(self.engine.start_epoch)

    def reset(self) -> None:
        """Forget jobs and counters, restart the clock, restore the scenario's faults and, if this service
        is served with moto (:attr:`resets_moto`), clear moto's state but the kept event queues."""
        self._reset(None)

    def load_scenario(self, source: ScenarioSource) -> Scenario:
        """Replace the scenario and reset the world (as :meth:`reset`)."""
        scenario = load_scenario(source)
        self._reset(scenario)
        return scenario

    def _reset(self, scenario: Scenario | None) -> None:
        """Reset to ``scenario`` (None: the one in force). No event is being delivered meanwhile: the pending
        ones go, and none lands on a bus of the world being dropped."""
        with self._delivery_lock, self.lock:
            self.regions.reset(scenario)
            scenario = self.engine.scenario
            self._injector = FaultInjector(scenario)
            self._stats = Stats()
            self.credentials = CredentialStore()
            self.events.restart(scenario)
            if self.resets_moto:
                reset_moto()

    def clock(self) -> dict[str, float]:
        """Emulated now, seconds since the world started, and the time scale."""
        with self.lock:
            now = self.regions.sync()
            return {
                "now": now,
                "elapsed": now - self.engine.start_epoch,
                "start_epoch": self.engine.start_epoch,
                "time_scale": self.engine.scenario.time_scale,
            }

    def advance(self, seconds: float) -> float:
        """Jump the emulated clock forward; returns the new emulated now."""
        with self.lock:
            return self.regions.advance(seconds)

    def set_faults(
        self,
        throttle_rate: float | None = None,
        error_rate: float | None = None,
        latency_ms: float | None = None,
        drop_rate: float | None = None,
        rate_limits: Mapping[str, float] | None = None,
        response_latency_ms: Mapping[str, float] | None = None,
    ) -> dict[str, Any]:
        """Change fault injection; arguments left as None keep their value. Returns the faults in force.

        ``rate_limits`` and ``response_latency_ms`` (``{operation: ms}``) replace the whole mapping
        (``{}`` clears it).
        """
        changes = {
            "throttle_rate": throttle_rate,
            "error_rate": error_rate,
            "latency_ms": latency_ms,
            "drop_rate": drop_rate,
        }
        with self.lock:
            self._injector.update(changes, rate_limits, response_latency_ms)
        return self.fault_settings()

    def fault_settings(self) -> dict[str, Any]:
        """The faults and rate limits in force."""
        with self.lock:
            return self._injector.settings()

    def set_events(
        self,
        delay_seconds: float | None = None,
        loss_rate: float | None = None,
        duplicate_rate: float | None = None,
        enabled: bool | None = None,
    ) -> dict[str, Any]:
        """Change how events reach EventBridge; None keeps a setting. Returns the settings in force."""
        changes = {
            "delay_seconds": delay_seconds,
            "loss_rate": loss_rate,
            "duplicate_rate": duplicate_rate,
            "enabled": enabled,
        }
        with self.lock:
            self.events.update(changes)
        return self.event_settings()

    def event_settings(self) -> dict[str, Any]:
        """The EventBridge event settings in force."""
        with self.lock:
            return self.events.settings.as_dict()

    def keep_event_queue(
        self, queue_arn: str, rule: str, event_pattern: str, target_id: str | None = None
    ) -> list[dict[str, str]]:
        """Put this event queue (an SQS queue, a rule of the default bus sending to it) back after every
        reset, empty; returns the event queues kept (in this process: see :mod:`.moto_world`)."""
        extra = {} if target_id is None else {"target_id": target_id}
        return keep_event_queue(EventQueue(queue_arn, rule, event_pattern, **extra))

    def forget_event_queue(self, rule: str) -> list[dict[str, str]]:
        """Stop putting back the event queues of the rule named ``rule``; returns the event queues kept."""
        return forget_event_queue(rule)

    def event_queues(self) -> list[dict[str, str]]:
        """The event queues a reset puts back."""
        return kept_event_queues()

    def stop_all_jobs(self) -> int:
        """Stop every non-terminal job in every region; returns how many were asked to stop."""
        with self.lock:
            now = self.regions.sync()
            return sum(engine.stop_all(now) for engine in self.regions.engines())

    def health(self) -> dict[str, Any]:
        """Liveness plus the scenario name and region."""
        scenario = self.scenario
        return {
            "ok": True,
            "scenario": scenario.name,
            "region": scenario.region,
            "account_id": scenario.account_id,
        }

    # -------------------------------------------------------------------------------- admin (HTTP)

    def admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Route an admin request (see :mod:`.admin`); returns ``(HTTP status, JSON payload)``."""
        return dispatch(self, method, path, body)


def _json_params(body: bytes) -> Any:
    """The request's JSON, or None if it is not JSON (an empty body is ``{}``)."""
    try:
        return json.loads(body or b"{}")
    except ValueError:
        return None


def _job_name(operation: str, params: Any) -> str | None:
    """The job a call names, for per-job counts."""
    name_key = JOB_NAME_PARAM.get(operation)
    if name_key and isinstance(params, dict) and isinstance(params.get(name_key), str):
        name: str = params[name_key]
        return name
    return None
