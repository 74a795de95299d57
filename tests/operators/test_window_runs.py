"""Acceptance windows in real dag.test() runs against the offline SageMaker: stages, stops, limits.

Capacity changes at fixed emulated times after the scenario loads; the job's own timeline and the
emulator's ledger of calls tell what happened (which jobs existed, which were billed, what was stopped).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from airflow.triggers.base import TriggerEvent

from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook
from airflow_provider_sm_prefs.operators import waiting
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger
from tests.clock import in_background
from tests.operators.test_dag_runs import processing_config, scenario, training_config

pytestmark = pytest.mark.usefixtures("airflow_db")

P5, G5, P4D = "ml.p5.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"
C5, M5 = "ml.c5.xlarge", "ml.m5.xlarge"
HOUR = 3600


def p5_frees_at(seconds: int, capacity: dict[str, Any] | None = None) -> dict[str, Any]:
    """p5 has nothing free until ``seconds`` (emulated); g5 and p4d always have room.

    The clock stands still (time_scale 0) until :func:`ticking` moves it, so the first job is created
    at emulated 0 however long the task takes to start, and every window falls where the test says.
    """
    pools = {
        P5: [{"from": 0, "to": seconds, "free": 0}, {"from": seconds, "free": 8}]
        if seconds
        else [{"from": 0, "free": 8}]
    }
    return scenario(time_scale=0, capacity={**pools, **(capacity or {})})


#: A window counts from the job's CreationTime, ``pending_seconds`` from its Pending transition, which
#: comes a moment later: a stage closed right at its window has pending_seconds just under the window.
BEFORE_PENDING = 60


def calls(sm: Any) -> int:
    """Calls SageMaker has served so far (the task's and its trigger's)."""
    return sum(sm.stats()["operations"].values())


@contextlib.contextmanager
def ticking(sm: Any, step: float = 60.0, every: float = 0.1, lead: int = 3) -> Iterator[None]:
    """Move the frozen emulated clock ``step`` seconds every ``every`` real seconds once a job exists.

    The clock runs at most ``lead`` steps ahead of the last call SageMaker served: the waits look every
    0.2 s, so it never holds them back, but while the task is between two looks for longer (resuming
    from the trigger, starting the next stage, a busy machine), the clock waits for it instead of
    running on. Every emulated interval a test checks is then the same however slow the machine.
    """

    def tick(done: threading.Event) -> None:
        while not done.is_set() and not sm.jobs():
            done.wait(0.05)
        seen, ahead = calls(sm), 0
        while not done.wait(every):
            served = calls(sm)
            if served != seen:
                seen, ahead = served, 0
            if ahead < lead:
                sm.advance(step)
                ahead += 1

    with in_background(tick):
        yield


def windows(*after: float | None) -> list[dict[str, Any]]:
    entries = [(P5, 2), (G5, 4), (P4D, 2)]
    out = []
    for (itype, count), window in zip(entries, after, strict=False):
        entry: dict[str, Any] = {"instance_type": itype, "instance_count": count}
        if window is not None:
            entry["accept_after"] = window
        out.append(entry)
    return out


def offered(job: dict[str, Any]) -> list[str]:
    """The instance types a job's request offered, in order (the emulator's view of what it got)."""
    return [p["instance_type"] for p in job["preferences"]]


def never_selected(job: dict[str, Any]) -> bool:
    """SageMaker never selected an entry for the job: nothing was provisioned, nothing billed."""
    return job["selected_instance_type"] is None and job["start_time"] is None


def test_stage_one_still_pending_when_the_window_opens_is_stopped_and_stage_two_takes_the_first_free_entry(
    sm: Any, run_test_dag: Any, capacity_record: Any
) -> None:
    sm.load_scenario(p5_frees_at(90 * 60))
    with ticking(sm):
        states, xcom = run_test_dag(
            "t_train_capacity", config=training_config(), prefs=windows(None, HOUR), max_pending=4 * HOUR
        )
    assert states["job"] == "success"
    assert xcom is not None
    first, second = sm.job("nightly"), sm.job("nightly-s2")
    assert first["status"] == "Stopped" and never_selected(first)
    assert offered(first) == [P5] and offered(second) == [P5, G5]
    assert [p["instance_count"] for p in second["preferences"]] == [2, 4]
    assert (xcom["job_name"], xcom["selected_instance_type"], xcom["preference_rank"]) == (
        "nightly-s2",
        G5,
        2,
    )
    stages = xcom["return_value"]["stages"]
    assert [(s["stage"], s["job_name"], s["entries"], s["ended"]) for s in stages] == [
        (1, "nightly", [P5], "escalated"),
        (2, "nightly-s2", [P5, G5], "selected"),
    ]
    # Stage 1 waited about an hour; the total counts from stage 1's creation on AWS's clock.
    # (the clock ticks on while the task looks and stops it: a few emulated minutes late at most)
    assert HOUR - BEFORE_PENDING <= stages[0]["pending_seconds"] < HOUR + 900
    assert xcom["pending_seconds"] >= stages[0]["pending_seconds"]
    record = capacity_record("t_train_capacity")
    assert record is not None and [s["ended"] for s in record["stages"]] == ["escalated", "selected"]


def test_first_choice_freeing_before_the_window_stays_in_stage_one(sm: Any, run_test_dag: Any) -> None:
    sm.load_scenario(p5_frees_at(30 * 60))
    with ticking(sm):
        states, xcom = run_test_dag(
            "t_train_capacity", config=training_config(), prefs=windows(None, HOUR), max_pending=4 * HOUR
        )
    assert states["job"] == "success" and xcom is not None
    assert [j["name"] for j in sm.jobs()] == ["nightly"]
    assert (xcom["selected_instance_type"], xcom["preference_rank"]) == (P5, 1)
    assert [(s["stage"], s["ended"]) for s in xcom["return_value"]["stages"]] == [(1, "selected")]
    assert xcom["pending_seconds"] == pytest.approx(30 * 60, abs=120)


def test_three_stages_each_still_pending_when_the_next_window_opens(sm: Any, run_test_dag: Any) -> None:
    sm.load_scenario(
        p5_frees_at(10 * HOUR, capacity={P5: [{"from": 0, "free": 0}], G5: [{"from": 0, "free": 0}]})
    )
    with ticking(sm, step=30):
        states, xcom = run_test_dag(
            "t_train_capacity",
            config=training_config(),
            prefs=windows(None, HOUR, 2 * HOUR),
            max_pending=5 * HOUR,
        )
    assert states["job"] == "success" and xcom is not None
    jobs = {j["name"]: j for j in sm.jobs()}
    assert sorted(jobs) == ["nightly", "nightly-s2", "nightly-s3"]
    assert [offered(jobs[n]) for n in ("nightly", "nightly-s2", "nightly-s3")] == [
        [P5],
        [P5, G5],
        [P5, G5, P4D],
    ]
    assert all(jobs[n]["status"] == "Stopped" and never_selected(jobs[n]) for n in ("nightly", "nightly-s2"))
    assert (xcom["job_name"], xcom["selected_instance_type"], xcom["preference_rank"]) == (
        "nightly-s3",
        P4D,
        3,
    )
    stages = xcom["return_value"]["stages"]
    assert [(s["stage"], s["ended"]) for s in stages] == [(1, "escalated"), (2, "escalated"), (3, "selected")]
    # Stage 2 opened an hour into the wait and ran until two hours in: about an hour of its own.
    assert HOUR - 900 < stages[1]["pending_seconds"] < HOUR + 900
    assert 2 * HOUR - BEFORE_PENDING <= xcom["pending_seconds"] < 2 * HOUR + 1800


@contextlib.contextmanager
def capacity_frees_between_the_trigger_and_the_task(
    sm: Any, window: float, hold: float = 4.0
) -> Iterator[list[str]]:
    """Let the trigger see the job still Pending once its window has opened, and the task's look that
    follows see it selected.

    Only the trigger calls DescribeTrainingJob while the task is deferred, so it is paced by holding that
    answer back ``hold`` real seconds: once one held answer stands for the trigger, the clock jumps past
    the window, the trigger's next look takes effect there (Pending, the window closed), and while that
    answer is held the clock jumps past the moment p5 frees, before the task resumes and looks itself.
    Yields the steps that happened, in order.
    """
    paced: list[str] = []
    describe = "DescribeTrainingJob"

    def stats() -> dict[str, Any]:
        return sm.stats()

    def wait_for(condition: Any, done: threading.Event) -> bool:
        give_up = time.monotonic() + 120
        while not done.wait(0.02):
            if condition(stats()):
                return True
            if time.monotonic() > give_up:
                return False
        return False

    def drive(done: threading.Event) -> None:
        if not wait_for(lambda s: s["operations"].get(describe), done):
            return
        sm.set_faults(response_latency_ms={describe: hold * 1000})
        if not wait_for(lambda s: s["in_flight"].get(describe), done):
            return
        sm.advance(window + 10)  # the trigger's held look took effect before: its next one is past the window
        before = stats()["operations"][describe]
        if wait_for(lambda s: s["operations"][describe] > before and s["in_flight"].get(describe), done):
            paced.append("window closed while Pending")
            sm.advance(600)  # p5 frees while the trigger's Pending answer is on its way
            paced.append("p5 freed before the task's look")
        sm.set_faults(response_latency_ms={})

    with in_background(drive):
        yield paced


def test_capacity_freeing_as_the_window_opens_keeps_the_job(sm: Any, run_test_dag: Any) -> None:
    # The trigger sees the job still Pending when the window opens; p5 frees before the task's look.
    sm.load_scenario(p5_frees_at(HOUR + 300))
    with capacity_frees_between_the_trigger_and_the_task(sm, HOUR) as paced:
        states, xcom = run_test_dag(
            "t_train_escalate_race", config=training_config(), prefs=windows(None, HOUR), max_pending=4 * HOUR
        )
    assert states["job"] == "success" and xcom is not None
    assert [j["name"] for j in sm.jobs()] == ["nightly"]
    assert sm.job("nightly")["status"] in ("InProgress", "Completed")
    assert (xcom["selected_instance_type"], xcom["preference_rank"]) == (P5, 1)
    # The trigger's look that ended its wait saw the job Pending past the window (so it reported the window
    # closed), and p5 had freed before the task looked again: the job was kept by the window's close.
    assert paced == ["window closed while Pending", "p5 freed before the task's look"]


def test_cpu_only_stage_without_capacity_goes_to_the_next_stage_at_once(sm: Any, run_test_dag: Any) -> None:
    sm.load_scenario(p5_frees_at(0, capacity={C5: [{"from": 0, "free": 0}]}))
    prefs = [
        {"instance_type": C5, "instance_count": 1},
        {"instance_type": G5, "instance_count": 1, "accept_after": 2 * HOUR},
    ]
    with ticking(sm, step=30):
        states, xcom = run_test_dag(
            "t_train_capacity", config=training_config(), prefs=prefs, max_pending=4 * HOUR
        )
    assert states["job"] == "success" and xcom is not None
    first, second = sm.job("nightly"), sm.job("nightly-s2")
    assert first["status"] == "Failed" and "CapacityError" in first["failure_reason"]
    assert offered(second) == [C5, G5]
    # Submitted right away, not two hours later: a CPU-only list cannot wait at SageMaker.
    assert second["created_at"] - first["created_at"] < 600
    assert (xcom["selected_instance_type"], xcom["preference_rank"]) == (G5, 2)
    assert [s["ended"] for s in xcom["return_value"]["stages"]] == ["no-capacity", "selected"]


def test_max_pending_running_out_inside_stage_two_stops_it_and_fails_with_a_capacity_timeout(
    sm: Any, run_test_dag: Any, capacity_record: Any
) -> None:
    sm.load_scenario(p5_frees_at(10 * HOUR, capacity={"ml.*": [{"from": 0, "free": 0}]}))
    with ticking(sm, step=60):
        states, xcom = run_test_dag(
            "t_train_capacity",
            config=training_config(),
            prefs=windows(None, HOUR),
            max_pending=HOUR + 20 * 60,
        )
    assert states["job"] == "failed" and xcom is None
    first, second = sm.job("nightly"), sm.job("nightly-s2")
    assert first["status"] == second["status"] == "Stopped"
    # 20 minutes remained for stage 2: below SageMaker's 30-minute minimum, so the provider stopped it.
    stopping = next(t["emulated_time"] for t in second["timeline"] if t["secondary_status"] == "Stopping")
    assert HOUR + 20 * 60 <= stopping - first["created_at"] < HOUR + 40 * 60
    record = capacity_record("t_train_capacity")
    assert record is not None and record["failure_kind"] == "capacity_timeout"
    assert [(s["stage"], s["ended"]) for s in record["stages"]] == [(1, "escalated"), (2, "timed-out")]


def test_worker_killed_between_stages_continues_with_the_next_stage_on_retry(
    sm: Any, run_test_dag: Any
) -> None:
    # p5 never frees: however long the retry takes, stage 2 can only get the second entry.
    sm.load_scenario(p5_frees_at(100 * HOUR, capacity={P5: [{"from": 0, "free": 0}]}))
    with ticking(sm, step=30):
        states, xcom = run_test_dag(
            "t_train_escalate_crash",
            config=training_config(),
            prefs=windows(None, HOUR),
            max_pending=4 * HOUR,
        )
    assert states["job"] == "success" and xcom is not None
    # One job per stage: the retry neither resubmitted stage 1 (-r2) nor ran two stages at once.
    assert sorted(j["name"] for j in sm.jobs()) == ["nightly", "nightly-s2"]
    assert sm.job("nightly")["status"] == "Stopped"
    assert (xcom["job_name"], xcom["selected_instance_type"]) == ("nightly-s2", G5)
    assert [s["ended"] for s in xcom["return_value"]["stages"]] == ["escalated", "selected"]
    # Each stage is its own job and carries the try that created it.
    client = sm.boto3_client("sagemaker")
    tries = {
        name: {t["Key"]: t["Value"] for t in client.list_tags(ResourceArn=sm.job(name)["arn"])["Tags"]}[
            "sm-prefs:try-number"
        ]
        for name in ("nightly", "nightly-s2")
    }
    assert tries == {"nightly": "1", "nightly-s2": "2"}
    assert xcom["identity_tags"]["sm-prefs:try-number"] == "2"


def test_processing_stages_use_client_side_windows(sm: Any, run_test_dag: Any) -> None:
    sm.load_scenario(p5_frees_at(0, capacity={"ml.g5.xlarge": [{"from": 0, "free": 0}]}))
    prefs = [
        {"instance_type": "ml.g5.xlarge", "instance_count": 1},
        {"instance_type": "ml.g4dn.xlarge", "instance_count": 1, "accept_after": HOUR},
    ]
    with ticking(sm):
        states, xcom = run_test_dag(
            "t_process", config=processing_config(), prefs=prefs, max_pending=3 * HOUR
        )
    assert states["job"] == "success" and xcom is not None
    assert sm.job("prep")["status"] == "Stopped" and never_selected(sm.job("prep"))
    assert (xcom["job_name"], xcom["selected_instance_type"], xcom["preference_rank"]) == (
        "prep-s2",
        "ml.g4dn.xlarge",
        2,
    )


def test_non_deferrable_task_escalates_the_same_way_to_completion(sm: Any, run_test_dag: Any) -> None:
    sm.load_scenario(p5_frees_at(90 * 60))
    with ticking(sm, step=30):
        states, xcom = run_test_dag(
            "t_train_sync", config=training_config(), prefs=windows(None, HOUR), max_pending=4 * HOUR
        )
    assert states["job"] == "success" and xcom is not None
    assert sm.job("nightly")["status"] == "Stopped" and never_selected(sm.job("nightly"))
    assert (xcom["job_name"], xcom["selected_instance_type"], xcom["job_status"]) == (
        "nightly-s2",
        G5,
        "Completed",
    )
    assert [s["ended"] for s in xcom["return_value"]["stages"]] == ["escalated", "selected"]


def test_an_entry_left_out_by_the_guardrails_never_returns_in_a_later_stage(
    sm: Any, run_test_dag: Any
) -> None:
    # No p5 quota: the guardrails leave p5 out; g5 (its window now the start) is offered at once and
    # p4d after its own window; p5 appears in no stage.
    sm.load_scenario(
        {
            **p5_frees_at(100 * HOUR, capacity={G5: [{"from": 0, "free": 0}]}),
            "quotas": {"training": {P5: 0}},
        }
    )
    with ticking(sm, step=30):
        states, xcom = run_test_dag(
            "t_train_capacity",
            config=training_config(),
            prefs=windows(None, HOUR, 2 * HOUR),
            max_pending=5 * HOUR,
        )
    assert states["job"] == "success" and xcom is not None
    jobs = {j["name"]: j for j in sm.jobs()}
    assert sorted(jobs) == ["nightly", "nightly-s2"]
    assert offered(jobs["nightly"]) == [G5] and offered(jobs["nightly-s2"]) == [G5, P4D]
    assert (xcom["selected_instance_type"], xcom["preference_rank"]) == (
        P4D,
        3,
    )  # rank in the list as written
    assert [x["instance_type"] for x in xcom["return_value"]["excluded"]] == [P5]
    # p4d's window still counts from the start of the wait: about two hours in, not one.
    stage_one = xcom["return_value"]["stages"][0]
    assert 2 * HOUR - BEFORE_PENDING <= stage_one["pending_seconds"] < 2 * HOUR + 900


class EndsOnceWithoutEventTrigger(SageMakerCapacityTrigger):
    """The capacity trigger, except that its first run ends without an event after one look at the job.

    ``dag.test()`` then resumes the task with the deferral's arguments alone, as it does whenever the
    inline run of a trigger ends without one. Which run is the first is kept in a file (``ENDED``), so the
    trigger dag.test() rebuilds from its class path finds it however the module was imported.
    """

    ENDED: ClassVar[Path | None] = None
    #: The job's secondary status at the early end.
    LOOKED: ClassVar[list[str]] = []

    async def run(self) -> AsyncIterator[TriggerEvent]:
        ended = type(self).ENDED
        if ended is not None and not ended.exists():
            ended.write_text(self.spec.job_name)
            async with await self.hook.get_async_conn() as client:
                describe = await SageMakerPreferenceHook.describe_job_async(client, self.kind, self.job_name)
            type(self).LOOKED.append(str((describe or {}).get("SecondaryStatus")))
            return
        async for event in super().run():
            yield event
            return


def test_a_wait_that_ends_without_an_event_looks_again_and_waits_on_instead_of_failing(
    sm: Any, run_test_dag: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Stage 1's trigger stops early, with the job Pending and its window an hour away; a triggerer would
    # have kept waiting. The task must look again and defer with the same window, not fail (or close it).
    monkeypatch.setattr(waiting, "SageMakerCapacityTrigger", EndsOnceWithoutEventTrigger)
    monkeypatch.setattr(EndsOnceWithoutEventTrigger, "ENDED", tmp_path / "ended")
    monkeypatch.setattr(EndsOnceWithoutEventTrigger, "LOOKED", [])
    sm.load_scenario(p5_frees_at(10 * HOUR))
    with ticking(sm):
        states, xcom = run_test_dag(
            "t_train_capacity", config=training_config(), prefs=windows(None, HOUR), max_pending=4 * HOUR
        )
    assert EndsOnceWithoutEventTrigger.LOOKED == ["Pending"]  # it did end early, the job still waiting
    assert (tmp_path / "ended").read_text() == "nightly"
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None
    assert (xcom["job_name"], xcom["selected_instance_type"], xcom["preference_rank"]) == (
        "nightly-s2",
        G5,
        2,
    )
    stages = xcom["return_value"]["stages"]
    assert [(s["stage"], s["job_name"], s["ended"]) for s in stages] == [
        (1, "nightly", "escalated"),
        (2, "nightly-s2", "selected"),
    ]
    # Stage 1 still had its whole window: closed about an hour in, not at the early end.
    assert HOUR - BEFORE_PENDING <= stages[0]["pending_seconds"] < HOUR + 900
