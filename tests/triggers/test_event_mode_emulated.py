"""Event mode end to end in one process: the offline SageMaker's own EventBridge events, a rule, a queue.

Jobs get capacity one after another while their triggers wait in event mode with a safety List cadence
far longer than the test: each wait must end on its event's detail, with no Describe (one per job with
``[sm_prefs] event_detail = hint``). With every event lost, the same waits end on the safety passes;
with every event duplicated, nothing is Described; with events late by more than the steps between
them, every wait still ends with the outcome a Describe gives.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import outcome_from_describe
from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.triggers import eventbridge_queue
from airflow_provider_sm_prefs.triggers import watcher as watcher_module
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger, creation_time_of
from offline_sagemaker.jobs import training_config

G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"
PREFS = [{"instance_type": G6, "instance_count": 2}, {"instance_type": G5, "instance_count": 4}]
N = 12
START = 600  # emulated seconds until the first job gets capacity
STEP = 300  # emulated seconds between capacity steps
PACE = 0.25  # real seconds between two steps of the test's clock


def scenario() -> dict[str, Any]:
    """A frozen clock: the test moves it through the capacity steps once every trigger is waiting."""
    windows = [{"from": START + i * STEP, "free": 4 * (i + 1)} for i in range(N)]
    for i in range(N - 1):
        windows[i]["to"] = windows[i + 1]["from"]
    return {
        "time_scale": 0,
        "job_runtime_seconds": 86400,
        "phase_seconds": {"starting": 60, "downloading": 60, "uploading": 30, "stopping": 30},
        "capacity": {G6: [{"from": 0, "free": 0}], G5: [{"from": 0, "to": START, "free": 0}, *windows]},
    }


def all_waiting(url: str, names: list[str]) -> bool:
    """Every job's trigger waits in event mode: listed once by the shared List loop (so no early pass is
    due for it) and subscribed to the queue's consumer, which reads the queue; and the List loop has
    measured the service clock's rate (its second pass, a few seconds after the first: one that came
    while the test moves the clock would see a change before its event, and Describe the job)."""
    consumers = [c for c in eventbridge_queue._CONSUMERS.values() if c.queue_url == url]
    if not consumers or not consumers[0].healthy:
        return False
    watchers = [w for w in list(watcher_module._WATCHERS.values()) if any(n in w._waiters for n in names)]
    waiters = [
        waiter for watcher in watchers for name in names for waiter in list(watcher._waiters.get(name, []))
    ]
    return (
        len(waiters) == len(names)
        and all(w.seen and w.unsubscribe is not None for w in waiters)
        and all(w.clock.measured for w in watchers)
    )


created_queues: list[str] = []


@pytest.fixture(autouse=True)
def _remove_queues(sm: Any) -> Any:
    """Rules outlive the emulator's reset (moto's state): remove them, or later tests pay for them."""
    yield
    while created_queues:
        sm.remove_event_queue(created_queues.pop())


def run_waits(
    sm: Any, monkeypatch: pytest.MonkeyPatch, safety: float, detail: str = "data"
) -> tuple[list[dict[str, Any]], Any, int]:
    """N jobs, each waited for in event mode; their events, the consumer's stats, and the List calls
    made before the test first moved the clock."""
    name = f"sm-events-{uuid.uuid4().hex[:8]}"
    url = sm.create_event_queue(name)
    created_queues.append(name)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_QUEUE_URL", url)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_SAFETY_LIST_SECONDS", str(safety))
    monkeypatch.setenv("AIRFLOW__SM_PREFS__EVENT_DETAIL", detail)
    client = sm.boto3_client("sagemaker")
    names = [f"evm-{i:02d}" for i in range(N)]
    created = {}
    for name in names:
        request, _ = build_request("training", training_config(name, max_runtime_seconds=86400), PREFS, 86400)
        client.create_training_job(**request)
        created[name] = creation_time_of(client.describe_training_job(TrainingJobName=name))
    sm.advance(120)  # past Starting: every job waits in Pending

    async def one(name: str) -> dict[str, Any]:
        trig = SageMakerCapacityTrigger(
            job_name=name, preferences=PREFS, poll_interval=0.5, creation_time=created[name]
        )
        async for event in trig.run():
            return dict(event.payload)
        raise AssertionError("no event")

    stats: list[Any] = []
    lists: list[int] = []

    async def clock() -> None:
        # Capacity comes only once every trigger waits, however long they take to start on a busy host.
        deadline = time.monotonic() + 60
        while not all_waiting(url, names):
            assert time.monotonic() < deadline, "the triggers never all waited in event mode"
            await asyncio.sleep(0.05)
        stats.extend(c.stats for c in eventbridge_queue._CONSUMERS.values() if c.queue_url == url)
        lists.append(sm.stats()["operations"].get("ListTrainingJobs", 0))
        sm.advance(START - 120)
        for _ in range(N - 1):
            await asyncio.sleep(PACE)
            sm.advance(STEP)

    async def main() -> list[dict[str, Any]]:
        tasks = [asyncio.create_task(one(name)) for name in names]
        _, events = await asyncio.wait_for(asyncio.gather(clock(), asyncio.gather(*tasks)), 120)
        return list(events)

    events = asyncio.run(main())
    return events, stats[0], lists[0]


def describes(sm: Any) -> dict[str, int]:
    return {name: ops.get("DescribeTrainingJob", 0) for name, ops in sm.stats()["jobs"].items()}


#: Outcome fields that do not move once a job runs (its status and secondary status do).
FIXED = ("job_arn", "selected_instance_type", "selected_instance_count", "preference_rank", "pending_seconds")


def outcomes_as_described(sm: Any, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The outcome a Describe of each job gives now, for the fields that do not move once it runs."""
    client = sm.boto3_client("sagemaker")
    described = []
    for event in events:
        describe = client.describe_training_job(TrainingJobName=event["job_name"])
        outcome = outcome_from_describe(JobKind.TRAINING, describe)
        described.append({k: getattr(outcome, k) for k in FIXED})
    return described


