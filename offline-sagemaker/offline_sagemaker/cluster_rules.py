"""Server-side validation of CreateCluster and UpdateCluster: the rules AWS documents for HyperPod groups.

botocore's client checks required members, types and minimums only; the service checks the rest. Two
kinds of message, as the service words them:

- the model's own constraints (patterns, maximum lengths and values, enums) in AWS's validation form,
  all of them at once: ``2 validation errors detected: Value 'a_b' at 'instanceGroups.1.member.
  instanceGroupName' failed to satisfy constraint: Member must satisfy regular expression pattern:
  [a-zA-Z0-9](-*[a-zA-Z0-9])*; ...`` (1-based member indexes, as AWS counts them);
- the documented rules between fields (``InstanceType`` or ``InstanceRequirements``, no type twice,
  unique group names, ``MinInstanceCount`` at most ``InstanceCount``, Continuous only with EKS), one
  message naming the field with a 0-based index, as :mod:`.rules` does for jobs.

Like :mod:`.rules`, this module shares no code with any client-side check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from offline_sagemaker.botocore_model import instance_types
from offline_sagemaker.cluster_models import Cluster, ClusterSpec, GroupSpec
from offline_sagemaker.exceptions import ResourceLimitExceeded, ValidationError
from offline_sagemaker.rules import validate_shape
from offline_sagemaker.scenario_types import Scenario

__all__ = [
    "CLUSTER_INSTANCE_TYPES",
    "MAX_INSTANCE_COUNT",
    "MAX_INSTANCE_TYPES",
    "check_cluster_quotas",
    "check_cluster_ref",
    "create_spec",
    "update_spec",
]

MAX_INSTANCE_COUNT = 6758
MAX_INSTANCE_TYPES = 20
CLUSTER_INSTANCE_TYPES: frozenset[str] = instance_types("cluster")

_NAME_PATTERN = "[a-zA-Z0-9](-*[a-zA-Z0-9])*"
_NAME = re.compile(_NAME_PATTERN)
_REF_PATTERN = r"(arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12})|([a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})"
_REF = re.compile(_REF_PATTERN)
_ROLE_PATTERN = r"arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+"
_ROLE = re.compile(_ROLE_PATTERN)
_EKS = "Orchestrator.Eks"


class _Constraints:
    """The model constraints a request breaks, reported together in AWS's validation form."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def add(self, value: Any, where: str, constraint: str) -> None:
        shown = f"[{', '.join(map(str, value))}]" if isinstance(value, list) else value
        self.errors.append(
            f"Value '{shown}' at '{where}' failed to satisfy constraint: Member must {constraint}"
        )

    def pattern(self, value: Any, where: str, regex: re.Pattern[str], pattern: str, max_length: int) -> None:
        if not isinstance(value, str):
            return  # botocore's shape check reports the type
        if not regex.fullmatch(value):
            self.add(value, where, f"satisfy regular expression pattern: {pattern}")
        if len(value) > max_length:
            self.add(value, where, f"have length less than or equal to {max_length}")

    def at_most(self, value: Any, where: str, maximum: int) -> None:
        if isinstance(value, int) and not isinstance(value, bool) and value > maximum:
            self.add(value, where, f"have value less than or equal to {maximum}")

    def raise_any(self) -> None:
        count = len(self.errors)
        if count:
            noun = "error" if count == 1 else "errors"
            raise ValidationError(f"{count} validation {noun} detected: " + "; ".join(self.errors))


def check_cluster_ref(value: Any) -> str:
    """``ClusterName`` of the operations that take a name or an ARN."""
    constraints = _Constraints()
    constraints.pattern(value, "clusterName", _REF, _REF_PATTERN, 256)
    constraints.raise_any()
    return str(value)


