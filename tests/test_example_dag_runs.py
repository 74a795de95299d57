"""The example DAGs, run end to end with dag.test() against the offline SageMaker."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.preferences import build_request
from harness.demo import cost_rows
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


def return_value(dag_id: str, task_id: str) -> Any:
    """The task's ``return_value`` XCom in the DAG's latest run (what ``make demo`` reads)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(
            select(XComModel)
            .where(XComModel.dag_id == dag_id, XComModel.task_id == task_id, XComModel.key == "return_value")
            .order_by(XComModel.timestamp.desc())
            .limit(1)
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


def test_nightly_retrain_falls_back_sizes_the_evaluation_and_prices_the_run(
    sm: Any,
    example_dags: Any,
    capacity_record: Callable[..., dict[str, Any] | None],
    capfd: pytest.CaptureFixture[str],
) -> None:
    sm.load_scenario(
        {
            "time_scale": 600,
            "job_runtime_seconds": 600,
            "capacity": {"ml.g6.48xlarge": [{"from": 0, "free": 0}]},
            # make demo's prices, which the guardrails read from the Price List API before submit
            "prices": load_scenario("nightly-demo").as_dict()["prices"],
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
    # make demo's cost lines: every figure is the record's (the page's data), none computed anew.
    record = capacity_record("sm_prefs_nightly_retrain", "train")
    outcome = return_value("sm_prefs_nightly_retrain", "train")
    assert record is not None and outcome is not None
    names = ("hourly_cost", "first_choice_hourly_cost", "cost_increase", "estimated_cost", "billable_seconds")
    assert {n: outcome[n] for n in names} == {n: record[n] for n in names}
    hourly, first, billable = (
        record["hourly_cost"],
        record["first_choice_hourly_cost"],
        record["billable_seconds"],
    )
    assert hourly and first and billable and record["estimated_cost"]
    premium = hourly - first
    assert premium > 0  # four ml.g5.48xlarge cost more an hour than two ml.g6.48xlarge
    assert dict(cost_rows(outcome)) == {
        "selected price": f"${hourly:,.2f}/h (ml.g5.48xlarge×4)",
        "first choice price": f"${first:,.2f}/h (ml.g6.48xlarge×2)",
        "difference": f"+${premium:,.2f}/h premium ({record['cost_increase']:+.0%} vs first choice), "
        f"+${premium * billable / 3600:,.2f} this run",
        "estimated cost of run": f"${record['estimated_cost']:,.2f} ({billable} billable s × ${hourly:,.2f}/h)",
    }


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
