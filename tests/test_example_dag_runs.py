"""The example DAGs, run end to end with dag.test() against the offline SageMaker."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.preferences import build_request
from offline_sagemaker import load_scenario

pytestmark = pytest.mark.usefixtures("airflow_db")

DAGS = Path(__file__).resolve().parent.parent / "dags_examples"


@pytest.fixture(scope="module")
def example_dags() -> Any:
    from tests.airflow_versions import DagBag

    bag = DagBag(str(DAGS))
    assert not bag.import_errors
    return bag


def states_of(dagrun: Any) -> dict[str, str | None]:
    return {ti.task_id: ti.state for ti in dagrun.get_task_instances()}


def test_nightly_retrain_falls_back_and_sizes_the_evaluation(
    sm: Any, example_dags: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(
        {
            "time_scale": 600,
            "job_runtime_seconds": 600,
            "capacity": {"ml.g6.48xlarge": [{"from": 0, "free": 0}]},
        }
    )
    dagrun = example_dags.get_dag("sm_prefs_nightly_retrain").test()
    assert states_of(dagrun) == {
        "stage_dataset": "success",
        "train": "success",
        "evaluate": "success",
        "report": "success",
    }
    out = capfd.readouterr().out
    assert (
        "'instance_type': 'ml.g5.48xlarge', 'instances': 4, 'processes': 32, 'per_device_batch_size': 48"
        in out
    )
    (job,) = sm.jobs()
    assert job["status"] == "Completed" and job["selected_instance_type"] == "ml.g5.48xlarge"
    s3 = sm.boto3_client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="sm-prefs-demo")["Contents"]]
    assert any(k.endswith("train.csv") for k in keys)
    # The job runs train.py from the archive the DAG uploaded beside (not inside) the training channel.
    described = sm.boto3_client("sagemaker").describe_training_job(TrainingJobName=job["name"])
    hyper = described["HyperParameters"]
    assert json.loads(hyper["sagemaker_program"]) == "train.py"
    code = json.loads(hyper["sagemaker_submit_directory"])
    channel = described["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"]
    assert code.startswith("s3://sm-prefs-demo/") and not code.startswith(channel)
    archive = s3.get_object(Bucket="sm-prefs-demo", Key=code.removeprefix("s3://sm-prefs-demo/"))[
        "Body"
    ].read()
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        assert {"train.py", "airflow_provider_sm_prefs/container.py"} <= set(tar.getnames())


def test_nightly_retrain_triggered_by_hand_without_a_logical_date(sm: Any, example_dags: Any) -> None:
    """Airflow 3's manual runs (CLI, REST, UI) may have no logical date: no ts_nodash, no ds."""
    # The local Airflow's repeating scarcity, on a faster clock.
    sm.load_scenario({**load_scenario("local-airflow").as_dict(), "time_scale": 600})
    dag = example_dags.get_dag("sm_prefs_nightly_retrain")
    names = []
    for _ in range(2):
        dagrun = dag.test(logical_date=None)
        assert dagrun.logical_date is None
        assert set(states_of(dagrun).values()) == {"success"}, states_of(dagrun)
        names.append(sm.jobs()[-1]["name"])
    # Each run gets its own job, named after the DAG, the task and (hashed) the run.
    assert names[0] != names[1] and all(n.startswith("sm-prefs-nightly-retrain-train-") for n in names)
    assert [j["selected_rank"] for j in sm.jobs()] == [2, 2]  # the local scenario always falls back


def test_processing_on_cpu_types(sm: Any, example_dags: Any) -> None:
    dagrun = example_dags.get_dag("sm_prefs_processing_cpu").test()
    assert states_of(dagrun) == {"prepare_features": "success"}
    (job,) = sm.jobs()
    assert job["kind"] == "processing" and job["selected_instance_type"] == "ml.c7i.4xlarge"


def test_sensor_watches_an_externally_submitted_job(sm: Any, example_dags: Any) -> None:
    config = {
        "TrainingJobName": "external-training-job",
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1",
            "TrainingInputMode": "File",
        },
        "RoleArn": "arn:aws:iam::123456789012:role/r",
        "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
        "ResourceConfig": {"VolumeSizeInGB": 10},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    }
    request, _ = build_request(
        "training", config, [{"instance_type": "ml.g5.12xlarge", "instance_count": 1}], 3600
    )
    sm.boto3_client("sagemaker").create_training_job(**request)
    dagrun = example_dags.get_dag("sm_prefs_watch_external_job").test()
    assert states_of(dagrun) == {"wait_for_capacity": "success", "announce": "success"}
