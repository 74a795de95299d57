"""The HTTP request handler of the offline SageMaker: moto's, quiet, with a keep-alive fast path.

werkzeug's development server closes the connection after every response and builds a full WSGI environ
per request. For the emulated operations (the hot path: clients poll Describe* in loops) this
handler answers directly, keeps the connection open and writes the response in one send. Everything else
takes werkzeug's path to the WSGI app (:mod:`.wsgi`) unchanged. Imports moto: load it only to serve.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Any

from airflow_provider_sm_prefs.testing.moto_speedups import apply as apply_moto_speedups
from airflow_provider_sm_prefs.testing.operations import emulated_operation
from airflow_provider_sm_prefs.testing.responses import DATE_SET, drop_connection, status_line
from airflow_provider_sm_prefs.testing.service import EmulatorService
from airflow_provider_sm_prefs.testing.wsgi import missing_moto

try:
    from moto.moto_server.werkzeug_app import MotoRequestHandler
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise missing_moto(exc) from exc

apply_moto_speedups()

__all__ = ["EmulatorRequestHandler"]

log = logging.getLogger(__name__)


class EmulatorRequestHandler(MotoRequestHandler):
    """moto's handler, quiet, with a keep-alive fast path for the emulated SageMaker operations.

    The server it runs in carries ``emulator_service`` (the :class:`EmulatorService` to answer from) and
    ``emulator_connections`` (the open sockets, so a stopped server can close kept-alive ones).
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
        operation = emulated_operation(self.headers.get("X-Amz-Target", ""))
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        if service is not None and self.command == "POST" and operation is not None and not chunked:
            self._serve_emulated(service, operation)
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
        response = service.handle_sagemaker(operation, body, self.headers.get("Authorization"))
        if response.drop:
            self.close_connection = True
            drop_connection(self.connection)
            return
        head = [f"{self.protocol_version} {status_line(response.status)}"]
        head.extend(f"{key}: {value}" for key, value in response.headers)
        if self.close_connection:
            head.append("Connection: close")
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body)

    def send_response(self, code: int, message: str | None = None) -> None:
        self.send_response_only(code, message)
        self.send_header("Server", self.version_string())
        environ = getattr(self, "environ", None) or {}
        if not environ.get(DATE_SET):
            self.send_header("Date", self.date_time_string())

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        log.debug("%s %s -> %s", getattr(self, "command", "?"), getattr(self, "path", "?"), code)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)
