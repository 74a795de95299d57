"""Every try of the operators and the sensor leaves its capacity record in XCom, failures included
(real dag.test() runs against the offline SageMaker)."""

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
FAST = {"time_scale": 600, "job_runtime_seconds": 600}


def test_a_fallback_leaves_a_complete_record(sm: Any, run_test_dag: Any, capacity_record: Any) -> None:
    sm.load_scenario({**FAST, "capacity": {G6: 0}})
    states, xcom = run_test_dag(
        "t_train_complete", config=training_config("rec-ok"), prefs=NIGHTLY, max_pending=3600
    )
    assert states == {"job": "success", "consume": "success"}
    record = capacity_record("t_train_complete")
    assert record is not None and record["version"] == 1
    assert (record["dag_id"], record["task_id"], record["map_index"], record["try_number"]) == (
        "t_train_complete",
        "job",
        -1,
        1,
    )
    assert (record["job_name"], record["region"], record["job_status"]) == (
        "rec-ok",
        "us-east-1",
        "Completed",
    )
    assert (
        record["selected_instance_type"],
        record["selected_instance_count"],
        record["preference_rank"],
    ) == (
        G5,
        4,
        2,
    )
    assert record["failure_kind"] is None and record["billable_seconds"] is not None
    assert [p["instance_type"] for p in record["preferences"]] == [G6, G5, P4D]
    assert record["created_at"] and record["ended_at"] and record["recorded_at"]
    # The record agrees with the per-key XComs downstream tasks read.
    assert xcom is not None and xcom["pending_seconds"] == record["pending_seconds"]


def test_a_quota_rejection_leaves_a_record_without_a_job(
    sm: Any, run_test_dag: Any, capacity_record: Any
) -> None:
    sm.load_scenario({**FAST, "quotas": {"training": {G5: 2}}})
    states, _ = run_test_dag(
        "t_train_capacity",
        config=training_config("rec-quota"),
        prefs=NIGHTLY,
        max_pending=3600,
        preflight="off",
    )
    assert states["job"] == "failed" and sm.jobs() == []
    record = capacity_record("t_train_capacity")
    assert record is not None and record["failure_kind"] == "quota"
    assert f"instance_preferences[1] ({G5}) lacks quota" in record["reason"]
    assert record["selected_instance_type"] is None and len(record["preferences"]) == 3


def test_a_capacity_timeout_leaves_a_record(sm: Any, run_test_dag: Any, capacity_record: Any) -> None:
    sm.load_scenario({"time_scale": 1800, "capacity": {"ml.*": [{"from": 0, "free": 0}]}})
    states, _ = run_test_dag(
        "t_train_capacity", config=training_config("rec-late"), prefs=NIGHTLY, max_pending=1800
    )
    assert states["job"] == "failed"
    record = capacity_record("t_train_capacity")
    assert record is not None and record["failure_kind"] == "capacity_timeout"
    assert record["job_name"] == "rec-late" and record["job_status"] == "Stopped"
    # The list the job was submitted with, though dag.test() resumes a deferral with its event alone.
    assert [(p["instance_type"], p["instance_count"]) for p in record["preferences"]] == [
        (p["instance_type"], p["instance_count"]) for p in NIGHTLY
    ]


def test_an_invalid_list_leaves_a_record_and_sends_nothing(
    sm: Any, run_test_dag: Any, capacity_record: Any
) -> None:
    states, _ = run_test_dag(
        "t_train_capacity", config=training_config("rec-bad"), prefs=[G6, G6], max_pending=3600
    )
    assert states["job"] == "failed" and sm.stats()["operations"] == {}
    record = capacity_record("t_train_capacity")
    assert record is not None and record["failure_kind"] == "invalid_request"
    assert "appears twice" in record["reason"]


def test_the_sensor_leaves_the_same_record(sm: Any, run_test_dag: Any, capacity_record: Any) -> None:
    sm.load_scenario({**FAST, "capacity": {G6: 0}})
    request, _ = build_request("training", training_config("rec-external"), NIGHTLY, 3600)
    sm.boto3_client("sagemaker").create_training_job(**request)
    states, _ = run_test_dag("t_sensor", job_name="rec-external")
    assert states == {"job": "success", "consume": "success"}
    record = capacity_record("t_sensor")
    assert record is not None and (record["job_name"], record["preference_rank"]) == ("rec-external", 2)
