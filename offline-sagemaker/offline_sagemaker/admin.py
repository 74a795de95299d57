"""The admin routes under ``/_emulator/``: a table of ``(method, route)`` -> handler, and their dispatch.

The routes answer ``(HTTP status, JSON payload)``. They run against any :class:`AdminTarget` (the
:class:`~offline_sagemaker.service.EmulatorService`), so the in-process methods and the
HTTP routes run the same code. Never faulted.

Anyone who can reach the port can call them, a web page in the user's browser included, so over HTTP
(:func:`refusal`) a request that changes state must carry ``Content-Type: application/json``: a browser
sends a cross-site request without asking the server first only with ``text/plain``, form or multipart
bodies (a CORS "simple request"), and the emulator grants no cross-site request when asked. A request
whose ``Origin`` is another site's is refused whatever its method. ``POST scenario`` reads only the files
the server allows (:class:`~offline_sagemaker.scenario.ScenarioFiles`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from offline_sagemaker.exceptions import ScenarioError, ScenarioRefused
from offline_sagemaker.scenario import ScenarioFiles
from offline_sagemaker.scenario_types import Scenario, ScenarioSource

__all__ = ["ADMIN_PREFIX", "JSON_CONTENT_TYPE", "ROUTES", "AdminTarget", "dispatch", "own_origins", "refusal"]

#: Where the admin routes are served.
ADMIN_PREFIX = "/_emulator"
_JOB_PREFIX = "jobs/"
_FAULT_FIELDS = frozenset(
    {"throttle_rate", "error_rate", "latency_ms", "drop_rate", "rate_limits", "response_latency_ms"}
)
_EVENT_FIELDS = frozenset({"delay_seconds", "loss_rate", "duplicate_rate", "enabled"})
_CREDENTIAL_FIELDS = frozenset({"revoked_roles", "reject_unknown_tokens", "skew_seconds"})
_EVENT_QUEUE_FIELDS = frozenset({"queue_arn", "rule", "event_pattern", "target_id"})

#: The content type of every admin request that changes state (see :func:`refusal`).
JSON_CONTENT_TYPE = "application/json"
#: The methods that read only; every other one changes state.
_READING = frozenset({"GET", "HEAD", "OPTIONS"})
#: The host names a browser may use for an emulator bound to loopback or to every interface.
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_LOCAL_BINDS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""})

Answer = tuple[int, Any]


class AdminTarget(Protocol):
    """What the admin routes operate on."""

    @property
    def scenario(self) -> Scenario: ...
    @property
    def scenario_files(self) -> ScenarioFiles: ...
    def health(self) -> dict[str, Any]: ...
    def stats(self) -> dict[str, Any]: ...
    def jobs(self) -> list[dict[str, Any]]: ...
    def job(self, name: str) -> dict[str, Any]: ...
    def stop_all_jobs(self) -> int: ...
    def reset(self) -> None: ...
    def load_scenario(self, source: ScenarioSource) -> Scenario: ...
    def clock(self) -> dict[str, float]: ...
    def advance(self, seconds: float) -> float: ...
    def fault_settings(self) -> dict[str, Any]: ...
    def set_faults(
        self,
        throttle_rate: float | None = None,
        error_rate: float | None = None,
        latency_ms: float | None = None,
        drop_rate: float | None = None,
        rate_limits: Mapping[str, float] | None = None,
        response_latency_ms: Mapping[str, float] | None = None,
    ) -> dict[str, Any]: ...
    def event_settings(self) -> dict[str, Any]: ...
    def set_events(
        self,
        delay_seconds: float | None = None,
        loss_rate: float | None = None,
        duplicate_rate: float | None = None,
        enabled: bool | None = None,
    ) -> dict[str, Any]: ...
    def credential_settings(self) -> dict[str, Any]: ...
    def set_credentials(
        self,
        revoked_roles: list[str] | None = None,
        reject_unknown_tokens: bool | None = None,
        skew_seconds: float | None = None,
    ) -> dict[str, Any]: ...
    def event_queues(self) -> list[dict[str, str]]: ...
    def keep_event_queue(
        self, queue_arn: str, rule: str, event_pattern: str, target_id: str | None = None
    ) -> list[dict[str, str]]: ...
    def forget_event_queue(self, rule: str) -> list[dict[str, str]]: ...


Handler = Callable[[AdminTarget, Mapping[str, Any]], Answer]


def _reset(target: AdminTarget, body: Mapping[str, Any]) -> Answer:
    target.reset()
    return 200, {"ok": True}


def _load_scenario(target: AdminTarget, body: Mapping[str, Any]) -> Answer:
    source = body.get("scenario", body)
    if not source or not isinstance(source, str | Mapping):
        return 400, {"error": 'body must be {"scenario": <builtin name | path | mapping>}'}
    if isinstance(source, str):
        # A name or a path: read only what the server allows, and say nothing of any other file.
        source = target.scenario_files.load(source)
    return 200, target.load_scenario(source).as_dict()


def _advance(target: AdminTarget, body: Mapping[str, Any]) -> Answer:
    seconds = body.get("advance", 0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        return 400, {"error": "advance: must be a number of seconds >= 0"}
    target.advance(float(seconds))
    return 200, target.clock()


def _set_faults(target: AdminTarget, body: Mapping[str, Any]) -> Answer:
    unknown = sorted(set(body) - _FAULT_FIELDS)
    if unknown:
        return 400, {"error": f"{unknown[0]}: unknown fault; allowed: {', '.join(sorted(_FAULT_FIELDS))}"}
    return 200, target.set_faults(**body)


def _set_events(target: AdminTarget, body: Mapping[str, Any]) -> Answer:
    unknown = sorted(set(body) - _EVENT_FIELDS)
    if unknown:
        return 400, {
            "error": f"{unknown[0]}: unknown event setting; allowed: {', '.join(sorted(_EVENT_FIELDS))}"
        }
    return 200, target.set_events(**body)


def _set_credentials(target: AdminTarget, body: Mapping[str, Any]) -> Answer:
    unknown = sorted(set(body) - _CREDENTIAL_FIELDS)
    if unknown:
        return 400, {
            "error": f"{unknown[0]}: unknown credential setting; allowed: {', '.join(sorted(_CREDENTIAL_FIELDS))}"
        }
    return 200, target.set_credentials(**body)


def _keep_event_queue(target: AdminTarget, body: Mapping[str, Any]) -> Answer:
    unknown = sorted(set(body) - _EVENT_QUEUE_FIELDS)
    if unknown:
        allowed = ", ".join(sorted(_EVENT_QUEUE_FIELDS))
        return 400, {"error": f"{unknown[0]}: unknown event queue field; allowed: {allowed}"}
    required = ("queue_arn", "rule", "event_pattern")
    if not all(isinstance(body.get(key), str) for key in required) or not isinstance(
        body.get("target_id", ""), str
    ):
        return 400, {"error": "queue_arn, rule and event_pattern (and target_id if given) must be strings"}
    return 200, {"event_queues": target.keep_event_queue(**body)}


def _forget_event_queue(target: AdminTarget, body: Mapping[str, Any]) -> Answer:
    rule = body.get("rule")
    if not isinstance(rule, str) or not rule:
        return 400, {"error": 'body must be {"rule": <rule name>}'}
    return 200, {"event_queues": target.forget_event_queue(rule)}


#: Every admin route but ``GET jobs/<name>``; the body is the request's JSON object (``{}`` if none).
ROUTES: dict[tuple[str, str], Handler] = {
    ("GET", "health"): lambda target, body: (200, target.health()),
    ("GET", "stats"): lambda target, body: (200, target.stats()),
    ("GET", "jobs"): lambda target, body: (200, {"jobs": target.jobs()}),
    ("POST", "stop-all-jobs"): lambda target, body: (200, {"stopped": target.stop_all_jobs()}),
    ("POST", "reset"): _reset,
    ("GET", "scenario"): lambda target, body: (200, target.scenario.as_dict()),
    ("POST", "scenario"): _load_scenario,
    ("GET", "clock"): lambda target, body: (200, target.clock()),
    ("POST", "clock"): _advance,
    ("GET", "faults"): lambda target, body: (200, target.fault_settings()),
    ("POST", "faults"): _set_faults,
    ("GET", "events"): lambda target, body: (200, target.event_settings()),
    ("POST", "events"): _set_events,
    ("GET", "credentials"): lambda target, body: (200, target.credential_settings()),
    ("POST", "credentials"): _set_credentials,
    ("GET", "event-queues"): lambda target, body: (200, {"event_queues": target.event_queues()}),
    ("POST", "event-queues"): _keep_event_queue,
    ("DELETE", "event-queues"): _forget_event_queue,
}


def _job(target: AdminTarget, name: str) -> Answer:
    try:
        return 200, target.job(name)
    except KeyError:
        return 404, {"error": f"no job named {name!r}"}


def dispatch(target: AdminTarget, method: str, path: str, body: Any = None) -> Answer:
    """Route an admin request (``path`` with or without :data:`ADMIN_PREFIX`); returns status and payload.

    Invalid arguments (a bad scenario, fault or clock value) answer 400 with ``{"error": message}``.
    """
    route = path[len(ADMIN_PREFIX) :].strip("/") if path.startswith(ADMIN_PREFIX) else path.strip("/")
    payload = body if isinstance(body, Mapping) else {}
    try:
        handler = ROUTES.get((method, route))
        if handler is not None:
            return handler(target, payload)
        if method == "GET" and route.startswith(_JOB_PREFIX):
            return _job(target, route[len(_JOB_PREFIX) :])
    except ScenarioRefused as exc:
        return 403, {"error": str(exc)}
    except (ScenarioError, ValueError) as exc:
        return 400, {"error": str(exc)}
    return 404, {"error": f"no admin route {method} {path}"}


def own_origins(host: str, port: str | int) -> frozenset[str]:
    """The origins of the emulator's own pages when it listens on ``host:port`` (lower case).

    An emulator bound to loopback or to every interface is reached as ``127.0.0.1``, ``localhost`` or
    ``[::1]``; the bound name alone otherwise. The ``Host`` header is not trusted: a page that rebinds
    its own DNS name to 127.0.0.1 would name itself there.
    """
    names = {f"[{host}]" if ":" in host else host}
    if host in _LOCAL_BINDS:
        names.update(_LOOPBACK)
    return frozenset(f"http://{name}:{port}".lower() for name in names if name)


def refusal(
    method: str, content_type: str | None, origin: str | None, allowed: frozenset[str]
) -> Answer | None:
    """Why an admin request over HTTP is refused before it is routed; None when it may pass.

    :param content_type: the request's ``Content-Type`` header (None if absent).
    :param origin: the request's ``Origin`` header (None if absent: a client that is not a browser).
    :param allowed: the emulator's own origins (:func:`own_origins`).
    """
    if origin is not None and origin.strip().rstrip("/").lower() not in allowed:
        return 403, {
            "error": f"Origin {origin!r}: the admin routes answer only requests from the emulator's own "
            f"origin ({', '.join(sorted(allowed)) or 'none'}); a page of another site may not control it"
        }
    media_type = (content_type or "").partition(";")[0].strip().lower()
    if method.upper() not in _READING and media_type != JSON_CONTENT_TYPE:
        return 415, {
            "error": f"Content-Type: admin {method.upper()} requests must carry 'Content-Type: "
            f"{JSON_CONTENT_TYPE}' (got {content_type or 'none'!r}); send the body as JSON ({{}} if empty)"
        }
    return None
