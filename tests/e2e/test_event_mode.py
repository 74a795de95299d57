"""Event mode with two triggerer processes sharing one queue of SageMaker's EventBridge events.

This module runs its own deployment: two triggerers (Airflow's HA mode), and ``[sm_prefs]
event_queue_url`` pointing both at one SQS queue that an EventBridge rule on the offline SageMaker feeds
with its job state-change events. The safety List cadence is 600 s, longer than the test: a task whose
wait ends within it was woken by an event. Each triggerer receives events about the other one's jobs
too; passing them on must lose none.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections import Counter

import pytest
from e2e_reliability import Ledger
from e2e_support import deferred_on, finish, fleet_waiting_for_capacity, job_tis, unique, wait_for
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
    # A triggerer takes every unassigned trigger up to its capacity in one loop: 20 deferrals can all land
    # on one. At most 12 each, the 20 capacity triggers are split over both (and the completion triggers
    # that follow fit in the 24 slots).
    "AIRFLOW__TRIGGERER__CAPACITY": "12",
    "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "120",
}
TASKS = 20
EVENT_WOKE = "A SageMaker event shows"
#: What a triggerer's event consumer says once it has heard of another consumer of its queue.
PEER_HEARD = "Another consumer reads the event queue"


#: How long the List count must stay unchanged before capacity opens: longer than the second pass that
#: measures the service clock's rate (hooks.clock.ServiceClock.MIN_SPAN + 0.5 s after the first) plus the
#: early pass a late registration brings (watcher.EARLY_PASS_MIN_GAP), with room for a loaded machine.
QUIET_LISTING_SECONDS = 10.0


def lists_settled(af: LocalAirflow) -> int:
    """The List calls so far, once every triggerer's List loop has made its first passes and gone quiet.

    A triggerer registers the capacity triggers it takes over several seconds on a loaded machine, and the
    loop answers late registrations with early passes: counting from a fixed sleep counted those as passes
    made while the tasks woke. Waiting for the count to stand still (on a condition, with a deadline) makes
    the count after capacity opens the passes the wake brought, and nothing else.
    """
    last = {"count": -1, "since": time.monotonic()}

    def quiet() -> int | None:
        count = lists(af.sm.stats())
        now = time.monotonic()
        if count != last["count"]:
            last.update(count=count, since=now)
            return None
        settled = count >= E2E_TRIGGERERS and now - last["since"] >= QUIET_LISTING_SECONDS
        return count if settled else None

    result: int = wait_for(
        quiet,
        STAGE_TIMEOUT,
        f"the List loops to go quiet for {QUIET_LISTING_SECONDS:.0f} s",
        every=0.5,
        detail=lambda: f"{lists(af.sm.stats())} List calls",
    )
    return result


def elsewhere_event(number: int, account: str, region: str) -> str:
    """An EventBridge message about a training job no task of this deployment watches."""
    name = f"elsewhere-{number:04d}"
    return json.dumps(
        {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "SageMaker Training Job State Change",
            "source": "aws.sagemaker",
            "account": account,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": region,
            "resources": [f"arn:aws:sagemaker:{region}:{account}:training-job/{name}"],
            "detail": {
                "TrainingJobName": name,
                "TrainingJobStatus": "InProgress",
                "SecondaryStatus": "Starting",
            },
        }
    )


def consumers_acquainted(af: LocalAirflow, run_id: str, triggerer_ids: set[int]) -> int:
    """Wait until each triggerer's event consumer has heard of the other; returns the events it took.

    A consumer that has heard of no other consumer of its queue drops an event about a job it does not
    watch (it keeps one every few seconds, released, to be heard of: triggers/eventbridge_queue.py), so
    until the two have heard of each other an event about a job the other triggerer holds may be lost,
    and that job's task wakes at a List pass instead (documented: docs/events.md). Events about jobs
    nobody here watches, put on the queue as the EventBridge rule would, make both hear of each other;
    what each consumer says then, in the log of a trigger it runs, is the condition waited on.
    """
    sqs = af.sm.boto3_client("sqs")
    url = sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"]
    account = url.rstrip("/").split("/")[-2]
    numbers = itertools.count()

    def said(triggerer_id: int) -> bool:
        pattern = f"dag_id=e2e_fleet/run_id={run_id}/task_id=job/map_index=*/attempt=1.log.trigger.{triggerer_id}.log"
        return any(PEER_HEARD in log.read_text(errors="replace") for log in af.log_dir.glob(pattern))

    def heard() -> bool:
        sqs.send_message(QueueUrl=url, MessageBody=elsewhere_event(next(numbers), account, af.sm.region))
        return all(said(triggerer_id) for triggerer_id in triggerer_ids)

    wait_for(heard, STAGE_TIMEOUT, "each triggerer's event consumer to hear of the other", every=1.0)
    return next(numbers)


def woken_by_event(af: LocalAirflow, run_id: str, map_index: int, triggerer_id: int) -> bool:
    log = trigger_log(af, run_id, map_index, triggerer_id)
    return log.exists() and EVENT_WOKE in log.read_text(errors="replace")


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
    introductions = consumers_acquainted(airflow, run_id, alive)
    listed_before = lists_settled(airflow)

    airflow.sm.advance(opens_at - airflow.sm.clock()["elapsed"] + 1)
    opened = time.monotonic()

    def capacity_triggers_done() -> bool:
        return not any(
            ti["trigger"] and (ti["trigger"]["id"], ti["trigger"]["created_date"]) in capacity_triggers
            for ti in job_tis(airflow, run_id)
        )

    wait_for(capacity_triggers_done, STAGE_TIMEOUT, "every capacity trigger to fire", every=0.5)
    fired_in = time.monotonic() - opened
    # Counted up to the last capacity trigger's end: the completion triggers that follow register over as
    # long as the workers take to resume their tasks, and each registration may bring an early pass.
    listed_while_waking = lists(airflow.sm.stats()) - listed_before
    deferred_on(airflow, "e2e_fleet", run_id, "job", count, previous=capacity_triggers, timeout=STAGE_TIMEOUT)
    resumed_in = time.monotonic() - opened

    # Every capacity trigger fired within seconds while the List loops' next passes were 600 s away: what
    # woke them, on whichever triggerer held them, was their jobs' events. A task that resumed meanwhile
    # waits for completion on a new trigger, whose registration may bring one early pass per triggerer
    # (20 jobs: one page each).
    assert fired_in < 120, f"the capacity triggers fired {fired_in:.0f} s after capacity opened"
    assert listed_while_waking <= E2E_TRIGGERERS, f"{listed_while_waking} List calls while the tasks woke"
    # The trigger logs say so too, where the capacity trigger's log survives: a task whose completion
    # trigger runs on the same triggerer gets the same log file name, and Airflow starts it afresh.
    said = sum(1 for i in range(count) if woken_by_event(airflow, run_id, i, owner_of[i]))
    assert said > 0, "no trigger log says an event woke it"

    airflow.sm.advance(10 + 3600 + 10 + 1)
    state = airflow.wait_for_run("e2e_fleet", run_id, timeout=STAGE_TIMEOUT)
    assert state == "success", airflow.ti_states("e2e_fleet", run_id)
    tis = job_tis(airflow, run_id)
    assert {(ti["state"], ti["try_number"]) for ti in tis} == {("success", 1)}
    assert stops(airflow.sm.stats(), names) == 0
    print(
        f"\nevent mode: {count} tasks on two triggerers {dict(spread)}, one queue; every wait woken by its "
        f"event, every capacity trigger fired within {fired_in:.1f} s and all tasks "
        f"resumed within {resumed_in:.0f} s of capacity opening, {listed_while_waking} List calls meanwhile; {said} capacity-trigger logs kept, each says an event woke it"
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
        faults="each triggerer receives the other's events (SQS hands each message to one consumer); "
        f"the two consumers heard of each other first ({introductions} events about other jobs)",
        outcome=f"{count}/{count} woken by their own event within {fired_in:.0f} s (safety List pass: 600 s), "
        "succeeded on their first try",
    )
