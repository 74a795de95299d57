"""Regions: every region a world of its own on one clock, and the resources a job may use only from its
own region, through real boto3 clients signed for each region.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from emulator_support import frozen, processing_request

from offline_sagemaker import OfflineSageMaker
from offline_sagemaker.exceptions import ScenarioError
from offline_sagemaker.scenario import load_scenario

G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"
WEST, EAST = "us-west-2", "us-east-1"
WEST_PLAN = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/west-p4d"
PREFERENCES = [{"InstanceType": G6, "InstanceCount": 2}, {"InstanceType": G5, "InstanceCount": 4}]

#: The home region (us-east-1) has none of the list; us-west-2 frees g5 after ten minutes and has a plan.
TWO_REGIONS = frozen(
    capacity={G6: [{"from": 0, "free": 0}], G5: [{"from": 0, "free": 0}]},
    regions={
        WEST: {
            "capacity": {
                G6: [{"from": 0, "free": 0}],
                G5: [{"from": 0, "to": 600, "free": 0}, {"from": 600, "free": 8}],
            },
            "quotas": {"training": {P4D: 1}},
            "training_plans": [{"arn": WEST_PLAN, "instance_type": P4D, "count": 1}],
        }
    },
)


@pytest.fixture
def regions(emulator: OfflineSageMaker) -> OfflineSageMaker:
    emulator.load_scenario(TWO_REGIONS)
    return emulator


def client(sm: OfflineSageMaker, region: str, service: str = "sagemaker") -> Any:
    return sm.boto3_client(
        service, region_name=region, config=Config(retries={"total_max_attempts": 1, "mode": "standard"})
    )


def refused(call: Callable[..., Any], **kwargs: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    return str(caught.value.response["Error"]["Message"])


# -- the scenario's regions ----------------------------------------------------------------------------


def test_a_region_keeps_the_scenarios_settings_it_does_not_set_and_round_trips() -> None:
    scenario = load_scenario(TWO_REGIONS)
    west = scenario.in_region(WEST)
    assert (west.region, west.quotas, west.training_plans[0].arn) == (WEST, {"training": {P4D: 1}}, WEST_PLAN)
    assert [w.free for w in west.capacity[G5]] == [0, 8]
    elsewhere = scenario.in_region("eu-west-1")
    assert (elsewhere.region, elsewhere.capacity, elsewhere.quotas) == (
        "eu-west-1",
        scenario.capacity,
        scenario.quotas,
    )
    assert scenario.in_region(EAST) is scenario
    assert load_scenario(scenario.as_dict()).regions == scenario.regions


@pytest.mark.parametrize(
    ("regions", "message"),
    [
        ({EAST: {}}, "regions.us-east-1: us-east-1 is the scenario's own region"),
        ({WEST: {"prices": {}}}, "regions.us-west-2.prices: unknown key"),
        (
            {WEST: {"capacity": {G5: [{"free": -1}]}}},
            "regions.us-west-2.capacity.ml.g5.48xlarge[0].free: must be",
        ),
        (
            {
                WEST: {
                    "training_plans": [
                        {
                            "arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/x",
                            "instance_type": P4D,
                            "count": 1,
                        }
                    ]
                }
            },
            "regions.us-west-2.training_plans[0].arn: a plan of us-west-2 has an ARN in us-west-2",
        ),
    ],
)
def test_a_bad_region_is_named_with_its_key(regions: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(frozen(regions=regions))
    assert message in str(caught.value)


# -- one world per region ------------------------------------------------------------------------------


def test_each_region_has_its_own_jobs_arns_and_capacity_on_one_clock(
    regions: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    east, west = client(regions, EAST), client(regions, WEST)
    # A job name is unique within an account and region: the same name in two regions is two jobs.
    east_arn = east.create_training_job(**make_training("nightly", PREFERENCES))["TrainingJobArn"]
    west_arn = west.create_training_job(
        **make_training(
            "nightly", PREFERENCES, image="123456789012.dkr.ecr.us-west-2.amazonaws.com/my-trainer:latest"
        )
    )["TrainingJobArn"]
    assert east_arn == "arn:aws:sagemaker:us-east-1:123456789012:training-job/nightly"
    assert west_arn == "arn:aws:sagemaker:us-west-2:123456789012:training-job/nightly"
    regions.advance(599)
    assert east.describe_training_job(TrainingJobName="nightly")["SecondaryStatus"] == "Pending"
    assert west.describe_training_job(TrainingJobName="nightly")["SecondaryStatus"] == "Pending"
    regions.advance(1)
    west_job = west.describe_training_job(TrainingJobName="nightly")
    assert (west_job["TrainingJobArn"], west_job["SecondaryStatus"]) == (west_arn, "Downloading")
    assert regions.job("nightly", region=WEST)["selected_instance_type"] == G5
    # us-east-1 never frees either type: its job waits on.
    assert east.describe_training_job(TrainingJobName="nightly")["SecondaryStatus"] == "Pending"
    assert regions.job("nightly")["region"] == EAST
    assert {(j["name"], j["region"], j["status"]) for j in regions.jobs()} == {
        ("nightly", EAST, "InProgress"),
        ("nightly", WEST, "InProgress"),
    }
    assert [s["TrainingJobArn"] for s in west.list_training_jobs()["TrainingJobSummaries"]] == [west_arn]
    # A region no one named has the scenario's own settings, and none of the others' jobs.
    with pytest.raises(ClientError) as caught:
        client(regions, "eu-west-1").describe_training_job(TrainingJobName="nightly")
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    # Stopping in one region leaves the other's job alone.
    east.stop_training_job(TrainingJobName="nightly")
    regions.advance(60)
    assert east.describe_training_job(TrainingJobName="nightly")["TrainingJobStatus"] == "Stopped"
    assert west.describe_training_job(TrainingJobName="nightly")["TrainingJobStatus"] == "InProgress"


def test_training_plans_and_quotas_are_the_regions_own(
    regions: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    planned = [{"InstanceType": P4D, "InstanceCount": 1, "TrainingPlanArns": [WEST_PLAN]}]
    west_image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-trainer:latest"
    assert (
        client(regions, WEST).describe_training_plan(TrainingPlanName="west-p4d")["TrainingPlanArn"]
        == WEST_PLAN
    )
    with pytest.raises(ClientError):
        client(regions, EAST).describe_training_plan(TrainingPlanName="west-p4d")
    client(regions, WEST).create_training_job(**make_training("planned", planned, image=west_image))
    message = refused(client(regions, EAST).create_training_job, **make_training("planned", planned))
    assert "west-p4d" in message
    # us-west-2's quota allows one p4d: a second on-demand one is refused there, not in us-east-1.
    quota = client(regions, WEST).create_training_job
    with pytest.raises(ClientError) as caught:
        quota(**make_training("two", [{"InstanceType": P4D, "InstanceCount": 2}], image=west_image))
    assert caught.value.response["Error"]["Code"] == "ResourceLimitExceeded"
    client(regions, EAST).create_training_job(
        **make_training("two", [{"InstanceType": P4D, "InstanceCount": 2}])
    )


# -- what a job may use from its own region only -------------------------------------------------------


def test_an_input_bucket_of_another_region_is_refused_and_get_bucket_location_says_where(
    regions: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    s3 = client(regions, WEST, "s3")
    s3.create_bucket(Bucket="west-data", CreateBucketConfiguration={"LocationConstraint": WEST})
    assert s3.get_bucket_location(Bucket="west-data")["LocationConstraint"] == WEST
    channel = {
        "ChannelName": "train",
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://west-data/train/"}},
    }
    message = refused(
        client(regions, EAST).create_training_job,
        **make_training("east", PREFERENCES, InputDataConfig=[channel]),
    )
    assert message == (
        "InputDataConfig[0].DataSource.S3DataSource.S3Uri: the S3 bucket west-data is in us-west-2, not in "
        "us-east-1. Your input bucket must be in the same AWS Region as your training job."
    )
    west_image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-trainer:latest"
    client(regions, WEST).create_training_job(
        **make_training("west", PREFERENCES, image=west_image, InputDataConfig=[channel])
    )
    # A bucket nobody created here is not checked: the emulator does not know where it is.
    channel["DataSource"]["S3DataSource"]["S3Uri"] = "s3://somewhere/train/"
    client(regions, EAST).create_training_job(
        **make_training("unknown", PREFERENCES, InputDataConfig=[channel])
    )
    processing = processing_request("east-processing", [{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}])
    processing["ProcessingInputs"] = [
        {
            "InputName": "data",
            "S3Input": {
                "S3Uri": "s3://west-data/in",
                "LocalPath": "/opt/ml/processing/in",
                "S3DataType": "S3Prefix",
                "S3InputMode": "File",
            },
        }
    ]
    assert refused(client(regions, EAST).create_processing_job, **processing).startswith(
        "ProcessingInputs[0].S3Input.S3Uri: the S3 bucket west-data is in us-west-2, not in us-east-1."
    )


def test_an_image_key_or_subnet_of_another_region_is_refused(
    regions: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    east = client(regions, EAST)
    message = refused(
        east.create_training_job,
        **make_training(
            "image", PREFERENCES, image="123456789012.dkr.ecr.us-west-2.amazonaws.com/my-trainer:latest"
        ),
    )
    assert message.startswith(
        "AlgorithmSpecification.TrainingImage: the image 123456789012.dkr.ecr.us-west-2.amazonaws.com/my-trainer:latest "
        "is in an Amazon ECR repository in us-west-2, not in us-east-1."
    )
    west_key = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    message = refused(
        east.create_training_job,
        **make_training("key", PREFERENCES, resource_extra={"VolumeKmsKeyId": west_key}),
    )
    assert message.startswith(f"ResourceConfig.VolumeKmsKeyId: the KMS key {west_key} is in us-west-2")
    # A key id or alias is read in the job's own region.
    east.create_training_job(
        **make_training("alias", PREFERENCES, resource_extra={"VolumeKmsKeyId": "alias/models"})
    )
    ec2 = client(regions, WEST, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.8.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.8.1.0/24")["Subnet"]["SubnetId"]
    vpc_config = {"Subnets": [subnet], "SecurityGroupIds": ["sg-12345678"]}
    message = refused(east.create_training_job, **make_training("vpc", PREFERENCES, VpcConfig=vpc_config))
    assert (
        message
        == f"VpcConfig.Subnets[0]: the subnet {subnet} is in us-west-2, not in us-east-1. Use a subnet of a VPC in us-east-1."
    )
    west_image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-trainer:latest"
    client(regions, WEST).create_training_job(
        **make_training("vpc", PREFERENCES, image=west_image, VpcConfig=vpc_config)
    )
    assert regions.stats()["operations"].get("CreateTrainingJob") == 5


# -- events --------------------------------------------------------------------------------------------


def _events(sm: OfflineSageMaker, region: str, url: str, until: str) -> list[dict[str, Any]]:
    """The events a queue of ``region`` receives until one is about the job ``until``."""
    sqs, seen = client(sm, region, "sqs"), []
    for _ in range(20):
        for message in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            seen.append(json.loads(message["Body"]))
        if any(e["detail"].get("TrainingJobName") == until for e in seen):
            return seen
    raise AssertionError(f"no event about {until} reached the queue of {region}: {seen}")


def test_a_jobs_events_go_to_the_default_bus_of_its_own_region(
    regions: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    west_url = regions.create_event_queue("west-events", region=WEST)
    east_url = regions.create_event_queue("east-events")
    try:
        west_image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-trainer:latest"
        client(regions, WEST).create_training_job(**make_training("west-job", PREFERENCES, image=west_image))
        client(regions, EAST).create_training_job(**make_training("east-job", PREFERENCES))
        west = _events(regions, WEST, west_url, "west-job")
        east = _events(regions, EAST, east_url, "east-job")
    finally:
        regions.remove_event_queue("west-events", region=WEST)
        regions.remove_event_queue("east-events")
    assert {(e["region"], e["detail"]["TrainingJobName"]) for e in west} == {(WEST, "west-job")}
    assert {(e["region"], e["detail"]["TrainingJobName"]) for e in east} == {(EAST, "east-job")}
    assert west[0]["resources"] == ["arn:aws:sagemaker:us-west-2:123456789012:training-job/west-job"]
