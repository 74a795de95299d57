"""Airflow's triggerer HA mode: two triggerer processes share the capacity waits; one dies with kill -9.

This module runs its own deployment with two triggerers (``triggerer`` and ``triggerer-2``, each its own
``TriggererJob``). Each triggerer takes unassigned triggers up to its ``[triggerer] capacity`` (Airflow's
default, 1,000) in every loop, so triggers created while both run land on whichever asks first: they
spread over both without any setting, and either one alone can hold them all. A triggerer whose heartbeat
is older than ``triggerer_health_check_threshold`` (10 s in this deployment) counts as dead, and the
survivor takes its triggers in its next loop.

Each triggerer process has its own shared ``ListTrainingJobs`` loop; every pass lists all InProgress jobs,
the other triggerer's too, and wakes only the waiters registered in that process.

``SM_PREFS_E2E_HA_TASKS`` sets how many tasks wait (default below; ``make e2e-ha`` runs 200).
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from e2e_reliability import Ledger
from e2e_support import (
    deferred_on,
    finish,
    fleet_waiting_for_capacity,
    job_tis,
    pending_from_timeline,
    unique,
    wait_for,
)

from airflow_provider_sm_prefs.domain.outcome import XComKey
from harness.deployment import LocalAirflow

pytestmark = pytest.mark.e2e

E2E_TRIGGERERS = 2
E2E_DAGS = ("e2e_fleet",)
#: Hundreds of task processes on 2 cores keep the one api-server worker busy: a task's calls to the
#: Execution API may take longer than Airflow's default 5 s (it retries 5 times, then fails the task).
#: And a scheduler starved of CPU for 30 s (the default threshold) declares its own job dead and resets
#: its running tasks as orphans, which starts them again as a second try (seen with 200 tasks at a load
#: average of 60); this scenario is about the triggerer, so the scheduler gets 120 s.
E2E_ENV = {
    "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "120",
}
#: Tasks waiting for capacity when one triggerer dies.
TASKS = int(os.environ.get("SM_PREFS_E2E_HA_TASKS", "60"))
#: Seconds for each stage (all deferred, taken over, all resumed, all done). A 2-core machine runs about
#: one task process a second, several times fewer while other work shares it (60 tasks took 5 minutes to
#: be all deferred at a load average of 40).
STAGE_TIMEOUT = 240.0 + 5.0 * TASKS
KILLED, SURVIVOR = "triggerer-2", "triggerer"


def trigger_log(af: LocalAirflow, run_id: str, map_index: int, triggerer_id: int) -> Path:
    """The log a triggerer writes for one mapped task's trigger (first try)."""
    return (
        af.log_dir
        / "dag_id=e2e_fleet"
        / f"run_id={run_id}"
        / "task_id=job"
        / f"map_index={map_index}"
        / f"attempt=1.log.trigger.{triggerer_id}.log"
    )


def describes(stats: dict[str, Any], names: list[str]) -> dict[str, int]:
    return {n: stats["jobs"].get(n, {}).get("DescribeTrainingJob", 0) for n in names}


def all_waiting(af: LocalAirflow, run_id: str, names: list[str]) -> list[dict[str, Any]]:
    """Until every task of the run is deferred on a triggerer with its job Pending; their instances."""
    count = len(names)

    def check() -> list[dict[str, Any]] | None:
        run = af.dag_run("e2e_fleet", run_id)["state"]
        assert run in ("queued", "running"), f"the run is {run}: {af.ti_states('e2e_fleet', run_id)}"
        jobs = {j["name"]: j for j in af.sm.jobs()}
        tis = job_tis(af, run_id)
        ready = (
            len(tis) == count
            and all(ti["state"] == "deferred" and (ti["trigger"] or {}).get("triggerer_id") for ti in tis)
            and all(jobs.get(n, {}).get("secondary_status") == "Pending" for n in names)
        )
        return tis if ready else None

    tis: list[dict[str, Any]] = wait_for(
        check, STAGE_TIMEOUT, f"{count} tasks deferred with their jobs Pending", every=2.0
    )
    return tis


def stops(stats: dict[str, Any], names: list[str]) -> int:
    """StopTrainingJob calls on these jobs (another scenario's teardown may have stopped its own)."""
    return sum(stats["jobs"].get(n, {}).get("StopTrainingJob", 0) for n in names)


def lists(stats: dict[str, Any]) -> int:
    return int(stats["operations"].get("ListTrainingJobs", 0))


