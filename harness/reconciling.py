"""The reconciler running next to a deployment under test: one ``sm-prefs-reconcile --stop`` pass every
:data:`EVERY` seconds, as a deployment's maintenance schedule would run it (docs/guides/reconciler.md).

Each pass reads task states from the deployment's REST API and SageMaker through its ``aws_default``
connection. A pass may fail outright while the api-server or the database is down: it is counted, never
fatal. Every job a pass stops is checked right away against its task's state, read on its own through the
REST API: a task still running, deferred, queued, scheduled or waiting for its retry owns its job, and
stopping that job is a **wrong stop**.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.deployment import LocalAirflow

#: Real seconds between two passes.
EVERY = 30.0
#: Task states in which a task still owns its job (the reconciler must keep it).
LIVE_STATES = frozenset(
    {"running", "deferred", "queued", "scheduled", "up_for_retry", "up_for_reschedule", "restarting", None}
)


@dataclass
class ReconcilerLedger:
    """What the passes did over a run."""

    passes: int = 0
    failed_passes: int = 0
    stopped: list[str] = field(default_factory=list)
    wrong_stops: list[str] = field(default_factory=list)
    errors: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "passes": self.passes,
            "failed_passes": self.failed_passes,
            "stopped": list(self.stopped),
            "wrong_stops": list(self.wrong_stops),
            "errors": self.errors,
        }


class ReconcilerLoop:
    """Runs passes in a thread while the context is open; :attr:`ledger` says what they did."""

    def __init__(self, af: LocalAirflow, every: float = EVERY) -> None:
        self.af = af
        self.every = every
        self.ledger = ReconcilerLedger()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reconciler", daemon=True)

    def __enter__(self) -> ReconcilerLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=600)

    def _run(self) -> None:
        while not self._done.wait(self.every):
            self.one_pass()

    def one_pass(self) -> dict[str, Any] | None:
        """One ``--stop`` pass; its report, or None when the pass could not run."""
        self.ledger.passes += 1
        try:
            report = self._reconcile()
        except Exception:  # the api-server or the database is down: the next pass tries again
            self.ledger.failed_passes += 1
            return None
        self.ledger.errors += int(report.get("errors", 0))
        for row in report.get("jobs", []):
            if row.get("action") == "stopped":
                self.ledger.stopped.append(row["job"])
                self._check_stop(row)
        return report

    def _reconcile(self) -> dict[str, Any]:
        af = self.af
        # No --deployment-id: the command reads the id the deployment generated (its Airflow Variable) over
        # the REST API, as an operator's cron job would; before the first task generated it, the pass fails.
        env = {**af.env, "SM_PREFS_AIRFLOW_API_URL": af.api_url, "SM_PREFS_AIRFLOW_API_TOKEN": af.token()}
        command = [
            str(Path(sys.executable).with_name("sm-prefs-reconcile")),
            "--json",
            "--stop",
            "--aws-conn-id",
            "aws_default",
        ]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
        report: dict[str, Any] = json.loads(result.stdout)
        return report

    def _check_stop(self, row: dict[str, Any]) -> None:
        """A stopped job whose task still owns it is a wrong stop (its state read on its own)."""
        try:
            ti = self.af.task_instance(row["dag_id"], row["run_id"], row["task_id"], int(row["map_index"]))
        except Exception:
            return  # unreadable now: the run's own invariants still catch a task that lost its job
        if ti.get("state") in LIVE_STATES:
            self.ledger.wrong_stops.append(
                f"{row['job']} (task {row['task_id']}[{row['map_index']}] {ti['state']})"
            )
