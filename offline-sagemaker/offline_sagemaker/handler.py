"""The HTTP request handler of the offline SageMaker: moto's, quiet, with keep-alive fast paths.

werkzeug's development server closes the connection after every response and builds a full WSGI environ
per request; AWS's endpoints keep connections open. For the emulated operations (the hot path: clients
poll Describe* in loops) this handler answers directly, keeps the connection open and writes the
response in one send. The JSON-protocol calls of event mode and job logs (SQS, EventBridge, CloudWatch
Logs: a consumer long-polls and deletes in a loop) go to the WSGI app (:mod:`.wsgi`) with their body
read in full, and their response is written with its length on a connection kept open. Everything else
takes werkzeug's path unchanged. Imports moto: load it only to serve. Importing it patches nothing: the
server applies :mod:`.moto_speedups` when it starts.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
from typing import Any

from offline_sagemaker.operations import emulated_operation
from offline_sagemaker.responses import DATE_SET, drop_connection, status_line
from offline_sagemaker.service import EmulatorService
from offline_sagemaker.wsgi import missing_moto

try:
    from moto.moto_server.werkzeug_app import MotoRequestHandler
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise missing_moto(exc) from exc

__all__ = ["EmulatorRequestHandler"]

log = logging.getLogger(__name__)

#: X-Amz-Target prefixes of the JSON-protocol services answered on a kept-alive connection.
KEEP_ALIVE_TARGETS = ("AmazonSQS.", "AWSEvents.", "Logs_20140328.")
#: Response headers the kept-alive path writes itself (or must not pass on).
_OWN_HEADERS = frozenset({"content-length", "connection", "transfer-encoding"})


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
        target = self.headers.get("X-Amz-Target", "")
        if self.command == "POST" and target.startswith(KEEP_ALIVE_TARGETS) and not chunked:
            self._serve_kept_alive()
            return
        super().run_wsgi()

    def _request_body(self) -> bytes:
        if self.headers.get("Expect", "").lower().strip() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        return self.rfile.read(length) if length > 0 else b""

    def _serve_kept_alive(self) -> None:
        """The WSGI app's answer, written with its length; the connection stays open for the next call."""
        body = self._request_body()
        environ = self.make_environ()
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started[:] = [status, headers]
            return lambda data: None

        try:
            result = self.server.app(environ, start_response)
            try:
                payload = b"".join(result)
            finally:
                if hasattr(result, "close"):
                    result.close()
        except ConnectionError:  # an emulated connection drop
            self.close_connection = True
            return
        except Exception:
            log.exception("The offline SageMaker failed to answer %s", self.headers.get("X-Amz-Target"))
            self.close_connection = True
            started[:] = ["500 Internal Server Error", [("Content-Type", "text/plain")]]
            payload = b"internal error"
        status, headers = started
        head = [f"{self.protocol_version} {status}"]
        head.extend(f"{key}: {value}" for key, value in headers if key.lower() not in _OWN_HEADERS)
        if not environ.get(DATE_SET):
            head.append(f"Date: {self.date_time_string()}")
        head.append(f"Content-Length: {len(payload)}")
        if self.close_connection:
            head.append("Connection: close")
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)

    def _serve_emulated(self, service: EmulatorService, operation: str) -> None:
        body = self._request_body()
        authorization = self.headers.get("Authorization")
        response = service.token_refusal(
            self.headers.get("X-Amz-Security-Token"), self.headers.get("X-Amz-Target"), authorization
        ) or service.handle_sagemaker(operation, body, authorization)
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
