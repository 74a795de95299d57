"""The ``regions`` section of a scenario: each other region's own capacity, quotas and training plans,
validated as the scenario's own are (:mod:`.scenario_fields`), errors named ``regions.<region>.<key>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from offline_sagemaker.exceptions import ScenarioError
from offline_sagemaker.scenario_fields import (
    _capacity,
    _mapping,
    _only_keys,
    _quotas,
    _region,
    _training_plans,
)
from offline_sagemaker.scenario_types import REGION_KEYS, RegionSettings, Scenario

__all__ = ["regions_section"]


def regions_section(data: Mapping[str, Any]) -> dict[str, Any]:
    """``regions``: each one's capacity, quotas and training plans, validated as the scenario's own are
    (errors name ``regions.<region>.<key>``); a region's plans must name it in their ARNs."""
    home = data.get("region", Scenario.region)
    regions: dict[str, RegionSettings] = {}
    for region, raw in _mapping(data.get("regions"), "regions").items():
        where = f"regions.{region}"
        _region(region, where)
        if region == home:
            raise ScenarioError(
                f"{where}: {region} is the scenario's own region; set its capacity, quotas and "
                "training_plans at the top level"
            )
        own = _mapping(raw, where)
        _only_keys(own, where, REGION_KEYS)
        # The scenario's capacity_period applies to every region's windows.
        scoped = {**own, "capacity_period": data.get("capacity_period")}
        try:
            settings = RegionSettings(
                capacity=_capacity(scoped)["capacity"] if "capacity" in own else None,
                quotas=_quotas(scoped)["quotas"] if "quotas" in own else None,
                training_plans=_training_plans(scoped)["training_plans"] if "training_plans" in own else None,
            )
        except ScenarioError as exc:
            raise ScenarioError(f"{where}.{exc}") from None
        for index, plan in enumerate(settings.training_plans or ()):
            if plan.arn.split(":")[3] != region:
                raise ScenarioError(
                    f"{where}.training_plans[{index}].arn: a plan of {region} has an ARN in {region} "
                    f"(arn:aws:sagemaker:{region}:...), got {plan.arn}"
                )
        regions[region] = settings
    return {"regions": regions}
