"""Regions after the home one (domain/regions.py): what a DAG author writes, read; every region-bound field
of the request overridden or named with its fix; the request each region is sent."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.domain.regions import (
    REGION_BOUND,
    FailoverRegion,
    location_region,
    read_regions,
    region_of,
    region_problems,
    region_request,
    s3_buckets,
)

G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"
EAST_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1"
WEST_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1"
HOME = InstancePreferenceList(
    [{"instance_type": G6, "instance_count": 2}, {"instance_type": G5, "instance_count": 4}]
)


def nightly() -> dict[str, Any]:
    """The nightly retrain's request in us-east-1: an image, an input channel, an output, a volume key."""
    return {
        "TrainingJobName": "nightly",
        "AlgorithmSpecification": {"TrainingImage": EAST_IMAGE, "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://east-data/train/"}},
            }
        ],
        "OutputDataConfig": {"S3OutputPath": "s3://east-models/out"},
        "ResourceConfig": {"VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
    }


WEST_OVERRIDES = {
    "AlgorithmSpecification": {"TrainingImage": WEST_IMAGE},
    "InputDataConfig": [
        {
            "ChannelName": "train",
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://west-data/train/"}},
        }
    ],
    "OutputDataConfig": {"S3OutputPath": "s3://west-models/out"},
}


def west(**changes: Any) -> dict[str, Any]:
    return {"region": "us-west-2", "after": timedelta(hours=2), "overrides": WEST_OVERRIDES, **changes}


def test_a_region_written_as_a_dict_is_read_with_its_list_and_connection() -> None:
    regions, problems = read_regions(
        [west(instance_preferences=[{"instance_type": P4D, "instance_count": 1}], aws_conn_id="aws_west")],
        JobKind.TRAINING,
    )
    assert problems == []
    (region,) = regions
    assert (region.region, region.after, region.aws_conn_id) == ("us-west-2", 7200.0, "aws_west")
    assert region.instance_preferences == InstancePreferenceList(
        [{"instance_type": P4D, "instance_count": 1}]
    )
    assert region_problems(JobKind.TRAINING, nightly(), regions, HOME, "us-east-1") == []


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"region": "us-west-2"}, "regions: give a list of regions, e.g. [{'region': 'us-west-2'"),
        (
            [west(region="US West")],
            "regions[0].region: must be an AWS region name such as us-west-2, got 'US West'",
        ),
        ([west(after=None)], "regions[0].after: give how long the job waits before it moves to us-west-2"),
        ([west(after=-5)], "regions[0].after: give how long the job waits before it moves to us-west-2"),
        ([west(overide={})], "regions[0].overide: unknown key (did you mean 'overrides'?)"),
        ([west(overrides=["x"])], "regions[0].overrides: must be a mapping of Create request fields"),
        (
            [west(instance_preferences=[{"instance_type": "ml.nope.xlarge"}])],
            "regions[0].instance_preferences[0]: ml.nope.xlarge is not a SageMaker training instance type",
        ),
        ([west(aws_conn_id="")], "regions[0].aws_conn_id: must be a connection id, got ''"),
    ],
)
def test_what_cannot_be_read_names_the_region_and_the_key(raw: Any, problem: str) -> None:
    _, problems = read_regions(raw, JobKind.TRAINING)
    assert any(p.startswith(problem) for p in problems), problems


def test_every_region_bound_field_left_as_the_home_one_is_named_with_its_fix() -> None:
    regions, _ = read_regions([{"region": "us-west-2", "after": 3600, "overrides": {}}], JobKind.TRAINING)
    request = nightly()
    request["ResourceConfig"]["VolumeKmsKeyId"] = "alias/models"
    request["VpcConfig"] = {"Subnets": ["subnet-0east"], "SecurityGroupIds": ["sg-0east"]}
    assert region_problems(JobKind.TRAINING, request, regions, HOME, "us-east-1") == [
        "regions[0] (us-west-2): AlgorithmSpecification.TrainingImage is an Amazon ECR image of the home region "
        "and the overrides do not replace it; give AlgorithmSpecification in the overrides with one of "
        "us-west-2 (ECR replication copies the image to a repository there)",
        "regions[0] (us-west-2): InputDataConfig[0].DataSource.S3DataSource.S3Uri is an S3 location of the "
        "home region and the overrides do not replace it; give InputDataConfig in the overrides with one of "
        "us-west-2 (a bucket is in one region; S3 replication copies the data to a bucket there)",
        "regions[0] (us-west-2): OutputDataConfig.S3OutputPath is an S3 location of the home region and the "
        "overrides do not replace it; give OutputDataConfig in the overrides with one of us-west-2 (a bucket "
        "is in one region; S3 replication copies the data to a bucket there)",
        "regions[0] (us-west-2): ResourceConfig.VolumeKmsKeyId is a KMS key of the home region and the "
        "overrides do not replace it; give ResourceConfig in the overrides with one of us-west-2 (keys are "
        "regional; use a key, or a multi-Region replica key, of that region)",
        "regions[0] (us-west-2): VpcConfig.Subnets is VPC networking of the home region and the overrides do "
        "not replace it; give VpcConfig in the overrides with one of us-west-2 (subnets and security groups "
        "belong to one region's VPC)",
        "regions[0] (us-west-2): VpcConfig.SecurityGroupIds is VPC networking of the home region and the "
        "overrides do not replace it; give VpcConfig in the overrides with one of us-west-2 (subnets and "
        "security groups belong to one region's VPC)",
    ]