#: Tasks waiting while one triggerer stalls (a smaller fleet: what matters is that the stalled one held some).
STALL_TASKS = min(TASKS, 20)


@pytest.mark.timeout(600 + 4 * STAGE_TIMEOUT)
def test_a_stalled_triggerer_losing_its_triggers_stops_no_job(airflow: LocalAirflow, ledger: Ledger) -> None:
    """A live triggerer whose heartbeat lapses loses its triggers to the other; when it wakes up, Airflow
    3.3 cancels them on it *with* ``on_kill`` (apache/airflow#73454). The trigger reads its task's state
    first: still deferred means the trigger moved, so the job keeps running and the task ends once."""
    started = time.monotonic()
    count, opens_at = STALL_TASKS, 50_000
    prefix = unique("stall")
    run_id, names = fleet_waiting_for_capacity(airflow, "triggerer-stall", prefix, count, opens_at, count)

    tis = all_waiting(airflow, run_id, names)
    capacity_triggers = {(ti["trigger"]["id"], ti["trigger"]["created_date"]) for ti in tis}
    spread = Counter(ti["trigger"]["triggerer_id"] for ti in tis)
    alive_before = {job["id"] for job in airflow.jobs("TriggererJob", alive=True)}
    assert len(alive_before) == 2, alive_before

    def alive_alone() -> int | None:
        alive = {j["id"] for j in airflow.jobs("TriggererJob", alive=True)}
        return alive.pop() if len(alive) == 1 else None

    # SIGSTOP: the process lives but neither heartbeats nor runs its triggers, as under a long GC pause
    # or a starved VM. The other triggerer takes its triggers once its heartbeat is 10 s old. Airflow may
    # have given every trigger to one triggerer: the stalled one must be a holder, so a process found to
    # hold none is woken again and the other one stalled instead.
    for stalled_name in (KILLED, SURVIVOR):
        paused = airflow.kill_process(stalled_name, signal.SIGSTOP)
        stalled_at = time.monotonic()
        try:
            survivor: int = wait_for(
                alive_alone, 60, "the stalled triggerer to stop counting as alive", every=1.0
            )
        except BaseException:
            airflow.kill_process(stalled_name, signal.SIGCONT)
            raise
        [stalled] = alive_before - {survivor}
        if spread[stalled]:
            break
        airflow.kill_process(stalled_name, signal.SIGCONT)
        wait_for(
            lambda: len(airflow.jobs("TriggererJob", alive=True)) == 2, 60, f"{stalled_name} alive again"
        )
    moved = spread[stalled]
    try:

        def on_survivor() -> bool:
            tis = job_tis(airflow, run_id)
            return {ti["state"] for ti in tis} == {"deferred"} and {
                (ti["trigger"] or {}).get("triggerer_id") for ti in tis
            } == {survivor}

        wait_for(on_survivor, STAGE_TIMEOUT, "the other triggerer to take every trigger", every=1.0)
    finally:
        airflow.kill_process(stalled_name, signal.SIGCONT)
    taken_over = time.monotonic() - stalled_at

    # Awake again, the stalled triggerer finds its triggers assigned elsewhere and cancels each one the way
    # a user's clear or mark would be: the log of every trigger it held says so.
    def cancelled_there(map_index: int) -> bool:
        log = trigger_log(airflow, run_id, map_index, stalled)
        return log.exists() and "another triggerer took it over" in log.read_text(errors="replace")

    held = sorted(ti["map_index"] for ti in tis if ti["trigger"]["triggerer_id"] == stalled)
    wait_for(lambda: all(cancelled_there(i) for i in held), STAGE_TIMEOUT, "the woken triggerer's on_kill")
    assert stops(airflow.sm.stats(), names) == 0, "on_kill stopped a job"
    assert {j["status"] for j in airflow.sm.jobs() if j["name"] in names} == {"InProgress"}
    assert {(ti["trigger"]["id"], ti["trigger"]["created_date"]) for ti in job_tis(airflow, run_id)} == (
        capacity_triggers
    ), "a task left its trigger"

    airflow.sm.advance(opens_at - airflow.sm.clock()["elapsed"] + 1)
    deferred_on(airflow, "e2e_fleet", run_id, "job", count, previous=capacity_triggers, timeout=STAGE_TIMEOUT)
    airflow.sm.advance(10 + 3600 + 10 + 1)
    state = airflow.wait_for_run("e2e_fleet", run_id, timeout=STAGE_TIMEOUT)
    assert state == "success", airflow.ti_states("e2e_fleet", run_id)
    tis = job_tis(airflow, run_id)
    assert {(ti["state"], ti["try_number"]) for ti in tis} == {("success", 1)}, "a task ran more than once"
    jobs = {j["name"]: j for j in airflow.sm.jobs() if j["name"].startswith(prefix)}
    assert sorted(jobs) == names and {j["status"] for j in jobs.values()} == {"Completed"}
    assert stops(airflow.sm.stats(), names) == 0
    wait_for(
        lambda: len(airflow.jobs("TriggererJob", alive=True)) == 2, 60, "the woken triggerer alive again"
    )
    print(
        f"\ntriggerer stall: {count} tasks, {moved} on the stalled triggerer ({len(paused)} processes "
        f"SIGSTOPped), taken over after {taken_over:.0f} s, cancelled there with on_kill, no job stopped"
    )
    finish(
        airflow,
        ledger,
        {n: ("e2e_fleet", run_id, "job", i) for i, n in enumerate(names)},
        started,
        id="triggerer-stall",
        order=18,
        scenario="Two triggerers; one stalls (SIGSTOP) past the health threshold while every task waits, its "
        "triggers move to the other, then it wakes up (SIGCONT) and Airflow cancels them there with on_kill",
        load=f"{count} mapped tasks deferred ({moved} on the stalled triggerer), {count} jobs Pending",
        faults=f"triggerer SIGSTOP for {taken_over:.0f} s, then SIGCONT",
        outcome=f"{count}/{count} succeeded on their first try; on_kill on the woken triggerer stopped no job "
        "(the task was still deferred); 1 job per task",
    )


