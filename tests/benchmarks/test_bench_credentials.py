"""The credentials benchmark runs end to end (``--smoke``): waits on an assumed role outlive its sessions.

Five capacity waits in one trigger process, an emulated hour without capacity at 300x, on a connection
that assumes a role with 15-minute sessions (each lasts 3 real seconds): every wait ends with success, the
process renewed its credentials several times, and the emulator refused no request. Marked ``realclock``
like the other tests of expiring credentials: a session lasts seconds, so the run goes after the parallel
tests, on its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.credentials import SMOKE

pytestmark = pytest.mark.realclock

ROOT = Path(__file__).resolve().parents[2]
#: Real seconds after which the benchmark is taken for hung (the smoke run takes about 25 s alone).
HANG = 600


@pytest.mark.timeout(HANG + 60)
def test_smoke_waits_outlive_their_sessions(tmp_path: Path) -> None:
    output = tmp_path / "credentials.json"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.credentials", "--smoke", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    result = json.loads(output.read_text(encoding="utf-8"))

    [run] = result["runs"]
    assert (run["auth"], run["mode"]) == ("assume-role", "poll"), run
    assert "figures" in run, run.get("error_traceback") or run.get("error")
    figures = run["figures"]
    assert figures["waits"] == SMOKE.waits
    assert figures["failed"] == 0, figures["failed_examples"]
    assert figures["undetected"] == 0
    assert figures["selected"] == SMOKE.waits
    # Each job waited about the hour on the emulated clock, which is four sessions' lifetimes.
    assert figures["pending_hours_min"] >= SMOKE.hours
    # Renewed sessions, none of them refused: not one request went out with expired credentials.
    assert figures["sts_sessions"] >= 2
    assert figures["refused_total"] == 0, figures["refused"]
    # Every SageMaker call of the triggers was signed with a session key, never the long-term keys.
    assert figures["calls"]["long_term_key_calls"] == 0
    assert figures["calls"]["session_keys_used"] >= 2
    assert figures["calls"]["trigger_call_errors"] == {}
    assert isinstance(figures["lag"]["max_ms"], float)
    assert "| assume-role | poll | 5 | 0 | 0 |" in completed.stdout
