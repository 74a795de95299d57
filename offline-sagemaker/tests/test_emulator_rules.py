"""Server-side rules R1-R10, R13, R14 over real HTTP: each accepted and rejected, with code and field."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from offline_sagemaker import OfflineSageMaker

G6, G5, P5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p5.48xlarge", "ml.p4d.24xlarge"
BUILTIN_IMAGE_CLASSIFICATION = "811284229777.dkr.ecr.us-east-1.amazonaws.com/image-classification:1"
BUILTIN_XGBOOST = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"

pytestmark = pytest.mark.usefixtures("world")


def rejected(call: Callable[[], Any], code: str, *fragments: str) -> str:
    """Run ``call``, expect a ClientError with ``code`` whose message contains every fragment."""
    with pytest.raises(ClientError) as info:
        call()
    error = info.value.response["Error"]
    assert error["Code"] == code, error
    for fragment in fragments:
        assert fragment in error["Message"], error["Message"]
    return str(error["Message"])


def raw_call(emulator: OfflineSageMaker, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST a SageMaker JSON request as-is (for fields botocore's serializer would drop)."""
    request = urllib.request.Request(
        emulator.endpoint_url,
        data=json.dumps(body).encode(),
        headers={"X-Amz-Target": f"SageMaker.{operation}", "Content-Type": "application/x-amz-json-1.1"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


# ------------------------------------------------------------------------------------------------ R1


def test_r1_one_and_five_entries_are_accepted(
    client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(**make_training("one", [{"InstanceType": G5}], count=1))
    five = [{"InstanceType": t} for t in (G6, G5, P4D, "ml.g6e.48xlarge", "ml.p4de.24xlarge")]
    client.create_training_job(**make_training("five", five, count=1))
    assert (
        client.describe_training_job(TrainingJobName="five")["ResourceConfig"]["InstancePreferences"] == five
    )


def test_r1_six_entries_are_rejected(client: Any, make_training: Callable[..., dict[str, Any]]) -> None:
    six = [
        {"InstanceType": t} for t in (G6, G5, P4D, "ml.g6e.48xlarge", "ml.p4de.24xlarge", "ml.g5.24xlarge")
    ]
    rejected(
        lambda: client.create_training_job(**make_training("six", six, count=1)),
        "ValidationException",
        "ResourceConfig.InstancePreferences",
        "got 6",
    )


def test_r1_empty_list_is_rejected_by_the_service(
    raw_client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    rejected(
        lambda: raw_client.create_training_job(**make_training("empty", [], count=1)),
        "ValidationException",
        "ResourceConfig.InstancePreferences",
    )


def test_r1_processing_six_entries_are_rejected(
    client: Any, make_processing: Callable[..., dict[str, Any]]
) -> None:
    six = [
        {"InstanceType": t}
        for t in (
            "ml.m5.large",
            "ml.m5.xlarge",
            "ml.m5.2xlarge",
            "ml.c5.xlarge",
            "ml.c5.2xlarge",
            "ml.r5.large",
        )
    ]
    rejected(
        lambda: client.create_processing_job(**make_processing("p-six", six, count=1)),
        "ValidationException",
        "ProcessingResources.ClusterConfig.InstancePreferences",
    )


# ------------------------------------------------------------------------------------------------ R2


def test_r2_duplicate_type_is_rejected_naming_the_entry(
    client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    rejected(
        lambda: client.create_training_job(
            **make_training(
                "dup", [{"InstanceType": G6}, {"InstanceType": P4D}, {"InstanceType": G6}], count=1
            )
        ),
        "ValidationException",
        "ResourceConfig.InstancePreferences[2].InstanceType: ml.g6.48xlarge appears more than once",
    )


def test_r2_distinct_types_are_accepted(client: Any, make_training: Callable[..., dict[str, Any]]) -> None:
    client.create_training_job(
        **make_training("distinct", [{"InstanceType": G6}, {"InstanceType": G5}], count=1)
    )


def test_r2_processing_duplicate_is_rejected(
    client: Any, make_processing: Callable[..., dict[str, Any]]
) -> None:
    rejected(
        lambda: client.create_processing_job(
            **make_processing(
                "p-dup", [{"InstanceType": "ml.m5.large"}, {"InstanceType": "ml.m5.large"}], count=1
            )
        ),
        "ValidationException",
        "ProcessingResources.ClusterConfig.InstancePreferences[1].InstanceType: ml.m5.large appears more than once",
    )


# ------------------------------------------------------------------------------------------------ R3


def test_r3_uniform_and_per_entry_counts_are_accepted(
    client: Any, make_training: Callable[..., dict[str, Any]], make_processing: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(
        **make_training("uniform", [{"InstanceType": G6}, {"InstanceType": G5}], count=2)
    )
    client.create_training_job(
        **make_training(
            "per-entry", [{"InstanceType": G6, "InstanceCount": 2}, {"InstanceType": G5, "InstanceCount": 4}]
        )
    )
    client.create_processing_job(
        **make_processing("p-per-entry", [{"InstanceType": "ml.m5.large", "InstanceCount": 100}])
    )
    described = client.describe_training_job(TrainingJobName="uniform")["ResourceConfig"]
    assert described["InstanceCount"] == 2


@pytest.mark.parametrize(
    ("preferences", "count", "field"),
    [
        (
            [{"InstanceType": G6, "InstanceCount": 2}, {"InstanceType": G5}],
            2,
            "InstancePreferences[0].InstanceCount",
        ),
        ([{"InstanceType": G6}, {"InstanceType": G5}], None, "ResourceConfig.InstanceCount: required"),
        (
            [{"InstanceType": G6, "InstanceCount": 2}, {"InstanceType": G5}],
            None,
            "InstancePreferences[1].InstanceCount",
        ),
        ([{"InstanceType": G6, "InstanceCount": 0}], None, "InstancePreferences[0].InstanceCount"),
    ],
    ids=["both", "neither", "only-some", "zero"],
)
def test_r3_mixed_missing_or_zero_counts_are_rejected(
    client: Any,
    make_training: Callable[..., dict[str, Any]],
    preferences: list[dict[str, Any]],
    count: int | None,
    field: str,
) -> None:
    rejected(
        lambda: client.create_training_job(**make_training("bad-counts", preferences, count=count)),
        "ValidationException",
        field,
    )


def test_r3_processing_count_above_100_is_rejected(
    client: Any, make_processing: Callable[..., dict[str, Any]]
) -> None:
    rejected(
        lambda: client.create_processing_job(
            **make_processing("p-101", [{"InstanceType": "ml.m5.large", "InstanceCount": 101}])
        ),
        "ValidationException",
        "ProcessingResources.ClusterConfig.InstancePreferences[0].InstanceCount",
        "between 1 and 100",
    )


# ------------------------------------------------------------------------------------------------ R4


def test_r4_job_level_instance_type_with_preferences_is_rejected(
    client: Any, make_training: Callable[..., dict[str, Any]], make_processing: Callable[..., dict[str, Any]]
) -> None:
    rejected(
        lambda: client.create_training_job(
            **make_training("r4", [{"InstanceType": G6}], instance_type=G5, count=1)
        ),
        "ValidationException",
        "ResourceConfig.InstanceType",
    )
    rejected(
        lambda: client.create_processing_job(
            **make_processing(
                "p-r4", [{"InstanceType": "ml.m5.large"}], instance_type="ml.m5.xlarge", count=1
            )
        ),
        "ValidationException",
        "ProcessingResources.ClusterConfig.InstanceType",
    )


def test_r4_plain_single_type_job_keeps_working_without_selected_fields(
    client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(**make_training("plain", instance_type=G5, count=1))
    config = client.describe_training_job(TrainingJobName="plain")["ResourceConfig"]
    assert config["InstanceType"] == G5
    assert "SelectedInstanceType" not in config and "InstancePreferences" not in config


# ------------------------------------------------------------------------------------------------ R5


@pytest.mark.parametrize(
    ("resource_extra", "extra", "field"),
    [
        (
            {"InstanceGroups": [{"InstanceType": G5, "InstanceCount": 1, "InstanceGroupName": "a"}]},
            {},
            "ResourceConfig.InstanceGroups",
        ),
        (
            {"InstancePlacementConfig": {"EnableMultipleJobs": True}},
            {},
            "ResourceConfig.InstancePlacementConfig",
        ),
        ({}, {"EnableManagedSpotTraining": True}, "EnableManagedSpotTraining"),
    ],
    ids=["instance-groups", "placement", "spot"],
)
def test_r5_incompatible_training_options_are_rejected(
    client: Any,
    make_training: Callable[..., dict[str, Any]],
    resource_extra: dict[str, Any],
    extra: dict[str, Any],
    field: str,
) -> None:
    request = make_training("r5", [{"InstanceType": G6}], count=1, resource_extra=resource_extra, **extra)
    rejected(lambda: client.create_training_job(**request), "ValidationException", field)


def test_r5_spot_disabled_is_accepted(client: Any, make_training: Callable[..., dict[str, Any]]) -> None:
    client.create_training_job(
        **make_training("no-spot", [{"InstanceType": G6}], count=1, EnableManagedSpotTraining=False)
    )


# ------------------------------------------------------------------------------------------------ R6


def test_r6_one_matching_plan_is_accepted(
    client: Any, make_training: Callable[..., dict[str, Any]], plans: dict[str, str]
) -> None:
    client.create_training_job(
        **make_training(
            "r6-ok", [{"InstanceType": P5, "InstanceCount": 2, "TrainingPlanArns": [plans["p5"]]}]
        )
    )
    described = client.describe_training_job(TrainingJobName="r6-ok")
    assert described["ResourceConfig"]["InstancePreferences"][0]["TrainingPlanArns"] == [plans["p5"]]


@pytest.mark.parametrize(
    ("arns", "instance_type", "fragment"),
    [
        (["p5", "p5_later"], P5, "must hold exactly one training plan ARN, got 2"),
        (["unknown"], P5, "does not exist"),
        (["g5"], P5, "reserves ml.g5.48xlarge, not ml.p5.48xlarge"),
    ],
    ids=["two-arns", "unknown-plan", "wrong-type"],
)
def test_r6_bad_entry_plans_are_rejected(
    client: Any,
    make_training: Callable[..., dict[str, Any]],
    plans: dict[str, str],
    arns: list[str],
    instance_type: str,
    fragment: str,
) -> None:
    resolved = [plans.get(a, "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nope") for a in arns]
    request = make_training(
        "r6-bad", [{"InstanceType": instance_type, "TrainingPlanArns": resolved}], count=1
    )
    rejected(
        lambda: client.create_training_job(**request),
        "ValidationException",
        "ResourceConfig.InstancePreferences[0].TrainingPlanArns",
        fragment,
    )


# ------------------------------------------------------------------------------------------------ R7


def test_r7_job_level_plan_applies_to_the_matching_entry(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]], plans: dict[str, str]
) -> None:
    client.create_training_job(
        **make_training(
            "r7-ok",
            [{"InstanceType": P5}, {"InstanceType": G5}],
            count=1,
            resource_extra={"TrainingPlanArn": plans["g5"]},
        )
    )
    world.advance(60)
    job = world.job("r7-ok")
    assert (job["selected_instance_type"], job["selected_rank"], job["capacity"]) == (G5, 2, "training-plan")


def test_r7_job_level_and_entry_plans_together_are_rejected(
    client: Any, make_training: Callable[..., dict[str, Any]], plans: dict[str, str]
) -> None:
    request = make_training(
        "r7-both",
        [{"InstanceType": P5, "TrainingPlanArns": [plans["p5"]]}, {"InstanceType": G5}],
        count=1,
        resource_extra={"TrainingPlanArn": plans["g5"]},
    )
    rejected(
        lambda: client.create_training_job(**request), "ValidationException", "ResourceConfig.TrainingPlanArn"
    )


def test_r7_job_level_plan_matching_no_entry_is_rejected(
    client: Any, make_training: Callable[..., dict[str, Any]], plans: dict[str, str]
) -> None:
    request = make_training(
        "r7-none",
        [{"InstanceType": G6}, {"InstanceType": P4D}],
        count=1,
        resource_extra={"TrainingPlanArn": plans["g5"]},
    )
    rejected(
        lambda: client.create_training_job(**request),
        "ValidationException",
        "ResourceConfig.TrainingPlanArn",
        "which no entry of ResourceConfig.InstancePreferences lists",
    )


# ------------------------------------------------------------------------------------------------ R8


def test_r8_processing_rejects_training_plans(
    emulator: OfflineSageMaker, make_processing: Callable[..., dict[str, Any]], plans: dict[str, str]
) -> None:
    body = make_processing(
        "p-plan", [{"InstanceType": "ml.m5.large", "InstanceCount": 1, "TrainingPlanArns": [plans["p5"]]}]
    )
    status, payload = raw_call(emulator, "CreateProcessingJob", body)
    assert status == 400 and payload["__type"] == "ValidationException"
    assert "ProcessingResources.ClusterConfig.InstancePreferences[0].TrainingPlanArns" in payload["message"]
    assert "On-Demand" in payload["message"]


def test_r8_processing_on_demand_list_is_accepted(
    client: Any, make_processing: Callable[..., dict[str, Any]]
) -> None:
    client.create_processing_job(
        **make_processing(
            "p-od", [{"InstanceType": "ml.m5.large"}, {"InstanceType": "ml.c5.xlarge"}], count=1
        )
    )


# ------------------------------------------------------------------------------------------------ R9


def test_r9_every_entry_is_checked_against_its_quota_with_current_utilization(
    world: OfflineSageMaker, client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    # Quota ml.p4d.24xlarge = 4; a running plain job holds 2 of them.
    client.create_training_job(**make_training("holder", instance_type=P4D, count=2))
    world.advance(60)
    assert world.job("holder")["secondary_status"] == "Downloading"
    assert (
        "SelectedInstanceType" not in client.describe_training_job(TrainingJobName="holder")["ResourceConfig"]
    )
    request = make_training(
        "r9-bad", [{"InstanceType": G5, "InstanceCount": 1}, {"InstanceType": P4D, "InstanceCount": 3}]
    )
    message = rejected(lambda: client.create_training_job(**request), "ResourceLimitExceeded")
    assert message == (
        "The account-level service limit 'ml.p4d.24xlarge for training job usage' is 4 Instances, with current "
        "utilization of 2 Instances and a request delta of 3 Instances. Please use AWS Service Quotas to request an "
        "increase for this quota. If AWS Service Quotas is not available, contact AWS support to request an "
        "increase for this quota."
    )
    with pytest.raises(ClientError):
        client.describe_training_job(TrainingJobName="r9-bad")  # nothing was created
    client.create_training_job(
        **make_training(
            "r9-ok", [{"InstanceType": G5, "InstanceCount": 1}, {"InstanceType": P4D, "InstanceCount": 2}]
        )
    )


def test_r9_processing_quota(client: Any, make_processing: Callable[..., dict[str, Any]]) -> None:
    rejected(
        lambda: client.create_processing_job(
            **make_processing(
                "p-quota", [{"InstanceType": "ml.m5.large"}, {"InstanceType": "ml.m5.xlarge"}], count=4
            )
        ),
        "ResourceLimitExceeded",
        "'ml.m5.xlarge for processing job usage' is 3 Instances",
        "request delta of 4 Instances",
    )
    client.create_processing_job(
        **make_processing(
            "p-quota-ok", [{"InstanceType": "ml.m5.large"}, {"InstanceType": "ml.m5.xlarge"}], count=3
        )
    )


# ----------------------------------------------------------------------------------------------- R10


def test_r10_builtin_algorithm_rejects_an_unsupported_entry(
    client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    request = make_training(
        "r10-bad",
        [{"InstanceType": G5}, {"InstanceType": "ml.m5.xlarge"}],
        count=1,
        image=BUILTIN_IMAGE_CLASSIFICATION,
    )
    rejected(
        lambda: client.create_training_job(**request),
        "ValidationException",
        "ResourceConfig.InstancePreferences[1].InstanceType: ml.m5.xlarge is not supported by the built-in "
        "algorithm image-classification",
    )
    trn = make_training(
        "r10-trn",
        [{"InstanceType": "ml.m5.xlarge"}, {"InstanceType": "ml.trn1.32xlarge"}],
        count=1,
        image=BUILTIN_XGBOOST,
    )
    rejected(
        lambda: client.create_training_job(**trn),
        "ValidationException",
        "InstancePreferences[1].InstanceType",
    )


def test_r10_builtin_algorithm_accepts_supported_types_and_custom_images_anything(
    client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    client.create_training_job(
        **make_training(
            "r10-ok",
            [{"InstanceType": G5}, {"InstanceType": P4D}],
            count=1,
            image=BUILTIN_IMAGE_CLASSIFICATION,
        )
    )
    client.create_training_job(
        **make_training("r10-custom", [{"InstanceType": G5}, {"InstanceType": "ml.m5.xlarge"}], count=1)
    )


def test_r10_scenario_can_declare_its_own_builtin_algorithm(
    load_frozen: Callable[..., OfflineSageMaker], client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    load_frozen(builtin_algorithms={"my-algo": ["ml.g5.*"]})
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-algo:3"
    rejected(
        lambda: client.create_training_job(
            **make_training("own-bad", [{"InstanceType": G6}], count=1, image=image)
        ),
        "ValidationException",
        "not supported by the built-in algorithm my-algo",
    )
    client.create_training_job(**make_training("own-ok", [{"InstanceType": G5}], count=1, image=image))


# ----------------------------------------------------------------------------------------------- R13


@pytest.mark.parametrize("seconds", [1800, 2419200])
def test_r13_pending_time_bounds_are_accepted(
    client: Any, make_training: Callable[..., dict[str, Any]], seconds: int
) -> None:
    client.create_training_job(
        **make_training(
            f"pending-{seconds}",
            [{"InstanceType": G6}],
            count=1,
            stopping={"MaxPendingTimeInSeconds": seconds},
        )
    )
    described = client.describe_training_job(TrainingJobName=f"pending-{seconds}")
    assert described["StoppingCondition"]["MaxPendingTimeInSeconds"] == seconds


@pytest.mark.parametrize("seconds", [1799, 2419201])
def test_r13_pending_time_out_of_range_is_rejected(
    raw_client: Any, make_training: Callable[..., dict[str, Any]], seconds: int
) -> None:
    request = make_training(
        "pending-bad", [{"InstanceType": G6}], count=1, stopping={"MaxPendingTimeInSeconds": seconds}
    )
    rejected(
        lambda: raw_client.create_training_job(**request),
        "ValidationException",
        "StoppingCondition.MaxPendingTimeInSeconds",
        "1800",
        str(seconds),
    )


def test_r13_processing_has_no_pending_time(
    emulator: OfflineSageMaker, make_processing: Callable[..., dict[str, Any]]
) -> None:
    body = make_processing("p-pending", [{"InstanceType": "ml.m5.large"}], count=1)
    body["StoppingCondition"]["MaxPendingTimeInSeconds"] = 1800
    status, payload = raw_call(emulator, "CreateProcessingJob", body)
    assert status == 400 and payload["__type"] == "ValidationException"
    assert "StoppingCondition.MaxPendingTimeInSeconds" in payload["message"]


# ----------------------------------------------------------------------------------------------- R14


def test_r14_unknown_training_type_is_rejected(
    client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    rejected(
        lambda: client.create_training_job(
            **make_training("r14", [{"InstanceType": G6}, {"InstanceType": "ml.g9.99xlarge"}], count=1)
        ),
        "ValidationException",
        "ResourceConfig.InstancePreferences[1].InstanceType: ml.g9.99xlarge is not a valid training instance type",
    )


@pytest.mark.parametrize(
    "instance_type", ["ml.p5.48xlarge", "ml.trn1.32xlarge", "ml.p4d.24xlarge", "ml.c5n.xlarge"]
)
def test_r14_training_only_types_are_rejected_for_processing(
    client: Any, make_processing: Callable[..., dict[str, Any]], instance_type: str
) -> None:
    rejected(
        lambda: client.create_processing_job(
            **make_processing(
                "p-r14", [{"InstanceType": "ml.m5.large"}, {"InstanceType": instance_type}], count=1
            )
        ),
        "ValidationException",
        f"ProcessingResources.ClusterConfig.InstancePreferences[1].InstanceType: {instance_type} is not a valid "
        "processing instance type",
    )


def test_r14_processing_types_from_the_model_are_accepted(
    client: Any, make_processing: Callable[..., dict[str, Any]]
) -> None:
    client.create_processing_job(
        **make_processing(
            "p-gpu", [{"InstanceType": "ml.g5.48xlarge"}, {"InstanceType": "ml.m5.large"}], count=1
        )
    )


# ----------------------------------------------------------------------------------- names and shape


def test_duplicate_name_is_resource_in_use(client: Any, make_training: Callable[..., dict[str, Any]]) -> None:
    client.create_training_job(**make_training("twice", [{"InstanceType": G5}], count=1))
    rejected(
        lambda: client.create_training_job(**make_training("twice", [{"InstanceType": G5}], count=1)),
        "ResourceInUse",
        "Training job names must be unique within an AWS account and region, and a training job with this name "
        "already exists (arn:aws:sagemaker:us-east-1:123456789012:training-job/twice)",
    )


def test_duplicate_processing_name_is_resource_in_use(
    client: Any, make_processing: Callable[..., dict[str, Any]]
) -> None:
    client.create_processing_job(**make_processing("p-twice", instance_type="ml.m5.large", count=1))
    rejected(
        lambda: client.create_processing_job(
            **make_processing("p-twice", instance_type="ml.m5.large", count=1)
        ),
        "ResourceInUse",
        "processing job with this name already exists",
    )


def test_describe_unknown_job_is_requested_resource_not_found(client: Any) -> None:
    rejected(
        lambda: client.describe_training_job(TrainingJobName="ghost"),
        "ValidationException",
        "Requested resource not found.",
    )
    rejected(
        lambda: client.describe_processing_job(ProcessingJobName="ghost"),
        "ValidationException",
        "Requested resource not found.",
    )
    rejected(
        lambda: client.stop_training_job(TrainingJobName="ghost"),
        "ValidationException",
        "Requested resource not found.",
    )


def test_missing_required_member_is_rejected(
    raw_client: Any, make_training: Callable[..., dict[str, Any]]
) -> None:
    request = make_training("no-role", [{"InstanceType": G5}], count=1)
    del request["RoleArn"]
    rejected(lambda: raw_client.create_training_job(**request), "ValidationException", "RoleArn")


def test_bad_job_name_is_rejected(raw_client: Any, make_training: Callable[..., dict[str, Any]]) -> None:
    rejected(
        lambda: raw_client.create_training_job(**make_training("bad_name!", [{"InstanceType": G5}], count=1)),
        "ValidationException",
        "trainingJobName",
    )


def test_unknown_members_are_ignored_and_left_out_of_the_shape_report(
    emulator: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    accepted = make_training("newer-field", [{"InstanceType": G5}], count=1, SomeFutureField={"x": 1})
    status, _ = raw_call(emulator, "CreateTrainingJob", accepted)
    assert status == 200
    request = make_training("bad-type", [{"InstanceType": G5}], count=1, SomeFutureField=1)
    request["RoleArn"] = 42
    status, error = raw_call(emulator, "CreateTrainingJob", request)
    assert status == 400 and error["__type"] == "ValidationException"
    assert error["message"].startswith("1 validation error detected: Invalid type for parameter RoleArn")
    assert "SomeFutureField" not in error["message"]
