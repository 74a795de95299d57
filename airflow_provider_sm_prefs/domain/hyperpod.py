"""HyperPod flexible instance groups: the ordered list of instance types, and where a scale-up stands.

A flexible instance group (``ClusterInstanceGroupSpecification.InstanceRequirements.InstanceTypes``) names
1 to 20 instance types in priority order. HyperPod provisions each node on the first type with capacity and
falls back to the next, so one group can hold a *mix*: ``2 × ml.p5.48xlarge + 4 × ml.p4d.24xlarge``.
``MinInstanceCount`` is the count at which a group first becomes ``InService``; if it is not met within
three hours the group rolls back to its previous state (zero nodes for a new group).

This module checks a group request against every documented rule before anything is sent to AWS
(:class:`FlexibleGroup`), decides where a wait stands from one ``DescribeCluster`` answer
(:func:`group_progress`), and keeps what a task asked for across its tries (:class:`GroupRequest`). What
the group ended up with is :mod:`.hyperpod_outcome`. Pure domain code: no Airflow, no boto.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.domain.exceptions import ClusterConfigError, InvalidInstancePreferencesError

#: ``ClusterInstanceRequirements.InstanceTypes``: 1 to 20 types.
MAX_GROUP_TYPES = 20
#: ``ClusterInstanceGroupSpecification.InstanceCount``: 0 to 6758.
MAX_GROUP_INSTANCES = 6758
#: A group that has not reached ``MinInstanceCount`` within this long rolls back.
MIN_COUNT_DEADLINE_SECONDS = 3 * 3600
#: ``NodeProvisioningMode`` (CreateCluster, UpdateCluster, DescribeCluster): its one value.
CONTINUOUS = "Continuous"
#: The wait of a task without ``max_pending`` in Continuous mode, where HyperPod retries failed
#: provisioning without end and never rolls an unmet scale-up back: the same three hours the rule gives
#: a group outside that mode.
CONTINUOUS_MAX_PENDING_SECONDS = MIN_COUNT_DEADLINE_SECONDS
#: ``InstanceGroupName`` and ``ClusterName``: 1 to 63 characters, letters, digits and inner hyphens.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
#: The types AWS's announcement lists for HyperPod flexible groups (the API's enum allows many more).
ANNOUNCED_TYPES = (
    "ml.p4d.24xlarge",
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
    "ml.trn2.48xlarge",
)


class GroupStatus(str, Enum):
    """``ClusterInstanceGroupDetails.Status`` as DescribeCluster reports it."""

    IN_SERVICE = "InService"
    CREATING = "Creating"
    UPDATING = "Updating"
    FAILED = "Failed"
    DEGRADED = "Degraded"
    SYSTEM_UPDATING = "SystemUpdating"
    DELETING = "Deleting"


class ClusterStatus(str, Enum):
    """``DescribeCluster.ClusterStatus``."""

    CREATING = "Creating"
    DELETING = "Deleting"
    FAILED = "Failed"
    IN_SERVICE = "InService"
    ROLLING_BACK = "RollingBack"
    SYSTEM_UPDATING = "SystemUpdating"
    UPDATING = "Updating"


@dataclass(frozen=True, slots=True)
class FlexibleGroup:
    """One flexible instance group, as a task asks for it.

    :param group_name: ``InstanceGroupName``.
    :param instance_types: the acceptable types, most preferred first (1 to 20, each once).
    :param instance_count: the group's target count (0 to 6758).
    :param min_instance_count: the count at which the group first becomes InService (None: AWS's
        default, the whole target).
    :param execution_role: ``ExecutionRole``, required for a new group.
    :param extra: every other ``ClusterInstanceGroupSpecification`` field, passed through as given
        (``LifeCycleConfig``, ``ThreadsPerCore``, ``InstanceStorageConfigs``...).
    """

    group_name: str
    instance_types: tuple[str, ...]
    instance_count: int
    min_instance_count: int | None = None
    execution_role: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(
        cls,
        group_name: Any,
        instance_types: Any,
        instance_count: Any,
        min_instance_count: Any = None,
        execution_role: Any = None,
        extra: Mapping[str, Any] | None = None,
        allowed_types: Iterable[str] | None = None,
    ) -> FlexibleGroup:
        """Check every documented rule; raise one error listing every problem, each naming its field.

        :param allowed_types: the ``ClusterInstanceType`` enum of the installed botocore (None: not checked).
        :raises InvalidInstancePreferencesError: with one line per broken rule.
        """
        problems: list[str] = []
        if not isinstance(group_name, str) or not NAME_PATTERN.match(group_name):
            problems.append(
                f"group_name: {group_name!r} is not a valid InstanceGroupName; use 1-63 letters, digits "
                "and hyphens, starting and ending with a letter or digit"
            )
        types = _parse_types(instance_types, problems, None if allowed_types is None else set(allowed_types))
        count = _parse_count("instance_count", instance_count, problems)
        minimum = (
            None
            if min_instance_count is None
            else _parse_count("min_instance_count", min_instance_count, problems)
        )
        if count is not None and minimum is not None and minimum > count:
            problems.append(
                f"min_instance_count: {minimum} is more than instance_count {count}; the group could "
                "never become InService — lower min_instance_count or raise instance_count"
            )
        if execution_role is not None and not (isinstance(execution_role, str) and execution_role):
            problems.append("execution_role: give the IAM role ARN the group's nodes run as")
        given = dict(extra or {})
        for clash in (
            "InstanceType",
            "InstanceRequirements",
            "InstanceCount",
            "MinInstanceCount",
            "InstanceGroupName",
            "ExecutionRole",
        ):
            if clash in given:
                problems.append(
                    f"group_config.{clash}: set by the operator's own argument; remove it from group_config"
                )
        if problems:
            raise InvalidInstancePreferencesError(problems)
        assert count is not None
        return cls(
            group_name=group_name,
            instance_types=types,
            instance_count=count,
            min_instance_count=minimum,
            execution_role=execution_role,
            extra=given,
        )

    @property
    def first_choice(self) -> str | None:
        return self.instance_types[0] if self.instance_types else None

    def rank_of(self, instance_type: str) -> int | None:
        """1-based position of ``instance_type`` in the list, or None if the group was not asked for it."""
        try:
            return self.instance_types.index(instance_type) + 1
        except ValueError:
            return None

    def specification(self, execution_role: str | None = None) -> dict[str, Any]:
        """The ``ClusterInstanceGroupSpecification`` for CreateCluster / UpdateCluster."""
        spec: dict[str, Any] = dict(self.extra)
        spec["InstanceGroupName"] = self.group_name
        spec["InstanceRequirements"] = {"InstanceTypes": list(self.instance_types)}
        spec["InstanceCount"] = self.instance_count
        if self.min_instance_count is not None:
            spec["MinInstanceCount"] = self.min_instance_count
        role = self.execution_role or execution_role
        if role:
            spec["ExecutionRole"] = role
        return spec

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["instance_types"] = list(self.instance_types)
        data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlexibleGroup:
        return cls(
            group_name=data["group_name"],
            instance_types=tuple(data["instance_types"]),
            instance_count=int(data["instance_count"]),
            min_instance_count=data.get("min_instance_count"),
            execution_role=data.get("execution_role"),
            extra=dict(data.get("extra") or {}),
        )

    def describe(self) -> str:
        """One line for logs: ``8 nodes over [ml.p5.48xlarge, ...] (InService at 4)``."""
        at = f" (InService at {self.min_instance_count})" if self.min_instance_count is not None else ""
        return f"{self.instance_count} nodes over [{', '.join(self.instance_types)}]{at}"


def _parse_types(raw: Any, problems: list[str], allowed: set[str] | None) -> tuple[str, ...]:
    if isinstance(raw, str) or not isinstance(raw, Sequence) or not raw:
        problems.append(
            f"instance_types: give a list of 1 to {MAX_GROUP_TYPES} instance types, most preferred first "
            f"(got {raw!r})"
        )
        return ()
    if len(raw) > MAX_GROUP_TYPES:
        problems.append(
            f"instance_types: {len(raw)} types; a flexible instance group takes at most {MAX_GROUP_TYPES} — "
            "drop the least preferred"
        )
    seen: dict[str, int] = {}
    types: list[str] = []
    for index, value in enumerate(raw):
        where = f"instance_types[{index}]"
        if not isinstance(value, str) or not value:
            problems.append(f"{where}: {value!r} is not an instance type name such as 'ml.p5.48xlarge'")
            continue
        if value in seen:
            problems.append(
                f"{where}: {value} appears twice (first at instance_types[{seen[value]}]); each instance "
                "type may appear once"
            )
            continue
        seen[value] = index
        if allowed is not None and value not in allowed:
            problems.append(
                f"{where}: {value} is not a HyperPod cluster instance type (botocore's ClusterInstanceType); "
                "check the spelling, or upgrade botocore if AWS added it recently"
            )
        types.append(value)
    return tuple(types)


def _parse_count(name: str, raw: Any, problems: list[str]) -> int | None:
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())  # a rendered template
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_GROUP_INSTANCES:
        problems.append(f"{name}: {raw!r} must be a whole number from 0 to {MAX_GROUP_INSTANCES}")
        return None
    return raw


# -- where a wait stands ---------------------------------------------------------------------------------


class GroupPhase(str, Enum):
    """What one DescribeCluster says about a scale-up the task waits for."""

    WAITING = "waiting"
    #: the group runs its target count.
    REACHED_TARGET = "reached-target"
    #: the group is InService with at least MinInstanceCount nodes and the task accepts that now.
    REACHED_MINIMUM = "reached-minimum"
    ROLLED_BACK = "rolled-back"
    FAILED = "failed"
    GONE = "gone"
    #: the group is short of its target (and of an accepted minimum) past ``max_pending``.
    SHORTFALL = "shortfall"


def rollback_refusal(current: Mapping[str, Any], target_count: int) -> str | None:
    """Why a rollback of a task's scale-up must not touch group ``current`` now; None when it may.

    A rollback puts back the count the task found, so it is the task's to make only while the task's own
    scale-up is still the group's last change: the group targets the count the task asked for. A group
    that targets anything else was changed since by someone else (a person, another task, another
    deployment), and scaling it back would undo their change.
    """
    target = int(current.get("TargetCount") or 0)
    if target == target_count:
        return None
    return (
        f"the group now targets {target} nodes, not the {target_count} this task asked for: someone changed it "
        f"since, so it is no longer this task's to scale back; left as it is"
    )


def find_group(describe_cluster: Mapping[str, Any], group_name: str) -> Mapping[str, Any] | None:
    """The group's ``ClusterInstanceGroupDetails`` in a DescribeCluster answer."""
    for group in describe_cluster.get("InstanceGroups") or ():
        if isinstance(group, Mapping) and group.get("InstanceGroupName") == group_name:
            return dict(group)
    return None


