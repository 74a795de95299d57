"""The XComs a trigger stores for its task go to the triggerer's supervisor all at once where they can,
and a triggerer process's first wait that will end its task warms the channel while it waits.

The runner's side is Airflow's own: its ``TriggerCommsDecoder`` on a socket, installed as the Task SDK's
``SUPERVISOR_COMMS`` as the triggerer installs it. The supervisor's side is a stand-in that reads the
frames and answers each store (the real one needs a triggerer process and its execution API: the e2e
suite stores through one and reads the values downstream). It answers nothing until every store has
arrived or a generous deadline passed, so how many arrived before the first answer tells whether they
were sent together.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import msgspec
import pytest

from airflow_provider_sm_prefs.triggers import finish

REF = {"dag_id": "nightly", "task_id": "train", "run_id": "manual__1", "map_index": 3, "try_number": 1}
XCOMS: dict[str, Any] = {
    "chosen_instance_type": "ml.g6.48xlarge",
    "chosen_instance_count": 2,
    "chosen_rank": 1,
    "seconds_waited": 312.5,
    "sm_prefs_capacity_record": {"job_name": "nightly-1", "entries": [{"instance_type": "ml.g6.48xlarge"}]},
    "return_value": {"instance_type": "ml.g6.48xlarge", "count": 2},
}
#: How long the stand-in supervisor waits for every store before it answers what it has (seconds).
DEADLINE = 60.0


class Supervisor(threading.Thread):
    """Reads length-prefixed request frames; answers them once ``hold_for`` have arrived (or at the deadline)."""

    def __init__(self, sock: socket.socket, hold_for: int) -> None:
        super().__init__(daemon=True)
        self.sock, self.hold_for = sock, hold_for
        self.bodies: list[dict[str, Any]] = []
        self.before_first_answer = 0

    @staticmethod
    def answer(body: dict[str, Any]) -> dict[str, Any] | None:
        """A store's answer is empty; a read finds nothing."""
        if body["type"] == "GetXCom":
            return {"type": "XComResult", "key": body["key"], "value": None}
        return None

    def _frame(self) -> list[Any] | None:
        head = self._exactly(4)
        return None if head is None else msgspec.msgpack.decode(self._exactly(int.from_bytes(head, "big")))

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def run(self) -> None:
        held: list[int] = []
        deadline = time.monotonic() + DEADLINE
        self.sock.settimeout(0.2)
        while True:
            try:
                frame = self._frame()
            except TimeoutError:
                frame = []
            if frame is None:
                return
            if frame:
                held.append(frame[0])
                self.bodies.append(frame[1])
            if held and (len(self.bodies) >= self.hold_for or time.monotonic() > deadline):
                self.before_first_answer = self.before_first_answer or len(self.bodies)
                for request_id, body in zip(held, self.bodies[-len(held) :], strict=True):
                    answer = msgspec.msgpack.encode([request_id, self.answer(body), None])
                    self.sock.sendall(len(answer).to_bytes(4, "big") + answer)
                held.clear()


def on_a_channel(monkeypatch: pytest.MonkeyPatch, hold_for: int, work: Any) -> tuple[Supervisor, Any]:
    """Run ``await work()`` with the Task SDK's channel on a socket to a stand-in supervisor."""
    from airflow.jobs.triggerer_job_runner import TriggerCommsDecoder
    from airflow.sdk.execution_time import task_runner

    runner_side, supervisor_side = socket.socketpair()
    supervisor = Supervisor(supervisor_side, hold_for)
    supervisor.start()

    async def main() -> Any:
        reader, writer = await asyncio.open_connection(sock=runner_side)
        comms = TriggerCommsDecoder(async_writer=writer, async_reader=reader, socket=runner_side)
        if hasattr(comms, "start_reader"):  # Airflow 3.2+: the channel reads answers in its own task
            await comms.start_reader()
        monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", comms, raising=False)
        try:
            return await work()
        finally:
            writer.close()

    result = asyncio.run(main())
    supervisor.join(timeout=DEADLINE)
    return supervisor, result


