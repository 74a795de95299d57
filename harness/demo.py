"""``make demo``: the nightly DAG against the offline SageMaker, first choice scarce, in one command.

Starts the emulator as its own process (``sm-prefs-emulator``), prepares a throw-away Airflow home
with an ``aws_default`` connection pointing at it, runs ``airflow dags test`` on the nightly example
DAG, and prints what SageMaker chose and what it cost: the selected cluster's and the first choice's
hourly cost, the difference, and the run's estimated cost, each as the train task's outcome (its
``return_value``) carries it. The guardrails priced the list before submit from the Price List API
(the scenario's ``prices``); an outcome without a price says so and why. Nothing here is needed to
use the provider.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_provider_sm_prefs.domain.outcome import format_duration
from harness.config import free_port, venv_bin
from offline_sagemaker import RemoteSageMaker
from offline_sagemaker.controls import EmulatorControls

DAG_ID = "sm_prefs_nightly_retrain"


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    from urllib.request import urlopen

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the offline SageMaker exited with code {proc.returncode}")
        try:
            with urlopen(f"{url}/_emulator/health", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the offline SageMaker did not answer at {url} within {timeout:.0f}s")


class EmulatedNight(threading.Thread):
    """Holds the scenario's clock still until the DAG submits its first job, then runs it at the
    scenario's own time scale.

    The scenario's night is written in emulated seconds from its start ("the second choice frees up
    after 50 minutes"); ``airflow dags test`` takes anything from seconds to half a minute to parse and
    start. Starting the night at the first submission makes the wait the demo shows the scenario's on
    any machine, rather than shortened by however long Airflow took to start.
    """

    def __init__(self, sm: EmulatorControls, time_scale: float, tick: float = 0.25) -> None:
        super().__init__(name="emulated-night", daemon=True)
        self.sm, self.time_scale, self.tick = sm, time_scale, tick
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.sm.jobs():
                if self.stopped.wait(self.tick):
                    return
            last = time.monotonic()
            while not self.stopped.wait(self.tick):
                now = time.monotonic()
                self.sm.advance((now - last) * self.time_scale)
                last = now
        except BaseException as err:  # reported by the demo; the run itself goes on
            self.error = err

    def stop(self) -> None:
        self.stopped.set()
        self.join(5)


def _read_outcome(env: dict[str, str]) -> dict[str, Any] | None:
    """The train task's return_value, read from the demo's metadata database."""
    code = (
        "import json\n"
        "from airflow.utils.session import create_session\n"
        "from airflow.models.xcom import XComModel\n"
        "with create_session() as s:\n"
        f"    row = s.query(XComModel).filter(XComModel.dag_id=={DAG_ID!r}, XComModel.task_id=='train',"
        " XComModel.key=='return_value').order_by(XComModel.timestamp.desc()).first()\n"
        "    print(json.dumps(row.value if row else None))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if result.returncode != 0 or not lines:
        sys.stderr.write(result.stderr[-2000:])
        return None
    value = json.loads(lines[-1])
    outcome: dict[str, Any] | None = json.loads(value) if isinstance(value, str) else value
    return outcome


def _cluster(instance_type: str | None, count: Any) -> str:
    return f"{instance_type}×{count}" if count else str(instance_type)


def _unpriced(outcome: Mapping[str, Any], instance_type: str | None) -> str:
    """Why the outcome has no hourly cost for ``instance_type``: the guardrails' own line when they have one."""
    for line in outcome.get("unchecked") or []:
        if (line.startswith("price:") and f" {instance_type} " in line) or line.startswith("region:"):
            return f"unpriced: {line}"
    return (
        f"unpriced: the outcome has no price for {instance_type} (none is looked up with "
        "preflight='off' and neither prices= nor a price cap)"
    )


