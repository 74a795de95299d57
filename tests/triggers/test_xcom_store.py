"""The XComs a trigger stores for its task go to the triggerer's supervisor all at once where they can,
and a triggerer process's first wait that will end its task warms the channel while it waits.

The runner's side is Airflow's own: its ``TriggerCommsDecoder`` on a socket, installed as the Task SDK's
``SUPERVISOR_COMMS`` as the triggerer installs it; the supervisor's side is the stand-in of
``tests/triggers/conftest.py``, which decodes each request as the supervisor does. It answers nothing until
the stores the test expects have arrived (or a generous deadline passed), so how many arrived before the
first answer tells whether they were sent together. Every expectation is a literal: the message a
downstream task's read is served from, for the golden capacity record of ``tests/golden/records.json``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.triggers import finish
from tests.airflow_versions import AIRFLOW_V_3_3_PLUS
from tests.triggers.conftest import TriggererChannel

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "records.json"
#: The golden capacity record, as the previous release stored it and a downstream task reads it.
RECORD: dict[str, Any] = json.loads(GOLDEN.read_text())["record"]
REF = {"dag_id": "nightly", "task_id": "train", "run_id": "manual__1", "map_index": 3, "try_number": 1}
XCOMS: dict[str, Any] = {
    "selected_instance_type": "ml.g5.48xlarge",
    "selected_instance_count": 4,
    "preference_rank": 2,
    "pending_seconds": 1227.0,
    "capacity_outcome": RECORD,
    "return_value": {"job_name": "golden-nightly", "selected_instance_type": "ml.g5.48xlarge"},
}
#: What the supervisor receives for each store: (key, value, dag_id, run_id, task_id, map_index). The
#: default backend's serialization leaves JSON values as they are; the execution API stores them so.
EXPECTED = [
    ("selected_instance_type", "ml.g5.48xlarge", "nightly", "manual__1", "train", 3),
    ("selected_instance_count", 4, "nightly", "manual__1", "train", 3),
    ("preference_rank", 2, "nightly", "manual__1", "train", 3),
    ("pending_seconds", 1227.0, "nightly", "manual__1", "train", 3),
    ("capacity_outcome", RECORD, "nightly", "manual__1", "train", 3),
    (
        "return_value",
        {"job_name": "golden-nightly", "selected_instance_type": "ml.g5.48xlarge"},
        "nightly",
        "manual__1",
        "train",
        3,
    ),
]


def sent(channel: TriggererChannel) -> list[tuple[Any, ...]]:
    """The stores the supervisor received, in the order of ``EXPECTED``'s keys."""
    sets = channel.sets
    return [
        (msg.key, msg.value, msg.dag_id, msg.run_id, msg.task_id, msg.map_index)
        for msg in sorted(sets.values(), key=lambda msg: list(XCOMS).index(msg.key))
    ]


def test_the_golden_record_is_the_one_the_expectations_name() -> None:
    # The literal source itself: a golden file that changed would make the expectations say something else.
    assert (RECORD["job_name"], RECORD["selected_instance_type"], RECORD["selected_instance_count"]) == (
        "golden-nightly",
        "ml.g5.48xlarge",
        4,
    )
    assert (RECORD["preference_rank"], RECORD["pending_seconds"], RECORD["version"]) == (2, 1227.0, 1)


def test_every_store_is_sent_before_the_first_answer_where_the_task_sdk_stores_asynchronously(
    channel: TriggererChannel,
) -> None:
    # Airflow 3.3 (XCom.aset): all six in flight at once; before, one after the other in a thread.
    together = 6 if AIRFLOW_V_3_3_PLUS else 1
    channel.run(lambda: finish.store_xcoms(REF, XCOMS), hold_for=together)

    assert channel.supervisor is not None
    assert channel.supervisor.before_first_answer == together
    assert [type(msg).__name__ for msg in channel.supervisor.messages] == ["SetXCom"] * 6
    assert sent(channel) == EXPECTED


def test_the_stores_are_sent_together_on_airflow_3_3_with_the_default_backend() -> None:
    assert (finish._sent_together() is not None) is AIRFLOW_V_3_3_PLUS


def test_a_backend_that_serializes_its_own_way_stores_one_by_one_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch, channel: TriggererChannel
) -> None:
    """An object-store backend may upload in ``serialize_value``: that must not run on the event loop."""
    from airflow.sdk.bases.xcom import BaseXCom
    from airflow.sdk.execution_time import xcom

    loop_threads: set[int] = set()
    seen: list[tuple[str | None, int]] = []

    class ObjectStoreXCom(BaseXCom):
        @staticmethod
        def serialize_value(value: Any, **kwargs: Any) -> Any:
            seen.append((kwargs.get("key"), threading.get_ident()))
            return BaseXCom.serialize_value(value, **kwargs)

    monkeypatch.setattr(xcom, "XCom", ObjectStoreXCom)
    assert finish._sent_together() is None

    async def on_the_loop() -> float:
        loop_threads.add(threading.get_ident())
        return await finish.store_xcoms(REF, XCOMS)

    channel.run(on_the_loop, hold_for=1)
    assert channel.supervisor is not None and channel.supervisor.before_first_answer == 1
    assert [key for key, _ in seen] == [
        "selected_instance_type",
        "selected_instance_count",
        "preference_rank",
        "pending_seconds",
        "capacity_outcome",
        "return_value",
    ]
    assert not {thread for _, thread in seen} & loop_threads
    assert sent(channel) == EXPECTED


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str, *args: Any) -> None:
        self.lines.append(message % args)

    debug = info


def test_the_first_wait_of_a_triggerer_process_reads_through_the_channel_once_while_it_waits(
    channel: TriggererChannel,
) -> None:
    """Airflow builds the supervisor's execution API on its first call; a read while waiting pays for it."""
    plan = finish.FinishPlan(ti=REF)
    log = Log()

    async def two_waits_start() -> None:
        finish.warm_up(plan, log)
        finish.warm_up(plan, log)  # a second wait in the same process: nothing more
        await asyncio.gather(*finish._warming)

    channel.run(two_waits_start)
    assert channel.supervisor is not None
    assert [
        (type(msg).__name__, msg.key, msg.dag_id, msg.run_id, msg.task_id, msg.map_index)
        for msg in channel.supervisor.messages
    ] == [("GetXCom", "capacity_outcome", "nightly", "manual__1", "train", 3)]
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
