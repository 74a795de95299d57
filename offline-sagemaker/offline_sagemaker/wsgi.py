"""The WSGI application of the offline SageMaker: emulated operations, job pages, admin routes, then moto.

Requests are routed in this order:

1. ``X-Amz-Target: <prefix>.<Op>`` for the emulated operations -> the emulator (served by the
   request handler's fast path (:mod:`.handler`) when it can, by this app otherwise);
2. paths under ``/_emulator/view`` -> human-readable job pages (:mod:`.view`), then the rest of
   ``/_emulator/`` -> admin routes (:mod:`.admin`, never faulted);
3. IAM ``SimulatePrincipalPolicy`` (the SageMaker Python SDK's role check, which moto lacks) ->
   :mod:`.iam_api`;
4. everything else (S3, CloudWatch Logs writes, the other SageMaker operations, ...) -> moto's dispatcher.

Every emulated response carries a ``Date`` header in *emulated* time, because clients use the service's
clock to compute deadlines.
"""

from __future__ import annotations

import io
import json
import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from offline_sagemaker.admin import ADMIN_PREFIX
from offline_sagemaker.exceptions import InternalFailure, UnknownOperation
from offline_sagemaker.iam_api import is_simulate_request, simulate_principal_policy
from offline_sagemaker.operations import emulated_operation, unknown_sagemaker_operation
from offline_sagemaker.responses import (
    DATE_SET,
    drop_connection,
    error_response,
    http_date,
    status_line,
)
from offline_sagemaker.service import EmulatorService
from offline_sagemaker.view import VIEW_PREFIX, job_page, jobs_page, not_found_page

__all__ = ["EmulatorApp", "missing_moto"]

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


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


class EmulatorApp:
    """The WSGI application: emulated SageMaker operations, job pages, admin routes, then moto for the rest.

    :param service: the emulator service.
    :param fallback: the WSGI app for everything else (moto's dispatcher by default).
    """

    def __init__(self, service: EmulatorService, fallback: WsgiApp | None = None) -> None:
        self.service = service
        self.fallback = fallback if fallback is not None else _moto_dispatcher()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET")
        operation = emulated_operation(target)
        if operation is not None:
            return self._sagemaker(operation, environ, start_response)
        unknown = unknown_sagemaker_operation(target)
        if unknown is not None:
            # SageMaker answers an operation it does not have in its JSON error form; moto would
            # route the request elsewhere (S3 by default) and answer 200.
            self._read_body(environ)
            response = error_response(
                UnknownOperation(f"Operation {unknown} is not a SageMaker operation"), time.time()
            )
            environ[DATE_SET] = True
            start_response(status_line(response.status), response.headers)
            return [response.body]
        path = environ.get("PATH_INFO", "")
        if _under(path, VIEW_PREFIX):
            return self._view(path, environ, start_response)
        if _under(path, ADMIN_PREFIX):
            return self._admin(environ, start_response)
        if "/iam/aws4_request" in environ.get("HTTP_AUTHORIZATION", ""):
            body = self._read_body(environ)
            if is_simulate_request(environ.get("REQUEST_METHOD", ""), environ.get("CONTENT_TYPE", ""), body):
                status, xml = simulate_principal_policy(body, self.service.scenario.iam_denied_actions)
                return self._send(status, xml, environ, start_response, content_type="text/xml")
            environ["wsgi.input"] = io.BytesIO(body)  # moto reads the body again
        return self.fallback(environ, start_response)

    @staticmethod
    def _read_body(environ: dict[str, Any]) -> bytes:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body: bytes = environ["wsgi.input"].read(length) if length > 0 else b""
        return body

    def _sagemaker(
        self, operation: str, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        response = self.service.handle_sagemaker(
            operation, self._read_body(environ), environ.get("HTTP_AUTHORIZATION")
        )
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
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return self._send(400, {"error": "body must be JSON"}, environ, start_response)
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