@pytest.mark.timeout(600 + 5 * STAGE_TIMEOUT)
def test_one_of_two_triggerers_killed_while_tasks_wait_the_other_takes_every_trigger(
    airflow: LocalAirflow, ledger: Ledger
) -> None:
    started = time.monotonic()
    count, opens_at = TASKS, 50_000
    prefix = unique("ha")
    run_id, names = fleet_waiting_for_capacity(airflow, "triggerer-ha", prefix, count, opens_at, count)

    def alive_triggerers() -> set[int]:
        return {job["id"] for job in airflow.jobs("TriggererJob", alive=True)}

    # Both triggerers heartbeat: two TriggererJobs alive (a loaded machine may delay a heartbeat a while).
    triggerers: set[int] = wait_for(
        lambda: len(alive := alive_triggerers()) == 2 and alive, 60, "both triggerer jobs alive", every=1.0
    )

    tis = all_waiting(airflow, run_id, names)
    waited_at = time.monotonic()
    capacity_triggers = {(ti["trigger"]["id"], ti["trigger"]["created_date"]) for ti in tis}
    owner_of = {ti["map_index"]: ti["trigger"]["triggerer_id"] for ti in tis}
    spread = Counter(owner_of.values())
    # Airflow's own assignment spread the triggers over both triggerers.
    assert set(spread) == triggerers, f"triggers per triggerer job: {dict(spread)}, alive: {triggerers}"

    # Two List loops serve the wait, each listing every job; nothing changes, so nobody Describes.
    quiet_from = airflow.sm.stats()
    time.sleep(5)
    quiet_to = airflow.sm.stats()
    assert lists(quiet_to) > lists(quiet_from)
    assert describes(quiet_to, names) == describes(quiet_from, names)

    airflow.kill_process(KILLED, signal.SIGKILL)
    killed_at = time.monotonic()
    assert not airflow.is_alive(KILLED) and airflow.is_alive(SURVIVOR)
    wait_for(lambda: not airflow.members(KILLED), 10, "every process of the killed triggerer to be gone")
    before = airflow.sm.stats()

    def one_alive() -> int | None:
        alive = alive_triggerers()
        return alive.pop() if len(alive) == 1 else None

    # The triggerer whose heartbeat stopped is the one killed; the other keeps heartbeating.
    survivor = wait_for(one_alive, 60, "the killed triggerer's job to stop counting as alive", every=1.0)
    [dead] = triggerers - {survivor}
    orphaned = sorted(i for i, owner in owner_of.items() if owner == dead)
    assert orphaned, "the killed triggerer held no trigger"

    def started_on(triggerer_id: int, map_index: int) -> bool:
        log = trigger_log(airflow, run_id, map_index, triggerer_id)
        return log.exists() and " starting" in log.read_text(errors="replace")

    def taken_over() -> bool:
        tis = job_tis(airflow, run_id)
        return (
            {ti["state"] for ti in tis} == {"deferred"}
            # The same triggers (no task resumed or deferred again), every one on the survivor ...
            and {(ti["trigger"]["id"], ti["trigger"]["created_date"]) for ti in tis} == capacity_triggers
            and {(ti["trigger"] or {}).get("triggerer_id") for ti in tis} == {survivor}
            # ... which runs them: its trigger log of each orphaned task says so.
            and all(started_on(survivor, i) for i in orphaned)
        )

    wait_for(taken_over, STAGE_TIMEOUT, "the surviving triggerer to run every trigger", every=1.0)
    takeover_seconds = time.monotonic() - killed_at

    # The survivor's one List loop now serves all waits: it lists, and still nobody Describes a Pending job
    # (the taken-over triggers start from the listing, with the CreationTime they carry).
    listed_from = airflow.sm.stats()
    time.sleep(5)
    waiting = airflow.sm.stats()
    assert lists(waiting) > lists(listed_from) > lists(before)
    assert describes(waiting, names) == describes(before, names), "a Pending job was Described"
    assert {ti["state"] for ti in job_tis(airflow, run_id)} == {"deferred"}

    # Open the capacity window: every job leaves Pending at the same emulated instant; the survivor's
    # listing sees it and each task resumes once, then waits for completion (on the survivor: the only one).
    airflow.sm.advance(opens_at - airflow.sm.clock()["elapsed"] + 1)
    deferred_on(airflow, "e2e_fleet", run_id, "job", count, previous=capacity_triggers, timeout=STAGE_TIMEOUT)
    airflow.sm.advance(10 + 3600 + 10 + 1)
    state = airflow.wait_for_run("e2e_fleet", run_id, timeout=STAGE_TIMEOUT)
    assert state == "success", airflow.ti_states("e2e_fleet", run_id)

    tis = job_tis(airflow, run_id)
    assert {(ti["state"], ti["try_number"]) for ti in tis} == {("success", 1)}, "a task ran more than once"
    stats = airflow.sm.stats()
    jobs = {j["name"]: j for j in airflow.sm.jobs()}
    assert sorted(jobs) == names, "exactly one SageMaker job per task"
    assert stats["operations"]["CreateTrainingJob"] == count
    assert all(stats["jobs"][n]["CreateTrainingJob"] == 1 for n in names)
    assert stops(stats, names) == 0
    assert {j["status"] for j in jobs.values()} == {"Completed"}
    # After the kill each job is Described only when something changed: when it left Pending, when the task
    # resumed, when it ended (3 in the runs seen; 1 to spare): never once per poll.
    after_kill = {n: d - describes(before, names)[n] for n, d in describes(stats, names).items()}
    assert max(after_kill.values()) <= 4, sorted(after_kill.items(), key=lambda kv: -kv[1])[:5]
    for i, name in enumerate(names):
        pending = airflow.xcom("e2e_fleet", run_id, "job", XComKey.PENDING_SECONDS.value, map_index=i)
        expected = pending_from_timeline(jobs[name])
        # Pending time comes from AWS's transitions: the takeover neither reset nor double-counted it.
        assert expected > 1000
        assert pending == pytest.approx(expected, abs=0.01), name
        assert airflow.xcom("e2e_fleet", run_id, "job", XComKey.JOB_NAME.value, map_index=i) == name
    note = (
        f"{len(orphaned)} triggers taken over {takeover_seconds:.0f} s after the kill; "
        f"Describes per job after the kill ≤ {max(after_kill.values())}"
    )
    print(
        f"\ntriggerer HA: {count} tasks; spread {dict(spread)}; {note}; all waiting after "
        f"{waited_at - started:.0f} s; total {time.monotonic() - started:.0f} s"
    )
    finish(
        airflow,
        ledger,
        {n: ("e2e_fleet", run_id, "job", i) for i, n in enumerate(names)},
        started,
        id="triggerer-ha",
        order=17,
        scenario="Two triggerers (Airflow's HA mode), kill -9 of one (all its processes) while every task "
        "waits for capacity; not restarted",
        load=f"{count} mapped tasks deferred ({spread[dead]} on the killed triggerer, {spread[survivor]} on "
        f"the other), {count} jobs Pending",
        faults="triggerer SIGKILL, never restarted",
        outcome=f"{count}/{count} succeeded on their first try; the survivor took every trigger "
        f"{takeover_seconds:.0f} s after the kill; 1 job per task; pending_seconds = emulator's Pending "
        "time; no Describe while Pending",
    )
