"""The triggerer's channel to its supervisor, with a stand-in on the supervisor's end.

A trigger that ends its task stores the task's XComs as a task's own pushes go: the Task SDK's ``XCom``
sends ``SetXCom`` requests through ``SUPERVISOR_COMMS``, which in a triggerer is Airflow's own
``TriggerCommsDecoder`` on a socket to the triggerer's supervisor process. Everything on the runner's side
here is Airflow's and the provider's real code; only the supervisor is a stand-in, because the real one
needs a triggerer process and its execution API (the e2e suite stores through one and reads the values
downstream). The stand-in reads the frames as the supervisor reads them (``_RequestFrame``, then the
supervisor's own ``TriggerRunnerSupervisor.decoder``), so the tests assert on the very message objects
the supervisor would hand to the execution API, and answers each as the supervisor does.
"""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
import pytest

T = TypeVar("T")

#: How long the stand-in waits for ``hold_for`` requests before it answers those it has (real seconds):
#: a bound for a broken run, never reached by a passing one.
DEADLINE = 60.0


class SupervisorStandIn(threading.Thread):
    """The supervisor's end of the runner's channel: decodes every request, records it, and answers.

    It answers nothing until ``hold_for`` requests have arrived (or :data:`DEADLINE` passed), so
    :attr:`before_first_answer` tells whether requests were sent together or one after the other.

    :param sock: the supervisor's end of the socket pair.
    :param hold_for: how many requests to wait for before the first answer (1: answer each at once).
    """

    def __init__(self, sock: socket.socket, hold_for: int = 1) -> None:
        super().__init__(daemon=True)
        self.sock, self.hold_for = sock, hold_for
        #: Every request, decoded as the triggerer's supervisor decodes it (``SetXCom``, ``GetXCom``...).
        self.messages: list[Any] = []
        #: How many requests had arrived when the first answer went out.
        self.before_first_answer = 0

    def sets(self) -> dict[str, Any]:
        """The ``SetXCom`` messages received, by XCom key (a key stored twice fails the test)."""
        stored = [msg for msg in self.messages if type(msg).__name__ == "SetXCom"]
        by_key = {msg.key: msg for msg in stored}
        assert len(by_key) == len(stored), [msg.key for msg in stored]
        return by_key

    def answer(self, msg: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The body and the error the supervisor answers ``msg`` with.

        A store answers nothing (``handle_set_xcom``); a read finds no value. Anything else is refused with
        an ``ErrorResponse``, so that a request the tests did not foresee fails loudly in the runner.
        """
        from airflow.sdk.execution_time.comms import ErrorResponse, XComResult

        kind = type(msg).__name__
        if kind in ("SetXCom", "DeleteXCom", "MaskSecret"):
            return None, None
        if kind == "GetXCom":
            # As ``XComResult.from_xcom_response`` builds it (``type`` set), dumped with ``exclude_unset``.
            found = XComResult(key=msg.key, value=None, type="XComResult")
            return found.model_dump(exclude_unset=True), None
        refused = ErrorResponse(detail={"message": f"{kind} is not served by the stand-in supervisor"})
        return None, refused.model_dump()

    def run(self) -> None:
        from airflow.jobs.triggerer_job_runner import TriggerRunnerSupervisor
        from airflow.sdk.execution_time.comms import _RequestFrame, _ResponseFrame

        frames = msgspec.msgpack.Decoder(_RequestFrame)
        held: list[tuple[int, Any]] = []
        deadline = time.monotonic() + DEADLINE
        while True:
            readable, _, _ = select.select([self.sock], [], [], 0.2)
            if readable:
                body = self._frame()
                if body is None:
                    return
                request = frames.decode(body)
                msg = TriggerRunnerSupervisor.decoder.validate_python(request.body)
                self.messages.append(msg)
                held.append((request.id, msg))
            if held and (len(self.messages) >= self.hold_for or time.monotonic() > deadline):
                self.before_first_answer = self.before_first_answer or len(self.messages)
                for request_id, msg in held:
                    answer, error = self.answer(msg)
                    self.sock.sendall(_ResponseFrame(id=request_id, body=answer, error=error).as_bytes())
                held.clear()

    def _frame(self) -> bytes | None:
        head = self._exactly(4)
        return None if head is None else self._exactly(int.from_bytes(head, "big"))

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data


class TriggererChannel:
    """Runs async work with the Task SDK's ``SUPERVISOR_COMMS`` installed as a triggerer installs it.

    :attr:`supervisor` is the stand-in of the latest :meth:`run`.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.supervisor: SupervisorStandIn | None = None

    def run(self, work: Callable[[], Awaitable[T]], hold_for: int = 1) -> T:
        """``asyncio.run(work())`` on a fresh channel; tasks it started (a warm-up read) finish first."""
        from airflow.jobs.triggerer_job_runner import TriggerCommsDecoder
        from airflow.sdk.execution_time import task_runner

        runner_side, supervisor_side = socket.socketpair()
        supervisor = self.supervisor = SupervisorStandIn(supervisor_side, hold_for)
        supervisor.start()

        async def main() -> T:
            reader, writer = await asyncio.open_connection(sock=runner_side)
            comms = TriggerCommsDecoder(async_writer=writer, async_reader=reader, socket=runner_side)
            if hasattr(comms, "start_reader"):  # Airflow 3.2+: the channel reads answers in its own task
                await comms.start_reader()
            reading = getattr(comms, "_reader_task", None)
            self.monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", comms, raising=False)
            try:
                result = await work()
                others = asyncio.all_tasks() - {asyncio.current_task(), reading}
                # A task the wait left (the shared List loop, a client's idle close) may be cancelled as
                # the wait ends: its CancelledError is its end, not the test's.
                await asyncio.gather(*others, return_exceptions=True)
                return result
            finally:
                if reading is not None:
                    reading.cancel()
                writer.close()

        try:
            return asyncio.run(main())
        finally:
            supervisor.join(timeout=DEADLINE)
            supervisor_side.close()

    @property
    def sets(self) -> dict[str, Any]:
        """The latest run's ``SetXCom`` messages, by key."""
        assert self.supervisor is not None, "nothing ran on the channel"
        return self.supervisor.sets()


@pytest.fixture
def channel(monkeypatch: pytest.MonkeyPatch) -> TriggererChannel:
    """The triggerer's channel to a stand-in supervisor; each wait that will end its task warms it up
    (``finish.warm_up`` reads once per process: reset, so every test sees the same requests)."""
    from airflow_provider_sm_prefs.triggers import finish

    monkeypatch.setattr(finish, "_warmed_in", None)
    return TriggererChannel(monkeypatch)
