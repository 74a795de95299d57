"""The offline SageMaker over real HTTP: moto's server for every service, with eight SageMaker operations
answered by the emulator, injected faults, and admin routes under ``/_emulator/``.

Requests are routed in this order:

1. ``X-Amz-Target: SageMaker.<Op>`` for the eight emulated operations -> the emulator (fast path: no
   Flask, no moto routing);
2. paths under ``/_emulator/view`` -> human-readable job pages (:mod:`.view`), then the rest of
   ``/_emulator/`` -> admin routes (never faulted);
3. everything else (S3, CloudWatch Logs, the other SageMaker operations, ...) -> moto's dispatcher.

Every emulated SageMaker response carries a ``Date`` header in *emulated* time, because clients use the
service's clock to compute deadlines.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from airflow_provider_sm_prefs.testing import view
from airflow_provider_sm_prefs.testing.api import SageMakerApi
from airflow_provider_sm_prefs.testing.engine import Engine
from airflow_provider_sm_prefs.testing.exceptions import (
    ApiError,
    InternalFailure,
    SerializationError,
    ServiceUnavailable,
    ThrottlingError,
)
from airflow_provider_sm_prefs.testing.operations import JOB_NAME_PARAM, OPERATIONS
from airflow_provider_sm_prefs.testing.scenario import Faults, Scenario, ScenarioError, load_scenario
from airflow_provider_sm_prefs.testing.view import VIEW_PREFIX

__all__ = ["EmulatorApp", "EmulatorService", "OfflineSageMaker", "RemoteSageMaker"]

log = logging.getLogger(__name__)

ScenarioSource = str | Path | Mapping[str, Any] | Scenario

_ADMIN_PREFIX = "/_emulator"
_TARGET_PREFIX = "SageMaker."
_DATE_SET = "sm_prefs.date_set"
_JSON_CONTENT_TYPE = "application/x-amz-json-1.1"
_FAKE_KEY = "testing"
_SESSION_LOCK = threading.Lock()
#: HTTP status per error code (the engine's errors carry none); every other error is the client's (400).
_STATUS_BY_CODE = {"InternalFailure": 500, "ServiceUnavailable": 503}


@dataclass
class Response:
    """One HTTP answer from the service layer (``drop`` = close the connection without answering)."""

    status: int
    body: bytes
    headers: list[tuple[str, str]]
    drop: bool = False


class _TokenBucket:
    """Allows ``rate`` calls per real second with a burst of one second's worth."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.tokens = self.capacity
        self.stamp = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class EmulatorService:
    """Everything behind the HTTP layer: engine, API, faults, statistics and admin operations.

    Thread-safe: one lock serialises the world. Admin operations are reachable both as methods (in-process)
    and through :meth:`admin` (the HTTP routes and :class:`RemoteSageMaker` use that), so both paths run
    the same code.

    :param scenario: a builtin scenario name, a path, a dict or a :class:`Scenario`.
    :param real_clock: monotonic real seconds, injectable for tests.
    :param wall_clock: real epoch seconds, injectable for tests.
    """

    def __init__(
        self,
        scenario: ScenarioSource = "default",
        *,
        real_clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.lock = threading.RLock()
        loaded = load_scenario(scenario)
        self.engine = Engine(loaded, real_clock=real_clock, wall_clock=wall_clock)
        self.api = SageMakerApi(self.engine)
        self._apply_scenario_faults(loaded)
        self._reset_stats()

    # ------------------------------------------------------------------------------ state helpers

    @property
    def scenario(self) -> Scenario:
        """The scenario in force."""
        return self.engine.scenario

    def _apply_scenario_faults(self, scenario: Scenario) -> None:
        self.faults: Faults = scenario.faults
        self.rate_limits: dict[str, float] = dict(scenario.rate_limits)
        self._buckets = {op: _TokenBucket(rate) for op, rate in self.rate_limits.items()}
        self._rng = random.Random(scenario.seed)

    def _reset_stats(self) -> None:
        self._operations: dict[str, int] = {}
        self._throttled: dict[str, int] = {}
        self._errors: dict[str, int] = {}
        self._dropped: dict[str, int] = {}
        self._rejected: dict[str, dict[str, int]] = {}
        self._per_job: dict[str, dict[str, int]] = {}

    @staticmethod
    def _bump(counter: dict[str, int], key: str) -> None:
        counter[key] = counter.get(key, 0) + 1

    # ------------------------------------------------------------------------------- SageMaker ops

    def handle_sagemaker(self, operation: str, body: bytes) -> Response:
        """Answer one emulated SageMaker call (faults first, so a faulted call has no side effects)."""
        params: Any
        try:
            params = json.loads(body or b"{}")
        except ValueError:
            params = None
        with self.lock:
            self._bump(self._operations, operation)
            name_key = JOB_NAME_PARAM.get(operation)
            if name_key and isinstance(params, dict) and isinstance(params.get(name_key), str):
                self._bump(self._per_job.setdefault(params[name_key], {}), operation)
            fault = self._draw_fault(operation)
            delay = self.faults.latency_ms / 1000.0
            date = self.engine.now()
        if delay > 0:
            time.sleep(delay)
        if fault == "drop":
            return Response(0, b"", [], drop=True)
        if fault == "throttle":
            return self.error_response(ThrottlingError(), date)
        if fault == "error500":
            return self.error_response(InternalFailure(), date)
        if fault == "error503":
            return self.error_response(ServiceUnavailable(), date)
        if params is None:
            return self.error_response(SerializationError("Request body is not valid JSON"), date)
        with self.lock:
            try:
                result = self.api.call(operation, params)
            except ApiError as error:
                self._rejected.setdefault(operation, {})
                self._bump(self._rejected[operation], error.code)
                return self.error_response(error, self.engine.now())
            date = self.engine.now()
        return self._json(200, result, date)

    def _draw_fault(self, operation: str) -> str | None:
        faults = self.faults
        rng = self._rng
        if faults.drop_rate and rng.random() < faults.drop_rate:
            self._bump(self._dropped, operation)
            return "drop"
        bucket = self._buckets.get(operation)
        if bucket is not None and not bucket.take():
            self._bump(self._throttled, operation)
            return "throttle"
        if faults.throttle_rate and rng.random() < faults.throttle_rate:
            self._bump(self._throttled, operation)
            return "throttle"
        if faults.error_rate and rng.random() < faults.error_rate:
            self._bump(self._errors, operation)
            return "error500" if rng.random() < 0.5 else "error503"
        return None

    def _headers(self, length: int, date: float) -> list[tuple[str, str]]:
        return [
            ("Content-Type", _JSON_CONTENT_TYPE),
            ("Content-Length", str(length)),
            ("x-amzn-RequestId", str(uuid.uuid4())),
            ("Date", email.utils.formatdate(date, usegmt=True)),
        ]

    def _json(self, status: int, payload: Any, date: float) -> Response:
        body = json.dumps(payload, separators=(",", ":")).encode()
        return Response(status, body, self._headers(len(body), date))

    def error_response(self, error: ApiError, date: float) -> Response:
        """The AWS JSON error form: ``__type`` + ``message`` and the ``x-amzn-ErrorType`` header."""
        status = _STATUS_BY_CODE.get(error.code, 400)
        response = self._json(status, {"__type": error.code, "message": error.message}, date)
        response.headers.append(("x-amzn-ErrorType", error.code))
        return response

    # ----------------------------------------------------------------------------- admin (methods)

    def stats(self) -> dict[str, Any]:
        """Call counts: every call received, throttled, injected 5xx, dropped, rejected, and per job."""
        with self.lock:
            return {
                "operations": dict(self._operations),
                "throttled": dict(self._throttled),
                "errors": dict(self._errors),
                "dropped": dict(self._dropped),
                "rejected": {op: dict(codes) for op, codes in self._rejected.items()},
                "jobs": {name: dict(ops) for name, ops in self._per_job.items()},
            }

    def jobs(self) -> list[dict[str, Any]]:
        """Admin views of all jobs in creation order."""
        with self.lock:
            self.engine.sync()
            return [job.view(self.engine.start_epoch) for job in self.engine.jobs()]

    def job(self, name: str) -> dict[str, Any]:
        """Admin view of one job (training first, then processing); KeyError if unknown."""
        with self.lock:
            self.engine.sync()
            job = self.engine.find(name)
            if job is None:
                raise KeyError(name)
            return job.view(self.engine.start_epoch)

    def reset(self) -> None:
        """Forget jobs and counters, restart the clock and restore the scenario's faults."""
        with self.lock:
            self.engine.reset()
            self._apply_scenario_faults(self.engine.scenario)
            self._reset_stats()

    def load_scenario(self, source: ScenarioSource) -> Scenario:
        """Replace the scenario and reset the world."""
        scenario = load_scenario(source)
        with self.lock:
            self.engine.reset(scenario)
            self._apply_scenario_faults(scenario)
            self._reset_stats()
        return scenario

    def clock(self) -> dict[str, float]:
        """Emulated now, seconds since the world started, and the time scale."""
        with self.lock:
            now = self.engine.sync()
            return {
                "now": now,
                "elapsed": now - self.engine.start_epoch,
                "start_epoch": self.engine.start_epoch,
                "time_scale": self.engine.scenario.time_scale,
            }

    def advance(self, seconds: float) -> float:
        """Jump the emulated clock forward; returns the new emulated now."""
        with self.lock:
            return self.engine.advance(seconds)

    def set_faults(
        self,
        throttle_rate: float | None = None,
        error_rate: float | None = None,
        latency_ms: float | None = None,
        drop_rate: float | None = None,
        rate_limits: Mapping[str, float] | None = None,
    ) -> dict[str, Any]:
        """Change fault injection; arguments left as None keep their value. Returns the faults in force."""
        changes = {
            "throttle_rate": throttle_rate,
            "error_rate": error_rate,
            "latency_ms": latency_ms,
            "drop_rate": drop_rate,
        }
        for key, value in changes.items():
            if value is None:
                continue
            limit = None if key == "latency_ms" else 1.0
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or value < 0
                or (limit and value > limit)
            ):
                raise ValueError(f"{key}: must be a number {'>= 0' if limit is None else 'between 0 and 1'}")
        if rate_limits is not None:
            for op, rate in rate_limits.items():
                if op not in OPERATIONS:
                    raise ValueError(
                        f"rate_limits.{op}: not an emulated operation ({', '.join(sorted(OPERATIONS))})"
                    )
                if isinstance(rate, bool) or not isinstance(rate, int | float) or rate <= 0:
                    raise ValueError(f"rate_limits.{op}: must be a positive number of calls per second")
        with self.lock:
            self.faults = replace(self.faults, **{k: float(v) for k, v in changes.items() if v is not None})
            if rate_limits is not None:
                self.rate_limits = {op: float(rate) for op, rate in rate_limits.items()}
                self._buckets = {op: _TokenBucket(rate) for op, rate in self.rate_limits.items()}
            return self.fault_settings()

    def fault_settings(self) -> dict[str, Any]:
        """The faults and rate limits in force."""
        with self.lock:
            return {**self.faults.as_dict(), "rate_limits": dict(self.rate_limits)}

    def stop_all_jobs(self) -> int:
        """Stop every non-terminal job; returns how many were asked to stop."""
        with self.lock:
            return self.engine.stop_all(self.engine.sync())

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
        """Route an admin request; returns ``(HTTP status, JSON payload)``."""
        route = path[len(_ADMIN_PREFIX) :].strip("/") if path.startswith(_ADMIN_PREFIX) else path.strip("/")
        payload = body if isinstance(body, Mapping) else {}
        try:
            if method == "GET" and route == "health":
                return 200, self.health()
            if method == "GET" and route == "stats":
                return 200, self.stats()
            if method == "GET" and route == "jobs":
                return 200, {"jobs": self.jobs()}
            if method == "GET" and route.startswith("jobs/"):
                name = route[len("jobs/") :]
                try:
                    return 200, self.job(name)
                except KeyError:
                    return 404, {"error": f"no job named {name!r}"}
            if method == "POST" and route == "stop-all-jobs":
                return 200, {"stopped": self.stop_all_jobs()}
            if method == "POST" and route == "reset":
                self.reset()
                return 200, {"ok": True}
            if method == "GET" and route == "scenario":
                return 200, self.scenario.as_dict()
            if method == "POST" and route == "scenario":
                source = payload.get("scenario", payload)
                if not source:
                    return 400, {"error": 'body must be {"scenario": <builtin name | path | mapping>}'}
                return 200, self.load_scenario(source).as_dict()
            if method == "GET" and route == "clock":
                return 200, self.clock()
            if method == "POST" and route == "clock":
                seconds = payload.get("advance", 0)
                if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
                    return 400, {"error": "advance: must be a number of seconds >= 0"}
                self.advance(float(seconds))
                return 200, self.clock()
            if method == "GET" and route == "faults":
                return 200, self.fault_settings()
            if method == "POST" and route == "faults":
                allowed = {"throttle_rate", "error_rate", "latency_ms", "drop_rate", "rate_limits"}
                unknown = sorted(set(payload) - allowed)
                if unknown:
                    return 400, {
                        "error": f"{unknown[0]}: unknown fault; allowed: {', '.join(sorted(allowed))}"
                    }
                return 200, self.set_faults(**payload)
        except (ScenarioError, ValueError) as exc:
            return 400, {"error": str(exc)}
        return 404, {"error": f"no admin route {method} {path}"}


