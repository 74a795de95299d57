"""The look-ups behind the guardrails before submit: Service Quotas, training plans, the Price List API,
and the region of an S3 bucket (for the regions a job may move to).

:class:`PreflightLookups` works on the connection of the
:class:`~airflow_provider_sm_prefs.hooks.sagemaker.SageMakerPreferenceHook` it is given (region,
credentials, ``endpoint_url`` and per-service config in its extra), so the guardrails ask the same
account the job goes to; the SageMaker hook holds one (``SageMakerPreferenceHook.lookups``) and keeps
its own calls about jobs. Each look-up that cannot run — access denied, endpoint unreachable,
throttled past a short retry — becomes one *unchecked* line and never fails the task.

Results are cached (:class:`~.cache.TtlCache`: in memory and in a per-user directory the task processes
of a worker share): prices for a day, quotas for ten minutes, failures for five; training plans are
described fresh every time (their free instances change as jobs start). Cache keys hold the connection
id, region, endpoint and a one-way digest of the access key id — never a secret.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import cached_property
from itertools import islice
from typing import TYPE_CHECKING, Any

from botocore.config import Config
from botocore.exceptions import ClientError

from airflow_provider_sm_prefs.domain.guardrails import Facts, PlanFacts, quota_name
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.regions import location_region
from airflow_provider_sm_prefs.hooks.cache import TtlCache, default_directory
from airflow_provider_sm_prefs.hooks.clock import service_now
from airflow_provider_sm_prefs.hooks.retry import Retry, error_code, retry_sync, with_default_retries

__all__ = ["PRICE_TTL", "QUOTA_TTL", "PreflightLookups", "TtlCache", "clear_cache"]

#: Seconds a price is reused: list prices change rarely (AWS publishes them a few times a month).
PRICE_TTL = 24 * 3600.0
#: Seconds the quota table is reused: an approved increase shows within this time.
QUOTA_TTL = 600.0
#: The Price List API is served from these regions only; others ask us-east-1.
PRICING_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1")
PRICE_SERVICE_CODE = "AmazonSageMaker"
#: GetProducts pages read for one instance type at most (100 products a page).
PRICE_MAX_PAGES = 10
#: Seconds a failed look-up (denied, unreachable) is remembered, so a DAG of many tasks does not pay
#: for the same failure (timeouts included) in every task.
FAILURE_TTL = 300.0
#: Preflight is a convenience: two requests per look-up (botocore's retry and ours share them), then the
#: check is reported as not run.
PREFLIGHT_ATTEMPTS = 2
PREFLIGHT_RETRY = Retry(attempts=PREFLIGHT_ATTEMPTS, base=0.5, cap=2.0)
#: Timeouts of the quota and price clients, unless the connection's config sets its own.
PREFLIGHT_CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=15)


_CACHE = TtlCache(default_directory() if os.environ.get("SM_PREFS_CACHE_DIR", None) != "" else None)


def clear_cache() -> None:
    """Forget every cached price and quota of this process."""
    _CACHE.clear()


def usd_per_hour(price_list: Iterable[str], component: str) -> float | None:
    """The On-Demand USD per hour in a GetProducts ``PriceList`` (JSON strings) for ``component``."""
    for item in price_list:
        product = json.loads(item)
        attributes = (product.get("product") or {}).get("attributes") or {}
        if str(attributes.get("component", "")).lower() != component.lower():
            continue
        for term in ((product.get("terms") or {}).get("OnDemand") or {}).values():
            for dimension in (term.get("priceDimensions") or {}).values():
                usd = (dimension.get("pricePerUnit") or {}).get("USD")
                if (
                    usd is not None
                    and str(dimension.get("unit", "")).lower().startswith("hr")
                    and float(usd) > 0
                ):
                    return float(usd)
    return None


def _why(err: Exception) -> str:
    if isinstance(err, ClientError):
        return f"{error_code(err) or 'error'}: {err.response.get('Error', {}).get('Message', '')}".strip()
    return f"{type(err).__name__}: {err}"


if TYPE_CHECKING:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook


class PreflightLookups:
    """Quotas, training plans and prices for the guardrails, on the connection of ``hook``.

    :param hook: the SageMaker hook of the task: its connection, region and config reach the other
        services, and its client describes training plans.
    """

    def __init__(self, hook: AwsBaseHook) -> None:
        self.hook = hook
        self._clients: dict[tuple[str, str | None], Any] = {}

    @cached_property
    def _identity(self) -> tuple[Any, ...]:
        """Who asks where: connection, region, endpoint and a digest of the access key id."""
        try:
            access_key = self._session.get_credentials().get_frozen_credentials().access_key or ""
        except Exception:  # no credentials yet: the calls themselves will say so
            access_key = ""
        digest = hashlib.sha256(access_key.encode()).hexdigest()[:16]
        config = self.hook.conn_config
        endpoint = config.get_service_endpoint_url("sagemaker") if config else None
        return (self.hook.aws_conn_id, self.hook.conn_region_name, endpoint, digest)

    def preflight_facts(
        self,
        kind: JobKind,
        entries: Iterable[tuple[str, str | None]],
        *,
        checks: bool,
        prices: bool,
        known_prices: Mapping[str, float] | None = None,
    ) -> Facts:
        """Look up what the guardrails need for ``entries`` (``(instance_type, plan ARN or None)``).

        :param checks: quotas and training plans (``preflight`` is not ``off``).
        :param prices: prices from the Price List API (region check, price caps, cost fields).
        :param known_prices: prices the DAG gave; those types are not looked up.
        """
        listed = list(entries)
        facts = Facts(region=self.hook.conn_region_name)
        if checks:
            self._quota_facts(kind, [t for t, _ in listed], facts)
            for _, plan in listed:
                if plan:
                    self._plan_facts(plan, facts)
        if prices:
            for instance_type, _ in listed:
                if instance_type not in (known_prices or {}):
                    self._price_facts(kind, instance_type, facts)
        return facts

    # -- quotas ----------------------------------------------------------------------------------------
    def _failed(self, service: str) -> str | None:
        """Why ``service`` failed for this identity within :data:`FAILURE_TTL`, if it did."""
        hit, reason = _CACHE.get(("failed", service, *self._identity), ttl=FAILURE_TTL)
        return str(reason) if hit else None

    def _remember_failure(self, service: str, err: Exception) -> str:
        reason = _why(err)
        _CACHE.put(("failed", service, *self._identity), reason, FAILURE_TTL)
        return reason

    def _quota_facts(self, kind: JobKind, types: list[str], facts: Facts) -> None:
        reason = self._failed("service-quotas")
        if reason is None:
            try:
                table = self.quota_table()
            except Exception as err:
                reason = self._remember_failure("service-quotas", err)
        if reason is not None:
            facts.unchecked.append(f"quota: Service Quotas could not be read ({reason})")
            return
        for instance_type in types:
            name = quota_name(kind, instance_type)
            facts.quotas[instance_type] = table.get(name)
            if name not in table:
                facts.unchecked.append(f"quota: no quota named '{name}' in Service Quotas")

    def quota_table(self) -> dict[str, float]:
        """Every SageMaker quota of the account and region, by name (cached for :data:`QUOTA_TTL`)."""
        key = ("quotas", *self._identity)
        hit, value = _CACHE.get(key, ttl=QUOTA_TTL)
        if hit:
            return dict(value)
        client = self._client("service-quotas", self.hook.conn_region_name)

        def read() -> dict[str, float]:
            # A transient error reads the table again from its first page: it is a few pages long.
            pages = client.get_paginator("list_service_quotas").paginate(
                ServiceCode="sagemaker", PaginationConfig={"PageSize": 100}
            )
            return {
                str(quota.get("QuotaName")): float(quota.get("Value", 0))
                for page in pages
                for quota in page.get("Quotas") or []
            }

        table = retry_sync(read, "ListServiceQuotas", PREFLIGHT_RETRY)
        _CACHE.put(key, table, QUOTA_TTL)
        return dict(table)

    # -- training plans --------------------------------------------------------------------------------
    def _plan_facts(self, arn: str, facts: Facts) -> None:
        # preflight's client (two requests at most), not the hook's: a plan check that cannot reach SageMaker
        # is reported unchecked in seconds instead of after the submit path's long retries
        try:
            client = self._client("sagemaker", self.hook.conn_region_name)
            response = retry_sync(
                lambda: client.describe_training_plan(TrainingPlanName=arn),
                "DescribeTrainingPlan",
                PREFLIGHT_RETRY,
            )
        except Exception as err:
            facts.unchecked.append(f"plan: {arn} could not be described ({_why(err)})")
            return
        facts.plans[arn] = PlanFacts(
            name=str(response.get("TrainingPlanName") or arn.rsplit("/", 1)[-1]),
            status=str(response.get("Status")),
            total=int(response.get("TotalInstanceCount") or 0),
            available=int(response.get("AvailableInstanceCount") or 0),
            start=_moment(response.get("StartTime")),
            end=_moment(response.get("EndTime")),
            now=service_now(response),
        )

    # -- prices ----------------------------------------------------------------------------------------
    def _price_facts(self, kind: JobKind, instance_type: str, facts: Facts) -> None:
        reason = self._failed("pricing")
        if reason is None:
            try:
                facts.prices[instance_type] = self.hourly_price(kind, instance_type)
                return
            except Exception as err:
                reason = self._remember_failure("pricing", err)
        facts.unchecked.append(f"price: {instance_type} could not be priced ({reason})")

    def hourly_price(self, kind: JobKind, instance_type: str) -> float | None:
        """USD per instance-hour of ``instance_type`` for ``kind`` jobs in the hook's region; None when the
        price list has none there (cached for :data:`PRICE_TTL`)."""
        region = self.hook.conn_region_name or "us-east-1"
        key = ("price", kind.value, instance_type, *self._identity)
        hit, value = _CACHE.get(key, ttl=PRICE_TTL)
        if hit:
            return value  # type: ignore[no-any-return]
        client = self._pricing_client(region)
        filters = [
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        ]

        def read() -> list[Any]:
            # Every SageMaker component of the instance (training, processing, hosting...) is a product:
            # the one wanted may be on any of the first pages. A transient error reads them again.
            pages = client.get_paginator("get_products").paginate(
                ServiceCode=PRICE_SERVICE_CODE, Filters=filters, PaginationConfig={"PageSize": 100}
            )
            return [item for page in islice(pages, PRICE_MAX_PAGES) for item in page.get("PriceList") or []]

        products = retry_sync(read, f"GetProducts {instance_type}", PREFLIGHT_RETRY)
        price = usd_per_hour(products, kind.spec.label)
        _CACHE.put(key, price, PRICE_TTL)
        return price

    # -- buckets ---------------------------------------------------------------------------------------
    def bucket_region(self, bucket: str) -> str | None:
        """The region of an S3 bucket (``GetBucketLocation``); None when it cannot be read (no such bucket,
        access denied, unreachable): the caller says so, and SageMaker refuses a bucket of another region."""
        client = self._client("s3", self.hook.conn_region_name)
        try:
            answer = retry_sync(
                lambda: client.get_bucket_location(Bucket=bucket),
                f"GetBucketLocation {bucket}",
                PREFLIGHT_RETRY,
            )
        except Exception:
            return None
        return location_region(answer.get("LocationConstraint"))

    def _pricing_client(self, region: str) -> Any:
        return self._client("pricing", region if region in PRICING_REGIONS else "us-east-1")

    @cached_property
    def _session(self) -> Any:
        return self.hook.get_session(region_name=self.hook.conn_region_name)

    def _client_config(self, service: str = "") -> Config:
        """The connection's botocore config over :data:`PREFLIGHT_CLIENT_CONFIG`, with preflight's short
        retries unless the user chose a retry mode (:func:`~.retry.with_default_retries`). S3 at an
        endpoint of the connection's own (an S3-compatible store, the offline SageMaker) is addressed by
        path, which needs no DNS name per bucket."""
        user = self.hook.conn_config.botocore_config
        config = PREFLIGHT_CLIENT_CONFIG.merge(user) if user else PREFLIGHT_CLIENT_CONFIG
        if service == "s3" and self.hook.conn_config.get_service_endpoint_url(service_name="s3"):
            config = Config(s3={"addressing_style": "path"}).merge(config)
        return with_default_retries(config, PREFLIGHT_ATTEMPTS)

    def _client(self, service: str, region: str | None) -> Any:
        """A client of another service on the hook's connection: its credentials, endpoint and config."""
        if (service, region) not in self._clients:
            hook = self.hook
            session = (
                self._session if region == hook.conn_region_name else hook.get_session(region_name=region)
            )
            self._clients[(service, region)] = session.client(
                service_name=service,
                region_name=region,
                endpoint_url=hook.conn_config.get_service_endpoint_url(service_name=service),
                config=hook._get_config(self._client_config(service)),
                verify=hook.verify,
            )
        return self._clients[(service, region)]


def _moment(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None
