"""The trigger holds an event that comes right after the deferral (Airflow's scheduler race).

Airflow 3.3's scheduler fails a task resumed before it has processed the worker's exit from the
deferral (apache/airflow#72716). The trigger yields nothing sooner than ``min_defer_seconds`` after
``deferred_at``; a longer wait is not delayed at all.

The triggerer's wall clock and sleep are injected (:class:`TriggererClock`): nothing here sleeps, and
what a test asserts is what the trigger decided (its holds) and when, on that clock, its event came.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.triggers import dwell
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger
from airflow_provider_sm_prefs.triggers.dwell import DEFAULT_MIN_DEFER_SECONDS, min_defer_seconds
from offline_sagemaker.jobs import training_config
from tests.clock import advancing_once_served
from tests.triggers.conftest import TriggererChannel

G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"
PREFS = [{"instance_type": G6, "instance_count": 1}, {"instance_type": G5, "instance_count": 1}]


def submit(sm: Any, name: str) -> None:
    request, _ = build_request("training", training_config(name, max_runtime_seconds=86400), PREFS, 86400)
    sm.boto3_client("sagemaker").create_training_job(**request)


#: The triggerer's wall clock when a test starts (any instant: nothing here reads the host's clock).
START = datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc)


class TriggererClock:
    """The wall clock and the sleep of :mod:`~airflow_provider_sm_prefs.triggers.dwell`, injected.

    It stands still but when the hold sleeps: then it moves on by the very seconds asked, at once. So
    :attr:`holds` is every hold the trigger decided, and :attr:`now` when the event comes says how long
    after the deferral it came on the triggerer's clock, however long the job's looks took on this host.
    """

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.holds: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.holds.append(seconds)
        self.now += timedelta(seconds=seconds)
        await asyncio.sleep(0)  # a sleep yields to the loop, as the real one does

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        clock = self

        class Datetime(datetime):
            @classmethod
            def now(cls, tz: Any = None) -> Any:
                assert tz is timezone.utc, "the dwell reads the clock in UTC"
                return clock.now

        monkeypatch.setattr(dwell, "datetime", Datetime)
        monkeypatch.setattr(dwell, "asyncio", SimpleNamespace(sleep=self.sleep))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> TriggererClock:
    """The triggerer's clock, standing at :data:`START` until the trigger holds its event."""
    triggerer = TriggererClock(START)
    triggerer.install(monkeypatch)
    return triggerer


def first_event(trigger: SageMakerCapacityTrigger) -> Any:
    async def first() -> Any:
        async for event in trigger.run():
            return event
        raise AssertionError("no event")

    return asyncio.run(asyncio.wait_for(first(), 300))


def event_of(trigger: SageMakerCapacityTrigger) -> dict[str, Any]:
    return dict(first_event(trigger).payload)


def trigger(name: str, deferred_at: datetime | None, hold: float | None) -> SageMakerCapacityTrigger:
    return SageMakerCapacityTrigger(
        job_name=name,
        preferences=PREFS,
        poll_interval=0.1,
        deferred_at=deferred_at.isoformat() if deferred_at else None,
        min_defer_seconds=hold,
    )


