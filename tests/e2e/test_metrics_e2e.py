"""Capacity metrics from a real deployment: StatsD on, a UDP socket listening, one nightly run that falls back."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.deployment import LocalAirflow

#: The capacity metric lines of the run, kept for reading after the session.
CAPTURED = Path(__file__).resolve().parents[2] / "build" / "e2e-metrics" / "statsd-capacity.txt"

pytestmark = pytest.mark.e2e

# The socket must exist before the deployment starts: its port goes into every Airflow process's config.
STATSD = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
STATSD.bind(("127.0.0.1", 0))
E2E_SCENARIO = "local-airflow"
E2E_DAGS = ("sm_prefs_nightly_retrain",)
E2E_ENV = {
    "AIRFLOW__METRICS__STATSD_ON": "True",
    "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
    "AIRFLOW__METRICS__STATSD_PORT": str(STATSD.getsockname()[1]),
    "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
    "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
}


class Collector(threading.Thread):
    """Reads the socket all along: the deployment sends many metrics, and UDP drops what nobody reads."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.lines: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        STATSD.settimeout(0.2)
        while not self.stopping.is_set():
            try:
                self.lines.extend(STATSD.recv(65535).decode(errors="replace").splitlines())
            except TimeoutError:
                continue


@pytest.fixture(scope="module")
def statsd() -> Iterator[Collector]:
    collector = Collector()
    collector.start()
    yield collector
    collector.stopping.set()
    collector.join(timeout=5)


def test_a_run_that_falls_back_sends_its_capacity_metrics(statsd: Collector, airflow: LocalAirflow) -> None:
    run_id = airflow.trigger_dag("sm_prefs_nightly_retrain", logical_date=None)
    assert airflow.wait_for_run("sm_prefs_nightly_retrain", run_id, timeout=300) == "success"
    outcome = airflow.xcom("sm_prefs_nightly_retrain", run_id, "train")
    time.sleep(2)  # the last datagrams of the finished task
    lines = [line for line in list(statsd.lines) if line.startswith("airflow.sm_prefs.")]
    CAPTURED.parent.mkdir(parents=True, exist_ok=True)
    CAPTURED.write_text("\n".join(lines) + "\n")
    assert any(
        line.startswith("airflow.ti.") or line.startswith("airflow.scheduler") for line in statsd.lines
    )
    tags = (
        "dag_id=sm_prefs_nightly_retrain,task_id=train,job_kind=training,instance_type=ml.g5.48xlarge,rank=2"
    )
    assert f"airflow.sm_prefs.capacity.selected,{tags}:1|c" in lines, lines
    assert f"airflow.sm_prefs.capacity.fallback,{tags}:1|c" in lines, lines
    (timer,) = [
        line for line in lines if line.startswith(f"airflow.sm_prefs.capacity.time_to_capacity,{tags}:")
    ]
    assert float(timer.rsplit(":", 1)[1].removesuffix("|ms")) == pytest.approx(
        outcome["pending_seconds"] * 1000
    )
    # Once per try: the push when the job completes does not count the selection again.
    assert sum(line.startswith("airflow.sm_prefs.capacity.selected,") for line in lines) == 1