def _group_constraints(constraints: _Constraints, group: Mapping[str, Any], index: int) -> None:
    where = f"instanceGroups.{index + 1}.member"
    constraints.pattern(
        group.get("InstanceGroupName"), f"{where}.instanceGroupName", _NAME, _NAME_PATTERN, 63
    )
    constraints.at_most(group.get("InstanceCount"), f"{where}.instanceCount", MAX_INSTANCE_COUNT)
    constraints.at_most(group.get("MinInstanceCount"), f"{where}.minInstanceCount", MAX_INSTANCE_COUNT)
    constraints.at_most(group.get("ThreadsPerCore"), f"{where}.threadsPerCore", 2)
    constraints.pattern(group.get("ExecutionRole"), f"{where}.executionRole", _ROLE, _ROLE_PATTERN, 2048)
    enum = f"satisfy enum value set: [{', '.join(sorted(CLUSTER_INSTANCE_TYPES))}]"
    instance_type = group.get("InstanceType")
    if isinstance(instance_type, str) and instance_type not in CLUSTER_INSTANCE_TYPES:
        constraints.add(instance_type, f"{where}.instanceType", enum)
    requirements = group.get("InstanceRequirements")
    types = requirements.get("InstanceTypes") if isinstance(requirements, Mapping) else None
    if isinstance(types, list):
        path = f"{where}.instanceRequirements.instanceTypes"
        if len(types) > MAX_INSTANCE_TYPES:
            constraints.add(types, path, f"have length less than or equal to {MAX_INSTANCE_TYPES}")
        if any(t not in CLUSTER_INSTANCE_TYPES for t in types):
            constraints.add(types, path, f"satisfy constraint: [Member must {enum}]")


def _group_spec(group: Mapping[str, Any], index: int) -> GroupSpec:
    """The documented rules between a group's fields."""
    where = f"InstanceGroups[{index}]"
    requirements = group.get("InstanceRequirements")
    if group.get("InstanceType") is not None and requirements is not None:
        raise ValidationError(
            f"{where}: InstanceType and InstanceRequirements are mutually exclusive; give one instance type "
            "in InstanceType, or a priority list in InstanceRequirements.InstanceTypes"
        )
    if requirements is not None:
        types = list(requirements["InstanceTypes"])
        for position, instance_type in enumerate(types):
            if instance_type in types[:position]:
                raise ValidationError(
                    f"{where}.InstanceRequirements.InstanceTypes[{position}]: {instance_type} appears more "
                    "than once; each instance type may appear once"
                )
    elif group.get("InstanceType") is not None:
        types = [group["InstanceType"]]
    else:
        raise ValidationError(
            f"{where}: give the instance type in InstanceType, or a priority list in "
            "InstanceRequirements.InstanceTypes"
        )
    count, min_count = group["InstanceCount"], group.get("MinInstanceCount")
    if min_count is not None and min_count > count:
        raise ValidationError(
            f"{where}.MinInstanceCount: {min_count} is greater than InstanceCount ({count}); the minimum "
            "must not exceed the target"
        )
    return GroupSpec(
        name=group["InstanceGroupName"],
        types=tuple(types),
        flexible=requirements is not None,
        count=count,
        min_count=min_count,
        request=dict(group),
    )


def _groups(params: Mapping[str, Any], constraints: _Constraints) -> list[Mapping[str, Any]]:
    if params.get("RestrictedInstanceGroups") is not None:
        raise ValidationError(
            "RestrictedInstanceGroups: the offline SageMaker does not emulate restricted instance groups"
        )
    groups = list(params.get("InstanceGroups") or [])
    if len(groups) > 100:
        constraints.add(f"<{len(groups)} groups>", "instanceGroups", "have length less than or equal to 100")
    for index, group in enumerate(groups):
        _group_constraints(constraints, group, index)
    return groups


def _unique_names(specs: list[GroupSpec]) -> None:
    seen: set[str] = set()
    for index, spec in enumerate(specs):
        if spec.name in seen:
            raise ValidationError(
                f"InstanceGroups[{index}].InstanceGroupName: {spec.name} is used by another instance group; "
                "instance group names must be unique within a cluster"
            )
        seen.add(spec.name)


def _continuous(params: Mapping[str, Any], orchestrator: Any) -> bool | None:
    mode = params.get("NodeProvisioningMode")
    if mode is None:
        return None
    if mode != "Continuous":
        raise ValidationError(
            f"1 validation error detected: Value '{mode}' at 'nodeProvisioningMode' failed to satisfy "
            "constraint: Member must satisfy enum value set: [Continuous]"
        )
    if not (isinstance(orchestrator, Mapping) and orchestrator.get("Eks")):
        raise ValidationError(
            f"NodeProvisioningMode: Continuous is supported only for clusters orchestrated by Amazon EKS; "
            f"set {_EKS}.ClusterArn or leave NodeProvisioningMode out"
        )
    return True


