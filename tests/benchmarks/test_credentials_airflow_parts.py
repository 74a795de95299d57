"""The pure parts of ``make bench-credentials-airflow``: the probe's summary and GC timer, the blocked-loop
warnings read from a triggerer log, session keys between two emulator snapshots, and the workload's
capacity window (the real deployment runs in ``tests/e2e/test_credentials_airflow.py``)."""

from __future__ import annotations

import gc
from pathlib import Path

from benchmarks.airflow_observe import blocked_warnings, session_use, usage_totals
from benchmarks.credentials_airflow import SMOKE, AirflowPlan, connection_env, deployment_env, queue_url
from benchmarks.loop_probe import GcTimer, LoopLagTrigger, lag_summary


def test_lag_summary_counts_and_quantiles() -> None:
    lags = [0.001] * 98 + [0.06, 0.4]
    summary = lag_summary(lags, [(100.0, 0.06), (200.0, 0.4)], 0.05, 1.0)
    assert summary["samples"] == 100
    assert summary["max_ms"] == 400.0
    assert summary["p50_ms"] == 1.0
    assert summary["over_counted"] == 2
    assert summary["slow"] == [[100.0, 60.0], [200.0, 400.0]]


def test_gc_timer_times_collections_per_generation() -> None:
    timer = GcTimer()
    gc.callbacks.append(timer)
    try:
        gc.collect(2)
    finally:
        gc.callbacks.remove(timer)
    assert timer.summary()["2"]["count"] >= 1


def test_probe_trigger_round_trips() -> None:
    classpath, kwargs = LoopLagTrigger("/tmp/stop", 0.02, max_seconds=60.0).serialize()
    assert classpath == "benchmarks.loop_probe.LoopLagTrigger"
    assert LoopLagTrigger(**kwargs).serialize() == (classpath, kwargs)


def test_blocked_warnings_are_read_from_the_log(tmp_path: Path) -> None:
    log = tmp_path / "triggerer.log"
    log.write_text(
        "x [info] Triggerer's async thread was blocked for 0.45 seconds, exceeding the configured ...\n"
        "y [info] 1001 triggers currently running\n"
        "z [info] Triggerer's async thread was blocked for 1.56 seconds, exceeding the configured ...\n",
        encoding="utf-8",
    )
    assert blocked_warnings(log) == {"count": 2, "max_seconds": 1.56}
    assert blocked_warnings(tmp_path / "missing.log") == {"count": 0, "max_seconds": None}


def test_session_use_counts_session_keys_that_signed_calls_between_snapshots() -> None:
    before = {"access_keys": {"ASIAONE": {"ListTrainingJobs": 3}, "bench-harness": {"CreateTrainingJob": 5}}}
    after = {
        "access_keys": {
            "ASIAONE": {"ListTrainingJobs": 3},
            "ASIATWO": {"ListTrainingJobs": 4},
            "ASIATHREE": {"ListTrainingJobs": 1, "DescribeTrainingJob": 1},
            "testing": {"ListTrainingJobs": 9},
        }
    }
    assert session_use(before, after) == {"session_keys": 2, "session_calls": 6}


def test_usage_totals_sum_cpu_and_take_the_largest_peak() -> None:
    usage = {
        "1": {"cpu_seconds": 10.5, "peak_rss_mib": 250.0},
        "2": {"cpu_seconds": 3.0, "peak_rss_mib": 275.5},
    }
    assert usage_totals(usage) == {"processes": 2, "cpu_seconds": 13.5, "peak_rss_mib": 275.5}


def test_capacity_comes_after_the_expected_deferral_plus_the_hours() -> None:
    plan = AirflowPlan(waits=1000, hours=12.0, time_scale=250.0, defer_per_wait=1.3, defer_slack=120.0)
    workload = plan.workload("poll")
    assert workload.first_step == (120.0 + 1300.0) * 250.0 + 12 * 3600
    assert workload.job_names[0] == "cra-poll-00000"
    assert SMOKE.waits == 10 and SMOKE.modes == ("poll",)


def test_connections_and_event_mode_environment(tmp_path: Path) -> None:
    env = connection_env("http://127.0.0.1:5005", 900, tmp_path)
    assert set(env) == {"AIRFLOW_CONN_AWS_CREDS_ASSUME_ROLE", "AIRFLOW_CONN_AWS_CREDS_WEB_IDENTITY"}
    assert '"DurationSeconds": 900' in env["AIRFLOW_CONN_AWS_CREDS_ASSUME_ROLE"]
    assert "assume_role_with_web_identity" in env["AIRFLOW_CONN_AWS_CREDS_WEB_IDENTITY"]
    assert (tmp_path / "web-identity-token").exists()
    plan = AirflowPlan(waits=20)
    poll = deployment_env(plan, "poll", plan.workload("poll"), tmp_path / "stop")
    events = deployment_env(plan, "events", plan.workload("events"), tmp_path / "stop")
    assert "AIRFLOW__SM_PREFS__EVENT_QUEUE_URL" not in poll
    assert events["AIRFLOW__SM_PREFS__EVENT_QUEUE_URL"] == queue_url("events")
    assert poll["SM_PREFS_CREDS_WAITS"] == "20"
    assert int(poll["AIRFLOW__TRIGGERER__CAPACITY"]) > plan.waits
