"""Training plans, Service Quotas and the Price List API of the offline SageMaker, driven with boto3.

Responses are held to botocore's output shapes; the numbers are the scenario's (the same quotas the
emulator enforces on Create, the plans its capacity model draws from, the prices it lists).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError
from emulator_support import PLAN_P5, PLAN_P5_LATER, frozen
from test_emulator_conformance import conforms, raw

from offline_sagemaker import OfflineSageMaker
from offline_sagemaker.scenario import ScenarioError, load_scenario

P4D, P5, G5 = "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.48xlarge"
PRICES = {P4D: 37.688, P5: {"us-east-1": 55.04, "eu-west-1": 61.0}}


def shape(service: str, operation: str) -> Any:
    model = botocore.session.get_session().get_service_model(service)
    return model.operation_model(operation).output_shape


def body(response: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


@pytest.fixture
def account(load_frozen: Callable[..., OfflineSageMaker]) -> OfflineSageMaker:
    return load_frozen(prices=PRICES)


def all_quotas(emulator: OfflineSageMaker) -> list[dict[str, Any]]:
    paginator = emulator.boto3_client("service-quotas").get_paginator("list_service_quotas")
    return [q for page in paginator.paginate(ServiceCode="sagemaker") for q in page["Quotas"]]


# -- Service Quotas -----------------------------------------------------------------------------------


def test_service_quotas_list_the_limits_the_emulator_enforces_by_aws_quota_name(
    account: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    quotas = {q["QuotaName"]: q for q in all_quotas(account)}
    assert quotas[f"{P4D} for training job usage"]["Value"] == 4.0  # FROZEN's quota
    assert quotas["ml.m5.xlarge for processing job usage"]["Value"] == 3.0
    assert quotas[f"{G5} for training job usage"]["Unit"] == "None"
    # The same number refuses a Create above it.
    with pytest.raises(ClientError) as info:
        account.boto3_client("sagemaker").create_training_job(
            **make_training("over", [{"InstanceType": P4D, "InstanceCount": 5}])
        )
    assert info.value.response["Error"]["Code"] == "ResourceLimitExceeded"


def test_get_service_quota_answers_by_code_and_both_conform_to_botocores_model(
    account: OfflineSageMaker,
) -> None:
    client = account.boto3_client("service-quotas")
    listed = client.list_service_quotas(ServiceCode="sagemaker", MaxResults=5)
    conforms(body(listed), shape("service-quotas", "ListServiceQuotas"), "ListServiceQuotas")
    assert len(listed["Quotas"]) == 5 and listed["NextToken"]
    one = client.get_service_quota(ServiceCode="sagemaker", QuotaCode=listed["Quotas"][0]["QuotaCode"])
    conforms(body(one), shape("service-quotas", "GetServiceQuota"), "GetServiceQuota")
    assert one["Quota"] == listed["Quotas"][0]


def test_service_quotas_reject_what_aws_rejects(account: OfflineSageMaker) -> None:
    client = account.boto3_client("service-quotas")
    with pytest.raises(ClientError) as info:
        client.list_service_quotas(ServiceCode="ec2-nope")
    assert info.value.response["Error"]["Code"] == "NoSuchResourceException"
    with pytest.raises(ClientError) as info:
        client.get_service_quota(ServiceCode="sagemaker", QuotaCode="L-00000000")
    assert info.value.response["Error"]["Code"] == "NoSuchResourceException"
    with pytest.raises(ClientError) as info:
        client.list_service_quotas(ServiceCode="sagemaker", NextToken="!!!")
    assert info.value.response["Error"]["Code"] == "ValidationException"


# -- Price List ---------------------------------------------------------------------------------------


def products(emulator: OfflineSageMaker, instance_type: str, region: str) -> list[dict[str, Any]]:
    response = emulator.boto3_client("pricing").get_products(
        ServiceCode="AmazonSageMaker",
        Filters=[
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        ],
    )
    conforms(body(response), shape("pricing", "GetProducts"), "GetProducts")
    assert all(isinstance(item, str) for item in response["PriceList"])  # JSON strings, as AWS sends
    return [json.loads(item) for item in response["PriceList"]]


def usd(product: dict[str, Any]) -> float:
    (term,) = product["terms"]["OnDemand"].values()
    (dimension,) = term["priceDimensions"].values()
    assert dimension["unit"] == "Hrs"
    return float(dimension["pricePerUnit"]["USD"])


def test_get_products_prices_each_component_per_region_in_aws_format(account: OfflineSageMaker) -> None:
    p4d = products(account, P4D, "us-east-1")
    # Not a processing type; a HyperPod cluster type too.
    assert {p["product"]["attributes"]["component"] for p in p4d} == {"Training", "Cluster"}
    assert [usd(p) for p in p4d] == [37.688, 37.688]
    assert products(account, P4D, "ap-south-1")  # a bare number prices every region
    assert [usd(p) for p in products(account, P5, "eu-west-1")] == [61.0, 61.0]  # Training, Cluster
    assert products(account, P5, "ap-south-1") == []  # no price there: not offered
    assert products(account, G5, "us-east-1") == []  # no price in the scenario at all
    m5 = account.boto3_client("pricing").get_products(
        ServiceCode="AmazonSageMaker",
        Filters=[{"Type": "TERM_MATCH", "Field": "component", "Value": "Processing"}],
    )
    assert m5["PriceList"] == []


def test_get_products_requires_a_service_code_as_the_model_does(account: OfflineSageMaker) -> None:
    client = account.boto3_client("pricing")
    client.meta.events.register("provide-client-params.pricing.GetProducts", lambda params, **_: {})
    with pytest.raises(Exception, match="ServiceCode"):
        client.get_products()


def test_access_denied_operations_answer_like_iam(load_frozen: Callable[..., OfflineSageMaker]) -> None:
    emulator = load_frozen(prices=PRICES, access_denied=["GetProducts"])
    with pytest.raises(ClientError) as info:
        products(emulator, P4D, "us-east-1")
    assert info.value.response["Error"]["Code"] == "AccessDeniedException"
    assert "pricing:GetProducts" in info.value.response["Error"]["Message"]
    assert all_quotas(emulator)  # only the named operation is denied


# -- Training plans ------------------------------------------------------------------------------------


def test_describe_training_plan_follows_the_window_and_counts_instances_in_use(
    account: OfflineSageMaker, make_training: Callable[..., dict[str, Any]]
) -> None:
    sagemaker = account.boto3_client("sagemaker")
    wire = raw(account, "DescribeTrainingPlan", {"TrainingPlanName": PLAN_P5})
    conforms(wire, shape("sagemaker", "DescribeTrainingPlan"), "DescribeTrainingPlan")
    plan = sagemaker.describe_training_plan(TrainingPlanName=PLAN_P5)
    assert (plan["Status"], plan["TotalInstanceCount"], plan["AvailableInstanceCount"]) == ("Active", 2, 2)
    assert plan["ReservedCapacitySummaries"][0]["InstanceType"] == P5
    sagemaker.create_training_job(
        **make_training("on-plan", [{"InstanceType": P5, "InstanceCount": 2, "TrainingPlanArns": [PLAN_P5]}])
    )
    account.advance(120)
    assert account.job("on-plan")["status"] == "InProgress"
    plan = sagemaker.describe_training_plan(TrainingPlanName="p5-now")  # by name, too
    assert (plan["InUseInstanceCount"], plan["AvailableInstanceCount"]) == (2, 0)
    later = sagemaker.describe_training_plan(TrainingPlanName=PLAN_P5_LATER)
    assert later["Status"] == "Scheduled" and later["AvailableInstanceCount"] == 0
    account.advance(7200)
    assert sagemaker.describe_training_plan(TrainingPlanName=PLAN_P5_LATER)["Status"] == "Active"
    with pytest.raises(ClientError) as info:
        sagemaker.describe_training_plan(TrainingPlanName="no-such-plan")
    assert info.value.response["Error"]["Code"] == "ResourceNotFound"


def test_a_pinned_plan_status_is_reported_and_lends_no_instances(
    load_frozen: Callable[..., OfflineSageMaker], make_training: Callable[..., dict[str, Any]]
) -> None:
    plans = [{"arn": PLAN_P5, "instance_type": P5, "count": 2, "from": 0, "to": 3600, "status": "Failed"}]
    emulator = load_frozen(training_plans=plans)
    sagemaker = emulator.boto3_client("sagemaker")
    wire = raw(emulator, "ListTrainingPlans", {"Filters": [{"Name": "Status", "Value": "Failed"}]})
    conforms(wire, shape("sagemaker", "ListTrainingPlans"), "ListTrainingPlans")
    summaries = sagemaker.list_training_plans(Filters=[{"Name": "Status", "Value": "Failed"}])
    (summary,) = summaries["TrainingPlanSummaries"]
    assert (summary["Status"], summary["DurationHours"], summary["AvailableInstanceCount"]) == (
        "Failed",
        1,
        0,
    )
    sagemaker.create_training_job(
        **make_training(
            "never",
            [{"InstanceType": P5, "InstanceCount": 2, "TrainingPlanArns": [PLAN_P5]}],
            stopping={"MaxPendingTimeInSeconds": 1800},
        )
    )
    emulator.advance(600)
    assert emulator.job("never")["status"] == "InProgress"  # waits: the plan lends nothing


# -- scenario keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"prices": {P4D: -1}}, f"prices.{P4D}: must be a number >= 0"),
        ({"prices": {P4D: 0}}, f"prices.{P4D}: must be a price in USD per instance-hour above 0"),
        ({"prices": {"ml.p4d.*": 3}}, "prices.ml.p4d.*: name one instance type per price"),
        ({"prices": {"ml.p4d.24xlarg": 3}}, "did you mean 'ml.p4d.24xlarge'"),
        ({"prices": {P4D: {}}}, f"prices.{P4D}: give a price for at least one region"),
        ({"access_denied": ["GetProduct"]}, "did you mean 'GetProducts'"),
        (
            {"training_plans": [{"arn": PLAN_P5, "instance_type": P5, "count": 1, "status": "Ready"}]},
            "training_plans[0].status: must be one of Pending, Active, Scheduled, Expired, Failed",
        ),
    ],
)
def test_invalid_new_scenario_keys_name_the_key_and_the_fix(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=None) as info:
        load_scenario(frozen(**overrides))
    assert message in str(info.value)


def test_the_new_scenario_keys_round_trip() -> None:
    scenario = load_scenario(frozen(prices=PRICES, access_denied=["GetProducts"]))
    assert load_scenario(scenario.as_dict()) == scenario
    assert scenario.price(P5, "eu-west-1") == 61.0 and scenario.price(P5, "ap-south-1") is None
