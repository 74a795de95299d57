"""Tags of training and processing jobs and clusters, and Search of training jobs by tag, over boto3.

AddTags, ListTags (with MaxResults/NextToken) and DeleteTags as AWS documents them: the tags given at
Create come back from ListTags; at most 50 tags per resource, keys of 1 to 128 characters, values of at
most 256, AWS's character set, and no ``aws:`` keys, each breach a ValidationException that changes
nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from emulator_support import ROLE
from test_emulator_conformance import conforms, output_shape, raw

from offline_sagemaker import OfflineSageMaker

pytestmark = pytest.mark.usefixtures("world")

G5 = "ml.g5.48xlarge"
PREFS = [{"InstanceType": G5, "InstanceCount": 1}]
CPU = [{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}]


def error(call: Callable[..., Any], **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


def tags(**pairs: str) -> list[dict[str, str]]:
    return [{"Key": k.replace("_", ":"), "Value": v} for k, v in pairs.items()]


def training(client: Any, make_training: Callable[..., dict[str, Any]], name: str, **kw: Any) -> str:
    arn: str = client.create_training_job(**make_training(name, PREFS, **kw))["TrainingJobArn"]
    return arn


def test_the_tags_given_at_create_come_back_from_list_tags_for_training_and_processing(
    client: Any, make_training: Callable[..., dict[str, Any]], make_processing: Callable[..., dict[str, Any]]
) -> None:
    arn = training(client, make_training, "t1", tags={"team": "ml", "sm-prefs:dag-id": "nightly"})
    listed = client.list_tags(ResourceArn=arn)
    assert listed["Tags"] == [{"Key": "team", "Value": "ml"}, {"Key": "sm-prefs:dag-id", "Value": "nightly"}]
    conforms(
        {k: v for k, v in listed.items() if k != "ResponseMetadata"}, output_shape("ListTags"), "ListTags"
    )
    parn = client.create_processing_job(**make_processing("p1", CPU, tags={"team": "data"}))[
        "ProcessingJobArn"
    ]
    assert client.list_tags(ResourceArn=parn)["Tags"] == [{"Key": "team", "Value": "data"}]


def test_add_tags_adds_or_replaces_and_delete_tags_removes_on_a_job(
    client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    arn = training(client, make_training, "t2", tags={"a": "1"})
    answer = client.add_tags(ResourceArn=arn, Tags=[{"Key": "a", "Value": "2"}, {"Key": "b", "Value": "3"}])
    assert answer["Tags"] == [{"Key": "a", "Value": "2"}, {"Key": "b", "Value": "3"}]
    client.delete_tags(ResourceArn=arn, TagKeys=["b", "never-there"])
    assert client.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "a", "Value": "2"}]


def test_list_tags_pages_with_max_results_and_next_token(
    client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    arn = training(client, make_training, "t3", tags={f"k{i:02d}": str(i) for i in range(50)})
    first = client.list_tags(ResourceArn=arn, MaxResults=50)
    assert len(first["Tags"]) == 50 and "NextToken" not in first
    # A deleted tag and one added: still one page of at most 50.
    client.delete_tags(ResourceArn=arn, TagKeys=["k00"])
    client.add_tags(ResourceArn=arn, Tags=[{"Key": "new", "Value": "x"}])
    keys = [
        t["Key"] for page in client.get_paginator("list_tags").paginate(ResourceArn=arn) for t in page["Tags"]
    ]
    assert len(keys) == 50 and keys[-1] == "new" and "k00" not in keys


def test_a_clusters_tags_page_like_a_jobs_and_a_bad_page_request_is_refused(
    emulator: OfflineSageMaker, client: Any
) -> None:
    arn = client.create_cluster(
        ClusterName="tags-paged",
        InstanceGroups=[
            {
                "InstanceGroupName": "g",
                "InstanceCount": 1,
                "InstanceType": G5,
                "ExecutionRole": ROLE,
                "LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lifecycle", "OnCreate": "on_create.sh"},
            }
        ],
        Tags=[{"Key": f"k{i:02d}", "Value": str(i)} for i in range(50)],
    )["ClusterArn"]
    pages = client.get_paginator("list_tags").paginate(ResourceArn=arn, PaginationConfig={"PageSize": 50})
    assert [t["Key"] for page in pages for t in page["Tags"]] == [f"k{i:02d}" for i in range(50)]
    # 50 is botocore's minimum MaxResults (and a resource's most tags): one page; the service checks both.
    with pytest.raises(Exception, match="400"):
        raw(emulator, "ListTags", {"ResourceArn": arn, "MaxResults": 10})
    with pytest.raises(Exception, match="400"):
        raw(emulator, "ListTags", {"ResourceArn": arn, "NextToken": "forged"})


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ({"Key": "aws:team", "Value": "x"}, "aws:"),
        ({"Key": "AWS:team", "Value": "x"}, "aws:"),
        ({"Key": "k" * 129, "Value": "x"}, "length"),
        ({"Key": "team", "Value": "v" * 257}, "256"),
        ({"Key": "team#1", "Value": "x"}, "pattern"),
        ({"Key": "team", "Value": "a,b"}, "pattern"),
    ],
)
def test_a_tag_aws_refuses_is_a_validation_exception_at_create_and_at_add_tags(
    raw_client: Any,
    client: Any,
    make_training: Callable[..., dict[str, Any]],
    bad: dict[str, str],
    words: str,
) -> None:
    code, message = error(raw_client.create_training_job, **make_training("bad-create", PREFS, Tags=[bad]))
    assert code == "ValidationException" and words in message
    assert error(client.describe_training_job, TrainingJobName="bad-create")[0] == "ValidationException"
    arn = training(client, make_training, "tagged", tags={"keep": "1"})
    code, message = error(raw_client.add_tags, ResourceArn=arn, Tags=[bad])
    assert code == "ValidationException" and words in message
    assert client.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "keep", "Value": "1"}]


def test_letters_spaces_digits_and_the_allowed_punctuation_are_accepted(
    client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    value = "manual__2026-09-15T00:00:00+00:00 équipe/ü=1@x_y.z"
    arn = training(client, make_training, "unicode", tags={"sm-prefs:run-id": value})
    assert client.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "sm-prefs:run-id", "Value": value}]


def test_more_than_50_tags_on_a_resource_is_refused_and_changes_nothing(
    raw_client: Any, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    many = {f"k{i}": "v" for i in range(51)}
    code, message = error(raw_client.create_training_job, **make_training("too-many", PREFS, tags=many))
    assert code == "ValidationException" and "50" in message
    arn = training(client, make_training, "forty-nine", tags={f"k{i}": "v" for i in range(49)})
    client.add_tags(ResourceArn=arn, Tags=[{"Key": "k0", "Value": "replaced"}])  # replacing adds none
    code, message = error(
        client.add_tags, ResourceArn=arn, Tags=[{"Key": "x", "Value": "1"}, {"Key": "y", "Value": "2"}]
    )
    assert code == "ValidationException" and "51" in message
    assert len(client.list_tags(ResourceArn=arn)["Tags"]) == 49


def test_tags_of_an_unknown_job_arn_are_resource_not_found(client: Any) -> None:
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/nobody"
    assert error(client.list_tags, ResourceArn=arn)[0] == "ResourceNotFound"
    assert error(client.add_tags, ResourceArn=arn, Tags=[{"Key": "a", "Value": "b"}])[0] == "ResourceNotFound"


def test_search_finds_training_jobs_by_tag(
    emulator: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    training(
        client, make_training, "nightly-1", tags={"sm-prefs:dag-id": "nightly", "sm-prefs:task-id": "train"}
    )
    training(client, make_training, "other-1", tags={"sm-prefs:dag-id": "other"})
    training(client, make_training, "untagged")
    found = client.search(
        Resource="TrainingJob",
        SearchExpression={
            "Filters": [{"Name": "Tags.sm-prefs:dag-id", "Operator": "Equals", "Value": "nightly"}]
        },
    )
    assert [r["TrainingJob"]["TrainingJobName"] for r in found["Results"]] == ["nightly-1"]
    record = found["Results"][0]["TrainingJob"]
    assert {"Key": "sm-prefs:task-id", "Value": "train"} in record["Tags"]
    assert record["TrainingJobArn"].endswith(":training-job/nightly-1")
    body = {
        "Resource": "TrainingJob",
        "SearchExpression": {
            "Filters": [{"Name": "Tags.sm-prefs:dag-id", "Operator": "Equals", "Value": "nightly"}]
        },
    }
    conforms(raw(emulator, "Search", body), output_shape("Search"), "Search")
    exists = client.search(
        Resource="TrainingJob",
        SearchExpression={"Filters": [{"Name": "Tags.sm-prefs:dag-id", "Operator": "Exists"}]},
        SortOrder="Ascending",
    )
    assert [r["TrainingJob"]["TrainingJobName"] for r in exists["Results"]] == ["nightly-1", "other-1"]


def test_search_pages_and_refuses_what_it_does_not_emulate(
    client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    for i in range(3):
        training(client, make_training, f"paged-{i}", tags={"sm-prefs:dag-id": "paged"})
    pages = client.get_paginator("search").paginate(
        Resource="TrainingJob",
        SearchExpression={
            "Filters": [{"Name": "Tags.sm-prefs:dag-id", "Operator": "Equals", "Value": "paged"}]
        },
        PaginationConfig={"PageSize": 2},
    )
    assert sorted(r["TrainingJob"]["TrainingJobName"] for p in pages for r in p["Results"]) == [
        "paged-0",
        "paged-1",
        "paged-2",
    ]
    code, message = error(client.search, Resource="Model")
    assert code == "ValidationException" and "TrainingJob" in message
    code, message = error(
        client.search,
        Resource="TrainingJob",
        SearchExpression={"Filters": [{"Name": "Tags.a", "Operator": "GreaterThan", "Value": "1"}]},
    )
    assert code == "ValidationException" and "GreaterThan" in message
