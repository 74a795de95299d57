"""Chaos, short, in the production topology: CeleryExecutor on Redis, two workers, two schedulers, two
triggerers, kill -9 of one component of each kind at seeded random instants.

The same driver as ``make chaos`` (harness/chaos.py) with a smaller fleet: a worker killed while its task's
Create has taken effect and its answer has not arrived, a scheduler, a triggerer, the api-server, the
dag-processor, the Redis broker and PostgreSQL, each restarted after a pause. No duplicate job, no job left
running after its task ended, no task failed but the ones whose list never has capacity, and every
successful task's XCom record equal to its job's Describe.

Two deployments sharing one offline SageMaker (``pytest -m two_deployments tests/e2e/test_chaos.py``; not
in ``make chaos-short``, which it would make several minutes longer): a second deployment started from the
same defaults runs the same fleet with the same run id beside the killed one, each with its own reconciler
in stop mode. Their generated deployment ids differ, neither stops a job of the other, and each one's
invariants hold.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from e2e_reliability import Ledger

from harness import chaos
from harness.deployment import LocalAirflow

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]

E2E_EXECUTOR = "celery"
E2E_DAGS = (chaos.DAG_ID,)
FLEET, KILLS, SEED = 10, 9, 3
#: Two deployments: a small fleet each, the fewest kills a plan has (one of each kind of component).
SHARED_FLEET, SHARED_KILLS, SHARED_SEED = 6, 1, 4


def test_the_short_plan_kills_every_kind_of_component() -> None:
    """Every kind of component is in the short run's seeded schedule (else the run would prove less)."""
    targets = {k.target.rstrip("-0123456789") for k in chaos.plan_kills(KILLS, SEED)}
    assert targets >= {"worker", "worker-mid-create", "scheduler", "triggerer", "api-server", "redis"}
    assert {"postgres", "dag-processor"} <= targets


@pytest.mark.timeout(1800)
def test_kills_at_any_instant_lose_nothing_and_leave_no_job_running(
    airflow: LocalAirflow, ledger: Ledger
) -> None:
    started = time.monotonic()
    data = chaos.run_chaos(airflow, fleet=FLEET, kills=KILLS, seed=SEED, timeout=1200)
    chaos.write_report(data, chaos.RUN_DIR / "chaos-short.json", chaos.RUN_DIR / "chaos-short.md")
    print(chaos.render_markdown(data))
    result = data["result"]
    ledger.record(
        id="chaos-short",
        order=20,
        scenario=f"Chaos, short, CeleryExecutor topology: e2e_chaos ({FLEET} mapped tasks with retries: "
        "fallbacks, acceptance-window stages, capacity timeouts)",
        load=f"{FLEET} task instances, {result['jobs_created']} jobs",
        faults=f"{len(data['kills'])} kill -9 ("
        + ", ".join(f"{k} {n}" for k, n in data["kills_by_component"].items())
        + f"), Create answered {chaos.CREATE_LATENCY_MS} ms after it took effect",
        outcome=", ".join(f"{n} {s}" for s, n in result["task_states"].items())
        + f"; {len(result['capacity_timeouts'])} set capacity timeouts, "
        f"{len(result['foreign_failures'])} other failures; {len(result['duplicates'])} duplicate jobs; "
        f"{len(result['record_mismatches'])} of {result['records_checked']} XCom records differ from Describe; "
        f"reconciler throughout: {len(result['reconciler']['stopped'])} stopped, "
        f"{len(result['reconciler']['wrong_stops'])} wrong stops",
        jobs_created=result["jobs_created"],
        unattended=len(result["unattended"]),
        seconds=time.monotonic() - started,
    )
    kills = data["kills"]
    assert len(kills) == len(data["plan"]), "the fleet finished before every planned kill"
    mid_create = [k for k in kills if k["target"] == "worker-mid-create"]
    assert len(mid_create) == 1 and "in flight" in mid_create[0]["instant"], mid_create
    assert {k["component"].rstrip("-0123456789") for k in kills} >= {
        "worker",
        "scheduler",
        "triggerer",
        "api-server",
        "dag-processor",
        "redis",
        "postgres",
    }
    # The scenario's failures happened, and only those.
    assert result["capacity_timeouts"], "no task met its capacity timeout"
    assert result["duplicates"] == []
    assert result["unattended"] == []
    assert result["foreign_failures"] == []
    assert result["record_mismatches"] == [] and result["records_checked"] > 0
    # The reconciler ran throughout and never stopped a job its task still owned.
    reconciler = result["reconciler"]
    assert reconciler["passes"] > reconciler["failed_passes"] >= 0, reconciler
    assert reconciler["wrong_stops"] == [], reconciler
    assert data["ok"]
    assert all(mib > 0 for mib in data["peak_rss_mib"].values()), data["peak_rss_mib"]


