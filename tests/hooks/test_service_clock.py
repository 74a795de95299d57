"""The service's clock between answers: AWS's runs at this process's rate; a compressed one is followed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow_provider_sm_prefs.hooks.clock import ServiceClock

T0 = datetime(2026, 9, 15, 2, tzinfo=timezone.utc)


def test_before_any_answer_there_is_no_service_time_and_a_timed_wait_is_no_longer_than_a_measurement() -> (
    None
):
    clock = ServiceClock()
    assert clock.now(10.0) is None
    # A wait for a service time (a window's close) that starts before the first List pass has answered is
    # as short as one with a single answer: a whole cap (the poll interval) could carry it past its time
    # on a compressed clock. Without a service time to wait for, the cap.
    assert clock.wait_for(10.0, T0, 7200.0, 30.0) == ServiceClock.MIN_SPAN + 0.5
    assert clock.wait_for(10.0, T0, None, 30.0) == 30.0
    # One answer: no rate yet, so the wait is no longer than the span that measures one.
    clock.observe(T0, 10.0)
    assert clock.wait_for(10.0, T0, 7200.0, 30.0) == ServiceClock.MIN_SPAN + 0.5


def test_an_ordinary_clock_runs_at_this_processs_rate_whatever_the_date_resolution() -> None:
    clock = ServiceClock()
    clock.observe(T0, 100.0)
    clock.observe(T0 + timedelta(seconds=31), 130.0)  # a second of Date resolution over 30 s
    assert clock.rate == 1.0
    # The shortest span measured, with a whole second of resolution against it, is still the host's rate.
    worst = ServiceClock()
    worst.observe(T0, 0.0)
    worst.observe(T0 + timedelta(seconds=3.5), ServiceClock.MIN_SPAN)
    assert worst.measured and worst.rate == 1.0
    assert clock.now(140.0) == T0 + timedelta(seconds=41)
    # The window closes 20 s of service time after the created instant's 30 s: wake then, not at the cap.
    assert clock.wait_for(140.0, T0 + timedelta(seconds=-9), 70.0, 30.0) == 20.0


def test_a_compressed_clock_is_followed_so_a_window_between_two_passes_is_not_missed() -> None:
    clock = ServiceClock()
    clock.observe(T0, 100.0)
    clock.observe(T0 + timedelta(hours=2), 130.0)  # 240x: two hours in 30 s
    assert clock.rate == 240.0
    assert clock.now(131.0) == T0 + timedelta(hours=2, minutes=4)
    created = T0 + timedelta(hours=1)
    # A window 2 h after creation closes 1 h after the last answer: 15 s from then, not at the next pass.
    assert clock.wait_for(130.0, created, 7200.0, 30.0) == 15.0
    # Past it, the wait is the floor: the caller looks (one Describe) instead of spinning.
    assert clock.wait_for(150.0, created, 7200.0, 30.0) == ServiceClock.FLOOR


def test_answers_closer_than_the_span_move_the_base_but_not_the_rate() -> None:
    clock = ServiceClock()
    clock.observe(T0, 100.0)
    clock.observe(T0 + timedelta(seconds=600), 100.2)  # too close to measure a rate
    assert clock.rate == 1.0 and clock.last == T0 + timedelta(seconds=600)
    assert not clock.measured
    clock.observe(T0 + timedelta(seconds=1200), 102.5)  # 2.5 s after the first: 1,200 s of service time
    assert clock.measured and clock.rate == 480.0
    # A clock that stands still (a frozen offline SageMaker) is no compressed clock.
    clock.observe(T0 + timedelta(seconds=1200), 105.0)
    assert clock.rate == 1.0