def create_spec(params: Mapping[str, Any]) -> ClusterSpec:
    """Validate a CreateCluster request into a :class:`ClusterSpec`."""
    validate_shape("CreateCluster", params)
    constraints = _Constraints()
    constraints.pattern(params["ClusterName"], "clusterName", _NAME, _NAME_PATTERN, 63)
    groups = _groups(params, constraints)
    constraints.raise_any()
    if not groups:
        raise ValidationError("InstanceGroups: a cluster needs at least one instance group")
    specs = [_group_spec(group, index) for index, group in enumerate(groups)]
    _unique_names(specs)
    continuous = _continuous(params, params.get("Orchestrator"))
    return ClusterSpec(name=params["ClusterName"], groups=tuple(specs), continuous=continuous)


def update_spec(params: Mapping[str, Any], cluster: Cluster) -> ClusterSpec:
    """Validate an UpdateCluster request against ``cluster`` into a :class:`ClusterSpec`."""
    validate_shape("UpdateCluster", params)
    constraints = _Constraints()
    groups = _groups(params, constraints)
    constraints.raise_any()
    specs = [_group_spec(group, index) for index, group in enumerate(groups)]
    _unique_names(specs)
    delete = list(params.get("InstanceGroupsToDelete") or [])
    for index, name in enumerate(delete):
        if name not in cluster.groups or cluster.groups[name].deleting:
            raise ValidationError(
                f"InstanceGroupsToDelete[{index}]: cluster {cluster.name} has no instance group {name}"
            )
        if any(spec.name == name for spec in specs):
            raise ValidationError(
                f"InstanceGroupsToDelete[{index}]: {name} is also in InstanceGroups; an update may change "
                "or delete an instance group, not both"
            )
    for index, spec in enumerate(specs):
        _same_kind_of_group(spec, cluster, index)
    orchestrator = params.get("Orchestrator") or cluster.request.get("Orchestrator")
    continuous = _continuous(params, orchestrator)
    return ClusterSpec(name=cluster.name, groups=tuple(specs), delete=tuple(delete), continuous=continuous)


def _same_kind_of_group(spec: GroupSpec, cluster: Cluster, index: int) -> None:
    """An existing group keeps its kind: one fixed type, or a (changeable) priority list."""
    group = cluster.groups.get(spec.name)
    if group is None:
        return
    if group.deleting:
        raise ValidationError(f"InstanceGroups[{index}]: instance group {spec.name} is being deleted")
    where = f"InstanceGroups[{index}]"
    if group.spec.flexible != spec.flexible:
        have = "InstanceRequirements" if group.spec.flexible else "InstanceType"
        raise ValidationError(
            f"{where}: instance group {spec.name} was created with {have}; an update must use the same field"
        )
    if not spec.flexible and spec.types != group.spec.types:
        raise ValidationError(
            f"{where}.InstanceType: instance group {spec.name} runs {group.spec.types[0]}; the instance type "
            "of an existing instance group cannot be changed"
        )


def check_cluster_quotas(
    spec: ClusterSpec, cluster: Cluster | None, scenario: Scenario, utilization: Callable[[str], int]
) -> None:
    """Every listed type at the group's added count must fit the account quota ``<type> for cluster
    usage``, as for jobs: a flexible group may end up on any of its types."""
    for group in spec.groups:
        existing = cluster.groups.get(group.name) if cluster is not None else None
        delta = group.count - (existing.live if existing is not None else 0)
        if delta <= 0:
            continue
        for instance_type in group.types:
            limit = scenario.quota("cluster", instance_type)
            if limit is None:
                continue
            current = utilization(instance_type)
            if current + delta > limit:
                raise ResourceLimitExceeded(
                    f"The account-level service limit '{instance_type} for cluster usage' is {limit} "
                    f"Instances, with current utilization of {current} Instances and a request delta of "
                    f"{delta} Instances. Please use AWS Service Quotas to request an increase for this quota. "
                    "If AWS Service Quotas is not available, contact AWS support to request an increase for "
                    "this quota.",
                )
