"""Event mode with two triggerer processes sharing one queue of SageMaker's EventBridge events.

This module runs its own deployment: two triggerers (Airflow's HA mode), and ``[sm_prefs]
event_queue_url`` pointing both at one SQS queue that an EventBridge rule on the offline SageMaker feeds
with its job state-change events. The safety List cadence is 600 s, longer than the test: a task whose
wait ends within it was woken by an event. Each triggerer receives events about the other one's jobs
too; passing them on must lose none.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from e2e_reliability import Ledger
from e2e_support import deferred_on, finish, fleet_waiting_for_capacity, job_tis, unique
from test_triggerer_ha import STAGE_TIMEOUT, all_waiting, lists, stops, trigger_log

from harness.deployment import LocalAirflow

pytestmark = pytest.mark.e2e

QUEUE = "sm-prefs-e2e-events"
E2E_TRIGGERERS = 2
E2E_DAGS = ("e2e_fleet",)
#: The queue's AWS-style URL: the SQS client sends it to the connection's endpoint (the offline SageMaker,
#: which serves SQS too), so it can be configured before the deployment's port is known.
E2E_ENV = {
    "AIRFLOW__SM_PREFS__EVENT_QUEUE_URL": f"https://sqs.us-east-1.amazonaws.com/123456789012/{QUEUE}",
    "AIRFLOW__SM_PREFS__EVENT_SAFETY_LIST_SECONDS": "600",
    "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "120",
}
TASKS = 20
EVENT_WOKE = "A SageMaker event shows"


@pytest.mark.timeout(600 + 4 * STAGE_TIMEOUT)
def test_two_triggerers_on_one_event_queue_wake_every_task_by_its_event(
    airflow: LocalAirflow, ledger: Ledger
) -> None:
    started = time.monotonic()
    airflow.sm.create_event_queue(QUEUE)
    count, opens_at = TASKS, 50_000
    prefix = unique("events")
    run_id, names = fleet_waiting_for_capacity(airflow, "event-mode", prefix, count, opens_at, count)

    tis = all_waiting(airflow, run_id, names)
    capacity_triggers = {(ti["trigger"]["id"], ti["trigger"]["created_date"]) for ti in tis}
    owner_of = {ti["map_index"]: ti["trigger"]["triggerer_id"] for ti in tis}
    spread = Counter(owner_of.values())
    alive = {job["id"] for job in airflow.jobs("TriggererJob", alive=True)}
    assert set(spread) == alive and len(alive) == 2, f"triggers per triggerer: {dict(spread)}, alive: {alive}"
    time.sleep(5)  # every List loop has made its first pass; from here on only events wake anyone
    listed_before = lists(airflow.sm.stats())

    airflow.sm.advance(opens_at - airflow.sm.clock()["elapsed"] + 1)
    opened = time.monotonic()
    deferred_on(airflow, "e2e_fleet", run_id, "job", count, previous=capacity_triggers, timeout=STAGE_TIMEOUT)
    resumed_in = time.monotonic() - opened
    listed_while_waking = lists(airflow.sm.stats()) - listed_before

    # Every capacity trigger, on whichever triggerer held it, was woken by its job's event.
    def woken_by_event(map_index: int) -> bool:
        log = trigger_log(airflow, run_id, map_index, owner_of[map_index])
        return log.exists() and EVENT_WOKE in log.read_text(errors="replace")

    missing = [i for i in range(count) if not woken_by_event(i)]
    assert missing == [], f"tasks not woken by an event: {missing}"
    # ... with no List pass in between (each triggerer's next one is 600 s away).
    assert listed_while_waking == 0, f"{listed_while_waking} List calls while the tasks woke"

    airflow.sm.advance(10 + 3600 + 10 + 1)
    state = airflow.wait_for_run("e2e_fleet", run_id, timeout=STAGE_TIMEOUT)
    assert state == "success", airflow.ti_states("e2e_fleet", run_id)
    tis = job_tis(airflow, run_id)
    assert {(ti["state"], ti["try_number"]) for ti in tis} == {("success", 1)}
    assert stops(airflow.sm.stats(), names) == 0
    print(
        f"\nevent mode: {count} tasks on two triggerers {dict(spread)}, one queue; every wait woken by its "
        f"event, all resumed {resumed_in:.0f} s after capacity opened (dwell and scheduler included), "
        f"0 List calls meanwhile"
    )
    finish(
        airflow,
        ledger,
        {n: ("e2e_fleet", run_id, "job", i) for i, n in enumerate(names)},
        started,
        id="event-mode-two-triggerers",
        order=19,
        scenario="Event mode: two triggerers read one SQS queue fed by an EventBridge rule on SageMaker's job "
        "events; capacity opens for every waiting job at once",
        load=f"{count} mapped tasks deferred over two triggerers {dict(spread)}, {count} jobs Pending",
        faults="each triggerer receives the other's events (SQS hands each message to one consumer)",
        outcome=f"{count}/{count} woken by their own event with 0 List calls, resumed within "
        f"{resumed_in:.0f} s, succeeded on their first try",
    )
