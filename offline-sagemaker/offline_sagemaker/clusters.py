"""The lifecycle of HyperPod clusters over the emulated clock: nodes drawn from the jobs' capacity pools.

No HTTP here. :class:`ClusterFleet` lives inside the :class:`~.engine.Engine` and shares its clock, its
event heap and its :class:`~.capacity.CapacityPools`, so cluster nodes and jobs compete for the same
scenario capacity, and waiting groups and waiting jobs are served in one FIFO order.

- Each node is provisioned on the first type of its group's list that has a free instance (then the
  next, ...): it holds that instance from launch, is ``Pending`` for ``clusters.node_provisioning_seconds``
  and then ``Running``. A group short of its target waits for capacity and gets nodes as the scenario
  frees instances.
- A group becomes InService once ``MinInstanceCount`` nodes run (the whole target without it; one node
  in Continuous mode); if that does not happen within 3 hours it rolls back (zero nodes for a new
  group). Outside Continuous mode a scale-up of a group already InService has the same 3 hours to
  reach its new target, else it rolls back to its previous settings.
- Nodes leave through ``ShuttingDown`` (``clusters.node_shutdown_seconds``) and return their instance
  when gone: scale-down, BatchDeleteClusterNodes, InstanceGroupsToDelete, DeleteCluster, rollback.
- An UpdateCluster group specification replaces the group's settings whole: a field the update leaves
  out (``TrainingPlanArn``, ``OverrideVpcConfig``...) is gone from the group afterwards. AWS does not
  document what leaving one out does; this is the reading under which a client that drops a field is
  seen to.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from offline_sagemaker.capacity import CapacityPools
from offline_sagemaker.clock import Event, EventQueue
from offline_sagemaker.cluster_models import (
    Cluster,
    ClusterEvent,
    ClusterSpec,
    ClusterStatus,
    GroupSpec,
    GroupStatus,
    InstanceGroup,
    Node,
    NodeStatus,
)
from offline_sagemaker.exceptions import ApiError, NotFound, ResourceInUse
from offline_sagemaker.models import PoolKey
from offline_sagemaker.scenario_types import Scenario

__all__ = ["MIN_COUNT_TIMEOUT_SECONDS", "ClusterFleet", "Timer"]

#: "If this threshold isn't met within 3 hours, the instance group rolls back to its previous state."
MIN_COUNT_TIMEOUT_SECONDS = 3 * 3600.0


class Timer(Enum):
    """What a cluster's scheduled event does."""

    NODE_READY = 1
    NODE_GONE = 2
    DEADLINE = 3
    SWEEP = 4
    ROLLED_BACK = 5


@dataclass(frozen=True)
class _Due:
    """The reference of a cluster timer in the engine's event heap."""

    timer: Timer
    cluster: Cluster
    group: InstanceGroup | None = None
    node: Node | None = None


