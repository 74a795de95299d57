"""The soak, short: 2 nights of the nightly example and a 10-task mapped DAG under every fault kind.

The same driver as ``make soak`` (harness/soak.py): throttling, HTTP 5xx and dropped connections at
seeded random steps, a kill -9 of the triggerer's session and of the scheduler's (each restarted), one
night where part of the fleet never gets capacity before its pending deadline. No duplicate job, no job
left running after its task ended, no task failed for another reason than that capacity timeout.
"""

from __future__ import annotations

import time

import pytest
from e2e_reliability import Ledger

from harness import soak
from harness.deployment import LocalAirflow

pytestmark = [pytest.mark.e2e, pytest.mark.soak]

E2E_DAGS = soak.DAGS
NIGHTS, FLEET, SEED = 2, 10, 7
#: One clock step takes a job from capacity to its end: each task defers once for capacity, then ends.
STEP = 2700


def test_plan_has_every_fault_kind() -> None:
    """The seeded plan of the short soak has a capacity-timeout night and both kills (else: no test)."""
    plans = soak.plan_week(NIGHTS, FLEET, SEED)
    assert any(p.kind == "capacity-timeout" for p in plans)
    assert sum(p.kill_triggerer_step is not None for p in plans) == 1
    assert sum(p.kill_scheduler_step is not None for p in plans) == 1


@pytest.mark.timeout(1800)
def test_short_soak_creates_no_duplicate_leaves_no_job_and_fails_only_on_capacity(
    airflow: LocalAirflow, ledger: Ledger
) -> None:
    started = time.monotonic()
    data = soak.run_soak(airflow, nights=NIGHTS, fleet=FLEET, seed=SEED, night_timeout=780, step=STEP)
    soak.write_report(data, soak.RUN_DIR / "soak-short.json", soak.RUN_DIR / "soak-short.md")
    totals = data["totals"]
    print(soak.summary_line(data))
    ledger.record(
        id="soak-short",
        order=16,
        scenario=f"Soak, short: {NIGHTS} nights of the nightly example DAG and e2e_fleet ({FLEET} mapped tasks), "
        "one night with too little capacity before the pending deadline",
        load=f"{totals['dag_runs']} DAG runs, {NIGHTS * (FLEET + 5)} task instances",
        faults=f"{totals['throttled']} throttled + {totals['errors']} 5xx + {totals['dropped']} dropped of "
        f"{totals['calls']} SageMaker calls; " + "; ".join(totals["kills"]),
        outcome=", ".join(f"{n} runs {s}" for s, n in sorted(totals["dag_run_states"].items()))
        + f"; {totals['capacity_failures']} tasks failed with "
        f"CapacityTimeoutError, {totals['foreign_failures']} for another reason; "
        f"{totals['duplicates']} duplicate jobs",
        jobs_created=totals["jobs_created"],
        unattended=totals["unattended"],
        seconds=time.monotonic() - started,
    )
    nights = data["nights"]
    assert len(nights) == NIGHTS
    # The faults happened: every kind of API fault, both kills, and the capacity shortage failed tasks.
    assert totals["throttled"] > 0 and totals["errors"] > 0 and totals["dropped"] > 0, totals
    assert len(totals["kills"]) == 2, totals["kills"]
    assert totals["capacity_failures"] > 0, "the capacity-timeout night failed no task"
    assert totals["jobs_created"] >= NIGHTS * (FLEET + 1)
    # The three zeros.
    assert [d for n in nights for d in n["duplicates"]] == []
    assert [u for n in nights for u in n["unattended"]] == []
    assert [f for n in nights for f in n["foreign_failures"]] == []
    assert data["ok"]
    assert all(mib > 0 for mib in data["peak_rss_mib"].values()), data["peak_rss_mib"]