def fixed_fields(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: e["outcome"][k] for k in FIXED} for e in events]


def test_every_wait_ends_on_its_events_detail_with_no_describe(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm.load_scenario(scenario())
    events, stats, lists = run_waits(sm, monkeypatch, safety=600)
    assert [e["status"] for e in events] == ["success"] * N
    assert [e["outcome"]["selected_instance_type"] for e in events] == [G5] * N
    # One Describe by the test before the wait, none by the trigger: the event's detail was enough.
    assert set(describes(sm).values()) == {1}
    assert fixed_fields(events) == outcomes_as_described(sm, events)
    assert stats.woke >= N
    # The List loop's first passes, nothing after the waits began: the safety cadence is 600 s.
    assert sm.stats()["operations"]["ListTrainingJobs"] == lists


def test_with_event_detail_hint_every_event_costs_one_describe(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The earlier behaviour, kept as a setting: an event only wakes the trigger, which Describes its job."""
    sm.load_scenario(scenario())
    events, stats, lists = run_waits(sm, monkeypatch, safety=600, detail="hint")
    assert [e["status"] for e in events] == ["success"] * N
    # One Describe by the test before the wait, one by the trigger after its event.
    assert set(describes(sm).values()) == {2}
    assert sm.stats()["operations"]["ListTrainingJobs"] == lists


def test_with_every_event_lost_the_safety_passes_end_the_waits(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm.load_scenario({**scenario(), "events": {"loss_rate": 1.0}})
    events, stats, _ = run_waits(sm, monkeypatch, safety=2)
    assert [e["status"] for e in events] == ["success"] * N
    assert stats.woke == 0
    assert sm.stats()["events"]["lost"] > 0


def test_duplicated_events_cost_no_describe(sm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sm.load_scenario({**scenario(), "events": {"duplicate_rate": 1.0}})
    events, stats, lists = run_waits(sm, monkeypatch, safety=600)
    assert [e["status"] for e in events] == ["success"] * N
    assert set(describes(sm).values()) == {1}
    assert sm.stats()["operations"]["ListTrainingJobs"] == lists
    assert stats.duplicates > 0 or sm.stats()["events"]["duplicated"] > 0


def test_late_events_still_end_every_wait_with_the_outcome_a_describe_gives(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events delivered later than the steps between them: each job's is still its newest view."""
    sm.load_scenario({**scenario(), "events": {"delay_seconds": 3 * PACE}})
    events, _, _ = run_waits(sm, monkeypatch, safety=600)
    assert [e["status"] for e in events] == ["success"] * N
    assert fixed_fields(events) == outcomes_as_described(sm, events)
