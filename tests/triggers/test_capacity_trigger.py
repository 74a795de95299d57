"""The capacity trigger against the offline SageMaker: real aiobotocore HTTP, one event loop."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from airflow_provider_sm_prefs.domain.identity import AirflowIdentity, IdentityKey, OwnerClaim
from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.hooks.clock import service_now
from airflow_provider_sm_prefs.triggers import watcher as watcher_module
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger
from offline_sagemaker.jobs import training_config

G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"
PREFS = [{"instance_type": G6, "instance_count": 2}, {"instance_type": G5, "instance_count": 4}]


#: The identity tags of the task the triggers here wait for, as its Create carried them.
OURS = AirflowIdentity("nightly", "train", "scheduled__1", -1, 1, "tests").as_dict()


def submit(sm: Any, name: str, tags: dict[str, str] | None = None) -> None:
    config = training_config(name, max_runtime_seconds=86400, tags=OURS if tags is None else tags)
    request, _ = build_request("training", config, PREFS, 86400)
    sm.boto3_client("sagemaker").create_training_job(**request)


def trigger(name: str, **kwargs: Any) -> SageMakerCapacityTrigger:
    """A trigger as the operator defers to it: it knows the tags its job was created with."""
    kwargs.setdefault("owner", OwnerClaim.of_tags(OURS).as_dict())
    kwargs.setdefault("poll_interval", 0.2)
    return SageMakerCapacityTrigger(job_name=name, preferences=PREFS, **kwargs)


async def first_event(t: SageMakerCapacityTrigger) -> dict[str, Any]:
    async for event in t.run():
        return dict(event.payload)
    raise AssertionError("no event")


def staggered(n: int, step: float) -> dict[str, Any]:
    """G6 never free; G5 frees one 4-instance slot every ``step`` emulated seconds (jobs served FIFO)."""
    windows = [{"from": round(i * step, 3), "free": 4 * i} for i in range(n + 1)]
    for i in range(n):
        windows[i]["to"] = windows[i + 1]["from"]
    return {
        "time_scale": 600,
        "job_runtime_seconds": 86400,
        "phase_seconds": {"starting": 60, "downloading": 60, "uploading": 30, "stopping": 30},
        "capacity": {G6: [{"from": 0, "free": 0}], G5: windows},
    }


def test_many_waits_share_one_list_loop_and_describe_each_job_about_twice(sm: Any) -> None:
    n = 40
    # A frozen clock: every job is still Pending when its trigger first looks, however long the
    # submissions take on a busy host; then capacity comes one job at a time as the test moves the clock.
    sm.load_scenario({**staggered(n, step=120), "time_scale": 0})
    names = [f"fan-{i:02d}" for i in range(n)]
    for name in names:
        submit(sm, name)
    described = sm.stats()["operations"].get("DescribeTrainingJob", 0)

    async def clock() -> None:
        while (await asyncio.to_thread(sm.stats))["operations"].get("DescribeTrainingJob", 0) < described + n:
            await asyncio.sleep(0.05)
        for _ in range(n):
            await asyncio.to_thread(sm.advance, 120)
            await asyncio.sleep(0.2)

    async def main() -> list[dict[str, Any]]:
        waits = asyncio.gather(*(first_event(trigger(name)) for name in names))
        _, events = await asyncio.gather(clock(), waits)
        return list(events)

    events = asyncio.run(main())
    assert [e["status"] for e in events] == ["success"] * n
    assert {e["outcome"]["selected_instance_type"] for e in events} == {G5}
    ops = sm.stats()["operations"]
    # One Describe before waiting and one after the change, per job; the rest is shared List pages.
    assert ops["DescribeTrainingJob"] <= 3 * n, ops
    assert ops.get("ListTrainingJobs", 0) > 0
    waits = [e["outcome"]["pending_seconds"] for e in events]
    assert max(waits) > min(waits)


def test_per_job_polling_when_sharing_is_off(sm: Any) -> None:
    sm.load_scenario({"time_scale": 600, "capacity": {G6: [{"from": 0, "free": 0}]}})
    submit(sm, "solo")
    event = asyncio.run(first_event(trigger("solo", shared_poll=False)))
    assert event["status"] == "success" and event["outcome"]["preference_rank"] == 2
    assert "ListTrainingJobs" not in sm.stats()["operations"]


def test_throttling_and_server_errors_never_fail_the_wait(sm: Any) -> None:
    n = 15
    # A frozen clock keeps every job Pending until the test moves it once, so the waits poll through the
    # faults however fast or slow the host is; seed 4 throttles the first two calls after the faults
    # are set (its first draws are 0.24 and 0.10, under the 0.3 rate), so throttling is certain.
    sm.load_scenario({**staggered(n, step=60), "time_scale": 0, "seed": 4})
    names = [f"storm-{i:02d}" for i in range(n)]
    for name in names:
        submit(sm, name)
    calls_before = sum(sm.stats()["operations"].values())
    sm.set_faults(throttle_rate=0.3, error_rate=0.05)

    async def clock() -> None:
        while sum((await asyncio.to_thread(sm.stats))["operations"].values()) < calls_before + 2 * n:
            await asyncio.sleep(0.05)
        await asyncio.to_thread(sm.advance, 60 * n)

    async def main() -> list[dict[str, Any]]:
        waits = asyncio.gather(*(first_event(trigger(name)) for name in names))
        _, events = await asyncio.gather(clock(), waits)
        return list(events)

    try:
        events = asyncio.run(main())
    finally:
        sm.set_faults(throttle_rate=0.0, error_rate=0.0)
    assert [e["status"] for e in events] == ["success"] * n
    assert {e["outcome"]["selected_instance_type"] for e in events} == {G5}
    stats = sm.stats()
    assert sum(stats["throttled"].values()) > 0, stats


def test_listing_not_permitted_falls_back_to_per_job_polling(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The emulator grants every action; an IAM policy without ListTrainingJobs is simulated here.
    async def denied(self: Any, client: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "ListTrainingJobs"
        )

    monkeypatch.setattr(watcher_module.JobListWatcher, "list_all", denied)
    # A frozen clock: the job is Pending when the trigger first looks, however slow the host; g5 frees
    # when the test moves the clock after that look.
    sm.load_scenario({**staggered(1, step=3000), "time_scale": 0})
    submit(sm, "no-list")

    async def main() -> dict[str, Any]:
        submitted = calls(sm)
        task = asyncio.ensure_future(first_event(trigger("no-list")))
        await looked(sm, since=submitted)
        sm.advance(3000)  # g5 frees
        return await task

    event = asyncio.run(main())
    assert event["status"] == "success"
    assert event["outcome"]["pending_seconds"] > 0


def calls(sm: Any) -> int:
    """Calls SageMaker has served so far."""
    return sum(sm.stats()["operations"].values())


async def looked(sm: Any, since: int, deadline: float = 60.0) -> None:
    """Until SageMaker has served a call after the first ``since`` (a generous deadline for a loaded machine)."""
    waited = time.monotonic() + deadline
    while calls(sm) <= since and time.monotonic() < waited:
        await asyncio.sleep(0.05)
    assert calls(sm) > since, f"no call within {deadline} s"


def test_restarted_trigger_reports_the_same_pending_seconds(sm: Any) -> None:
    # The clock stands still but for the moves below: the job waits 600 emulated seconds before the
    # trigger is restarted and 600 after, however long each step takes on the machine.
    sm.load_scenario({**staggered(1, step=1200), "time_scale": 0})
    submit(sm, "restart-me")
    original = trigger("restart-me")

    async def interrupted() -> None:
        submitted = calls(sm)
        task = asyncio.ensure_future(first_event(original))
        await looked(sm, since=submitted)
        sm.advance(600)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    assert sm.job("restart-me")["secondary_status"] == "Pending"
    classpath, kwargs = original.serialize()
    rebuilt = SageMakerCapacityTrigger(**kwargs)

    async def resumed() -> dict[str, Any]:
        before = calls(sm)
        task = asyncio.ensure_future(first_event(rebuilt))
        await looked(sm, since=before)
        sm.advance(600)  # g5 frees
        return await task

    event = asyncio.run(resumed())
    timeline = sm.job("restart-me")["timeline"]
    index = next(i for i, t in enumerate(timeline) if t["secondary_status"] == "Pending")
    expected = timeline[index + 1]["emulated_time"] - timeline[index]["emulated_time"]
    assert expected > 600  # longer than the rebuilt trigger's own share of the wait
    assert event["outcome"]["pending_seconds"] == pytest.approx(expected, abs=1)


def test_on_kill_stops_the_job(sm: Any) -> None:
    sm.load_scenario(staggered(1, step=100000))
    submit(sm, "killed")
    asyncio.run(trigger("killed").on_kill())
    assert sm.job("killed")["status"] in ("Stopping", "Stopped")


def _with_task(t: SageMakerCapacityTrigger, map_index: int = -1) -> SageMakerCapacityTrigger:
    """The task instance the triggerer sets on a trigger it runs (the fields on_kill reads)."""
    from types import SimpleNamespace

    t.task_instance = SimpleNamespace(  # type: ignore[assignment]
        dag_id="nightly", task_id="train", run_id="scheduled__1", map_index=map_index, try_number=1
    )
    return t


@pytest.mark.parametrize(
    ("map_index", "state", "stopped"),
    [
        (-1, "deferred", False),  # the trigger moved to another triggerer (apache/airflow#73454)
        (3, "deferred", False),
        (-1, "failed", True),  # marked failed
        (-1, "success", True),  # marked success
        (7, None, True),  # cleared
    ],
)
def test_on_kill_stops_the_job_unless_its_task_is_still_deferred(
    sm: Any, monkeypatch: pytest.MonkeyPatch, map_index: int, state: str | None, stopped: bool
) -> None:
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    asked: list[dict[str, Any]] = []

    def get_task_states(**criteria: Any) -> dict[str, Any]:
        # The triggerer answers this over its supervisor channel; here the answer is given.
        asked.append(criteria)
        key = "train" if map_index < 0 else f"train_{map_index}"
        return {"scheduled__1": {key: state, "other": "deferred"}}

    monkeypatch.setattr(RuntimeTaskInstance, "get_task_states", staticmethod(get_task_states))
    sm.load_scenario(staggered(1, step=100000))
    name = f"moved-{map_index}-{state}"
    submit(sm, name)
    asyncio.run(_with_task(trigger(name), map_index).on_kill())
    assert asked == [
        dict(dag_id="nightly", task_ids=["train"], run_ids=["scheduled__1"], map_index=map_index)
    ]
    assert (sm.job(name)["status"] in ("Stopping", "Stopped")) is stopped, sm.job(name)["status"]


def test_on_kill_cancelled_again_while_at_work_still_stops_the_job(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Airflow 3.3's triggerer cancels the trigger again on each sync until it has finished, which lands
    # in the middle of on_kill when the state read or the Stop call takes a while.
    import time

    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    from airflow_provider_sm_prefs.triggers import kill

    def slow_states(**criteria: Any) -> dict[str, Any]:
        time.sleep(0.5)
        return {"scheduled__1": {"train": "failed"}}

    monkeypatch.setattr(RuntimeTaskInstance, "get_task_states", staticmethod(slow_states))
    sm.load_scenario(staggered(1, step=100000))
    submit(sm, "recancelled")

    async def main() -> None:
        killing = asyncio.ensure_future(_with_task(trigger("recancelled")).on_kill())
        await asyncio.sleep(0.1)
        killing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await killing
        await asyncio.gather(*kill.KILLS)

    asyncio.run(main())
    assert sm.job("recancelled")["status"] in ("Stopping", "Stopped")


@pytest.mark.parametrize(
    "tags",
    [
        {**OURS, IdentityKey.DEPLOYMENT.value: "af-theirs"},
        {**OURS, IdentityKey.RUN_ID.value: "scheduled__2"},
        {},
    ],
    ids=["another-deployment", "another-run", "untagged"],
)
def test_on_kill_never_stops_a_job_its_task_cannot_prove_its_own(sm: Any, tags: dict[str, str]) -> None:
    sm.load_scenario(staggered(1, step=100000))
    submit(sm, "not-mine", tags=tags)
    asyncio.run(_with_task(trigger("not-mine")).on_kill())  # no supervisor channel: the job would be stopped
    assert sm.job("not-mine")["status"] == "InProgress"
    assert sm.stats()["jobs"]["not-mine"].get("StopTrainingJob", 0) == 0


def test_on_kill_stops_the_job_when_the_task_state_cannot_be_read(sm: Any) -> None:
    # Outside a triggerer there is no supervisor channel: the state read fails, the job is stopped.
    sm.load_scenario(staggered(1, step=100000))
    submit(sm, "unreadable")
    asyncio.run(_with_task(trigger("unreadable")).on_kill())
    assert sm.job("unreadable")["status"] in ("Stopping", "Stopped")


def test_a_runner_that_takes_the_first_event_and_drops_the_trigger_runs_no_kill(
    sm: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # dag.test() and a task that does not defer take the first event and never resume the generator;
    # asyncio.run's shutdown then cancels its finalization. By then the task may have ended (here it reads
    # "success"): the job whose capacity the event reported must not be stopped by a kill path.
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    monkeypatch.setattr(
        RuntimeTaskInstance,
        "get_task_states",
        staticmethod(lambda **criteria: {"scheduled__1": {"train": "success"}}),
    )
    sm.load_scenario(staggered(1, step=0.001))  # G5 has room at once
    submit(sm, "taken")

    async def inline() -> Any:  # Airflow 3.0's _run_inline_trigger
        return await _with_task(trigger("taken")).run().__anext__()

    with caplog.at_level(logging.INFO):
        event = asyncio.run(inline())
    assert event.payload["status"] == "success"
    assert sm.stats()["jobs"]["taken"].get("StopTrainingJob", 0) == 0
    assert sm.job("taken")["status"] == "InProgress"
    assert "cancelled while its task" not in caplog.text


def test_wait_for_completion_reports_the_final_status(sm: Any) -> None:
    submit(sm, "to-the-end")
    event = asyncio.run(first_event(trigger("to-the-end", wait_for="completion")))
    assert event["status"] == "success"
    assert event["outcome"]["job_status"] == "Completed"
    assert event["phase"] == "completed"


def test_unknown_job_is_an_error_event(sm: Any) -> None:
    event = asyncio.run(first_event(trigger("never-created")))
    assert event["status"] == "error" and "no training job named" in event["reason"]


# -- starting from the shared listing (the deferring task passed the job's CreationTime) -------------


def created_at(sm: Any, name: str) -> str:
    describe = sm.boto3_client("sagemaker").describe_training_job(TrainingJobName=name)
    return describe["CreationTime"].isoformat()


def test_with_creation_time_each_job_is_described_once_after_its_change(sm: Any) -> None:
    n = 40
    sm.load_scenario(staggered(n, step=120))
    names = [f"listed-{i:02d}" for i in range(n)]
    for name in names:
        submit(sm, name)
    creation = {name: created_at(sm, name) for name in names}
    before = dict(sm.stats()["operations"])

    async def main() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(first_event(trigger(name, creation_time=creation[name])) for name in names)
        )

    events = asyncio.run(main())
    assert [e["status"] for e in events] == ["success"] * n
    assert [e["outcome"]["preference_rank"] for e in events] == [2] * n
    ops = sm.stats()["operations"]
    assert ops["DescribeTrainingJob"] - before["DescribeTrainingJob"] == n, ops
    assert ops["ListTrainingJobs"] - before.get("ListTrainingJobs", 0) > 0


def test_triggers_starting_together_share_their_first_pass(sm: Any) -> None:
    # Capacity is free: every job leaves Pending at once, so each trigger fires on its first look.
    n = 60
    sm.load_scenario(
        {"time_scale": 600, "job_runtime_seconds": 86400, "capacity": {G6: [{"from": 0, "free": 2 * n}]}}
    )
    names = [f"burst-{i:02d}" for i in range(n)]
    for name in names:
        submit(sm, name)
    creation = {name: created_at(sm, name) for name in names}
    sm.advance(600)  # past Starting: all are Downloading now
    before = sm.stats()["operations"].get("ListTrainingJobs", 0)

    async def main() -> list[dict[str, Any]]:
        # One poll interval of 30 s: only an early pass can deliver the events within the test's timeout.
        triggers = [trigger(name, creation_time=creation[name], poll_interval=30.0) for name in names]
        return await asyncio.wait_for(asyncio.gather(*(first_event(t) for t in triggers)), 20)

    events = asyncio.run(main())
    assert {e["outcome"]["selected_instance_type"] for e in events} == {G6}
    lists = sm.stats()["operations"]["ListTrainingJobs"] - before
    assert lists <= 3, f"{lists} List calls for one start-up burst"


def test_a_listed_job_that_ends_wakes_its_trigger_at_once(sm: Any) -> None:
    sm.load_scenario(staggered(1, step=100000))
    submit(sm, "ends-early")
    creation = created_at(sm, "ends-early")

    async def main() -> dict[str, Any]:
        task = asyncio.ensure_future(first_event(trigger("ends-early", creation_time=creation)))
        await asyncio.sleep(1.0)  # listed a few times, still Pending
        assert not task.done()
        sm.boto3_client("sagemaker").stop_training_job(TrainingJobName="ends-early")
        return await asyncio.wait_for(task, 10)

    event = asyncio.run(main())
    assert event["status"] == "error"
    assert event["error_type"] in ("JobStoppedError", "CapacityUnavailableError"), event


def test_waiting_progress_is_logged_from_the_listing(sm: Any, capsys: pytest.CaptureFixture[str]) -> None:
    sm.load_scenario(staggered(1, step=100000))
    submit(sm, "quiet")
    creation = created_at(sm, "quiet")

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(first_event(trigger("quiet", creation_time=creation)), 2.0)

    before = sm.stats()["operations"].get("DescribeTrainingJob", 0)
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("airflow_provider_sm_prefs.triggers.capacity.PROGRESS_LOG_EVERY", 0.5)
        asyncio.run(main())
    assert sm.stats()["operations"].get("DescribeTrainingJob", 0) == before  # logs cost no call
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if "quiet still Pending after" in line]
    assert lines and f"{G6}×2 → {G5}×4" in lines[0], out


def test_a_job_that_ended_before_its_trigger_started_is_reported_on_the_first_pass(sm: Any) -> None:
    sm.load_scenario({"time_scale": 600, "job_runtime_seconds": 60})
    submit(sm, "done-already")
    creation = created_at(sm, "done-already")
    sm.advance(3600)
    assert sm.job("done-already")["status"] == "Completed"
    t = trigger(
        "done-already", creation_time=creation, poll_interval=30.0
    )  # only the first pass can answer in time

    event = asyncio.run(asyncio.wait_for(first_event(t), 10))
    assert event["status"] == "success" and event["outcome"]["job_status"] == "Completed"


def test_a_window_on_a_compressed_clock_closes_near_its_time_not_at_the_next_list_pass(sm: Any) -> None:
    # The offline SageMaker at 240x: the shared List loop passes every 30 s (two emulated hours); the
    # window closes 1.25 emulated hours after creation, 19 s from now, between two passes. The trigger
    # follows the service clock's measured rate and reports the window about then; at the next pass (30 s,
    # two emulated hours) it would be three quarters of an hour late.
    sm.load_scenario(
        {"time_scale": 240, "job_runtime_seconds": 86400, "capacity": {G6: [{"from": 0, "free": 0}], G5: []}}
    )
    submit(sm, "windowed")
    event = asyncio.run(
        first_event(trigger("windowed", poll_interval=30.0, window_closes_after_seconds=4500.0))
    )
    assert event["status"] == "escalate", event  # EventStatus.WINDOW_CLOSED
    described = sm.boto3_client("sagemaker").describe_training_job(TrainingJobName="windowed")
    waited = (service_now(described) - described["CreationTime"]).total_seconds()
    # 1.25 h, plus less than the next pass's 0.75 h (11 s of this host's time) for a loaded machine.
    assert 4500 <= waited < 7200, waited
