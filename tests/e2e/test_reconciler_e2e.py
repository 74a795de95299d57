"""The reconciler in a running Airflow: jobs whose task no longer owns them are stopped, no other.

A deployment (api-server, scheduler, DAG processor, triggerer on PostgreSQL) runs tasks whose ends leave
their job running with nobody watching (docs/guides/reconciler.md); one pass of the command line
(``sm-prefs-reconcile --stop``, task states from the deployment's REST API, SageMaker through the
deployment's ``aws_default`` connection) must stop exactly those jobs, and keep the jobs of tasks that
still own theirs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from e2e_reliability import Ledger
from e2e_support import (
    G5,
    G6,
    P4D,
    clock_scenario,
    deferred_on,
    finish,
    training_config,
    unattended_jobs,
    unique,
    wait_for,
)

from harness.deployment import LocalAirflow

pytestmark = pytest.mark.e2e

#: The Airflow the deployment runs (this interpreter's).
AIRFLOW = tuple(int(part) for part in version("apache-airflow").split(".")[:2])
E2E_DAGS = ("t_train_complete", "e2e_retry")
#: The console script of the provider, next to this interpreter.
RECONCILE = str(Path(sys.executable).with_name("sm-prefs-reconcile"))


def no_capacity(name: str) -> dict[str, Any]:
    """Nothing free, a real-time clock nobody moves: every job waits in Pending until stopped."""
    return clock_scenario(
        name,
        phase_seconds={"starting": 1, "downloading": 1, "uploading": 1, "stopping": 1},
        capacity={"ml.*": [{"from": 0, "free": 0}]},
    )


def reconcile(airflow: LocalAirflow, *args: str) -> tuple[int, dict[str, Any]]:
    """One pass of ``sm-prefs-reconcile --json`` against the deployment; its exit status and report.

    No ``--deployment-id``: the command reads the id the deployment generated when its first task ran (the
    Airflow Variable ``sm_prefs_deployment_id``) over the REST API, as an operator's cron job would."""
    env = {
        **airflow.env,
        "SM_PREFS_AIRFLOW_API_URL": airflow.api_url,
        "SM_PREFS_AIRFLOW_API_TOKEN": airflow.token(),
    }
    # Jobs only: every call a scenario makes is checked against the task role's policy (e2e_support), and the
    # HyperPod part of a pass reads clusters, which only the reconciler role may (docs/iam-reconciler-policy.json;
    # tests/test_reconciler_groups.py and tests/test_iam_policy.py cover that part).
    command = [RECONCILE, "--json", "--aws-conn-id", "aws_default", "--no-hyperpod-groups"]
    result = subprocess.run(
        [*command, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    print("RECONCILE", " ".join(args) or "(dry run)", "exit", result.returncode, result.stderr[-2000:])
    print(result.stdout)
    # --json: standard output is the report alone, the logs go to standard error.
    report: dict[str, Any] = json.loads(result.stdout)
    return result.returncode, report


def rows(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Job name -> (decision, action) of a pass."""
    return {row["job"]: (row["decision"], row["action"]) for row in report["jobs"]}


def pending(airflow: LocalAirflow, name: str) -> bool:
    return bool(airflow.sm.job(name)["secondary_status"] == "Pending")


def triggerers_started(airflow: LocalAirflow, dag_id: str, run_id: str) -> int:
    """How many triggerers have started the trigger of the task ``job``: each writes its own trigger log,
    and a restarted triggerer's is a new one."""
    folder = airflow.log_dir / f"dag_id={dag_id}" / f"run_id={run_id}" / "task_id=job"
    logs = folder.glob("attempt=1.log.trigger.*.log")
    return sum(" starting" in log.read_text(errors="replace") for log in logs)


def stops(airflow: LocalAirflow, name: str) -> int:
    return int(airflow.sm.stats()["jobs"].get(name, {}).get("StopTrainingJob", 0))


@pytest.mark.core
@pytest.mark.timeout(600)
def test_a_task_marked_failed_while_no_triggerer_runs_has_its_job_stopped_by_one_pass(
    airflow: LocalAirflow, ledger: Ledger
) -> None:
    started = time.monotonic()
    dag_id = "t_train_complete"
    airflow.sm.load_scenario(no_capacity("reconcile-marked-failed"))
    orphan, owned = unique("orphan"), unique("owned")
    runs = {
        name: airflow.trigger_dag(
            dag_id,
            {"config": training_config(name, InstanceCount=1), "prefs": [G6, G5, P4D], "max_pending": 7200},
        )
        for name in (orphan, owned)
    }
    for name, run_id in runs.items():
        deferred_on(airflow, dag_id, run_id, "job", 1)
        wait_for(partial(pending, airflow, name), 60, f"{name} Pending")
    airflow.kill_process("triggerer", signal.SIGKILL)
    try:
        airflow.set_task_state(dag_id, runs[orphan], "job", "failed")
        assert airflow.wait_for_run(dag_id, runs[orphan], timeout=120) == "failed"
        # No triggerer: the trigger's on_kill never ran, and the job waits on with nobody watching.
        time.sleep(2)
        assert airflow.sm.job(orphan)["status"] == "InProgress"
        assert stops(airflow, orphan) == 0
        assert airflow.ti_states(dag_id, runs[owned])["job"] == "deferred"
        owners = {name: (dag_id, run_id, "job", -1) for name, run_id in runs.items()}
        assert unattended_jobs(airflow, owners) == [f"{orphan} (task job[-1] is failed)"]

        passed = time.monotonic()
        code, report = reconcile(airflow, "--stop")
        pass_seconds = time.monotonic() - passed
        assert code == 0, report
        assert report["dry_run"] is False
        assert rows(report) == {orphan: ("stop", "stopped"), owned: ("keep", "")}, report["jobs"]
        assert (report["seen"], report["stopped"], report["kept"], report["errors"]) == (2, 1, 1, 0)
        wait_for(lambda: airflow.sm.job(orphan)["status"] == "Stopped", 30, "the orphan to reach Stopped")
        # Nothing left running with nobody watching; the deferred task's job untouched.
        assert unattended_jobs(airflow, owners) == []
        assert (airflow.sm.job(owned)["status"], stops(airflow, owned)) == ("InProgress", 0)
        assert airflow.ti_states(dag_id, runs[owned])["job"] == "deferred"
        # A second pass has nothing left to stop.
        code, again = reconcile(airflow)
        assert (code, again["seen"], again["would_stop"], again["kept"]) == (0, 1, 0, 1), again
    finally:
        airflow.restart("triggerer")
    # The kept task's wait goes on under the restarted triggerer. Marked failed now, its job is stopped by
    # its trigger's on_kill or, should the triggerer cancel the trigger without it (a task marked while
    # its trigger starts), by the next pass: either way nothing is left running.
    wait_for(lambda: triggerers_started(airflow, dag_id, runs[owned]) >= 2, 120, "the restarted triggerer")
    airflow.set_task_state(dag_id, runs[owned], "job", "failed")
    assert airflow.wait_for_run(dag_id, runs[owned], timeout=120) == "failed"
    code, _ = reconcile(airflow, "--stop")
    assert code == 0
    wait_for(lambda: airflow.sm.job(owned)["status"] == "Stopped", 60, "the owned job to reach Stopped")
    finish(
        airflow,
        ledger,
        owners,
        started,
        id="reconcile-marked-failed-no-triggerer",
        order=23,
        scenario="a deferred task is marked failed while its triggerer is down (SIGKILL); one reconciler pass",
        load="2 tasks deferred, jobs Pending",
        faults="triggerer SIGKILL; task marked failed through the REST API meanwhile",
        outcome=(
            f"sm-prefs-reconcile --stop stopped the orphaned job in {pass_seconds:.1f} s and kept the "
            "deferred task's; 0 wrong stops"
        ),
    )


@pytest.mark.core
def test_a_task_process_killed_while_it_runs_leaves_no_job_after_one_pass(
    airflow: LocalAirflow, ledger: Ledger
) -> None:
    """Airflow 3.0 marks a task whose process died by a signal failed, without retry or failure callback:
    its job runs on until a pass stops it. From 3.1 on the retry reattaches to the job: a pass keeps it."""
    started = time.monotonic()
    dag_id = "e2e_retry"
    airflow.sm.load_scenario(no_capacity("reconcile-task-killed"))
    # Slow every SageMaker answer, so that the task is still running (in the Describe after Create) when
    # it is killed.
    airflow.sm.set_faults(latency_ms=1500)
    name = unique("killed")
    run_id = airflow.trigger_dag(
        dag_id, {"config": training_config(name, InstanceCount=1), "prefs": [G6, G5], "max_pending": None}
    )
    ti = airflow.wait_for_task(dag_id, run_id, "job", {"running", "failed", "up_for_retry"}, timeout=120)
    assert ti["state"] == "running", ti
    wait_for(lambda: any(j["name"] == name for j in airflow.sm.jobs()), 60, "CreateTrainingJob", every=0.05)
    airflow.kill_task_process(ti["id"], signal.SIGKILL)
    airflow.sm.set_faults(latency_ms=0)
    owners = {name: (dag_id, run_id, "job", -1)}

    if AIRFLOW < (3, 1):
        assert airflow.wait_for_run(dag_id, run_id, timeout=120) == "failed"
        assert airflow.task_instance(dag_id, run_id, "job")["try_number"] == 1
        assert unattended_jobs(airflow, owners) == [f"{name} (task job[-1] is failed)"]
        code, report = reconcile(airflow, "--stop")
        assert code == 0, report
        assert rows(report) == {name: ("stop", "stopped")}, report["jobs"]
        wait_for(lambda: airflow.sm.job(name)["status"] == "Stopped", 30, "the job to reach Stopped")
        outcome = "Airflow 3.0 failed the task without retry; one pass stopped its job"
    else:
        deferred_on(airflow, dag_id, run_id, "job", 1)  # the retry reattached and waits
        assert airflow.task_instance(dag_id, run_id, "job")["try_number"] == 2
        code, report = reconcile(airflow, "--stop")
        assert code == 0, report
        assert rows(report) == {name: ("keep", "")}, report["jobs"]
        assert (airflow.sm.job(name)["status"], stops(airflow, name)) == ("InProgress", 0)
        airflow.set_task_state(dag_id, run_id, "job", "failed")
        wait_for(lambda: airflow.sm.job(name)["status"] == "Stopped", 60, "on_kill to stop the job")
        outcome = "the retry reattached to the job; one pass kept it (0 wrong stops)"
    assert airflow.sm.stats()["operations"]["CreateTrainingJob"] == 1
    finish(
        airflow,
        ledger,
        owners,
        started,
        id="reconcile-task-killed",
        order=24,
        scenario="task process SIGKILLed while it runs (after Create); one reconciler pass",
        load="1 task",
        faults="SIGKILL of the task process; 1.5 s latency on every SageMaker call meanwhile",
        outcome=outcome,
    )