def check_flexible(cluster_name: str, group: Mapping[str, Any]) -> None:
    """Refuse to put a list on an existing group of one fixed ``InstanceType``, before any update.

    ``InstanceType`` and ``InstanceRequirements`` are mutually exclusive in a group's specification, and
    AWS documents no way to turn a group of the one into a group of the other.

    :param group: the group's ``ClusterInstanceGroupDetails`` from DescribeCluster.
    :raises ClusterConfigError: naming the cluster, the group, its type and the fix.
    """
    fixed = group.get("InstanceType")
    if not fixed or group.get("InstanceRequirements"):
        return
    name = group.get("InstanceGroupName")
    raise ClusterConfigError(
        cluster_name,
        str(name),
        str(group.get("Status") or "FixedInstanceType"),
        f"instance group {name} of cluster {cluster_name} was created with one fixed InstanceType "
        f"({fixed}), not an InstanceRequirements list, and AWS documents no conversion from one to the "
        "other; nothing was sent. Give group_name a new group to create a flexible group beside it, or "
        "scale this group with its own InstanceType outside this operator",
    )


def provisions_continuously(cluster: Mapping[str, Any] | None) -> bool:
    """Whether a DescribeCluster answer (or a CreateCluster request) has ``NodeProvisioningMode:
    Continuous``: HyperPod then retries without end and rolls no unmet scale-up back."""
    return cluster is not None and cluster.get("NodeProvisioningMode") == CONTINUOUS


