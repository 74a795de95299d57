"""The WSGI application of the offline SageMaker: emulated operations, job pages, admin routes, then moto.

Requests are routed in this order:

1. ``X-Amz-Target: <prefix>.<Op>`` for the emulated operations -> the emulator (served by the
   request handler's fast path (:mod:`.handler`) when it can, by this app otherwise);
2. paths under ``/_emulator/view`` -> human-readable job pages (:mod:`.view`), then the rest of
   ``/_emulator/`` -> admin routes (:mod:`.admin`, never faulted; a request that changes state must be
   JSON, and one from another site's page is refused: :func:`.admin.refusal`);
3. STS ``AssumeRole``, ``AssumeRoleWithWebIdentity`` and ``GetCallerIdentity`` of the emulator's session
   credentials -> :mod:`.sts`; IAM ``SimulatePrincipalPolicy`` (the SageMaker Python SDK's role check,
   which moto lacks) -> :mod:`.iam_api`;
4. everything else (S3, CloudWatch Logs writes, the other SageMaker operations, ...) -> moto's dispatcher.

The CloudWatch Logs reads (:data:`~.operations.LOGS_GROUP_ROUTED`) are the emulator's, which reads moto's
Logs for the groups that are not SageMaker's (groups a caller created) and lists both (:mod:`.logs_api`).

Before any of that (admin routes and pages excepted), a request whose ``X-Amz-Security-Token`` is expired
on the emulated clock, or invalid, is refused in its service's protocol (:mod:`.sts`).

No SageMaker call ends in a bare 500: an operation neither the emulator nor moto implements is answered
``UnknownOperationException`` naming it, and a SageMaker call moto fails on is answered
``ValidationException`` naming it (moto's traceback stays in the server log). AddTags, ListTags and
DeleteTags on a resource the emulator owns (a training or processing job, a HyperPod cluster) are the
emulator's, on any other
resource moto's.

Every emulated response carries a ``Date`` header in *emulated* time, because clients use the service's
clock to compute deadlines.
"""

from __future__ import annotations

import functools
import io
import json
import logging
import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from offline_sagemaker.admin import ADMIN_PREFIX, own_origins, refusal
from offline_sagemaker.exceptions import ApiError, InternalFailure, UnknownOperation, ValidationError
from offline_sagemaker.iam_api import is_simulate_request, simulate
from offline_sagemaker.logs_api import MOTO_LOGS
from offline_sagemaker.operations import (
    RESOURCE_ROUTED,
    TARGET_PREFIX,
    emulated_operation,
    emulated_resource,
    logs_read,
    unknown_sagemaker_operation,
)
from offline_sagemaker.responses import (
    DATE_SET,
    drop_connection,
    error_response,
    http_date,
    status_line,
)
from offline_sagemaker.service import EmulatorService
from offline_sagemaker.sts import sts_action
from offline_sagemaker.view import VIEW_PREFIX, job_page, jobs_page, not_found_page

__all__ = ["EmulatorApp", "missing_moto"]

log = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def missing_moto(exc: ImportError) -> ImportError:
    """The error for a missing ``moto[server]``, naming what to install."""
    return ImportError(
        "The offline SageMaker needs moto's server: pip install 'offline-sagemaker' (or 'moto[server]') "
        f"(missing: {exc.name})"
    )


def _moto_dispatcher() -> WsgiApp:
    try:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise missing_moto(exc) from exc
    return DomainDispatcherApplication(create_backend_app)


@functools.cache
def _moto_serves(operation: str) -> bool:
    """Whether moto's SageMaker backend has a handler for ``operation`` (else it answers a bare 500)."""
    from moto.core.utils import camelcase_to_underscores
    from moto.sagemaker.responses import SageMakerResponse

    return callable(getattr(SageMakerResponse, camelcase_to_underscores(operation), None))


def _json_object(body: bytes) -> dict[str, Any]:
    """A request's JSON body; ``{}`` if it is not a JSON object (the emulator's handler reports that)."""
    try:
        params = json.loads(body or b"{}")
    except ValueError:
        return {}
    return params if isinstance(params, dict) else {}


def _resource_arn(body: bytes) -> Any:
    return _json_object(body).get("ResourceArn")


def _security_token(environ: dict[str, Any]) -> str | None:
    """The request's session token: the ``X-Amz-Security-Token`` header, or the query-string parameter
    of a presigned URL."""
    token = environ.get("HTTP_X_AMZ_SECURITY_TOKEN")
    if token:
        return str(token)
    query = environ.get("QUERY_STRING", "")
    if "X-Amz-Security-Token" in query:
        found = urllib.parse.parse_qs(query).get("X-Amz-Security-Token")
        return found[0] if found else None
    return None


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


