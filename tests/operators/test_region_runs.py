"""Regions after the task's own, in real dag.test() runs against the offline SageMaker's two regions: the
home job stopped while Pending, the job made again in the next region with its overrides, one job at a
time, and a region missing an override refused before any call.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.operators.test_dag_runs import scenario, training_config
from tests.operators.test_window_runs import ticking

pytestmark = pytest.mark.usefixtures("airflow_db")

G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"
EAST, WEST = "us-east-1", "us-west-2"
WEST_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1"
PREFS = [{"instance_type": G6, "instance_count": 2}, {"instance_type": G5, "instance_count": 4}]
HOUR = 3600
#: The job moves to us-west-2 after half an hour of waiting in us-east-1.
MOVE_AFTER = 1800


def west(**changes: Any) -> list[dict[str, Any]]:
    return [
        {
            "region": WEST,
            "after": MOVE_AFTER,
            "overrides": {
                "AlgorithmSpecification": {"TrainingImage": WEST_IMAGE},
                "OutputDataConfig": {"S3OutputPath": "s3://west-models/out"},
            },
            **changes,
        }
    ]


def scarce_at_home(west_frees_at: float) -> dict[str, Any]:
    """Nothing of the list in us-east-1, ever; in us-west-2 g5 frees ``west_frees_at`` emulated seconds in."""
    return scenario(
        time_scale=0,
        capacity={G6: [{"from": 0, "free": 0}], G5: [{"from": 0, "free": 0}]},
        regions={
            WEST: {
                "capacity": {
                    G6: [{"from": 0, "free": 0}],
                    G5: [{"from": 0, "to": west_frees_at, "free": 0}, {"from": west_frees_at, "free": 8}],
                }
            }
        },
    )


def selected_ever(sm: Any) -> list[tuple[str, str]]:
    """(region, job) of every job SageMaker ever selected an entry for, in any region."""
    return [(j["region"], j["name"]) for j in sm.jobs() if j["selected_instance_type"] is not None]


def test_a_home_region_out_of_capacity_moves_the_job_to_the_next_region(
    sm: Any, run_test_dag: Any, capacity_record: Any
) -> None:
    # us-west-2 frees g5 ten emulated minutes after the job moves there.
    sm.load_scenario(scarce_at_home(MOVE_AFTER + 600))
    with ticking(sm):
        states, xcom = run_test_dag(
            "t_train_capacity", config=training_config(), prefs=PREFS, max_pending=4 * HOUR, regions=west()
        )
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None
    assert (xcom["region"], xcom["region_rank"]) == (WEST, 2)
    assert (xcom["selected_instance_type"], xcom["preference_rank"], xcom["fell_back"]) == (G5, 2, True)
    assert xcom["job_name"] == "nightly-s2"
    assert xcom["job_arn"] == "arn:aws:sagemaker:us-west-2:123456789012:training-job/nightly-s2"
    # The home job was stopped while Pending (never billed); exactly one job was ever selected.
    home = sm.job("nightly", region=EAST)
    assert (home["status"], home["selected_instance_type"], home["start_time"]) == ("Stopped", None, None)
    assert selected_ever(sm) == [(WEST, "nightly-s2")]
    assert sorted((j["region"], j["name"]) for j in sm.jobs()) == [(EAST, "nightly"), (WEST, "nightly-s2")]
    # It waited 600 emulated seconds in us-west-2, 2,400 in all.
    assert xcom["pending_seconds"] == pytest.approx(MOVE_AFTER + 600, abs=120)
    stages = xcom["return_value"]["stages"]
    assert [(s["stage"], s["job_name"], s["ended"], s.get("region")) for s in stages] == [
        (1, "nightly", "escalated", None),
        (2, "nightly-s2", "selected", WEST),
    ]
    # The job in us-west-2 was made with the region's overrides.
    described = sm.boto3_client("sagemaker", region_name=WEST).describe_training_job(
        TrainingJobName="nightly-s2"
    )
    assert described["AlgorithmSpecification"]["TrainingImage"] == WEST_IMAGE
    assert described["OutputDataConfig"]["S3OutputPath"] == "s3://west-models/out"
    assert described["RoleArn"] == training_config()["RoleArn"]
    record = capacity_record("t_train_capacity")
    assert record is not None and record["region"] == WEST


def test_a_region_missing_an_override_fails_the_task_before_any_call(sm: Any, run_test_dag: Any) -> None:
    regions = west()
    del regions[0]["overrides"]["OutputDataConfig"]
    states, _ = run_test_dag(
        "t_train_capacity", config=training_config(), prefs=PREFS, max_pending=4 * HOUR, regions=regions
    )
    assert states["job"] == "failed"
    assert sm.stats()["operations"] == {}
    assert sm.jobs() == []


def test_a_worker_killed_between_the_stop_and_the_next_create_leaves_one_job(
    sm: Any, run_test_dag: Any
) -> None:
    sm.load_scenario(scarce_at_home(MOVE_AFTER + 600))
    with ticking(sm):
        states, xcom = run_test_dag(
            "t_train_escalate_crash",
            config=training_config(),
            prefs=PREFS,
            max_pending=4 * HOUR,
            regions=west(),
        )
    assert states["job"] == "success"
    assert xcom is not None and (xcom["region"], xcom["job_name"]) == (WEST, "nightly-s2")
    assert sorted((j["region"], j["name"], j["status"]) for j in sm.jobs()) == [
        (EAST, "nightly", "Stopped"),
        (WEST, "nightly-s2", "InProgress"),
    ]
    assert sm.stats()["operations"]["CreateTrainingJob"] == 2
