"""Capacity waits outlive their 15-minute credentials in a real ``airflow triggerer`` (``--smoke``).

``benchmarks.credentials_airflow --smoke`` starts its own deployment (LocalExecutor, PostgreSQL, one
triggerer): ten mapped ``SageMakerCapacitySensor`` tasks, half on an AssumeRole connection and half on a
web-identity one (``DurationSeconds`` 900), wait in the triggerer for an emulated hour at 250x (a session
lasts 3.6 real seconds) before capacity arrives, and each finishes in the triggerer. Every wait succeeds,
no request is refused, and the sessions the triggerer took while waiting do not grow with the waits.
A few minutes on 2 cores: marked ``e2e`` (``make e2e``), not in ``make test``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.credentials_airflow import SMOKE

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
#: Real seconds after which the benchmark is taken for hung (the smoke run takes about 5 minutes alone).
HANG = 1500


@pytest.mark.timeout(HANG + 60)
def test_smoke_waits_outlive_their_sessions_in_a_real_triggerer(tmp_path: Path) -> None:
    output = tmp_path / "credentials-airflow.json"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.credentials_airflow", "--smoke", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    result = json.loads(output.read_text(encoding="utf-8"))
    [run] = result["runs"]
    assert "figures" in run, run.get("error_traceback") or run.get("error")
    figures = run["figures"]
    assert completed.returncode == 0, completed.stdout[-3000:] + json.dumps(figures)[:3000]
    assert figures["waits"] == SMOKE.waits
    assert figures["failed"] == 0, figures["failed_examples"]
    assert figures["succeeded"] == SMOKE.waits
    assert figures["still_deferred"] == 0
    # The waits were all in the triggerer for the planned emulated hour (four sessions' lifetimes).
    assert figures["hours_after_last_taken"] >= SMOKE.hours
    assert figures["pending_hours_min"] >= SMOKE.hours
    # No request went out with unknown credentials, and none refused as expired failed a wait: at 250x a
    # session lasts 3.6 real seconds, so on a busy host a token botocore still took for fresh may expire
    # on its way (as with clock skew); the provider renews it and sends the call again, once.
    assert figures["refused"].get("invalid", 0) == 0, figures["refused"]
    assert figures["refused"].get("expired", 0) <= figures["renewed_after_refusal"], figures
    # Every SageMaker call was signed with a session key, never the connections' long-term keys.
    assert figures["long_term_key_calls"] == 0
    # While the waits sat in the triggerer (no task process runs then), its sessions were renewed per
    # client, not per wait: a session lasts 3.6 real seconds, less than a poll interval, so at most one
    # per poll of each of the two connections' shared clients, however many waits share them.
    waiting = figures["while_waiting"]
    polls = waiting["real_seconds"] / SMOKE.poll_interval + 2
    assert 1 <= waiting["sts_sessions"] <= 2 * polls, waiting
    assert waiting["refused"].get("expired", 0) == 0, waiting
    assert 1 <= waiting["session_keys"] <= waiting["session_calls"], waiting
    # The probe ran in the triggerer the whole time and reported its loop lag.
    assert figures["probe"]["samples"] > 100, figures["probe"]
    assert isinstance(figures["probe"]["max_ms"], float)
    # ... and timed the process's garbage collections meanwhile (the youngest generation runs often).
    assert figures["probe"]["gc"]["0"]["count"] > 0, figures["probe"]["gc"]
    assert figures["triggerer"]["cpu_seconds"] > 0
    assert "| poll | 10 | 10 | 0 | 0 |" in completed.stdout
