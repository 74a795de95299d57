"""The hook's look-ups for the guardrails, over real HTTP to the offline SageMaker."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import botocore.endpoint
import pytest

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.hooks.preflight import PREFLIGHT_ATTEMPTS, TtlCache, clear_cache, usd_per_hour
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook

P5, P4D, G5 = "ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g5.48xlarge"
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"
#: A frozen clock: the plan is still Scheduled (its window an hour away) however long the look-ups take.
SCENARIO: dict[str, Any] = {
    "time_scale": 0,
    "quotas": {"training": {P5: 0}},
    "prices": {P5: 55.04, P4D: {"us-east-1": 37.69}},
    "training_plans": [{"arn": PLAN, "instance_type": P5, "count": 2, "from": 3600, "to": 7200}],
}
ENTRIES = [(P5, PLAN), (P4D, None), (G5, None)]


def look(**kwargs: Any) -> Any:
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    return hook.preflight_facts(JobKind.TRAINING, ENTRIES, checks=True, prices=True, **kwargs)


def test_quotas_plans_and_prices_come_from_the_same_connection(sm: Any) -> None:
    sm.load_scenario(SCENARIO)
    facts = look()
    assert facts.quotas[P5] == 0.0 and facts.quotas[P4D] == 10000.0
    assert facts.prices == {P5: 55.04, P4D: 37.69, G5: None}
    assert (facts.plans[PLAN].status, facts.plans[PLAN].total) == ("Scheduled", 2)
    assert facts.unchecked == []


def test_a_second_task_reuses_cached_quotas_and_prices_but_describes_plans_again(sm: Any) -> None:
    sm.load_scenario(SCENARIO)
    look()
    first = dict(sm.stats()["operations"])
    look()
    second = sm.stats()["operations"]
    assert first["ListServiceQuotas"] >= 1 and first["GetProducts"] == 3
    assert second["ListServiceQuotas"] == first["ListServiceQuotas"]
    assert second["GetProducts"] == first["GetProducts"]
    assert second["DescribeTrainingPlan"] == 2


def test_given_prices_are_not_looked_up(sm: Any) -> None:
    sm.load_scenario(SCENARIO)
    look(known_prices={P5: 1.0, P4D: 1.0, G5: 1.0})
    assert "GetProducts" not in sm.stats()["operations"]


def test_a_denied_look_up_is_unchecked_and_remembered_for_a_while(sm: Any) -> None:
    denied = ["GetProducts", "ListServiceQuotas", "DescribeTrainingPlan"]
    sm.load_scenario({**SCENARIO, "access_denied": denied})
    facts = look()
    assert facts.prices == {} and facts.quotas == {} and facts.plans == {}
    assert [line.split(":")[0] for line in facts.unchecked] == ["quota", "plan", "price", "price", "price"]
    assert "AccessDeniedException" in facts.unchecked[0]
    # One denied call per service: the other types and the next task reuse the answer.
    look()
    assert sm.stats()["operations"] == {"ListServiceQuotas": 1, "GetProducts": 1, "DescribeTrainingPlan": 2}
    sm.load_scenario(SCENARIO)  # permission granted: checked again once the failure is forgotten
    clear_cache()
    assert look().prices[P5] == 55.04


def test_an_unreachable_endpoint_is_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_AWS_DEFAULT",
        json.dumps(
            {
                "conn_type": "aws",
                "login": "testing",
                "password": "testing",
                "extra": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"},
            }
        ),
    )
    monkeypatch.setattr("airflow_provider_sm_prefs.hooks.preflight.PREFLIGHT_RETRY", _no_retry())
    sent: list[str] = []
    send = botocore.endpoint.Endpoint._send

    def counted(endpoint: Any, request: Any) -> Any:
        sent.append(request.headers.get("X-Amz-Target", b"").decode() or request.url)
        return send(endpoint, request)

    monkeypatch.setattr(botocore.endpoint.Endpoint, "_send", counted)
    facts = look()
    assert facts.quotas == {} and facts.prices == {}
    assert all("Could not connect" in line or "EndpointConnectionError" in line for line in facts.unchecked)
    # Every look-up (quotas, the plan, prices) is a convenience: two requests each at most, the training
    # plan's included (it once went through the submit path's client and its ten).
    per_operation = Counter(target.rsplit(".", 1)[-1] for target in sent)
    assert set(per_operation) == {"ListServiceQuotas", "DescribeTrainingPlan", "GetProducts"}, per_operation
    assert max(per_operation.values()) <= PREFLIGHT_ATTEMPTS, per_operation


def _no_retry() -> Any:
    from airflow_provider_sm_prefs.hooks.retry import Retry

    return Retry(attempts=1)


def test_cache_entries_expire() -> None:
    now = [0.0]
    cache = TtlCache(clock=lambda: now[0])
    cache.put(("k",), 1, ttl=10)
    assert cache.get(("k",)) == (True, 1)
    now[0] = 10.0
    assert cache.get(("k",)) == (False, None)


def test_task_processes_share_entries_through_the_directory(tmp_path: Path) -> None:
    writer, reader = TtlCache(tmp_path / "c"), TtlCache(tmp_path / "c")  # two processes' caches
    writer.put(("price", "ml.p5.48xlarge", None), 55.04, ttl=60)
    writer.put(("quotas",), {"ml.p5.48xlarge for training job usage": 0.0}, ttl=60)
    assert reader.get(("price", "ml.p5.48xlarge", None)) == (True, 55.04)
    assert reader.get(("quotas",)) == (True, {"ml.p5.48xlarge for training job usage": 0.0})
    assert oct((tmp_path / "c").stat().st_mode & 0o777) == "0o700"
    assert not any("testing" in p.read_text() for p in (tmp_path / "c").iterdir())  # no credentials
    writer.clear()
    assert TtlCache(tmp_path / "c").get(("quotas",)) == (False, None)


def test_the_price_is_read_from_the_matching_component_of_aws_price_list_strings() -> None:
    def product(component: str, usd: str) -> str:
        dimension = {"unit": "Hrs", "pricePerUnit": {"USD": usd}}
        return json.dumps(
            {
                "product": {"attributes": {"component": component}},
                "terms": {"OnDemand": {"A.B": {"priceDimensions": {"A.B.C": dimension}}}},
            }
        )

    items = [product("Hosting", "9.0"), product("Training", "7.5")]
    assert usd_per_hour(items, "Training") == 7.5
    assert usd_per_hour(items, "Processing") is None


def test_the_price_is_found_on_a_later_getproducts_page(sm: Any) -> None:
    # AWS lists every SageMaker component of an instance type (hosting, notebooks, training...); the
    # offline SageMaker has too few to fill a page, so the two pages are given to the real client.
    from botocore.stub import Stubber

    def product(component: str, usd: str) -> str:
        dimension = {"unit": "Hrs", "pricePerUnit": {"USD": usd}}
        return json.dumps(
            {
                "product": {"attributes": {"component": component}},
                "terms": {"OnDemand": {"A.B": {"priceDimensions": {"A.B.C": dimension}}}},
            }
        )

    clear_cache()
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default", region_name="us-east-1")
    client = hook.lookups._pricing_client("us-east-1")
    with Stubber(client) as stub:
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": [product("Hosting", "9.0")] * 100, "NextToken": "p2"},
        )
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": [product("Training", "7.5")]},
            expected_params={
                "ServiceCode": "AmazonSageMaker",
                "Filters": [
                    {"Type": "TERM_MATCH", "Field": "instanceName", "Value": G5},
                    {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-east-1"},
                ],
                "MaxResults": 100,
                "NextToken": "p2",
            },
        )
        assert hook.lookups.hourly_price(JobKind.TRAINING, G5) == 7.5
        stub.assert_no_pending_responses()


def test_a_buckets_region_is_read_from_s3_on_the_tasks_connection(sm: Any) -> None:
    """GetBucketLocation at the connection's endpoint (by path there: no DNS name per bucket)."""
    for region, bucket in (("us-west-2", "west-models"), ("us-east-1", "east-models")):
        where = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        sm.boto3_client("s3", region_name=region).create_bucket(Bucket=bucket, **where)
    lookups = SageMakerPreferenceHook(aws_conn_id="aws_default").lookups
    assert lookups.bucket_region("west-models") == "us-west-2"
    assert lookups.bucket_region("east-models") == "us-east-1"
    # A bucket that cannot be read (none here) has no known region: the caller says so, nothing fails.
    assert lookups.bucket_region("nobody-made-this") is None