def pending_bound(max_pending_seconds: float | None, continuous: bool) -> float | None:
    """The wait's bound: the task's ``max_pending``; without one, HyperPod's three-hour rule outside
    Continuous mode (no client-side bound), :data:`CONTINUOUS_MAX_PENDING_SECONDS` in it."""
    if max_pending_seconds is None and continuous:
        return float(CONTINUOUS_MAX_PENDING_SECONDS)
    return max_pending_seconds


def listed_types(group: Mapping[str, Any]) -> tuple[str, ...]:
    """The group's ordered list as DescribeCluster reports it (``InstanceRequirements``: the desired list
    while an update is under way, else the current one), or its one ``InstanceType``."""
    requirements = group.get("InstanceRequirements") or {}
    types = requirements.get("DesiredInstanceTypes") or requirements.get("CurrentInstanceTypes")
    if types:
        return tuple(str(t) for t in types)
    return (str(group["InstanceType"]),) if group.get("InstanceType") else ()


def is_scaling(group: Mapping[str, Any]) -> bool:
    """Whether HyperPod reports an operation in progress on the group (``ActiveOperations``)."""
    operations = group.get("ActiveOperations") or {}
    return any(int(count or 0) > 0 for count in operations.values())


def group_progress(
    describe_cluster: Mapping[str, Any],
    group_name: str,
    target: int,
    previous_count: int,
    accept_minimum: bool,
) -> GroupPhase:
    """Where a scale-up of ``group_name`` to ``target`` nodes stands.

    :param previous_count: the group's count before this task's request (0 for a new group): a group
        back at it with no operation in progress, after the request, was rolled back.
    :param accept_minimum: whether the task now takes ``MinInstanceCount`` running nodes as enough (its
        acceptance window has closed, or it never waits past the minimum).
    """
    cluster_status = describe_cluster.get("ClusterStatus")
    group = find_group(describe_cluster, group_name)
    if group is None:
        return (
            GroupPhase.ROLLED_BACK if cluster_status == ClusterStatus.ROLLING_BACK.value else GroupPhase.GONE
        )
    status = group.get("Status")
    current = int(group.get("CurrentCount") or 0)
    if status == GroupStatus.FAILED.value or cluster_status == ClusterStatus.FAILED.value:
        return GroupPhase.FAILED
    if cluster_status == ClusterStatus.ROLLING_BACK.value:
        return GroupPhase.ROLLED_BACK
    if current >= target and status == GroupStatus.IN_SERVICE.value:
        return GroupPhase.REACHED_TARGET
    if not is_scaling(group) and int(group.get("TargetCount") or 0) != target and current <= previous_count:
        # HyperPod gave the request up and put the group back to its previous settings.
        return GroupPhase.ROLLED_BACK
    minimum = group.get("MinCount")
    if (
        accept_minimum
        and minimum is not None
        and current >= int(minimum)
        and status == GroupStatus.IN_SERVICE.value
    ):
        return GroupPhase.REACHED_MINIMUM
    return GroupPhase.WAITING