class ClusterFleet:
    """The clusters of one world (rebuilt on every reset).

    :param scenario: the scenario in force.
    :param pools: the world's capacity pools (shared with jobs).
    :param events: the world's event heap (cluster timers are :attr:`Event.CLUSTER`).
    :param next_seq: the world's creation counter (orders groups among waiting jobs).
    :param released: called with the pools that grew when nodes are gone, so that waiters get them.
    """

    def __init__(
        self,
        scenario: Scenario,
        pools: CapacityPools,
        events: EventQueue,
        next_seq: Callable[[], int],
        released: Callable[[Iterable[PoolKey], float], None],
    ) -> None:
        self._scenario = scenario
        self._settings = scenario.clusters
        self._pools = pools
        self._events = events
        self._next_seq = next_seq
        self._released = released
        self._clusters: dict[str, Cluster] = {}

    # ------------------------------------------------------------------------------------- queries

    def get(self, name_or_arn: str) -> Cluster:
        """The cluster named (or with the ARN) ``name_or_arn``, else ``ResourceNotFound``."""
        cluster = self._clusters.get(name_or_arn)
        if cluster is None:
            cluster = next((c for c in self._clusters.values() if c.arn == name_or_arn), None)
        if cluster is None:
            raise NotFound("ResourceNotFound", f"Cluster {name_or_arn} not found.")
        return cluster

    def find(self, name: str) -> Cluster | None:
        return self._clusters.get(name)

    def clusters(self) -> list[Cluster]:
        """Every cluster, in creation order."""
        return sorted(self._clusters.values(), key=lambda c: c.seq)

    # ------------------------------------------------------------------------------------ commands

    def create(self, spec: ClusterSpec, request: dict[str, object], arn: str, now: float) -> Cluster:
        """Create a cluster in Creating and start provisioning its groups."""
        existing = self._clusters.get(spec.name)
        if existing is not None:
            raise ResourceInUse(f"Cluster {spec.name} already exists ({existing.arn})")
        cluster = Cluster(
            name=spec.name,
            arn=arn,
            request=request,
            created_at=now,
            continuous=bool(spec.continuous),
            seq=self._next_seq(),
        )
        self._clusters[spec.name] = cluster
        self._event(cluster, now, "Cluster", "Cluster creation started")
        for group_spec in spec.groups:
            self._add_group(cluster, group_spec, now)
        self._refresh(cluster, now)
        return cluster

    def update(self, cluster: Cluster, spec: ClusterSpec, now: float) -> None:
        """Apply an UpdateCluster: new groups, resized groups, deleted groups."""
        if cluster.deleting or cluster.failed or cluster.rolling_back:
            raise ApiError(
                "ConflictException",
                f"Cluster {cluster.name} is in status {cluster.status}; it cannot be updated now.",
            )
        if not cluster.continuous and cluster.status is not ClusterStatus.IN_SERVICE:
            raise ApiError(
                "ConflictException",
                f"Cluster {cluster.name} is in status {cluster.status}; outside Continuous node "
                "provisioning mode an update waits for InService.",
            )
        if spec.continuous is not None:
            cluster.continuous = spec.continuous
        self._event(cluster, now, "Cluster", "Cluster update started")
        for name in spec.delete:
            self._delete_group(cluster.groups[name], now)
        for group_spec in spec.groups:
            group = cluster.groups.get(group_spec.name)
            if group is None:
                self._add_group(cluster, group_spec, now)
            else:
                self._resize(group, group_spec, now)
        self._refresh(cluster, now)

    def delete_nodes(self, cluster: Cluster, node_ids: list[str], now: float) -> list[tuple[str, str | None]]:
        """BatchDeleteClusterNodes: ``(node id, error code or None)`` per id; each deletion lowers its
        group's target by one."""
        results: list[tuple[str, str | None]] = []
        for node_id in node_ids:
            node = cluster.nodes.get(node_id)
            if node is None:
                results.append((node_id, "NodeIdNotFound"))
                continue
            if not node.live:
                results.append((node_id, "InvalidNodeStatus"))
                continue
            group = cluster.groups[node.group]
            count = group.spec.count - 1
            min_count = group.spec.min_count
            group.spec = dataclasses.replace(
                group.spec, count=count, min_count=None if min_count is None else min(min_count, count)
            )
            self._shut_down(node, now)
            self._provision(group, now)
            results.append((node_id, None))
        self._refresh(cluster, now)
        return results

    def delete(self, cluster: Cluster, now: float) -> None:
        """DeleteCluster: every node shuts down; the cluster is gone when they are."""
        if cluster.deleting:
            return
        cluster.deleting = True
        self._event(cluster, now, "Cluster", "Cluster deletion started")
        for group in cluster.groups.values():
            self._delete_group(group, now)
        self._push(now + self._settings.node_shutdown_seconds, Timer.SWEEP, cluster)
        self._refresh(cluster, now)

    # --------------------------------------------------------------------------------- provisioning

    def provision(self, group: InstanceGroup, now: float) -> None:
        """Capacity may have grown for a waiting group: launch what fits, then refresh statuses."""
        self._provision(group, now)
        self._refresh(group.cluster, now)

    def _add_group(self, cluster: Cluster, spec: GroupSpec, now: float) -> None:
        group = InstanceGroup(cluster=cluster, spec=spec, seq=self._next_seq())
        cluster.groups[spec.name] = group
        self._event(
            cluster, now, "InstanceGroup", f"Creating instance group with {spec.count} instances", group
        )
        self._arm_deadline(group, now)
        self._provision(group, now)

    def _resize(self, group: InstanceGroup, spec: GroupSpec, now: float) -> None:
        self._pools.unwait(group)  # the listed types may change
        old, group.spec = group.spec, spec
        if spec.count != old.count and group.in_service and not group.cluster.continuous:
            group.updating = (
                True  # Updating until the nodes the change adds run and those it removes are gone
            )
            if spec.count > group.live:
                group.previous = old
                self._arm_deadline(group, now)
        if spec.count != old.count:
            self._event(
                group.cluster,
                now,
                "InstanceGroup",
                f"Scaling from {old.count} to {spec.count} instances",
                group,
            )
        self._shrink(group, now)
        self._provision(group, now)

    def _arm_deadline(self, group: InstanceGroup, now: float) -> None:
        group.token += 1
        self._push(
            now + MIN_COUNT_TIMEOUT_SECONDS, Timer.DEADLINE, group.cluster, group=group, token=group.token
        )

    def _provision(self, group: InstanceGroup, now: float) -> None:
        """Launch nodes on the first listed type with a free instance until the target is met; wait
        for the rest."""
        while group.missing > 0 and not group.deleting:
            instance_type = self._free_type(group, now)
            if instance_type is None:
                break
            self._launch(group, instance_type, now)
        if group.missing > 0 and not group.deleting:
            if not group.waiting:
                group.waiting = True
                self._event(
                    group.cluster,
                    now,
                    "InstanceGroup",
                    f"Insufficient capacity for {group.missing} instances of "
                    f"{', '.join(group.spec.types)}; waiting for capacity",
                    group,
                    level="Warn",
                )
            self._pools.wait(group)
        else:
            group.waiting = False
            self._pools.unwait(group)

    def _free_type(self, group: InstanceGroup, now: float) -> str | None:
        types = group.spec.types
        if self._settings.scale_up_types == "running" and group.in_service:
            running = {node.instance_type for node in group.nodes if node.live}
            if running:
                types = tuple(t for t in types if t in running)
        return next((t for t in types if self._pools.available(("od", t), now) >= 1), None)

    def _launch(self, group: InstanceGroup, instance_type: str, now: float) -> None:
        cluster = group.cluster
        cluster.node_seq += 1
        node_id = "i-" + hashlib.sha256(f"{cluster.arn}/{cluster.node_seq}".encode()).hexdigest()[:17]
        node = Node(
            node_id=node_id,
            group=group.name,
            instance_type=instance_type,
            launched_at=now,
            seq=cluster.node_seq,
        )
        cluster.nodes[node_id] = node
        self._pools.take_node(node)
        self._event(cluster, now, "Instance", f"Provisioning instance on {instance_type}", group, node)
        self._push(
            now + self._settings.node_provisioning_seconds,
            Timer.NODE_READY,
            cluster,
            node=node,
            token=node.token,
        )

    def _shrink(self, group: InstanceGroup, now: float) -> None:
        """Shut down the nodes above the target: Pending ones first, then the lowest-priority types,
        newest first."""
        excess = group.live - group.spec.count
        if excess <= 0:
            return
        rank = {t: i for i, t in enumerate(group.spec.types)}
        live = [n for n in group.nodes if n.live]
        live.sort(
            key=lambda n: (n.status is NodeStatus.PENDING, rank.get(n.instance_type, len(rank)), n.seq),
            reverse=True,
        )
        for node in live[:excess]:
            self._shut_down(node, now)

    def _shut_down(self, node: Node, now: float) -> None:
        cluster = self._cluster_of(node)
        node.token += 1  # a Pending node never becomes Running
        node.status = NodeStatus.SHUTTING_DOWN
        self._event(cluster, now, "Instance", "Shutting down instance", cluster.groups[node.group], node)
        self._push(now + self._settings.node_shutdown_seconds, Timer.NODE_GONE, cluster, node=node)

    def _delete_group(self, group: InstanceGroup, now: float) -> None:
        group.deleting = True
        group.token += 1
        self._pools.unwait(group)
        self._event(group.cluster, now, "InstanceGroup", "Deleting instance group", group)
        for node in group.nodes:
            if node.live:
                self._shut_down(node, now)
        self._push(now + self._settings.node_shutdown_seconds, Timer.SWEEP, group.cluster)

    def _cluster_of(self, node: Node) -> Cluster:
        return next(c for c in self._clusters.values() if c.nodes.get(node.node_id) is node)

    # -------------------------------------------------------------------------------------- timers

    def _push(
        self,
        when: float,
        timer: Timer,
        cluster: Cluster,
        *,
        group: InstanceGroup | None = None,
        node: Node | None = None,
        token: int = 0,
    ) -> None:
        self._events.push(when, Event.CLUSTER, _Due(timer, cluster, group, node), token)

    def on_timer(self, due: _Due, token: int, now: float) -> None:
        """A cluster timer is due (called by the engine in time order)."""
        cluster = due.cluster
        match due.timer:
            case Timer.NODE_READY:
                assert due.node is not None
                if token == due.node.token and due.node.status is NodeStatus.PENDING:
                    due.node.status = NodeStatus.RUNNING
                    group = cluster.groups[due.node.group]
                    self._event(
                        cluster,
                        now,
                        "Instance",
                        f"Instance is running on {due.node.instance_type}",
                        group,
                        due.node,
                    )
            case Timer.NODE_GONE:
                assert due.node is not None
                del cluster.nodes[due.node.node_id]
                self._released([self._pools.release_node(due.node)], now)
                self._sweep(cluster, now)
            case Timer.DEADLINE:
                assert due.group is not None
                if token == due.group.token and not due.group.deleting:
                    self._roll_back(due.group, now)
            case Timer.ROLLED_BACK:
                cluster.rolling_back -= 1
            case Timer.SWEEP:
                self._sweep(cluster, now)
        if self._clusters.get(cluster.name) is cluster:
            self._refresh(cluster, now)

    def _roll_back(self, group: InstanceGroup, now: float) -> None:
        """The group missed its 3-hour deadline: back to zero nodes (new group) or its previous settings."""
        cluster = group.cluster
        group.token += 1
        self._pools.unwait(group)
        wanted = group.threshold if not group.in_service else group.spec.count
        if group.in_service and group.previous is not None:
            group.spec = group.previous
        else:
            group.spec = dataclasses.replace(group.spec, count=0, min_count=None)
        group.previous, group.updating, group.waiting = None, False, False
        message = (
            f"Instance group {group.name} did not reach {wanted} running instances within 3 hours; "
            f"rolled back to {group.spec.count} instances"
        )
        cluster.failure_message = message
        self._event(cluster, now, "InstanceGroup", message, group, level="Error")
        if not cluster.in_service:
            cluster.failed = True  # a cluster that never came up does not stay half-made
            for other in cluster.groups.values():
                self._pools.unwait(other)
                other.token += 1
                for node in other.nodes:
                    if node.live:
                        self._shut_down(node, now)
        self._shrink(group, now)
        cluster.rolling_back += 1
        self._push(now + self._settings.node_shutdown_seconds, Timer.ROLLED_BACK, cluster)

    def _sweep(self, cluster: Cluster, now: float) -> None:
        """Forget deleted groups whose nodes are gone, and a deleted cluster once all its nodes are."""
        for name, group in list(cluster.groups.items()):
            if group.deleting and not group.nodes and not cluster.deleting:
                del cluster.groups[name]
                self._event(cluster, now, "InstanceGroup", f"Instance group {name} deleted")
        if cluster.deleting and not cluster.nodes:
            self._clusters.pop(cluster.name, None)

    # ------------------------------------------------------------------------------------ statuses

    def _refresh(self, cluster: Cluster, now: float) -> None:
        """Recompute group and cluster statuses; every change is a cluster event."""
        for group in cluster.groups.values():
            first = not group.in_service and not group.deleting and not cluster.failed
            if first and group.running >= group.threshold:
                group.in_service = True
                group.token += 1  # the first transition is done: no rollback any more
            settled = not any(n.status is NodeStatus.SHUTTING_DOWN for n in group.nodes)
            if group.updating and settled and group.running >= group.spec.count:
                group.updating, group.previous = False, None
                group.token += 1
            status = self._group_status(group)
            if status is not group.status:
                group.status = status
                self._event(cluster, now, "InstanceGroup", f"Instance group status is {status}", group)
        cluster_status = self._cluster_status(cluster)
        if cluster_status is not cluster.status:
            cluster.status = cluster_status
            if cluster_status is ClusterStatus.IN_SERVICE:
                cluster.in_service = True
            level = "Error" if cluster_status is ClusterStatus.FAILED else "Info"
            self._event(cluster, now, "Cluster", f"Cluster status is {cluster_status}", level=level)

    def _group_status(self, group: InstanceGroup) -> GroupStatus:
        if group.deleting:
            return GroupStatus.DELETING
        if group.cluster.failed:
            return GroupStatus.FAILED
        if not group.in_service:
            return GroupStatus.CREATING
        if group.updating:
            return GroupStatus.UPDATING
        if group.running >= group.spec.count or group.cluster.continuous:
            return GroupStatus.IN_SERVICE
        if self._settings.partial_group_status == "degraded":
            return GroupStatus.DEGRADED
        return GroupStatus.IN_SERVICE

    def _cluster_status(self, cluster: Cluster) -> ClusterStatus:
        if cluster.deleting:
            return ClusterStatus.DELETING
        if cluster.rolling_back:
            return ClusterStatus.ROLLING_BACK
        if cluster.failed:
            return ClusterStatus.FAILED
        statuses = {group.status for group in cluster.groups.values()}
        if not cluster.in_service:
            return ClusterStatus.CREATING if GroupStatus.CREATING in statuses else ClusterStatus.IN_SERVICE
        if statuses & {GroupStatus.CREATING, GroupStatus.UPDATING, GroupStatus.DELETING}:
            return ClusterStatus.UPDATING
        return ClusterStatus.IN_SERVICE

    # -------------------------------------------------------------------------------------- events

    def _event(
        self,
        cluster: Cluster,
        now: float,
        resource_type: str,
        description: str,
        group: InstanceGroup | None = None,
        node: Node | None = None,
        *,
        level: str = "Info",
    ) -> None:
        digest = hashlib.sha256(f"{cluster.arn}/event/{len(cluster.events)}".encode()).hexdigest()
        event_id = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        cluster.events.append(
            ClusterEvent(
                event_id=event_id,
                time=now,
                resource_type=resource_type,
                description=description,
                level=level,
                group=group.name if group is not None else (node.group if node is not None else None),
                node_id=node.node_id if node is not None else None,
            )
        )