def store(monkeypatch: pytest.MonkeyPatch, hold_for: int) -> tuple[Supervisor, float]:
    return on_a_channel(monkeypatch, hold_for, lambda: finish.store_xcoms(REF, XCOMS))


def test_every_store_is_sent_before_the_first_answer_where_the_task_sdk_stores_asynchronously(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    together = finish._sent_together() is not None
    supervisor, _ = store(monkeypatch, hold_for=len(XCOMS) if together else 1)

    # Airflow 3.3 (XCom.aset): all six in flight at once; before, one after the other in a thread.
    assert supervisor.before_first_answer == (len(XCOMS) if together else 1)
    from airflow.sdk.execution_time.xcom import XCom

    sent = {body["key"]: body for body in supervisor.bodies}
    assert set(sent) == set(XCOMS)
    for key, value in XCOMS.items():
        body = sent[key]
        assert body["type"] == "SetXCom"
        assert (body["dag_id"], body["task_id"], body["run_id"], body["map_index"]) == (
            "nightly",
            "train",
            "manual__1",
            3,
        )
        # What XCom.set sends: the configured backend's serialization of the value.
        expected = XCom.serialize_value(value, key=key, task_id="train", dag_id="nightly", run_id="manual__1")
        assert body["value"] == expected


def test_the_stores_are_sent_together_on_airflow_3_3_with_the_default_backend() -> None:
    from airflow.providers.common.compat.version_compat import AIRFLOW_V_3_3_PLUS

    assert (finish._sent_together() is not None) is AIRFLOW_V_3_3_PLUS


def test_a_backend_that_serializes_its_own_way_stores_one_by_one_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An object-store backend may upload in ``serialize_value``: that must not run on the event loop."""
    from airflow.sdk.bases.xcom import BaseXCom
    from airflow.sdk.execution_time import xcom

    loop_threads: set[int] = set()
    seen: list[int] = []

    class ObjectStoreXCom(BaseXCom):
        @staticmethod
        def serialize_value(value: Any, **kwargs: Any) -> Any:
            seen.append(threading.get_ident())
            return BaseXCom.serialize_value(value, **kwargs)

    monkeypatch.setattr(xcom, "XCom", ObjectStoreXCom)
    assert finish._sent_together() is None

    original = finish.store_xcoms

    async def on_the_loop(ref: Any, xcoms: Any) -> float:
        loop_threads.add(threading.get_ident())
        return await original(ref, xcoms)

    monkeypatch.setattr(finish, "store_xcoms", on_the_loop)
    supervisor, _ = store(monkeypatch, hold_for=1)
    assert supervisor.before_first_answer == 1
    assert len(seen) == len(XCOMS)
    assert not set(seen) & loop_threads


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str, *args: Any) -> None:
        self.lines.append(message % args)

    debug = info


def test_the_first_wait_of_a_triggerer_process_reads_through_the_channel_once_while_it_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Airflow builds the supervisor's execution API on its first call; a read while waiting pays for it."""
    monkeypatch.setattr(finish, "_warmed_in", None)
    plan = finish.FinishPlan(ti=REF)
    log = Log()

    async def two_waits_start() -> None:
        finish.warm_up(plan, log)
        finish.warm_up(plan, log)  # a second wait in the same process: nothing more
        await asyncio.gather(*finish._warming)

    supervisor, _ = on_a_channel(monkeypatch, hold_for=1, work=two_waits_start)
    assert [(b["type"], b["key"], b["task_id"], b["map_index"]) for b in supervisor.bodies] == [
        ("GetXCom", "capacity_outcome", "train", 3)
    ]
    assert len(log.lines) == 1 and "first read in" in log.lines[0]


def test_out_of_a_triggerer_nothing_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.execution_time import task_runner

    monkeypatch.setattr(finish, "_warmed_in", None)
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", object(), raising=False)

    async def start() -> None:
        finish.warm_up(finish.FinishPlan(ti=REF), Log())
        assert not finish._warming

    asyncio.run(start())
    assert finish._warmed_in is None