def test_an_override_naming_another_region_or_no_field_is_refused() -> None:
    overrides = {
        **WEST_OVERRIDES,
        "AlgorithmSpecification": {"TrainingImage": EAST_IMAGE.replace("us-east-1", "eu-west-1")},
        "OutputDataConfig": {
            "S3OutputPath": "s3://west-models/out",
            "KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        },
        "InputDataConfg": [],
        "ResourceConfig": {"InstancePreferences": [{"InstanceType": P4D}]},
    }
    regions, _ = read_regions([west(overrides=overrides)], JobKind.TRAINING)
    assert region_problems(JobKind.TRAINING, nightly(), regions, HOME) == [
        "regions[0] (us-west-2).overrides.InputDataConfg: not a field of CreateTrainingJobRequest (did you "
        "mean 'InputDataConfig'?)",
        "regions[0] (us-west-2).overrides.ResourceConfig.InstancePreferences: set by the provider; give the "
        "region's list as instance_preferences",
        "regions[0] (us-west-2).overrides: AlgorithmSpecification.TrainingImage is "
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/train:1, a resource of eu-west-1; use one of us-west-2",
        "regions[0] (us-west-2).overrides: OutputDataConfig.KmsKeyId is "
        "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab, a resource of us-east-1; "
        "use one of us-west-2",
    ]


def test_regions_open_in_order_after_the_home_windows_and_each_once() -> None:
    windowed = InstancePreferenceList(
        [
            {"instance_type": G6, "instance_count": 2},
            {"instance_type": G5, "instance_count": 4, "accept_after": 3600},
        ]
    )
    regions, _ = read_regions(
        [
            west(after=1800),
            west(after=7200),
            {"region": "eu-west-1", "after": 5400, "overrides": WEST_OVERRIDES},
        ],
        JobKind.TRAINING,
    )
    problems = [
        p
        for p in region_problems(JobKind.TRAINING, nightly(), regions, windowed, "us-east-1")
        if "after" in p or "once" in p
    ]
    assert problems == [
        "regions[0] (us-west-2).after: 1800 s is not after the stage before it opens (3600 s); each region "
        "opens later than the windows and regions before it",
        "regions[1] (us-west-2): us-west-2 is already a stage of this task; name each region once",
        "regions[2] (eu-west-1).after: 5400 s is not after the stage before it opens (7200 s); each region "
        "opens later than the windows and regions before it",
    ]
    home_again, _ = read_regions([{**west(), "region": "us-east-1"}], JobKind.TRAINING)
    assert region_problems(JobKind.TRAINING, nightly(), home_again, HOME, "us-east-1")[0] == (
        "regions[0] (us-east-1): us-east-1 is already a stage of this task; name each region once"
    )


def test_training_plans_are_regional() -> None:
    plan = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p4d"
    planned = InstancePreferenceList(
        [
            {"instance_type": P4D, "instance_count": 1, "training_plan_arn": plan},
            {"instance_type": G5, "instance_count": 4},
        ]
    )
    regions, _ = read_regions([west()], JobKind.TRAINING)
    assert region_problems(JobKind.TRAINING, nightly(), regions, planned) == [
        "regions[0] (us-west-2): the home list has training plans, which are regional; give this region its "
        "own instance_preferences (with plans of its own, or none)"
    ]
    regions, _ = read_regions([west(instance_preferences=planned.as_list())], JobKind.TRAINING)
    assert region_problems(JobKind.TRAINING, nightly(), regions, planned) == [
        f"regions[0] (us-west-2).instance_preferences[0].training_plan_arn: {plan} is a plan of us-east-1; "
        "use a plan of us-west-2"
    ]


def test_a_processing_jobs_inputs_outputs_and_network_are_region_bound() -> None:
    request = {
        "ProcessingJobName": "features",
        "AppSpecification": {"ImageUri": "public.ecr.aws/docker/library/python:3.12"},
        "ProcessingInputs": [
            {"InputName": "raw", "S3Input": {"S3Uri": "s3://east-raw/in", "LocalPath": "/in"}}
        ],
        "ProcessingOutputConfig": {
            "Outputs": [{"OutputName": "f", "S3Output": {"S3Uri": "s3://east-f/out"}}]
        },
        "NetworkConfig": {"VpcConfig": {"Subnets": ["subnet-0east"], "SecurityGroupIds": ["sg-0east"]}},
    }
    overrides = {
        "ProcessingInputs": [
            {"InputName": "raw", "S3Input": {"S3Uri": "s3://west-raw/in", "LocalPath": "/in"}}
        ],
        "NetworkConfig": {"VpcConfig": {"Subnets": ["subnet-0west"], "SecurityGroupIds": ["sg-0west"]}},
    }
    regions, _ = read_regions(
        [{"region": "us-west-2", "after": 600, "overrides": overrides}], JobKind.PROCESSING
    )
    prefs = InstancePreferenceList([{"instance_type": "ml.c7i.4xlarge"}], JobKind.PROCESSING)
    # A public image serves every region; the output location is the home region's.
    assert region_problems(JobKind.PROCESSING, request, regions, prefs) == [
        "regions[0] (us-west-2): ProcessingOutputConfig.Outputs[0].S3Output.S3Uri is an S3 location of the "
        "home region and the overrides do not replace it; give ProcessingOutputConfig in the overrides with "
        "one of us-west-2 (a bucket is in one region; S3 replication copies the data to a bucket there)"
    ]


def test_the_regions_request_merges_dicts_and_replaces_lists_and_values() -> None:
    region = FailoverRegion("us-west-2", 7200, WEST_OVERRIDES)
    home = nightly()
    sent = region_request(home, region)
    assert sent["AlgorithmSpecification"] == {"TrainingImage": WEST_IMAGE, "TrainingInputMode": "File"}
    assert sent["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://west-data/train/"
    assert sent["OutputDataConfig"] == {"S3OutputPath": "s3://west-models/out"}
    assert sent["RoleArn"] == home["RoleArn"] and sent["ResourceConfig"] == {"VolumeSizeInGB": 50}
    assert home == nightly()  # the home request is left as it was
    sent["InputDataConfig"][0]["ChannelName"] = "changed"
    assert WEST_OVERRIDES["InputDataConfig"][0]["ChannelName"] == "train"  # nor are the overrides


@pytest.mark.parametrize(
    ("value", "region"),
    [
        (WEST_IMAGE, "us-west-2"),
        ("123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com/x:1", "us-gov-west-1"),
        ("arn:aws:kms:eu-west-1:123456789012:key/abc", "eu-west-1"),
        ("arn:aws-cn:sagemaker:cn-north-1:123456789012:training-plan/p", "cn-north-1"),
        ("arn:aws:iam::123456789012:role/R", None),
        ("alias/models", None),
        ("public.ecr.aws/docker/library/python:3.12", None),
        (None, None),
    ],
)
def test_the_region_a_value_names(value: Any, region: str | None) -> None:
    assert region_of(value) == region


def test_every_region_bound_path_is_a_field_of_the_create_request() -> None:
    from airflow_provider_sm_prefs.domain.service_model import shape

    for kind, bound in REGION_BOUND.items():
        for path, _ in bound:
            node = shape(f"Create{kind.spec.label}JobRequest")
            for key in path:
                if key == "*":
                    node = shape(node["member"]["shape"])
                    continue
                assert key in node["members"], (kind, path, key)
                node = shape(node["members"][key]["shape"])


def test_the_buckets_of_a_request_and_the_region_get_bucket_location_names() -> None:
    request = nightly()
    request["CheckpointConfig"] = {"S3Uri": "s3://east-ckpt"}
    assert s3_buckets(JobKind.TRAINING, request) == [
        ("InputDataConfig[0].DataSource.S3DataSource.S3Uri", "east-data"),
        ("OutputDataConfig.S3OutputPath", "east-models"),
        ("CheckpointConfig.S3Uri", "east-ckpt"),
    ]
    assert [location_region(c) for c in (None, "", "EU", "us-west-2")] == [
        "us-east-1",
        "us-east-1",
        "eu-west-1",
        "us-west-2",
    ]
