"""Conformance: botocore's model accepts every response; boto3, aiobotocore and the AWS CLI all work
against the endpoint unchanged (Airflow's stock SageMaker hook: the provider's
tests/test_offline_sagemaker_with_provider.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.model import Shape

from offline_sagemaker import OfflineSageMaker
from offline_sagemaker.botocore_model import service_model

AWS_CLI = Path(sys.executable).with_name("aws")
G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"


def raw(emulator: OfflineSageMaker, operation: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        emulator.endpoint_url,
        data=json.dumps(body).encode(),
        headers={"X-Amz-Target": f"SageMaker.{operation}", "Content-Type": "application/x-amz-json-1.1"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def conforms(value: Any, shape: Shape, path: str, *, optional: frozenset[str] = frozenset()) -> None:
    """Assert ``value`` is exactly what botocore's ``shape`` allows: known members, enums, types."""
    kind = shape.type_name
    if kind in _CONTAINERS:
        _CONTAINERS[kind](value, shape, path, optional)
    elif kind == "string":
        assert isinstance(value, str), path
        if shape.enum:
            assert value in shape.enum, f"{path}: {value!r} not in {shape.name}"
    elif kind in ("integer", "long"):
        assert isinstance(value, int) and not isinstance(value, bool), path
    elif kind == "boolean":
        assert isinstance(value, bool), path
    elif kind in ("timestamp", "double", "float"):
        assert isinstance(value, int | float) and not isinstance(value, bool), path


def _structure(value: Any, shape: Shape, path: str, optional: frozenset[str]) -> None:
    assert isinstance(value, dict), path
    for key, item in value.items():
        assert key in shape.members, f"{path}.{key} is not a member of {shape.name}"
        conforms(item, shape.members[key], f"{path}.{key}")
    for required in shape.required_members:
        assert required in value or required in optional, f"{path}.{required} is required by {shape.name}"


def _list(value: Any, shape: Shape, path: str, optional: frozenset[str]) -> None:
    assert isinstance(value, list), path
    for index, item in enumerate(value):
        conforms(item, shape.member, f"{path}[{index}]")  # type: ignore[attr-defined]


def _map(value: Any, shape: Shape, path: str, optional: frozenset[str]) -> None:
    assert isinstance(value, dict), path
    for key, item in value.items():
        conforms(item, shape.value, f"{path}.{key}")  # type: ignore[attr-defined]


_CONTAINERS: dict[str, Callable[[Any, Shape, str, frozenset[str]], None]] = {
    "structure": _structure,
    "list": _list,
    "map": _map,
}


def output_shape(operation: str) -> Shape:
    shape = service_model().operation_model(operation).output_shape
    assert shape is not None
    return shape


@pytest.mark.usefixtures("world")
def test_every_response_conforms_to_botocores_model_at_every_stage(
    world: OfflineSageMaker,
    make_training: Callable[..., dict[str, Any]],
    make_processing: Callable[..., dict[str, Any]],
) -> None:
    raw(
        world,
        "CreateTrainingJob",
        make_training(
            "shape", [{"InstanceType": G6, "InstanceCount": 1}, {"InstanceType": G5, "InstanceCount": 2}]
        ),
    )
    raw(
        world,
        "CreateProcessingJob",
        make_processing("p-shape", [{"InstanceType": "ml.m5.4xlarge", "InstanceCount": 1}]),
    )
    raw(
        world, "CreateTrainingJob", make_training("shape-stop", [{"InstanceType": "ml.p5.48xlarge"}], count=1)
    )
    for index, step in enumerate((0, 60, 60, 600, 30, 1000)):
        world.advance(step)
        if index == 1:
            raw(world, "StopTrainingJob", {"TrainingJobName": "shape-stop"})
        for name in ("shape", "shape-stop"):
            described = raw(world, "DescribeTrainingJob", {"TrainingJobName": name})
            optional = (
                frozenset()
                if described["TrainingJobStatus"] == "Completed"
                else frozenset({"ModelArtifacts"})
            )
            conforms(described, output_shape("DescribeTrainingJob"), name, optional=optional)
        conforms(
            raw(world, "DescribeProcessingJob", {"ProcessingJobName": "p-shape"}),
            output_shape("DescribeProcessingJob"),
            "p",
        )
        conforms(raw(world, "ListTrainingJobs", {}), output_shape("ListTrainingJobs"), "list")
        conforms(raw(world, "ListProcessingJobs", {}), output_shape("ListProcessingJobs"), "plist")
    assert world.job("shape")["status"] == "Completed"
    assert world.job("shape-stop")["status"] == "Stopped"


