"""What a client checks before it submits, served from the scenario: training plans, quotas and prices.

- SageMaker ``DescribeTrainingPlan`` / ``ListTrainingPlans``: the scenario's ``training_plans``, with a
  status (pinned, or from the window: Scheduled before it, Active within, Expired after), the window, and
  total / in-use / available instances (available is total minus in use while Active, else 0).
- Service Quotas ``ListServiceQuotas`` / ``GetServiceQuota`` (ServiceCode ``sagemaker``): one quota per
  training, processing and HyperPod cluster instance type, named as AWS names them (``ml.p4d.24xlarge
  for training job usage``, ``ml.p5.48xlarge for cluster usage``), valued as the emulator enforces them
  (the scenario's ``quotas``; types without one are not limited and are reported at
  :data:`UNLIMITED_QUOTA`). Codes are stable per name (``L-`` + 8 hex).
- Price List ``GetProducts`` (ServiceCode ``AmazonSageMaker``): one product per type, region and
  component (Training, Processing, and Cluster for HyperPod nodes) priced in the scenario's ``prices``,
  in AWS's format — ``PriceList`` holds JSON *strings* with ``product.attributes`` and
  ``terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD``.

Requests are validated against botocore's models of each service, as the other operations are.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from offline_sagemaker.botocore_model import instance_types
from offline_sagemaker.engine import Engine
from offline_sagemaker.exceptions import NotFound
from offline_sagemaker.responses import page
from offline_sagemaker.rules import validate_shape
from offline_sagemaker.scenario_types import TrainingPlan

__all__ = ["UNLIMITED_QUOTA", "AccountApi", "quota_code"]

#: The value reported for a quota the scenario does not limit (the emulator enforces none).
UNLIMITED_QUOTA = 10000.0
PRICE_SERVICE_CODE = "AmazonSageMaker"
QUOTA_SERVICE_CODE = "sagemaker"
_COMPONENTS = {"training": "Training", "processing": "Processing", "cluster": "Cluster"}
_USAGE = {
    "training": "training job usage",
    "processing": "processing job usage",
    "cluster": "cluster usage",
}
_OFFER_TERM = "JRTCKXETXF"
_RATE_CODE = "6YS6EN2CT7"

Handler = Callable[[dict[str, Any], float], dict[str, Any]]


def quota_code(name: str) -> str:
    """The emulator's stable code for a quota name (AWS's codes differ per type and are looked up by name)."""
    return "L-" + hashlib.sha256(name.encode()).hexdigest()[:8].upper()


def _page(items: Sequence[Any], params: Mapping[str, Any], default: int) -> tuple[list[Any], str | None]:
    return page(items, params.get("NextToken"), params.get("MaxResults") or default)


class AccountApi:
    """Handlers for training plans, Service Quotas and the Price List API over an :class:`Engine`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def handlers(self) -> dict[str, Handler]:
        return {
            "DescribeTrainingPlan": self._describe_plan,
            "ListTrainingPlans": self._list_plans,
            "ListServiceQuotas": self._list_quotas,
            "GetServiceQuota": self._get_quota,
            "GetProducts": self._get_products,
        }

    # ------------------------------------------------------------------------------- training plans

    def plan_status(self, plan: TrainingPlan, now: float) -> str:
        if plan.status is not None:
            return plan.status
        if now < self.engine.epoch_at(plan.start):
            return "Scheduled"
        return "Active" if now < self.engine.epoch_at(plan.end) else "Expired"

    def _plan_view(self, plan: TrainingPlan, now: float) -> dict[str, Any]:
        scenario = self.engine.scenario
        status = self.plan_status(plan, now)
        in_use = self.engine.plan_in_use(plan.arn)
        start = self.engine.epoch_at(plan.start)
        out: dict[str, Any] = {
            "TrainingPlanArn": plan.arn,
            "TrainingPlanName": plan.name,
            "Status": status,
            "StartTime": round(start, 3),
            "UpfrontFee": "0",
            "CurrencyCode": "USD",
            "TotalInstanceCount": plan.count,
            "AvailableInstanceCount": max(0, plan.count - in_use) if status == "Active" else 0,
            "InUseInstanceCount": in_use,
            "TargetResources": ["training-job"],
        }
        capacity: dict[str, Any] = {
            "ReservedCapacityArn": (
                f"arn:aws:sagemaker:{scenario.region}:{scenario.account_id}:reserved-capacity/{plan.name}-rc"
            ),
            "ReservedCapacityType": "Instance",
            "InstanceType": plan.instance_type,
            "TotalInstanceCount": plan.count,
            "Status": status,
            "StartTime": round(start, 3),
        }
        if not math.isinf(plan.end):
            end = self.engine.epoch_at(plan.end)
            hours, minutes = divmod(int((plan.end - plan.start) // 60), 60)
            out.update(EndTime=round(end, 3), DurationHours=hours, DurationMinutes=minutes)
            capacity.update(EndTime=round(end, 3), DurationHours=hours, DurationMinutes=minutes)
        out["ReservedCapacitySummaries"] = [capacity]
        return out

    def _describe_plan(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("DescribeTrainingPlan", params)
        wanted = str(params["TrainingPlanName"])
        for plan in self.engine.scenario.training_plans:
            if wanted in (plan.arn, plan.name):
                return self._plan_view(plan, now)
        raise NotFound("ResourceNotFound", f"Training plan {wanted} does not exist.")

    def _list_plans(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("ListTrainingPlans", params)
        views = [self._plan_view(p, now) for p in self.engine.scenario.training_plans]
        for item in params.get("Filters") or []:
            views = [v for v in views if item.get("Name") != "Status" or v["Status"] == item.get("Value")]
        reverse = params.get("SortOrder") == "Descending"
        key = {"TrainingPlanName": "TrainingPlanName", "Status": "Status"}.get(
            params.get("SortBy") or "", "StartTime"
        )
        views.sort(key=lambda v: v[key], reverse=reverse)
        page, token = _page(views, params, 100)
        summary_keys = ("AvailableSpareInstanceCount", "UnhealthyInstanceCount")
        out: dict[str, Any] = {
            "TrainingPlanSummaries": [
                {k: v for k, v in view.items() if k not in summary_keys} for view in page
            ]
        }
        if token:
            out["NextToken"] = token
        return out

    # ---------------------------------------------------------------------------------------- quotas

    def _quotas(self) -> Iterator[dict[str, Any]]:
        scenario = self.engine.scenario
        for kind in _USAGE:
            for instance_type in sorted(instance_types(kind)):
                name = f"{instance_type} for {_USAGE[kind]}"
                code = quota_code(name)
                limit = scenario.quota(kind, instance_type)
                yield {
                    "ServiceCode": QUOTA_SERVICE_CODE,
                    "ServiceName": "Amazon SageMaker",
                    "QuotaArn": f"arn:aws:servicequotas:{scenario.region}:{scenario.account_id}:sagemaker/{code}",
                    "QuotaCode": code,
                    "QuotaName": name,
                    "Value": float(UNLIMITED_QUOTA if limit is None else limit),
                    "Unit": "None",
                    "Adjustable": True,
                    "GlobalQuota": False,
                    "QuotaAppliedAtLevel": "ACCOUNT",
                    "Description": f"Maximum number of {instance_type} instances for {_USAGE[kind]}",
                }

    def _check_service(self, params: Mapping[str, Any]) -> None:
        if params["ServiceCode"] != QUOTA_SERVICE_CODE:
            raise NotFound(
                "NoSuchResourceException",
                f"The request failed because the specified service {params['ServiceCode']} does not exist.",
            )

    def _list_quotas(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("ListServiceQuotas", params, service="service-quotas")
        self._check_service(params)
        quotas = list(self._quotas())
        if params.get("QuotaCode"):
            quotas = [q for q in quotas if q["QuotaCode"] == params["QuotaCode"]]
        page, token = _page(quotas, params, 100)
        out: dict[str, Any] = {"Quotas": page}
        if token:
            out["NextToken"] = token
        return out

    def _get_quota(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("GetServiceQuota", params, service="service-quotas")
        self._check_service(params)
        for quota in self._quotas():
            if quota["QuotaCode"] == params["QuotaCode"]:
                return {"Quota": quota}
        raise NotFound(
            "NoSuchResourceException",
            f"The request failed because the specified quota {params['QuotaCode']} does not exist.",
        )

    # ---------------------------------------------------------------------------------------- prices

    def _products(self, regions: Sequence[str]) -> Iterator[dict[str, Any]]:
        scenario = self.engine.scenario
        for instance_type in sorted(scenario.prices):
            for region in regions:
                price = scenario.price(instance_type, region)
                if price is None:
                    continue
                for kind, component in _COMPONENTS.items():
                    if instance_type in instance_types(kind):
                        yield _product(instance_type, region, component, price)

    def _get_products(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("GetProducts", params, service="pricing")
        filters = list(params.get("Filters") or [])
        if params["ServiceCode"] != PRICE_SERVICE_CODE:
            return {"FormatVersion": "aws_v1", "PriceList": []}
        matching = [p for p in self._products(self._regions(filters)) if _matches(p, filters)]
        page, token = _page(matching, params, 100)
        out: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(p) for p in page]}
        if token:
            out["NextToken"] = token
        return out

    def _regions(self, filters: Sequence[Mapping[str, Any]]) -> list[str]:
        for item in filters:
            if item.get("Field") == "regionCode" and item.get("Type") in ("TERM_MATCH", "EQUALS"):
                return [str(item.get("Value"))]
        scenario = self.engine.scenario
        named = {r for by_region in scenario.prices.values() for r in by_region if r != "*"}
        return sorted(named | {scenario.region})


def _matches(product: Mapping[str, Any], filters: Sequence[Mapping[str, Any]]) -> bool:
    attributes = product["product"]["attributes"]
    for item in filters:
        kind, value = item.get("Type"), str(item.get("Value"))
        actual = attributes.get(str(item.get("Field")))
        options = [v.strip() for v in value.split(",")]
        passes = {
            "TERM_MATCH": actual == value,
            "EQUALS": actual == value,
            "CONTAINS": actual is not None and value in actual,
            "ANY_OF": actual in options,
            "NONE_OF": actual not in options,
        }.get(str(kind), False)
        if not passes:
            return False
    return True


def _product(instance_type: str, region: str, component: str, price: float) -> dict[str, Any]:
    sku = hashlib.sha256(f"{instance_type}|{region}|{component}".encode()).hexdigest()[:16].upper()
    offer = f"{sku}.{_OFFER_TERM}"
    return {
        "product": {
            "productFamily": "ML Instance",
            "attributes": {
                "servicecode": PRICE_SERVICE_CODE,
                "servicename": "Amazon SageMaker",
                "location": region,
                "locationType": "AWS Region",
                "regionCode": region,
                "instanceName": instance_type,
                "instanceType": instance_type,
                "component": component,
                "usagetype": f"{region}-{component}:{instance_type}",
                "operation": "RunInstance",
            },
            "sku": sku,
        },
        "serviceCode": PRICE_SERVICE_CODE,
        "terms": {
            "OnDemand": {
                offer: {
                    "priceDimensions": {
                        f"{offer}.{_RATE_CODE}": {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": f"${price:g} per {component} {instance_type} hour in {region}",
                            "appliesTo": [],
                            "rateCode": f"{offer}.{_RATE_CODE}",
                            "beginRange": "0",
                            "pricePerUnit": {"USD": f"{price:.10f}"},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": "2026-09-01T00:00:00Z",
                    "offerTermCode": _OFFER_TERM,
                    "termAttributes": {},
                }
            }
        },
        "version": "emulated",
        "publicationDate": "2026-09-01T00:00:00Z",
    }
