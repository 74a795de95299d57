"""The HyperPod cluster model of the offline SageMaker: statuses, validated requests, clusters, groups, nodes.

A leaf beside :mod:`.models`: plain data with no behaviour beyond small derived properties, mutated only
by :mod:`.clusters` (lifecycle) and :mod:`.capacity` (which instances a node holds).

An instance group lists one instance type (``InstanceType``) or up to 20 in priority order
(``InstanceRequirements.InstanceTypes``, a *flexible* group); either way :attr:`GroupSpec.types` holds them
in order, and each node runs on one of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offline_sagemaker.models import _StrEnum

__all__ = [
    "Cluster",
    "ClusterEvent",
    "ClusterSpec",
    "ClusterStatus",
    "GroupSpec",
    "GroupStatus",
    "InstanceGroup",
    "Node",
    "NodeStatus",
]


class ClusterStatus(_StrEnum):
    """``ClusterStatus`` values (SystemUpdating is in the enum; the emulator runs no software updates)."""

    CREATING = "Creating"
    DELETING = "Deleting"
    FAILED = "Failed"
    IN_SERVICE = "InService"
    ROLLING_BACK = "RollingBack"
    SYSTEM_UPDATING = "SystemUpdating"
    UPDATING = "Updating"


class GroupStatus(_StrEnum):
    """``InstanceGroupStatus`` values the emulator emits."""

    IN_SERVICE = "InService"
    CREATING = "Creating"
    UPDATING = "Updating"
    FAILED = "Failed"
    DEGRADED = "Degraded"
    DELETING = "Deleting"


class NodeStatus(_StrEnum):
    """``ClusterInstanceStatus`` values the emulator emits."""

    PENDING = "Pending"
    RUNNING = "Running"
    SHUTTING_DOWN = "ShuttingDown"
    FAILURE = "Failure"


@dataclass(frozen=True)
class GroupSpec:
    """One validated ``ClusterInstanceGroupSpecification`` (built by :mod:`.cluster_rules`).

    :param name: ``InstanceGroupName``.
    :param types: the instance types in priority order (one for an ``InstanceType`` group).
    :param flexible: the group was given ``InstanceRequirements`` rather than ``InstanceType``.
    :param count: ``InstanceCount``, the target.
    :param min_count: ``MinInstanceCount`` if given.
    :param request: the group as requested (echoed by DescribeCluster).
    """

    name: str
    types: tuple[str, ...]
    flexible: bool
    count: int
    min_count: int | None
    request: dict[str, Any]


@dataclass(frozen=True)
class ClusterSpec:
    """A validated CreateCluster / UpdateCluster request.

    :param name: the cluster's name (CreateCluster) or name/ARN (UpdateCluster).
    :param groups: the instance groups given, in request order.
    :param delete: ``InstanceGroupsToDelete`` (UpdateCluster).
    :param continuous: ``NodeProvisioningMode: Continuous``, or None when the request does not say.
    """

    name: str
    groups: tuple[GroupSpec, ...]
    delete: tuple[str, ...] = ()
    continuous: bool | None = None


@dataclass(eq=False)
class Node:
    """One instance of a group, on one instance type, holding one instance of its pool until it is gone."""

    node_id: str
    group: str
    instance_type: str
    launched_at: float
    seq: int
    status: NodeStatus = NodeStatus.PENDING
    #: Bumped when the node's scheduled events become stale (it is deleted while Pending).
    token: int = 0

    @property
    def live(self) -> bool:
        """Pending or Running: counts toward the group's target."""
        return self.status in (NodeStatus.PENDING, NodeStatus.RUNNING)


@dataclass(eq=False)
class InstanceGroup:
    """One instance group of a cluster; mutated only by :mod:`.clusters`.

    ``seq`` orders the group among everything waiting for capacity (jobs included): FIFO by the start
    of the operation it waits for. ``in_service`` records that the group made its first transition to
    InService (the only one ``MinInstanceCount`` governs); ``previous`` is what a rollback restores.
    """

    cluster: Cluster
    spec: GroupSpec
    seq: int
    status: GroupStatus = GroupStatus.CREATING
    in_service: bool = False
    #: A scale-up of a group already InService is under way (outside Continuous mode: status Updating).
    updating: bool = False
    #: The group waits for capacity (recorded once per wait in the cluster's events).
    waiting: bool = False
    previous: GroupSpec | None = None
    deleting: bool = False
    #: Bumped when the group's deadline becomes stale (the operation ended or was replaced).
    token: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def nodes(self) -> list[Node]:
        """The group's nodes that still exist (ShuttingDown included), in launch order."""
        return [n for n in self.cluster.nodes.values() if n.group == self.spec.name]

    def count(self, *statuses: NodeStatus) -> int:
        return sum(1 for n in self.nodes if n.status in statuses)

    @property
    def live(self) -> int:
        """Pending and Running nodes: what counts toward the target."""
        return sum(1 for n in self.nodes if n.live)

    @property
    def running(self) -> int:
        return self.count(NodeStatus.RUNNING)

    @property
    def missing(self) -> int:
        """Nodes still to be provisioned to reach the target."""
        return max(0, self.spec.count - self.live)

    @property
    def threshold(self) -> int:
        """Running nodes needed for the first transition to InService."""
        if self.spec.min_count is not None:
            return self.spec.min_count
        if self.cluster.continuous:
            return min(1, self.spec.count)
        return self.spec.count


@dataclass(frozen=True)
class ClusterEvent:
    """One entry of ListClusterEvents."""

    event_id: str
    time: float
    resource_type: str
    description: str
    level: str = "Info"
    group: str | None = None
    node_id: str | None = None


@dataclass(eq=False)
class Cluster:
    """One HyperPod cluster; mutated only by :mod:`.clusters`."""

    name: str
    arn: str
    request: dict[str, Any]
    created_at: float
    continuous: bool
    seq: int
    status: ClusterStatus = ClusterStatus.CREATING
    groups: dict[str, InstanceGroup] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    events: list[ClusterEvent] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    failure_message: str | None = None
    failed: bool = False
    deleting: bool = False
    #: The cluster reached InService once (later scaling shows Updating, not Creating).
    in_service: bool = False
    rolling_back: int = 0
    node_seq: int = 0
