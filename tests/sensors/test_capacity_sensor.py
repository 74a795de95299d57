"""Real dag.test() runs of the sensor on jobs submitted elsewhere, against the offline SageMaker."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.preferences import build_request
from offline_sagemaker.jobs import training_config

pytestmark = pytest.mark.usefixtures("airflow_db")

G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"
NIGHTLY = [
    {"instance_type": G6, "instance_count": 2},
    {"instance_type": G5, "instance_count": 4},
    {"instance_type": P4D, "instance_count": 2},
]
#: The first choice never has capacity; the others are free.
FIRST_CHOICE_SCARCE = {
    "time_scale": 600,
    "job_runtime_seconds": 600,
    "capacity": {G6: [{"from": 0, "free": 0}]},
}


def test_sensor_on_an_external_job(sm: Any, run_test_dag: Any) -> None:
    sm.load_scenario(FIRST_CHOICE_SCARCE)
    request, _ = build_request("training", training_config("external-1"), NIGHTLY, 3600)
    sm.boto3_client("sagemaker").create_training_job(**request)
    states, xcom = run_test_dag("t_sensor", job_name="external-1")
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None and (
        xcom["job_name"],
        xcom["selected_instance_type"],
        xcom["preference_rank"],
    ) == ("external-1", G5, 2)
    assert sm.stats()["operations"].get("CreateTrainingJob", 0) == 1


def test_poking_sensor_reports_the_same_outcome(sm: Any, run_test_dag: Any) -> None:
    sm.load_scenario(FIRST_CHOICE_SCARCE)
    request, _ = build_request("training", training_config("external-2"), NIGHTLY, 3600)
    sm.boto3_client("sagemaker").create_training_job(**request)
    states, xcom = run_test_dag("t_sensor_poke", job_name="external-2")
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None and (xcom["selected_instance_type"], xcom["preference_rank"]) == (G5, 2)


def test_poking_sensor_times_out_without_stopping_someone_elses_job(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    # A frozen clock, moved past the sensor's 3600 s but nowhere near the job's own 86400 s limit: the
    # job is still waiting in SageMaker when the sensor gives up, however long dag.test() takes.
    sm.load_scenario({"time_scale": 0, "capacity": {"ml.*": [{"from": 0, "free": 0}]}})
    request, _ = build_request("training", training_config("external-3"), NIGHTLY, 86400)
    sm.boto3_client("sagemaker").create_training_job(**request)
    sm.advance(2 * 3600)
    states, _ = run_test_dag("t_sensor_poke", job_name="external-3")
    assert states["job"] == "failed"
    captured = capfd.readouterr()
    assert "Timed out waiting for capacity" in captured.out + captured.err
    assert sm.job("external-3")["status"] == "InProgress"