@pytest.fixture
def fast_job(sm: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A job that gets capacity at once: its trigger would fire within a poll of the deferral.

    The configured dwell is long (it is 0 for the rest of the suite): a trigger that wrongly falls back
    to it asks for a hold of its own, which the tests below see.
    """
    monkeypatch.setenv("AIRFLOW__SM_PREFS__MIN_DEFER_SECONDS", "30")
    sm.load_scenario({"time_scale": 600, "job_runtime_seconds": 86400})
    submit(sm, "fast")
    return "fast"


def test_an_event_right_after_the_deferral_is_held_until_the_dwell_has_passed(
    fast_job: str, clock: TriggererClock, capsys: pytest.CaptureFixture[str]
) -> None:
    # The event is ready 12 s after the deferral, on the triggerer's clock.
    deferred = START - timedelta(seconds=12)
    event = event_of(trigger(fast_job, deferred, 15.0))
    assert event["status"] == "success" and event["outcome"]["selected_instance_type"] == G6
    # Held for what was left of the dwell, before the event was yielded: it comes 15 s after the deferral.
    assert clock.holds == [3.0]
    assert clock.now - deferred == timedelta(seconds=15)
    # The outcome is SageMaker's, unchanged by the hold: no pending time added.
    assert event["outcome"]["pending_seconds"] < 60
    out = capsys.readouterr().out
    assert "Reporting fast in 3.0 s: its task deferred 12.0 s ago" in out and "min_defer_seconds=15.0" in out


def test_without_a_dwell_the_same_event_comes_at_once(fast_job: str, clock: TriggererClock) -> None:
    event = event_of(trigger(fast_job, START, 0))
    assert event["status"] == "success"
    assert clock.holds == [] and clock.now == START


def test_a_wait_longer_than_the_dwell_is_not_delayed(fast_job: str, clock: TriggererClock) -> None:
    # Deferred a minute ago (a triggerer restart, or a job that waited): nothing left to hold.
    event = event_of(trigger(fast_job, START - timedelta(minutes=1), 30.0))
    assert event["status"] == "success"
    assert clock.holds == [] and clock.now == START


def test_a_deferral_stamped_in_the_future_holds_no_longer_than_the_dwell(
    fast_job: str, clock: TriggererClock
) -> None:
    # The worker's clock an hour ahead of the triggerer's: the hold is still bounded by the dwell.
    event = event_of(trigger(fast_job, START + timedelta(hours=1), 1.0))
    assert event["status"] == "success"
    assert clock.holds == [1.0] and clock.now == START + timedelta(seconds=1)


def test_a_trigger_serialized_without_a_deferral_time_holds_nothing(
    fast_job: str, clock: TriggererClock
) -> None:
    # Rows written by a release without the dwell carry neither kwarg.
    classpath, kwargs = trigger(fast_job, None, None).serialize()
    kwargs.pop("deferred_at"), kwargs.pop("min_defer_seconds")
    event = event_of(SageMakerCapacityTrigger(**kwargs))
    assert event["status"] == "success"
    assert clock.holds == [] and clock.now == START


def test_the_deferral_kwargs_survive_serialization() -> None:
    at = datetime(2026, 11, 30, 2, 0, tzinfo=timezone.utc)
    _, kwargs = trigger("x", at, 7.5).serialize()
    assert kwargs["deferred_at"] == at.isoformat() and kwargs["min_defer_seconds"] == 7.5
    rebuilt = SageMakerCapacityTrigger(**kwargs)
    assert rebuilt.serialize()[1] == kwargs


def test_the_default_comes_from_the_airflow_config(monkeypatch: pytest.MonkeyPatch) -> None:
    assert min_defer_seconds(3) == 3.0
    monkeypatch.setenv("AIRFLOW__SM_PREFS__MIN_DEFER_SECONDS", "4.5")
    assert min_defer_seconds(None) == 4.5
    monkeypatch.delenv("AIRFLOW__SM_PREFS__MIN_DEFER_SECONDS")
    assert min_defer_seconds(None) == DEFAULT_MIN_DEFER_SECONDS


# -- the operators and the sensor stamp their deferral; the default comes from the config -------------------


@pytest.mark.usefixtures("airflow_db")
def test_a_deferring_operator_holds_a_fast_outcome_by_the_configured_dwell(
    sm: Any,
    run_test_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    clock: TriggererClock,
) -> None:
    # dag.test() runs the trigger right after the deferral. The clock stands still until the trigger's
    # first look, so the task always finds the job Pending and defers, however slow the machine; then
    # G6 is free 30 s (emulated) in, so the trigger fires within a poll. The task stamps its deferral and
    # the trigger holds by the one injected clock, which moves only when the trigger holds.
    sm.load_scenario({"time_scale": 0, "job_runtime_seconds": 86400, "phase_seconds": {"starting": 30}})
    monkeypatch.setenv("AIRFLOW__SM_PREFS__MIN_DEFER_SECONDS", "12")
    config = training_config("submitted", max_runtime_seconds=86400)
    with advancing_once_served(sm, "ListTrainingJobs", 30):
        states, xcom = run_test_dag("t_train_capacity", config=config, prefs=PREFS, max_pending=3600)
    assert states["job"] == "success" and xcom is not None
    assert xcom["selected_instance_type"] == G6 and xcom["pending_seconds"] < 60
    # Deferred at START, ready at START on the clock: held for the whole configured dwell.
    assert clock.holds == [12.0] and clock.now == START + timedelta(seconds=12)
    captured = capfd.readouterr()
    assert "Reporting submitted in 12.0 s: its task deferred 0.0 s ago" in captured.out + captured.err
    assert "min_defer_seconds=12.0" in captured.out + captured.err


@pytest.mark.parametrize(
    ("given", "configured", "expected"), [(None, "12", 12.0), (0, "12", None), (3, None, 3.0)]
)
def test_the_sensor_stamps_its_deferral(
    sm: Any,
    monkeypatch: pytest.MonkeyPatch,
    given: float | None,
    configured: str | None,
    expected: float | None,
    clock: TriggererClock,
) -> None:
    from airflow_provider_sm_prefs.compat import TaskDeferred
    from airflow_provider_sm_prefs.sensors.capacity import SageMakerCapacitySensor

    sm.load_scenario({"time_scale": 1, "capacity": {"ml.*": [{"from": 0, "free": 0}]}})
    submit(sm, "watched")
    if configured is None:
        monkeypatch.delenv("AIRFLOW__SM_PREFS__MIN_DEFER_SECONDS", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW__SM_PREFS__MIN_DEFER_SECONDS", configured)
    sensor = SageMakerCapacitySensor(task_id="watch", job_name="watched", min_defer_seconds=given)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})  # type: ignore[arg-type]
    _, kwargs = deferred.value.trigger.serialize()
    assert kwargs["min_defer_seconds"] == expected
    assert kwargs["deferred_at"] == "2026-12-01T02:00:00+00:00"  # the clock's START: stamped as it deferred


def test_an_event_that_ends_the_task_in_the_triggerer_is_not_held(
    fast_job: str, clock: TriggererClock, channel: TriggererChannel
) -> None:
    # The scheduler's race is with a task it finds scheduled, queued or running again: an ended one has none.
    from airflow.triggers.base import TaskSuccessEvent

    from airflow_provider_sm_prefs.triggers import finish

    plan = finish.FinishPlan(ti={"dag_id": "d", "task_id": "t", "run_id": "r"}).as_dict()
    ending = SageMakerCapacityTrigger(
        job_name=fast_job,
        preferences=PREFS,
        poll_interval=0.1,
        deferred_at=(START - timedelta(seconds=1)).isoformat(),
        min_defer_seconds=15.0,
        finish=plan,
    )

    async def first() -> Any:
        async for event in ending.run():
            return event
        raise AssertionError("no event")

    assert isinstance(channel.run(first), TaskSuccessEvent)
    assert clock.holds == [] and clock.now == START
    # It ended the task: its XComs went to the triggerer's supervisor, for the task of the plan.
    sets = channel.sets
    assert {(msg.dag_id, msg.run_id, msg.task_id, msg.map_index) for msg in sets.values()} == {
        ("d", "r", "t", -1)
    }
    assert (sets["selected_instance_type"].value, sets["job_name"].value) == (G6, "fast")
