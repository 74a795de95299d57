"""A seeded history for the capacity page: 60 real DAG runs over the last 30 nights, varied scarcity.

The three DAGs of ``tests/dags/sm_prefs_history_dags.py`` run with ``dag.test()`` in the deployment's
environment (its metadata database, its ``aws_default`` connection to the offline SageMaker), so every
record is written by the real operators after real calls to the emulator. Each run gets its own
emulated day of the ``capacity-history`` scenario: before it starts, the emulator's clock is advanced to
the hour of that day that decides its outcome (first choice, a fallback, a wait, a timeout, a quota
rejection, CPU-only "no capacity"), and the run is dated ``run_after`` = that night at 02:00 UTC (early in
the day, 1.5 hours before the seeding instead, so all 30 nights fit the default 30 days), so the
page has 30 days of history with a trend that gets worse.

    python -m harness.history --runs 60        # against the deployment of make airflow-history

:func:`plan` is pure (what runs when, at which hour); :func:`seed` runs it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from harness.config import REPO_ROOT
from harness.database import run_python

__all__ = ["HISTORY_DAGS", "PERIOD", "SCENARIO", "PlannedRun", "plan", "seed"]

#: The emulator scenario the history needs (one day of scarcity, repeating).
SCENARIO = "capacity-history"
#: The scenario's capacity period (emulated seconds).
PERIOD = 86400
DAG_FILE = REPO_ROOT / "tests" / "dags" / "sm_prefs_history_dags.py"
HISTORY_DAGS = ("sm_prefs_history_nightly", "sm_prefs_history_finetune", "sm_prefs_history_prep")

# Hour of the emulated day per night, oldest first: mostly the first choice early on, then fallbacks,
# waits (10:00, 10:15), the third choice (14-18) and timeouts (18+) grow more frequent.
_NIGHTLY = (1, 2, 1, 5, 1, 3, 6, 1, 2, 10.25, 5, 1, 7, 10, 2, 15, 5, 1, 19, 8,
            10.25, 15, 5, 19, 16, 10, 20, 6, 15, 19)  # fmt: skip
_PREP = (1, 7, 13, 2, 8, 21, 3, 14, 9, 22, 15, 4, 10, 21, 16, 5, 11, 22, 17, 23)
_FINETUNE = ((0.5, 1), (3, 1), (1, 2), (0.5, 1), (15, 1), (1, 1), (0.5, 2), (16, 1), (1, 1), (0.5, 2))


@dataclass(frozen=True)
class PlannedRun:
    """One run of the history: which DAG, dated when, placed at which hour of its emulated day."""

    dag_id: str
    run_after: str
    hour: float
    conf: dict[str, Any]


def plan(runs: int = 60, today: datetime | None = None) -> list[PlannedRun]:
    """``runs`` runs (at most 60) over the nights before ``today``, oldest first: every night a nightly
    retrain, two nights in three a preparation step, one night in three a fine-tune."""
    if not 1 <= runs <= 60:
        raise ValueError(f"runs: {runs} is out of range; the history has 1 to 60 runs")
    now = today or datetime.now(timezone.utc)
    # The runs span 29 nights and an hour (a preparation 30 minutes before a night, a fine-tune 30 after).
    # The newest night is that day's 02:00 when it is 1.5 to 22.5 hours ago, else 1.5 hours ago: every
    # run is over an hour old and the oldest is an hour inside the page's default 30 days, at any hour.
    latest = now - timedelta(minutes=90)
    day = latest.replace(hour=2, minute=0, second=0, microsecond=0)
    if day > latest or now - day > timedelta(hours=22, minutes=30):
        day = latest.replace(second=0, microsecond=0)
    planned: list[PlannedRun] = []
    prep, finetune = iter(_PREP), iter(_FINETUNE)
    for night, hour in enumerate(_NIGHTLY):
        when = day - timedelta(days=len(_NIGHTLY) - 1 - night)
        planned.append(PlannedRun("sm_prefs_history_nightly", when.isoformat(), hour, {}))
        if night % 3 == 2:
            ft_hour, count = next(finetune)
            planned.append(
                PlannedRun(
                    "sm_prefs_history_finetune",
                    (when + timedelta(minutes=30)).isoformat(),
                    ft_hour,
                    {"finetune_count": count},
                )
            )
        else:
            planned.append(
                PlannedRun(
                    "sm_prefs_history_prep", (when - timedelta(minutes=30)).isoformat(), next(prep), {}
                )
            )
    return sorted(planned, key=lambda run: run.run_after)[-runs:]


_RUNNER = """
import importlib.util, json, sys
from datetime import datetime
from offline_sagemaker import RemoteSageMaker
spec = importlib.util.spec_from_file_location("sm_prefs_history_dags", {dag_file!r})
dags = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dags)
by_id = {{d.dag_id: d for d in (dags.nightly, dags.finetune, dags.prep)}}
sm = RemoteSageMaker({endpoint!r})
if sm.scenario_dict().get("name") != {scenario!r}:
    sm.load_scenario({scenario!r})
period = {period}
for run in json.loads({runs!r}):
    clock = sm.clock()
    offset = clock["elapsed"] % period
    sm.advance(period - offset + run["hour"] * 3600)
    run_after = datetime.fromisoformat(run["run_after"])
    dagrun = by_id[run["dag_id"]].test(run_after=run_after, logical_date=run_after, run_conf=run["conf"])
    states = {{ti.task_id: str(ti.state) for ti in dagrun.get_task_instances()}}
    print(json.dumps({{"dag_id": run["dag_id"], "run_id": dagrun.run_id, "states": states}}), flush=True)
"""


def seed(
    env: Mapping[str, str], emulator_url: str, runs: Sequence[PlannedRun], timeout: float = 1200.0
) -> list[dict[str, Any]]:
    """Run ``runs`` in a Python with the deployment's environment; one ``{dag_id, run_id, states}`` each.

    Loads the ``capacity-history`` scenario into the emulator first when another one is loaded (which
    resets its jobs). Runs that already exist for a DAG and date make ``dag.test()`` fail: seed a fresh
    deployment.
    """
    code = _RUNNER.format(
        dag_file=str(DAG_FILE),
        endpoint=emulator_url,
        scenario=SCENARIO,
        period=PERIOD,
        runs=json.dumps([asdict(run) for run in runs]),
    )
    quiet = {
        **env,
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        "SM_PREFS_HISTORY_POLL_INTERVAL": "0.1",
        # dag.test() runs each trigger in this process, where the scheduler race the hold guards against
        # cannot happen: 60 runs would otherwise wait out up to min_defer_seconds each.
        "AIRFLOW__SM_PREFS__MIN_DEFER_SECONDS": "0",
    }
    output = run_python(quiet, code, timeout=timeout)
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"dag_id"')]


def main(argv: Sequence[str] | None = None) -> int:
    """Seed the history into the deployment whose ``AIRFLOW_HOME`` and emulator URL are given."""
    parser = argparse.ArgumentParser(prog="python -m harness.history", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="how many runs (1-60, default 60)")
    parser.add_argument("--print-plan", action="store_true", help="print the plan as JSON and exit")
    args = parser.parse_args(argv)
    planned = plan(args.runs)
    if args.print_plan:
        print(json.dumps([asdict(run) for run in planned], indent=2))
        return 0
    print(
        "seed a running deployment with: python -m harness.deployment up --seed-history 60", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