class EmulatorApp:
    """The WSGI application: emulated SageMaker fast path, admin routes, then moto for the rest.

    :param service: the emulator service.
    :param fallback: the WSGI app for everything else (moto's dispatcher by default).
    """

    def __init__(
        self, service: EmulatorService, fallback: Callable[..., Iterable[bytes]] | None = None
    ) -> None:
        self.service = service
        if fallback is None:
            _require_moto()
            from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

            fallback = DomainDispatcherApplication(create_backend_app)
        self.fallback = fallback

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET")
        if target and target.startswith(_TARGET_PREFIX):
            operation = target[len(_TARGET_PREFIX) :]
            if operation in OPERATIONS:
                return self._sagemaker(operation, environ, start_response)
        path = environ.get("PATH_INFO", "")
        if path == VIEW_PREFIX or path.startswith(VIEW_PREFIX + "/"):
            return self._view(path, environ, start_response)
        if path == _ADMIN_PREFIX or path.startswith(_ADMIN_PREFIX + "/"):
            return self._admin(environ, start_response)
        return self.fallback(environ, start_response)

    @staticmethod
    def _read_body(environ: dict[str, Any]) -> bytes:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        return environ["wsgi.input"].read(length) if length > 0 else b""

    def _sagemaker(
        self, operation: str, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        response = self.service.handle_sagemaker(operation, self._read_body(environ))
        if response.drop:
            sock = environ.get("werkzeug.socket")
            if sock is not None:
                # Close without a byte of response: the client sees the connection drop, as on a reset.
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                raise ConnectionAbortedError("emulated connection drop")
            response = self.service.error_response(InternalFailure("emulated connection drop"), time.time())
        environ[_DATE_SET] = True
        start_response(f"{response.status} {_REASONS.get(response.status, 'OK')}", response.headers)
        return [response.body]

    def _admin(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        raw = self._read_body(environ)
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                status, payload = 400, {"error": "body must be JSON"}
                return self._send(status, payload, environ, start_response)
        status, payload = self.service.admin(
            environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", ""), body
        )
        return self._send(status, payload, environ, start_response)

    def _view(
        self, path: str, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """The human-readable pages (see :mod:`.view`)."""
        route = path[len(VIEW_PREFIX) :].strip("/")
        scenario = self.service.scenario.name
        status = 200
        if not route or route == "jobs":
            page = view.jobs_page(self.service.jobs(), scenario)
        elif route.startswith("jobs/"):
            name = urllib.parse.unquote(route[len("jobs/") :])
            try:
                page = view.job_page(self.service.job(name), scenario)
            except KeyError:
                status, page = 404, view.not_found_page(name)
        else:
            status, page = 404, view.not_found_page(route)
        return self._send(status, page, environ, start_response, content_type="text/html; charset=utf-8")

    def _send(
        self,
        status: int,
        payload: Any,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        content_type: str = "application/json",
    ) -> Iterable[bytes]:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        environ[_DATE_SET] = True
        headers = [
            ("Content-Type", content_type),
            ("Content-Length", str(len(data))),
            ("Date", email.utils.formatdate(self.service.engine.now(), usegmt=True)),
        ]
        start_response(f"{status} {_REASONS.get(status, 'OK')}", headers)
        return [data]


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _require_moto() -> None:
    try:
        import moto.moto_server.werkzeug_app  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError(
            "The offline SageMaker needs moto's server: pip install 'airflow-provider-sm-prefs[testing]' "
            f"(missing: {exc.name})"
        ) from exc


def _request_handler_class() -> type:
    _require_moto()
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    class _Handler(MotoRequestHandler):  # type: ignore[misc]
        """moto's handler, quiet, with a keep-alive fast path for the emulated SageMaker operations.

        werkzeug's development server closes the connection after every response and builds a full
        WSGI environ per request. For the eight emulated operations (the hot path: clients poll
        Describe* in loops) this handler answers directly, keeps the connection open and writes the
        response in one send. Everything else takes werkzeug's path unchanged.
        """

        # Idle keep-alive connections are closed after this many seconds.
        timeout = 120

        def setup(self) -> None:
            super().setup()
            # One write per response already; no Nagle delay waiting for the client's delayed ACK.
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connections = getattr(self.server, "emulator_connections", None)
            if connections is not None:
                connections.add(self.connection)

        def finish(self) -> None:
            connections = getattr(self.server, "emulator_connections", None)
            if connections is not None:
                connections.discard(self.connection)
            super().finish()

        def run_wsgi(self) -> None:
            service: EmulatorService | None = getattr(self.server, "emulator_service", None)
            target = self.headers.get("X-Amz-Target", "")
            if (
                service is not None
                and self.command == "POST"
                and target.startswith(_TARGET_PREFIX)
                and target[len(_TARGET_PREFIX) :] in OPERATIONS
                and "chunked" not in self.headers.get("Transfer-Encoding", "").lower()
            ):
                self._serve_emulated(service, target[len(_TARGET_PREFIX) :])
                return
            super().run_wsgi()

        def _serve_emulated(self, service: EmulatorService, operation: str) -> None:
            if self.headers.get("Expect", "").lower().strip() == "100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = 0
            body = self.rfile.read(length) if length > 0 else b""
            response = service.handle_sagemaker(operation, body)
            if response.drop:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            head = [f"{self.protocol_version} {response.status} {_REASONS.get(response.status, 'OK')}"]
            head.extend(f"{key}: {value}" for key, value in response.headers)
            if self.close_connection:
                head.append("Connection: close")
            self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body)

        def send_response(self, code: int, message: str | None = None) -> None:
            self.send_response_only(code, message)
            self.send_header("Server", self.version_string())
            environ = getattr(self, "environ", None) or {}
            if not environ.get(_DATE_SET):
                self.send_header("Date", self.date_time_string())

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            log.debug("%s %s -> %s", getattr(self, "command", "?"), getattr(self, "path", "?"), code)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    return _Handler


class _EmulatorControls:
    """Admin methods shared by the in-process server and an attached remote one (via :meth:`_admin`)."""

    _region: str = "us-east-1"

    def _admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        raise NotImplementedError

    def _call(self, method: str, route: str, body: Any = None) -> Any:
        status, payload = self._admin(method, f"{_ADMIN_PREFIX}/{route}", body)
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

    def job(self, name: str) -> dict[str, Any]:
        """Admin view of one job; KeyError if unknown."""
        result: dict[str, Any] = self._call("GET", f"jobs/{name}")
        return result

    def load_scenario(self, scenario: ScenarioSource) -> dict[str, Any]:
        """Replace the scenario and reset the world; returns the scenario as a dict."""
        if isinstance(scenario, Scenario):
            source: Any = scenario.as_dict()
        elif isinstance(scenario, Path):
            source = str(scenario.resolve())
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
        """Forget jobs and counters and restart the emulated clock (scenario unchanged)."""
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
    ) -> dict[str, Any]:
        """Change fault injection for the eight SageMaker operations; None keeps a setting."""
        body: dict[str, Any] = {
            key: value
            for key, value in {
                "throttle_rate": throttle_rate,
                "error_rate": error_rate,
                "latency_ms": latency_ms,
                "drop_rate": drop_rate,
                "rate_limits": dict(rate_limits) if rate_limits is not None else None,
            }.items()
            if value is not None
        }
        result: dict[str, Any] = self._call("POST", "faults", body)
        return result

    def clear_faults(self) -> dict[str, Any]:
        """Turn every injected fault and rate limit off."""
        return self.set_faults(throttle_rate=0, error_rate=0, latency_ms=0, drop_rate=0, rate_limits={})

    def stop_all_jobs(self) -> int:
        """Stop every non-terminal job; returns how many were asked to stop."""
        return int(self._call("POST", "stop-all-jobs")["stopped"])


class OfflineSageMaker(_EmulatorControls):
    """The offline SageMaker in a background thread of this process.

    >>> with OfflineSageMaker(scenario="first-choice-scarce") as sm:  # doctest: +SKIP
    ...     client = sm.boto3_client("sagemaker")

    :param scenario: builtin scenario name, path to a YAML/JSON file, dict, or :class:`Scenario`.
    :param port: TCP port; 0 picks a free one.
    :param host: interface to bind; loopback by default so nothing outside this machine can reach it.
    :param real_clock: monotonic real seconds, injectable for tests.
    """

    def __init__(
        self,
        scenario: ScenarioSource = "default",
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        real_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = EmulatorService(scenario, real_clock=real_clock)
        self._region = self.service.scenario.region
        self._host = host
        self._requested_port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------ lifecycle

    def start(self) -> OfflineSageMaker:
        """Bind the port and serve in a daemon thread; returns self."""
        if self._server is not None:
            return self
        from werkzeug.serving import make_server

        app = EmulatorApp(self.service)
        self._server = make_server(
            self._host, self._requested_port, app, threaded=True, request_handler=_request_handler_class()
        )
        self._server.emulator_service = self.service
        self._server.emulator_connections = set()
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="offline-sagemaker",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        # Keep-alive connections outlive serve_forever; close them so a stopped emulator answers nothing.
        for connection in list(server.emulator_connections):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OfflineSageMaker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Block serving (the CLI uses this); :meth:`stop` from another thread ends it."""
        self.start()
        assert self._thread is not None
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=0.5)

    # ----------------------------------------------------------------------------------- properties

    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None:
            raise RuntimeError("OfflineSageMaker is not running; use it as a context manager or call start()")
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        """The bound interface."""
        return self._host

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host = self._host if ":" not in self._host else f"[{self._host}]"
        return f"http://{host}:{self.port}"

    @property
    def scenario(self) -> Scenario:
        """The scenario in force."""
        return self.service.scenario

    @property
    def engine(self) -> Engine:
        """The simulation (for white-box tests; hold ``service.lock`` when touching it)."""
        return self.service.engine

    # ---------------------------------------------------------------------------------- admin paths

    def _admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return self.service.admin(method, path, body)

    def load_scenario(self, scenario: ScenarioSource) -> dict[str, Any]:
        """Replace the scenario (a :class:`Scenario`, dict, name or path) and reset the world."""
        loaded = self.service.load_scenario(scenario)
        self._region = loaded.region
        return loaded.as_dict()

    @classmethod
    def attach(cls, endpoint_url: str) -> RemoteSageMaker:
        """Control an already-running emulator (e.g. the CLI's) over HTTP."""
        return RemoteSageMaker(endpoint_url)


class RemoteSageMaker(_EmulatorControls):
    """Admin access to an emulator running elsewhere (another process), over its ``/_emulator`` routes.

    :param endpoint_url: ``http://host:port`` of the running emulator.
    :param timeout: seconds per admin request.
    """

    def __init__(self, endpoint_url: str, timeout: float = 10.0) -> None:
        self._endpoint_url = endpoint_url.rstrip("/")
        self._timeout = timeout
        self._region = str(self._call("GET", "health").get("region", "us-east-1"))

    @property
    def endpoint_url(self) -> str:
        """``http://host:port`` of the remote emulator."""
        return self._endpoint_url

    def _admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self._endpoint_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"} if data is not None else {},
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                return error.code, json.loads(raw or b"null")
            except ValueError:
                return error.code, {"error": raw.decode(errors="replace")}
