"""The offline SageMaker over real HTTP, in a background thread of this process.

:class:`OfflineSageMaker` binds a port and serves the WSGI app (:mod:`.wsgi`) with the fast-path request
handler (:mod:`.handler`) around an :class:`~.service.EmulatorService`. This module is the public entry
point of the server side and re-exports :class:`EmulatorApp`, :class:`EmulatorService` and
:class:`RemoteSageMaker`. With the server runs the event pump (:class:`~.eventbridge.EventPump`): the world
advances every 0.1 real seconds and the jobs' EventBridge events are delivered, whether or not anybody
calls SageMaker.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from offline_sagemaker.controls import EmulatorControls
from offline_sagemaker.engine import Engine
from offline_sagemaker.eventbridge import EventPump
from offline_sagemaker.remote import RemoteSageMaker
from offline_sagemaker.scenario_types import Scenario, ScenarioSource
from offline_sagemaker.service import EmulatorService
from offline_sagemaker.wsgi import EmulatorApp

__all__ = ["EmulatorApp", "EmulatorService", "OfflineSageMaker", "RemoteSageMaker"]


class OfflineSageMaker(EmulatorControls):
    """The offline SageMaker in a background thread of this process.

    >>> with OfflineSageMaker(scenario="first-choice-scarce") as sm:  # doctest: +SKIP
    ...     client = sm.boto3_client("sagemaker")

    :param scenario: builtin scenario name, path to a YAML/JSON file, dict, or :class:`Scenario`.
    :param port: TCP port; 0 picks a free one.
    :param host: interface to bind; loopback by default so nothing outside this machine can reach it.
    :param scenario_dirs: directories whose ``.yaml``/``.yml``/``.json`` files ``POST /_emulator/scenario``
        (and :meth:`RemoteSageMaker.load_scenario` with a path string) may load; no other file is read over
        HTTP.
    :param real_clock: monotonic real seconds, injectable for tests.
    """

    def __init__(
        self,
        scenario: ScenarioSource = "default",
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        scenario_dirs: Iterable[str | os.PathLike[str]] = (),
        real_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = EmulatorService(
            scenario, scenario_dirs=scenario_dirs, real_clock=real_clock, publish_events=True
        )
        self._region = self.service.scenario.region
        self._host = host
        self._requested_port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._pump: EventPump | None = None

    # ------------------------------------------------------------------------------------ lifecycle

    def start(self) -> OfflineSageMaker:
        """Bind the port and serve in a daemon thread, with the event pump in another; returns self."""
        if self._server is not None:
            return self
        from werkzeug.serving import make_server

        # Imported here: the handler imports moto, which only a serving emulator needs.
        from offline_sagemaker.handler import EmulatorRequestHandler
        from offline_sagemaker.moto_speedups import apply as apply_moto_speedups

        # moto's SQS in constant time, for this process's moto from the first server started on (idempotent).
        apply_moto_speedups()

        app = EmulatorApp(self.service)
        self._server = make_server(
            self._host, self._requested_port, app, threaded=True, request_handler=EmulatorRequestHandler
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
        self._pump = EventPump(self.service.pump_events).start()
        return self

    def stop(self) -> None:
        """Stop the event pump, stop serving and release the port."""
        pump, self._pump = self._pump, None
        if pump is not None:
            pump.stop()
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
