"""Every example DAG, triggered every way a user triggers it: REST without and with a logical date, and
the UI's Trigger button in headless Chromium. Runs on the local Airflow's own scenario (``local-airflow``),
whose scarcity repeats, so the nightly DAG falls back whenever it runs.
"""

from __future__ import annotations

import re
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from harness.deployment import LocalAirflow

pytestmark = pytest.mark.e2e

E2E_SCENARIO = "local-airflow"
NIGHTLY, PROCESSING, SENSOR = (
    "sm_prefs_nightly_retrain",
    "sm_prefs_processing_cpu",
    "sm_prefs_watch_external_job",
)
E2E_DAGS = (NIGHTLY, PROCESSING, SENSOR)
#: The task of each example DAG that talks to SageMaker.
JOB_TASK = {NIGHTLY: "train", PROCESSING: "prepare_features", SENSOR: "wait_for_capacity"}
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "e2e-screenshots"


def external_job(airflow: LocalAirflow, name: str) -> None:
    """What the sensor example watches: a training job someone else submitted, with a preference list."""
    airflow.sm.boto3_client().create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
            "TrainingInputMode": "File",
        },
        RoleArn="arn:aws:iam::123456789012:role/SageMakerRole",
        OutputDataConfig={"S3OutputPath": "s3://models/out"},
        ResourceConfig={
            "VolumeSizeInGB": 50,
            "InstancePreferences": [
                {"InstanceType": "ml.g6.48xlarge", "InstanceCount": 1},
                {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
            ],
        },
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
    )


def assert_succeeded_with_its_job(airflow: LocalAirflow, dag_id: str, run_id: str) -> dict[str, Any]:
    """The run succeeded; its job task's outcome, links and XCom keys are what a user relies on."""
    assert airflow.wait_for_run(dag_id, run_id, timeout=300) == "success", airflow.ti_states(dag_id, run_id)
    assert set(airflow.ti_states(dag_id, run_id).values()) == {"success"}
    task = JOB_TASK[dag_id]
    outcome: dict[str, Any] = airflow.xcom(dag_id, run_id, task)
    assert outcome["job_status"] in ("InProgress", "Completed")
    if dag_id == SENSOR:
        return outcome
    # The name was derived from the task instance: no template a manual run lacks.
    slug = dag_id.replace("_", "-")
    assert re.fullmatch(rf"{slug}-{task.replace('_', '-')}-[0-9a-f]{{10}}", outcome["job_name"]), outcome
    # Fallback shows on every run: the first choice never has capacity in this scenario.
    assert outcome["preference_rank"] == 2 and outcome["fell_back"] is True
    # One XCom per extra link, holding a URL that opens the offline SageMaker's page for this job.
    keys = {e["key"] for e in airflow.xcom_entries(dag_id, run_id) if e["task_id"] == task}
    assert {"sm_prefs_job_link", "sm_prefs_job_logs_link"} <= keys
    assert not [k for k in keys if k.startswith("_link_")], keys
    link = airflow.xcom(dag_id, run_id, task, key="sm_prefs_job_link")
    assert link == f"{airflow.sm.endpoint_url}/_emulator/view/jobs/{outcome['job_name']}"
    with urllib.request.urlopen(link, timeout=10) as response:
        page = response.read().decode()
    assert outcome["job_name"] in page and outcome["selected_instance_type"] in page
    return outcome


@pytest.mark.parametrize(
    "logical_date",
    [pytest.param(None, marks=pytest.mark.core), "given"],
    ids=["null-logical-date", "with-logical-date"],
)
def test_every_example_dag_succeeds_when_triggered_through_the_rest_api(
    airflow: LocalAirflow, logical_date: str | None
) -> None:
    started = {}
    for dag_id in E2E_DAGS:
        conf: dict[str, Any] = {}
        if dag_id == SENSOR:
            conf["job_name"] = f"external-{logical_date or 'null'}-{int(time.time())}"
            external_job(airflow, conf["job_name"])
        when = datetime.now(timezone.utc) if logical_date else None
        run_id = airflow.trigger_dag(dag_id, conf=conf, logical_date=when)
        run = airflow.dag_run(dag_id, run_id)
        assert (run["logical_date"] is None) is (logical_date is None), run
        started[dag_id] = run_id
    outcomes = {
        dag_id: assert_succeeded_with_its_job(airflow, dag_id, run_id) for dag_id, run_id in started.items()
    }
    assert outcomes[SENSOR]["job_name"].startswith("external-")


# -- the UI's Trigger button -------------------------------------------------------------------------------


def trigger_from_the_ui(airflow: LocalAirflow, browser: Any, dag_id: str, params: dict[str, str]) -> str:
    """Open the DAG's page, press Trigger, fill the run parameters, submit; returns the new run's id."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    before = {r["dag_run_id"] for r in airflow.api("GET", f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]}
    browser.get(f"{airflow.ui_url.rstrip('/')}/dags/{dag_id}")
    wait = WebDriverWait(browser, 60)
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid=trigger-dag-button]"))).click()
    submit = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid=trigger-dag-submit]")))
    for name, value in params.items():
        field = browser.find_element(By.CSS_SELECTOR, f"input[name=element_{name}]")
        field.send_keys(Keys.CONTROL, "a")
        field.send_keys(value)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / f"trigger-{dag_id}.png"))
    submit.click()

    def new_run() -> str | None:
        runs = airflow.api("GET", f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]
        fresh = [r["dag_run_id"] for r in runs if r["dag_run_id"] not in before]
        return fresh[0] if fresh else None

    deadline = time.monotonic() + 60
    while (run_id := new_run()) is None:
        assert time.monotonic() < deadline, f"pressing Trigger on {dag_id} created no run"
        time.sleep(0.5)
    run = airflow.dag_run(dag_id, run_id)
    assert run["run_type"] == "manual" and run["triggered_by"] == "ui", run
    return run_id


def test_every_example_dag_succeeds_when_triggered_from_the_ui(airflow: LocalAirflow, browser: Any) -> None:
    started = {}
    for dag_id in E2E_DAGS:
        params: dict[str, str] = {}
        if dag_id == SENSOR:
            params["job_name"] = f"external-ui-{int(time.time())}"
            external_job(airflow, params["job_name"])
        started[dag_id] = trigger_from_the_ui(airflow, browser, dag_id, params)
    for dag_id, run_id in started.items():
        outcome = assert_succeeded_with_its_job(airflow, dag_id, run_id)
        if dag_id == SENSOR:
            assert outcome["job_name"].startswith("external-ui-")
    # What the "SageMaker Job" button opens, as a person sees it.
    browser.get(airflow.xcom(NIGHTLY, started[NIGHTLY], "train", key="sm_prefs_job_link"))
    browser.save_screenshot(str(SCREENSHOTS / "offline-job-view.png"))
    assert "ml.g5.48xlarge" in browser.find_element("css selector", "tr.selected").text
