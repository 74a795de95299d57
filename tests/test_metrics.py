"""Capacity metrics go out through Airflow's own metrics layer: a real StatsD client, a real UDP socket."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

EMIT = r"""
try:
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils
except ImportError:  # Airflow before 3.2: airflow.stats configures itself from [metrics] on first use
    stats = None

from airflow_provider_sm_prefs import metrics
from airflow_provider_sm_prefs.domain.exceptions import CapacityTimeoutError, QuotaExceededError
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.record import CapacityRecord, TaskInstanceRef

# What the task runner does at start-up with the [metrics] configuration (Airflow 3.2 and later).
if hasattr(stats, "initialize"):
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
elif stats is not None:  # Airflow 3.2's task runner initialises the shared Stats object itself
    from airflow.sdk._shared.observability.metrics.stats import Stats

    Stats.initialize(factory=stats_utils.get_stats_factory(Stats))
ti = TaskInstanceRef("nightly", "train", "manual__1")
outcome = CapacityOutcome(
    job_name="j", job_kind="training", job_arn=None, selected_instance_type="ml.g5.48xlarge",
    selected_instance_count=4, preference_rank=2, fell_back=True, pending_seconds=754.0,
    capacity="on-demand", accelerators=None, job_status="InProgress",
)
metrics.emit(CapacityRecord.from_outcome(ti, outcome, "us-east-1"))
metrics.emit(CapacityRecord.from_error(ti, CapacityTimeoutError("j", "Stopped", "late"), "training", "j", [], None))
metrics.emit(CapacityRecord.from_error(ti, QuotaExceededError("j", "no quota"), "training", "j", [], None))
"""


@pytest.fixture
def statsd_socket() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    yield sock
    sock.close()


def sent_to_statsd(code: str, statsd_socket: socket.socket) -> list[str]:
    """Run ``code`` in a new Python with Airflow's StatsD metrics on (to ``statsd_socket``, tags in the
    InfluxDB form) and return every line it sent."""
    env = {
        **os.environ,
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(statsd_socket.getsockname()[1]),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
    }
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines: list[str] = []
    with pytest.raises(TimeoutError):
        while True:
            lines.extend(statsd_socket.recv(65535).decode().splitlines())
    return lines


def test_selections_fallbacks_waits_and_failures_reach_statsd_with_their_tags(
    statsd_socket: socket.socket,
) -> None:
    lines = sent_to_statsd(EMIT, statsd_socket)
    ours = [line for line in lines if line.startswith("airflow.sm_prefs.")]  # Airflow sends its own too
    by_name = {line.split(",")[0].split(":")[0]: line for line in ours}
    assert set(by_name) == {
        "airflow.sm_prefs.capacity.time_to_capacity",
        "airflow.sm_prefs.capacity.selected",
        "airflow.sm_prefs.capacity.fallback",
        "airflow.sm_prefs.capacity.timeout",
        "airflow.sm_prefs.capacity.quota_rejected",
    }, lines
    timer = by_name["airflow.sm_prefs.capacity.time_to_capacity"]
    assert float(timer.rsplit(":", 1)[1].removesuffix("|ms")) == 754000.0, timer
    assert "instance_type=ml.g5.48xlarge" in timer and "rank=2" in timer and "dag_id=nightly" in timer
    assert by_name["airflow.sm_prefs.capacity.fallback"].endswith(":1|c")
    assert "task_id=train" in by_name["airflow.sm_prefs.capacity.timeout"]


#: The reconciler's counters, after the same start-up of Airflow's metrics layer as above.
EMIT_RECONCILER = (
    EMIT.split("ti = TaskInstanceRef", 1)[0]
    + """
from airflow_provider_sm_prefs.operators.reconciler import emit_metrics
emit_metrics({"deployment_id": "prod-eu", "dry_run": False, "seen": 7, "stopped": 2, "would_stop": 0,
              "kept": 3, "unattributed": 2, "errors": 0, "jobs": []})
"""
)


def test_a_reconciler_pass_sends_its_counts_tagged_with_its_deployment(statsd_socket: socket.socket) -> None:
    lines = sent_to_statsd(EMIT_RECONCILER, statsd_socket)
    ours = {
        line.split(",")[0]: line.rsplit(":", 1)[1]
        for line in lines
        if line.startswith("airflow.sm_prefs.reconciler.") and "deployment=prod-eu" in line
    }
    assert ours == {
        "airflow.sm_prefs.reconciler.seen": "7|c",
        "airflow.sm_prefs.reconciler.stopped": "2|c",
        "airflow.sm_prefs.reconciler.would_stop": "0|c",
        "airflow.sm_prefs.reconciler.scaled_back": "0|c",
        "airflow.sm_prefs.reconciler.would_scale_back": "0|c",
        "airflow.sm_prefs.reconciler.kept": "3|c",
        "airflow.sm_prefs.reconciler.unattributed": "2|c",
        "airflow.sm_prefs.reconciler.errors": "0|c",
    }, lines