@pytest.mark.usefixtures("world")
def test_boto3_parses_selected_fields(
    client: Any,
    world: OfflineSageMaker,
    make_training: Callable[..., dict[str, Any]],
    make_processing: Callable[..., dict[str, Any]],
) -> None:
    client.create_training_job(
        **make_training(
            "parsed", [{"InstanceType": G6, "InstanceCount": 2}, {"InstanceType": G5, "InstanceCount": 4}]
        )
    )
    client.create_processing_job(
        **make_processing(
            "p-parsed", [{"InstanceType": "ml.m5.xlarge"}, {"InstanceType": "ml.m5.4xlarge"}], count=1
        )
    )
    world.advance(60)
    training = client.describe_training_job(TrainingJobName="parsed")["ResourceConfig"]
    assert (training["SelectedInstanceType"], training["SelectedInstanceCount"]) == (G5, 4)
    processing = client.describe_processing_job(ProcessingJobName="p-parsed")["ProcessingResources"][
        "ClusterConfig"
    ]
    assert (processing["SelectedInstanceType"], processing["SelectedInstanceCount"]) == ("ml.m5.4xlarge", 1)


@pytest.mark.usefixtures("world")
def test_aiobotocore_works_unchanged(
    world: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    from aiobotocore.session import get_session

    async def scenario() -> dict[str, Any]:
        session = get_session()
        async with session.create_client(
            "sagemaker",
            region_name=world.region,
            endpoint_url=world.endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ) as client:
            await client.create_training_job(
                **make_training("async", [{"InstanceType": G6}, {"InstanceType": G5}], count=1)
            )
            world.advance(60)
            result: dict[str, Any] = await client.describe_training_job(TrainingJobName="async")
            return result

    described = asyncio.run(scenario())
    assert described["ResourceConfig"]["SelectedInstanceType"] == G5
    assert described["SecondaryStatus"] == "Downloading"


def aws_cli(emulator: OfflineSageMaker, *args: str) -> Any:
    result = subprocess.run(
        [
            str(AWS_CLI),
            "--endpoint-url",
            emulator.endpoint_url,
            "--region",
            emulator.region,
            "--output",
            "json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    if args[0] == "s3":
        return result.stdout  # the s3 commands print progress lines, not JSON
    return json.loads(result.stdout) if result.stdout.strip() else None


@pytest.mark.usefixtures("world")
def test_aws_cli_plain_job_and_s3(
    world: OfflineSageMaker, make_training: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    # awscli 1.x vendors an older botocore without InstancePreferences, so the CLI runs a plain job.
    request = make_training("cli-plain", instance_type="ml.m5.4xlarge", count=1)
    created = aws_cli(world, "sagemaker", "create-training-job", "--cli-input-json", json.dumps(request))
    assert created["TrainingJobArn"].endswith(":training-job/cli-plain")
    world.advance(60)
    described = aws_cli(world, "sagemaker", "describe-training-job", "--training-job-name", "cli-plain")
    assert described["ResourceConfig"]["InstanceType"] == "ml.m5.4xlarge"
    assert described["SecondaryStatus"] == "Downloading"
    listed = aws_cli(world, "sagemaker", "list-training-jobs")
    assert [s["TrainingJobName"] for s in listed["TrainingJobSummaries"]] == ["cli-plain"]
    aws_cli(world, "sagemaker", "stop-training-job", "--training-job-name", "cli-plain")
    assert world.job("cli-plain")["status"] == "Stopping"

    source = tmp_path / "data.csv"
    source.write_text("a,b\n1,2\n")
    world.boto3_client("s3").create_bucket(Bucket="cli-data")
    assert "upload:" in aws_cli(world, "s3", "cp", str(source), "s3://cli-data/in/data.csv")
    back = tmp_path / "back.csv"
    aws_cli(world, "s3", "cp", "s3://cli-data/in/data.csv", str(back))
    assert back.read_text() == "a,b\n1,2\n"
