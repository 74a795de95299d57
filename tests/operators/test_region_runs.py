"""Regions after the task's own, in real dag.test() runs against the offline SageMaker's two regions: the
home job stopped while Pending, the job made again in the next region with its overrides, one job at a
time, and a region missing an override refused before any call.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.operators.test_dag_runs import processing_config, scenario, training_config
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


def pending_in(job: dict[str, Any]) -> float:
    """Emulated seconds ``job`` spent Pending, from its timeline (as AWS's Pending transitions count it)."""
    timeline = job["timeline"]
    return sum(
        after["emulated_time"] - entry["emulated_time"]
        for entry, after in itertools.pairwise(timeline)
        if entry["secondary_status"] == "Pending"
    )


def selected_ever(sm: Any) -> list[tuple[str, str]]:
    """(region, job) of every job SageMaker ever selected an entry for, in any region."""
    return [(j["region"], j["name"]) for j in sm.jobs() if j["selected_instance_type"] is not None]


def test_a_home_region_out_of_capacity_moves_the_job_to_the_next_region(
    sm: Any, run_test_dag: Any, capacity_record: Any
) -> None:
    # us-west-2 frees g5 ten emulated minutes after the job moves there; its output bucket is there.
    sm.load_scenario(scarce_at_home(MOVE_AFTER + 600))
    west_s3 = sm.boto3_client("s3", region_name=WEST)
    west_s3.create_bucket(Bucket="west-models", CreateBucketConfiguration={"LocationConstraint": WEST})
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
    # The whole wait: from the home job's creation to the us-west-2 job's, then that job's Pending time.
    moved = sm.job("nightly-s2", region=WEST)
    assert moved["created_at"] - home["created_at"] >= MOVE_AFTER
    waited = moved["created_at"] - home["created_at"] + pending_in(moved)
    assert xcom["pending_seconds"] == pytest.approx(waited, abs=1)
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


def test_a_regions_bucket_in_another_region_fails_the_task_before_any_create(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(scarce_at_home(MOVE_AFTER + 600))
    sm.boto3_client("s3").create_bucket(Bucket="west-models")  # in us-east-1, not where the job moves
    states, _ = run_test_dag(
        "t_train_capacity", config=training_config(), prefs=PREFS, max_pending=4 * HOUR, regions=west()
    )
    assert states["job"] == "failed"
    assert "CreateTrainingJob" not in sm.stats()["operations"]
    assert (
        "regions[0] (us-west-2): OutputDataConfig.S3OutputPath names S3 bucket west-models, which is in "
        "us-east-1 (GetBucketLocation); give a bucket of us-west-2 in the overrides"
    ) in capfd.readouterr().out


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


def test_a_processing_job_moves_with_its_own_list_in_the_next_region(sm: Any, run_test_dag: Any) -> None:
    """Processing (no pending limit of SageMaker's): the window is the task's; the region offers its own list."""
    c7i, c6i = "ml.c7i.4xlarge", "ml.c6i.4xlarge"
    sm.load_scenario(
        scenario(
            time_scale=0,
            capacity={c7i: [{"from": 0, "free": 0}], c6i: [{"from": 0, "free": 0}]},
            regions={WEST: {"capacity": {c7i: [{"from": 0, "free": 0}], c6i: [{"from": 0, "free": 4}]}}},
        )
    )
    regions = [
        {
            "region": WEST,
            "after": 900,
            "overrides": {
                "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/prep:1"}
            },
            "instance_preferences": [{"instance_type": c6i, "instance_count": 1}],
        }
    ]
    with ticking(sm):
        states, xcom = run_test_dag(
            "t_process",
            config=processing_config(),
            prefs=[{"instance_type": c7i, "instance_count": 1}],
            max_pending=HOUR,
            regions=regions,
        )
    assert states["job"] == "success"
    assert xcom is not None
    # Rank 1 of the region's own list, and a fallback: not the first choice as written.
    assert (xcom["region"], xcom["region_rank"], xcom["selected_instance_type"]) == (WEST, 2, c6i)
    assert (xcom["preference_rank"], xcom["fell_back"]) == (1, True)
    assert sorted((j["region"], j["name"], j["status"]) for j in sm.jobs()) == [
        (EAST, "prep", "Stopped"),
        (WEST, "prep-s2", "InProgress"),
    ]