class EmulatorApp:
    """The WSGI application: emulated SageMaker operations, job pages, admin routes, then moto for the rest.

    :param service: the emulator service.
    :param fallback: the WSGI app for everything else (moto's dispatcher by default: then the service's
        resets clear moto's state too, see :mod:`.moto_world`).
    """

    def __init__(self, service: EmulatorService, fallback: WsgiApp | None = None) -> None:
        self.service = service
        if fallback is None:
            fallback = _moto_dispatcher()
            service.resets_moto = True
        self.fallback = fallback

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET")
        path = environ.get("PATH_INFO", "")
        token = None
        if not (_under(path, VIEW_PREFIX) or _under(path, ADMIN_PREFIX)):
            token = _security_token(environ)
            refused = self._refuse_token(token, target, environ, start_response)
            if refused is not None:
                return refused
        operation = emulated_operation(target)
        if operation is not None:
            return self._sagemaker(operation, self._read_body(environ), environ, start_response)
        operation = logs_read(target)
        if operation is not None:
            return self._logs(operation, environ, start_response)
        unknown = unknown_sagemaker_operation(target)
        if unknown is not None:
            # SageMaker answers an operation it does not have in its JSON error form; moto would
            # route the request elsewhere (S3 by default) and answer 200.
            self._read_body(environ)
            error = UnknownOperation(f"Operation {unknown} is not a SageMaker operation")
            return self._error(error, environ, start_response)
        if target and target.startswith(TARGET_PREFIX):
            return self._other_sagemaker(target[len(TARGET_PREFIX) :], environ, start_response)
        return self._rest(path, target, token, environ, start_response)

    def _rest(
        self,
        path: str,
        target: str | None,
        token: str | None,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
    ) -> Iterable[bytes]:
        """Every request but a SageMaker call: pages, admin routes, STS, IAM, then moto."""
        if _under(path, VIEW_PREFIX):
            return self._view(path, environ, start_response)
        if _under(path, ADMIN_PREFIX):
            return self._admin(environ, start_response)
        if not target and "x-www-form-urlencoded" in environ.get("CONTENT_TYPE", ""):
            answered = self._sts(token, environ, start_response)
            if answered is not None:
                return answered
        if "/iam/aws4_request" in environ.get("HTTP_AUTHORIZATION", ""):
            body = self._read_body(environ)
            if is_simulate_request(environ.get("REQUEST_METHOD", ""), environ.get("CONTENT_TYPE", ""), body):
                status, xml = simulate(body, self.service.scenario.iam_denied_actions)
                return self._send(status, xml, environ, start_response, content_type="text/xml")
            environ["wsgi.input"] = io.BytesIO(body)  # moto reads the body again
        return self.fallback(environ, start_response)

    def _refuse_token(
        self,
        token: str | None,
        target: str | None,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
    ) -> Iterable[bytes] | None:
        """The refusal of an expired or invalid session token (see :mod:`.sts`), None if it may pass."""
        refused = self.service.token_refusal(token, target, environ.get("HTTP_AUTHORIZATION"))
        if refused is None:
            return None
        self._read_body(environ)
        environ[DATE_SET] = True
        start_response(status_line(refused.status), refused.headers)
        return [refused.body]

    def _sts(
        self, token: str | None, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes] | None:
        """The emulator's answer to an STS call it serves (:mod:`.sts`), None for the others (body kept)."""
        body = self._read_body(environ)
        found = sts_action(environ.get("REQUEST_METHOD", ""), environ.get("CONTENT_TYPE", ""), body)
        answer = self.service.handle_sts(*found, token) if found is not None else None
        if answer is not None:
            return self._send(answer[0], answer[1], environ, start_response, content_type="text/xml")
        environ["wsgi.input"] = io.BytesIO(body)  # whoever answers reads the body again
        return None

    @staticmethod
    def _read_body(environ: dict[str, Any]) -> bytes:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body: bytes = environ["wsgi.input"].read(length) if length > 0 else b""
        return body

    def _error(
        self, error: ApiError, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        response = error_response(error, self.service.engine.now())
        environ[DATE_SET] = True
        start_response(status_line(response.status), response.headers)
        return [response.body]

    def _logs(
        self, operation: str, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """A CloudWatch Logs read: the emulator answers it (faults, ``access_denied``, validation) and reads
        moto's Logs through :data:`~.logs_api.MOTO_LOGS` for the groups that are not SageMaker's."""
        body = self._read_body(environ)
        what = f"CloudWatch Logs {operation}"

        def moto(request: dict[str, Any]) -> dict[str, Any]:
            status, _, payload = self._moto(dict(environ), json.dumps(request).encode(), what)
            answer = _json_object(payload)
            if status.startswith("2"):
                return answer
            code = str(answer.get("__type") or "ServiceUnavailableException").rpartition("#")[2]
            raise ApiError(code, str(answer.get("message") or answer.get("Message") or status))

        reset = MOTO_LOGS.set(moto)
        try:
            return self._sagemaker(operation, body, environ, start_response)
        finally:
            MOTO_LOGS.reset(reset)

    def _moto(self, environ: dict[str, Any], body: bytes, what: str) -> tuple[str, list[Any], bytes]:
        """moto's status, headers and body for a request with ``body`` (a 500 if moto raised)."""
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        started: list[Any] = []

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started[:] = [status, headers]
            return lambda data: None

        try:
            result = self.fallback(environ, capture)
            try:
                payload = b"".join(result)
            finally:
                if hasattr(result, "close"):
                    result.close()
        except Exception:
            log.exception("moto failed to serve %s", what)
            return "500 Internal Server Error", [], b""
        return started[0], started[1], payload

    def _other_sagemaker(
        self, operation: str, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """A SageMaker operation of botocore's model that the emulator does not serve by name."""
        body = self._read_body(environ)
        if operation in RESOURCE_ROUTED and emulated_resource(_resource_arn(body)):
            return self._sagemaker(operation, body, environ, start_response)
        if not _moto_serves(operation):
            error = UnknownOperation(
                f"Operation {operation} is not served by the offline SageMaker: neither the emulator nor "
                "moto implements it"
            )
            return self._error(error, environ, start_response)
        status, headers, payload = self._moto(environ, body, f"SageMaker {operation}")
        if status.startswith("5"):
            log.warning("moto failed to serve SageMaker %s (answered %s)", operation, status)
            failed = ValidationError(
                f"The offline SageMaker could not serve {operation} for this request: its moto backend "
                "failed on it (the server log has the details)"
            )
            return self._error(failed, environ, start_response)
        start_response(status, headers)
        return [payload]

    def _sagemaker(
        self, operation: str, body: bytes, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        response = self.service.handle_sagemaker(operation, body, environ.get("HTTP_AUTHORIZATION"))
        if response.drop:
            if drop_connection(environ.get("werkzeug.socket")):
                raise ConnectionAbortedError("emulated connection drop")
            # A server without the socket in its environ cannot drop: answer a failure instead.
            response = error_response(InternalFailure("emulated connection drop"), time.time())
        environ[DATE_SET] = True
        start_response(status_line(response.status), response.headers)
        return [response.body]

    def _admin(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        raw = self._read_body(environ)
        method = environ.get("REQUEST_METHOD", "GET")
        refused = refusal(
            method,
            environ.get("CONTENT_TYPE"),
            environ.get("HTTP_ORIGIN"),
            own_origins(str(environ.get("SERVER_NAME", "")), str(environ.get("SERVER_PORT", ""))),
        )
        if refused is not None:
            return self._send(*refused, environ, start_response)
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return self._send(400, {"error": "body must be JSON"}, environ, start_response)
        status, payload = self.service.admin(method, environ.get("PATH_INFO", ""), body)
        return self._send(status, payload, environ, start_response)

    def _view(
        self, path: str, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """The human-readable pages (see :mod:`.view`)."""
        route = path[len(VIEW_PREFIX) :].strip("/")
        scenario = self.service.scenario.name
        status = 200
        if not route or route == "jobs":
            page = jobs_page(self.service.jobs(), scenario)
        elif route.startswith("jobs/"):
            name = urllib.parse.unquote(route[len("jobs/") :])
            try:
                page = job_page(self.service.job(name), scenario)
            except KeyError:
                status, page = 404, not_found_page(name)
        else:
            status, page = 404, not_found_page(route)
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
        environ[DATE_SET] = True
        headers = [
            ("Content-Type", content_type),
            ("Content-Length", str(len(data))),
            ("Date", http_date(self.service.engine.now())),
        ]
        start_response(status_line(status), headers)
        return [data]