def cost_rows(outcome: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's cost lines, from the outcome's own figures; "unpriced" and why where one is missing.

    ``hourly_cost`` and ``first_choice_hourly_cost`` are USD per hour of the whole cluster (list price ×
    count), ``estimated_cost`` is ``hourly_cost`` × ``billable_seconds``: the guardrails computed them.
    """
    selected = _cluster(outcome.get("selected_instance_type"), outcome.get("selected_instance_count"))
    written = (outcome.get("preferences") or [{}])[0]
    first_type = written.get("instance_type")
    first = _cluster(first_type, written.get("instance_count"))
    hourly, first_hourly = outcome.get("hourly_cost"), outcome.get("first_choice_hourly_cost")
    billable, estimated = outcome.get("billable_seconds"), outcome.get("estimated_cost")
    rows = [
        (
            "selected price",
            f"${hourly:,.2f}/h ({selected})"
            if hourly is not None
            else _unpriced(outcome, outcome.get("selected_instance_type")),
        ),
        (
            "first choice price",
            f"${first_hourly:,.2f}/h ({first})"
            if first_hourly is not None
            else _unpriced(outcome, first_type),
        ),
    ]
    if hourly is None or first_hourly is None:
        difference = "unpriced: needs the prices of both clusters"
    elif not outcome.get("fell_back"):
        difference = "none: the first choice was selected"
    else:
        delta = hourly - first_hourly
        kind = "premium" if delta > 0 else "saving" if delta < 0 else "no difference"
        increase = outcome.get("cost_increase")
        difference = f"{'+' if delta >= 0 else '-'}${abs(delta):,.2f}/h {kind}"
        if increase is not None:
            difference += f" ({increase:+.0%} vs first choice)"
        if billable is not None:
            difference += f", {'+' if delta >= 0 else '-'}${abs(delta) * billable / 3600:,.2f} this run"
    rows.append(("difference", difference))
    if estimated is not None:
        cost = f"${estimated:,.2f} ({billable} billable s × ${hourly:,.2f}/h)"
    elif hourly is None:
        cost = _unpriced(outcome, outcome.get("selected_instance_type"))
    else:
        cost = "unknown: the outcome has no billable time (the job had not ended)"
    rows.append(("estimated cost of run", cost))
    return rows


def print_table(outcome: dict[str, Any], elapsed: float) -> None:
    accel = outcome.get("accelerators") or {}
    prefs = " → ".join(
        f"{p['instance_type']}×{p['instance_count']}" if p.get("instance_count") else p["instance_type"]
        for p in outcome.get("preferences") or []
    )
    rows = [
        ("preferences", prefs),
        ("entry chosen", outcome["selected_instance_type"]),
        ("rank", f"{outcome['preference_rank']} (fell back: {'yes' if outcome['fell_back'] else 'no'})"),
        ("count", str(outcome["selected_instance_count"])),
        ("capacity", outcome["capacity"]),
        ("pending time", f"{format_duration(outcome['pending_seconds'])} (emulated, from AWS timestamps)"),
        (
            "accelerators",
            f"{accel.get('total')} × {accel.get('model')}, {accel.get('memory_gib_total')} GiB accelerator memory"
            if accel.get("total")
            else "none",
        ),
        ("job status", outcome["job_status"]),
        ("billable seconds", str(outcome.get("billable_seconds"))),
        *cost_rows(outcome),
        ("demo wall time", f"{elapsed:.1f}s"),
    ]
    print("\n".join(table_lines(rows)))


def table_lines(rows: Sequence[tuple[str, str]], value_width: int = 64) -> list[str]:
    """The outcome as a two-column text table; a long value wraps onto the lines below its key."""
    width = max(len(k) for k, _ in rows)
    line = "+" + "-" * (width + 2) + "+" + "-" * (value_width + 2) + "+"
    out = [line, f"| {'SageMaker capacity outcome'.ljust(width + value_width + 4)}|", line]
    for key, value in rows:
        for i, part in enumerate(textwrap.wrap(value, value_width) or [""]):
            out.append(f"| {(key if i == 0 else '').ljust(width)} | {part.ljust(value_width)} |")
    out.append(line)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--scenario",
        default="nightly-demo",
        help="builtin scenario name or scenario file",
    )
    parser.add_argument("--dags-folder", default="dags_examples")
    parser.add_argument("--keep", action="store_true", help="keep the demo's AIRFLOW_HOME")
    args = parser.parse_args(argv)

    started = time.monotonic()
    home = Path(tempfile.mkdtemp(prefix="sm-prefs-demo-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    emulator = subprocess.Popen(
        [venv_bin("sm-prefs-emulator"), "--port", str(port), "--scenario", args.scenario],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_up(url, emulator)
        print(f"offline SageMaker up at {url} (scenario {args.scenario})")
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(Path(args.dags_folder).resolve()),
            "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(
                {
                    "conn_type": "aws",
                    "login": "demo",
                    "password": "demo",
                    "extra": {"endpoint_url": url, "region_name": "us-east-1"},
                }
            ),
            "AWS_DEFAULT_REGION": "us-east-1",
            "SM_PREFS_POLL_INTERVAL": os.environ.get("SM_PREFS_POLL_INTERVAL", "1"),
            "SM_PREFS_MAX_POLL_INTERVAL": os.environ.get("SM_PREFS_MAX_POLL_INTERVAL", "2"),
        }
        for key in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            env.pop(key, None)
        subprocess.run([venv_bin("airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
        # Restart the emulated night with its clock held; it runs from the DAG's first submission on.
        sm = RemoteSageMaker(url)
        scenario = sm.load_scenario(args.scenario)
        sm.load_scenario({**scenario, "time_scale": 0})
        night = EmulatedNight(sm, float(scenario.get("time_scale") or 0))
        night.start()
        print(f"running `airflow dags test {DAG_ID}` against it ...")
        try:
            result = subprocess.run(
                [venv_bin("airflow"), "dags", "test", DAG_ID], env=env, capture_output=True, text=True
            )
        finally:
            night.stop()
        if night.error is not None:
            print(f"the offline SageMaker's clock stopped early: {night.error}")
        log = home / "dags-test.log"
        log.write_text(result.stdout + result.stderr)
        outcome = _read_outcome(env)
        if result.returncode != 0 or outcome is None:
            print(result.stdout[-4000:] + result.stderr[-4000:])
            print(f"demo failed (exit {result.returncode}); full log: {log}")
            return 1
        print_table(outcome, time.monotonic() - started)
        return 0
    finally:
        emulator.terminate()
        try:
            emulator.wait(10)
        except subprocess.TimeoutExpired:
            emulator.kill()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