@pytest.mark.two_deployments
@pytest.mark.skipif(
    "'two_deployments' not in (config.getoption('markexpr') or '')",
    reason="two deployments run only when selected: pytest -m two_deployments tests/e2e/test_chaos.py",
)
@pytest.mark.timeout(2400)
def test_two_deployments_sharing_one_sagemaker_never_stop_each_others_jobs(
    airflow: LocalAirflow, ledger: Ledger, tmp_path: Path
) -> None:
    started = time.monotonic()
    with chaos.second_deployment(tmp_path / "second", airflow) as second:
        data = chaos.run_chaos(
            airflow,
            fleet=SHARED_FLEET,
            kills=SHARED_KILLS,
            seed=SHARED_SEED,
            timeout=1500,
            others=[second],
        )
    chaos.write_report(
        data, chaos.RUN_DIR / "chaos-two-deployments.json", chaos.RUN_DIR / "chaos-two-deployments.md"
    )
    print(chaos.render_markdown(data))
    first, other = data["deployments"]
    foreign = data["foreign_stops"]
    ledger.record(
        id="chaos-two-deployments",
        order=21,
        scenario=f"Chaos, two deployments sharing one offline SageMaker: e2e_chaos ({SHARED_FLEET} mapped "
        "tasks) with the same run id in a CeleryExecutor deployment under kill -9 and a LocalExecutor one, "
        "each generating its deployment id and running its reconciler in stop mode",
        load=f"{2 * SHARED_FLEET} task instances, "
        f"{first['result']['jobs_created'] + other['result']['jobs_created']} jobs",
        faults=f"{len(data['kills'])} kill -9 of the first deployment's components",
        outcome=f"{foreign['count']} foreign stops; duplicates "
        f"{len(first['result']['duplicates'])} / {len(other['result']['duplicates'])}; "
        f"reconcilers stopped {len(first['result']['reconciler']['stopped'])} / "
        f"{len(other['result']['reconciler']['stopped'])}, wrong stops "
        f"{len(first['result']['reconciler']['wrong_stops'])} / "
        f"{len(other['result']['reconciler']['wrong_stops'])}",
        jobs_created=first["result"]["jobs_created"] + other["result"]["jobs_created"],
        unattended=len(first["result"]["unattended"]) + len(other["result"]["unattended"]),
        seconds=time.monotonic() - started,
    )
    # Same defaults, two databases: two generated ids, and every job carries one of them.
    assert first["deployment_id"] and other["deployment_id"]
    assert first["deployment_id"] != other["deployment_id"], data["deployments"]
    assert data["deployment_ids_differ"]
    assert data["unowned_jobs"] == []
    # Neither deployment stopped a job of the other, by its reconciler or by anything else it sent.
    assert foreign["count"] == 0, foreign["items"]
    assert foreign["total_calls"] == sum(foreign["sent"].values())
    for deployment in (first, other):
        result = deployment["result"]
        assert result["jobs_created"] >= SHARED_FLEET, deployment
        assert result["duplicates"] == [], deployment["label"]
        assert result["unattended"] == [], deployment["label"]
        assert result["foreign_failures"] == [], deployment["label"]
        assert result["record_mismatches"] == [] and result["records_checked"] > 0, deployment["label"]
        reconciler = result["reconciler"]
        assert reconciler["passes"] > reconciler["failed_passes"] >= 0, reconciler
        assert reconciler["wrong_stops"] == [], reconciler
    assert data["ok"]