# -- what survives a try ---------------------------------------------------------------------------------

#: The task state store key of a group request (beside the job state's ``sm_prefs_job``).
GROUP_STATE_KEY = "sm_prefs_hyperpod"


@dataclass(frozen=True, slots=True)
class GroupRequest:
    """The scale-up a task instance asked for, written *before* the call so no retry asks twice.

    :param cluster_name: the cluster.
    :param group_name: the group.
    :param target_count: the count asked for.
    :param previous_count: the group's count before the request (0 for a new group); a rollback goes
        back to it.
    :param created_cluster: whether this task's request creates the cluster.
    :param created_group: whether this task's request adds the group.
    :param requested_at: ISO time of the request on the service's clock (None until AWS answered).
    :param try_number: the try that made the request.
    """

    cluster_name: str
    group_name: str
    target_count: int
    previous_count: int
    created_cluster: bool = False
    created_group: bool = False
    requested_at: str | None = None
    try_number: int | None = None
    version: int = 1

    def as_stored(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_stored(cls, data: Any) -> GroupRequest | None:
        if not isinstance(data, Mapping) or "cluster_name" not in data:
            return None
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})

    def is_for(self, cluster_name: str, group: FlexibleGroup) -> bool:
        """Whether this request is the one ``group`` on ``cluster_name`` describes."""
        return (
            self.cluster_name == cluster_name
            and self.group_name == group.group_name
            and self.target_count == group.instance_count
        )


def took_effect(request: GroupRequest, describe_cluster: Mapping[str, Any] | None) -> bool:
    """Whether AWS holds ``request`` (the group's target is the count asked for): then never ask again."""
    if describe_cluster is None:
        return False
    group = find_group(describe_cluster, request.group_name)
    return group is not None and int(group.get("TargetCount") or 0) == request.target_count
