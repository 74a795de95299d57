"""The offline SageMaker (the offline-sagemaker distribution) with Airflow and this provider: Airflow's
stock amazon hooks run against it unchanged, and the provider's request builder produces what it accepts.

The emulator's own tests, which need neither, are in offline-sagemaker/tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.preferences import build_request
from offline_sagemaker import OfflineSageMaker, jobs

G5 = "ml.g5.48xlarge"

#: A frozen-clock world (only advance() moves time): the job lines of its logs are deterministic.
FROZEN: dict[str, Any] = {
    "name": "frozen",
    "time_scale": 0,
    "start_epoch": 1_800_000_000,
    "job_runtime_seconds": 600,
    "phase_seconds": {"starting": 60, "downloading": 60, "uploading": 30, "stopping": 30},
    "capacity": {G5: [{"from": 0, "free": 4}]},
}


def training_request(
    name: str, preferences: list[dict[str, Any]] | None = None, **resource: Any
) -> dict[str, Any]:
    """CreateTrainingJob kwargs: a preference list, or a plain single-type job (``InstanceType=...``)."""
    config = jobs.training_config(name, max_runtime_seconds=86400, **resource)
    if preferences is not None:
        config["ResourceConfig"]["InstancePreferences"] = preferences
    return config


@pytest.fixture
def frozen_world(offline_sagemaker_factory: Callable[..., OfflineSageMaker]) -> OfflineSageMaker:
    return offline_sagemaker_factory(FROZEN)


@pytest.fixture
def airflow_conn(
    offline_sagemaker: OfflineSageMaker, monkeypatch: pytest.MonkeyPatch
) -> Iterator[OfflineSageMaker]:
    for key, value in offline_sagemaker.airflow_env(conn_id="aws_emulator").items():
        monkeypatch.setenv(key, value)
    yield offline_sagemaker


def test_stock_airflow_sagemaker_hook_runs_a_plain_job_to_completion(airflow_conn: OfflineSageMaker) -> None:
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook
    from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook

    s3 = S3Hook(aws_conn_id="aws_emulator")
    s3.create_bucket(bucket_name="airflow-data")
    s3.load_string("x,y\n1,2\n", key="train/data.csv", bucket_name="airflow-data")
    assert s3.read_key("train/data.csv", bucket_name="airflow-data") == "x,y\n1,2\n"

    config = training_request("airflow-plain", InstanceType="ml.m5.xlarge", InstanceCount=1)
    config["InputDataConfig"] = [
        {
            "ChannelName": "train",
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://airflow-data/train/"}},
        }
    ]
    hook = SageMakerHook(aws_conn_id="aws_emulator")
    # print_log=False: the log-tailing path describes the job only every 30 real seconds.
    hook.create_training_job(config, wait_for_completion=True, print_log=False, check_interval=1)
    described = hook.describe_training_job("airflow-plain")
    assert described["TrainingJobStatus"] == "Completed"
    assert airflow_conn.stats()["jobs"]["airflow-plain"]["DescribeTrainingJob"] >= 2


def test_the_stock_amazon_hook_follows_the_logs_of_a_job_with_a_job_level_count(
    frozen_world: OfflineSageMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SageMakerHook.check_training_status_with_log: describe_training_job_with_log + multi_stream_iter."""
    from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook

    world = frozen_world
    for key, value in world.airflow_env(conn_id="aws_default").items():
        monkeypatch.setenv(key, value)
    client = world.boto3_client("sagemaker")
    client.create_training_job(**training_request("stock", [{"InstanceType": G5}], InstanceCount=2))
    world.advance(2000)
    hook = SageMakerHook(aws_conn_id="aws_default")
    printed: list[str] = []
    monkeypatch.setattr(
        hook.log, "info", lambda msg, *args: printed.append(str(msg) % args if args else str(msg))
    )
    hook.check_training_status_with_log(
        "stock", hook.non_terminal_states, hook.training_failed_states, True, check_interval=0
    )
    lines = [line for line in printed if "instances)" in line or "Epoch" in line]
    assert lines[:2] == [
        f"Container started on {G5} (algo-1 of 2 instances)",
        f"Container started on {G5} (algo-2 of 2 instances)",
    ]
    assert sum("Epoch 3/3" in line for line in printed) == 2


def test_the_stock_amazon_hook_breaks_on_per_entry_counts_unless_describe_fills_the_count(
    frozen_world: OfflineSageMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook

    world = frozen_world
    for key, value in world.airflow_env(conn_id="aws_default").items():
        monkeypatch.setenv(key, value)
    client = world.boto3_client("sagemaker")
    client.create_training_job(**training_request("per-entry", [{"InstanceType": G5, "InstanceCount": 2}]))
    world.advance(2000)
    hook = SageMakerHook(aws_conn_id="aws_default")
    with pytest.raises(KeyError, match="InstanceCount"):
        hook.check_training_status_with_log("per-entry", set(), set(), True, check_interval=0)
    world.load_scenario({**FROZEN, "describe_instance_count": "selected"})
    client.create_training_job(**training_request("per-entry", [{"InstanceType": G5, "InstanceCount": 2}]))
    world.advance(2000)
    hook.check_training_status_with_log(
        "per-entry", hook.non_terminal_states, hook.training_failed_states, True, check_interval=0
    )


def test_a_request_built_by_the_provider_is_accepted(offline_sagemaker: OfflineSageMaker) -> None:
    config = jobs.training_config("helper", max_runtime_seconds=7200, tags={"team": "ml"})
    request, prefs = build_request("training", config, [{"instance_type": G5, "instance_count": 1}])
    assert prefs.describe(1) == f"{G5}×1"
    client = offline_sagemaker.boto3_client("sagemaker")
    client.create_training_job(**request)
    described = client.describe_training_job(TrainingJobName="helper")
    assert described["StoppingCondition"]["MaxRuntimeInSeconds"] == 7200
    assert described["ResourceConfig"]["InstancePreferences"][0]["InstanceType"] == G5


def test_the_former_helper_example_builds_a_two_entry_list() -> None:
    # The example airflow_provider_sm_prefs.testing.jobs documented before the split.
    config = jobs.training_config("nightly", InstanceCount=2)
    _, prefs = build_request("training", config, ["ml.g6.48xlarge", G5], 3600)
    assert prefs.describe(2) == f"ml.g6.48xlarge×2 → {G5}×2"
