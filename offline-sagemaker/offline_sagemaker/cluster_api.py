"""The HyperPod cluster operations of the offline SageMaker: JSON params in, JSON-ready dict out.

CreateCluster, UpdateCluster, DescribeCluster, DeleteCluster, ListClusters, ListClusterNodes,
DescribeClusterNode, BatchDeleteClusterNodes, ListClusterEvents and DescribeClusterEvent (the tags of a
cluster are :mod:`.tagging`'s, like a job's). Shapes follow botocore's model; the lifecycle behind them is
:mod:`.clusters`, the validation :mod:`.cluster_rules`.

- ``CurrentCount`` (group and per type) counts Running nodes; ``TargetCount`` is the requested count;
  ``ActiveOperations`` is ``{"Scaling": 1}`` while nodes are still to come, Pending or ShuttingDown.
- ``InstanceRequirements.CurrentInstanceTypes`` is the list before an update still under way,
  ``DesiredInstanceTypes`` the list of the latest request; ``InstanceTypeDetails`` lists every type of
  either (and any type a node still runs on), in priority order, with its Running nodes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from offline_sagemaker.cluster_models import Cluster, ClusterEvent, InstanceGroup, Node, NodeStatus
from offline_sagemaker.cluster_rules import (
    check_cluster_quotas,
    check_cluster_ref,
    create_spec,
    update_spec,
)
from offline_sagemaker.engine import Engine
from offline_sagemaker.exceptions import NotFound, ValidationError
from offline_sagemaker.responses import page
from offline_sagemaker.rules import validate_shape
from offline_sagemaker.tagging import tag_map

__all__ = ["ClusterApi"]

Handler = Callable[[dict[str, Any], float], dict[str, Any]]

DEFAULT_MAX_RESULTS = 10
#: Request fields DescribeCluster echoes as they were given.
_CLUSTER_ECHO = ("VpcConfig", "Orchestrator", "NodeRecovery", "TieredStorageConfig", "ClusterRole")
#: Group fields DescribeCluster echoes as they were given (``ClusterInstanceGroupDetails`` has them under
#: the same name and shape).
_GROUP_ECHO = (
    "ExecutionRole",
    "LifeCycleConfig",
    "ThreadsPerCore",
    "InstanceStorageConfigs",
    "OnStartDeepHealthChecks",
    "OverrideVpcConfig",
    "ScheduledUpdateConfig",
    "CapacityRequirements",
    "TrainingPlanArn",
    "SlurmConfig",
    "NetworkInterface",
)
#: Group fields DescribeCluster reports as the settings in force and the ones an update heads for: the
#: request's field → (its ``Current...``, its ``Desired...`` name). Nested ones are under their structure.
_GROUP_CURRENT_DESIRED = {
    "ImageId": ("CurrentImageId", "DesiredImageId"),
    "ImageReleaseVersion": ("CurrentImageReleaseVersion", "DesiredImageReleaseVersion"),
}
_NESTED_CURRENT_DESIRED = {
    "KubernetesConfig": {
        "Labels": ("CurrentLabels", "DesiredLabels"),
        "Taints": ("CurrentTaints", "DesiredTaints"),
    },
    "AutoPatchConfig": {"PatchSchedule": ("CurrentPatchSchedule", "DesiredPatchSchedule")},
}
_NODE_MESSAGES = {
    NodeStatus.PENDING: "Provisioning the instance",
    NodeStatus.RUNNING: "The instance is running",
    NodeStatus.SHUTTING_DOWN: "Shutting down the instance",
}


def _ts(value: float) -> float:
    return round(value, 3)


def _max_results(params: Mapping[str, Any]) -> int:
    value = params.get("MaxResults")
    if value is None:
        return DEFAULT_MAX_RESULTS
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise ValidationError(
            f"1 validation error detected: Value '{value}' at 'maxResults' failed to satisfy constraint: "
            "Member must have value between 1 and 100"
        )
    return value


def _epoch(params: Mapping[str, Any], key: str) -> float | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{key}: must be a timestamp, got {value!r}")
    return float(value)


def _within(when: float, params: Mapping[str, Any], after: str, before: str) -> bool:
    low, high = _epoch(params, after), _epoch(params, before)
    return (low is None or when > low) and (high is None or when < high)


def _paged(
    items: list[Any], params: Mapping[str, Any], key: str, render: Callable[[Any], Any]
) -> dict[str, Any]:
    shown, token = page(items, params.get("NextToken"), _max_results(params))
    out: dict[str, Any] = {key: [render(item) for item in shown]}
    if token:
        out["NextToken"] = token
    return out


def _scaling(group: InstanceGroup) -> bool:
    return not group.deleting and (
        group.missing > 0 or any(n.status is not NodeStatus.RUNNING for n in group.nodes)
    )


class ClusterApi:
    """Handlers for the HyperPod cluster operations over an :class:`Engine`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def handlers(self) -> dict[str, Handler]:
        return {
            "CreateCluster": self._create,
            "UpdateCluster": self._update,
            "DescribeCluster": self._describe,
            "DeleteCluster": self._delete,
            "ListClusters": self._list,
            "ListClusterNodes": self._list_nodes,
            "DescribeClusterNode": self._describe_node,
            "BatchDeleteClusterNodes": self._delete_nodes,
            "ListClusterEvents": self._list_events,
            "DescribeClusterEvent": self._describe_event,
        }

    # -------------------------------------------------------------------------------------- helpers

    def _cluster(self, params: Mapping[str, Any], operation: str) -> Cluster:
        validate_shape(operation, params)
        return self.engine.clusters.get(check_cluster_ref(params["ClusterName"]))

    def _arn(self, name: str) -> str:
        scenario = self.engine.scenario
        # A cluster's id: 12 lowercase alphanumerics, stable per name and creation.
        cluster_id = hashlib.sha256(f"{name}/{self.engine.now()}".encode()).hexdigest()[:12]
        return f"arn:aws:sagemaker:{scenario.region}:{scenario.account_id}:cluster/{cluster_id}"

    # ------------------------------------------------------------------------------------ commands

    def _create(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        spec = create_spec(params)
        fleet = self.engine.clusters
        existing = fleet.find(spec.name)
        if existing is not None:  # before quotas: a retried Create reports the cluster it made
            fleet.create(spec, params, existing.arn, now)
        check_cluster_quotas(spec, None, self.engine.scenario, self.engine.cluster_utilization)
        tags = tag_map(params.get("Tags"))
        cluster = fleet.create(spec, params, self._arn(spec.name), now)
        cluster.tags = tags
        return {"ClusterArn": cluster.arn}

    def _update(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        cluster = self._cluster(params, "UpdateCluster")
        spec = update_spec(params, cluster)
        check_cluster_quotas(spec, cluster, self.engine.scenario, self.engine.cluster_utilization)
        self.engine.clusters.update(cluster, spec, now)
        return {"ClusterArn": cluster.arn}

    def _delete(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        cluster = self._cluster(params, "DeleteCluster")
        self.engine.clusters.delete(cluster, now)
        return {"ClusterArn": cluster.arn}

    def _delete_nodes(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        cluster = self._cluster(params, "BatchDeleteClusterNodes")
        if params.get("NodeLogicalIds"):
            raise ValidationError("NodeLogicalIds: the offline SageMaker identifies nodes by NodeIds only")
        results = self.engine.clusters.delete_nodes(cluster, list(params.get("NodeIds") or []), now)
        out: dict[str, Any] = {}
        successful = [node_id for node_id, error in results if error is None]
        failed = [
            {"Code": error, "Message": _DELETE_ERRORS[error], "NodeId": node_id}
            for node_id, error in results
            if error is not None
        ]
        if successful:
            out["Successful"] = successful
        if failed:
            out["Failed"] = failed
        return out

    # -------------------------------------------------------------------------------------- reads

    def _describe(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        return self.describe(self._cluster(params, "DescribeCluster"))

    def describe(self, cluster: Cluster) -> dict[str, Any]:
        """``DescribeCluster`` response for ``cluster``."""
        out: dict[str, Any] = {
            "ClusterArn": cluster.arn,
            "ClusterName": cluster.name,
            "ClusterStatus": cluster.status.value,
            "CreationTime": _ts(cluster.created_at),
            "InstanceGroups": [_group_details(g) for g in cluster.groups.values()],
        }
        if cluster.failure_message is not None:
            out["FailureMessage"] = cluster.failure_message
        for key in _CLUSTER_ECHO:
            if key in cluster.request:
                out[key] = cluster.request[key]
        if cluster.continuous:
            out["NodeProvisioningMode"] = "Continuous"
        return out

    def _list(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        validate_shape("ListClusters", params)
        clusters = [
            c
            for c in self.engine.clusters.clusters()
            if _within(c.created_at, params, "CreationTimeAfter", "CreationTimeBefore")
        ]
        contains = params.get("NameContains")
        if contains:
            clusters = [c for c in clusters if str(contains).lower() in c.name.lower()]
        plan = params.get("TrainingPlanArn")
        if plan:  # clusters with a group that names the plan (its nodes still draw On-Demand capacity here)
            clusters = [
                c
                for c in clusters
                if any(g.spec.request.get("TrainingPlanArn") == plan for g in c.groups.values())
            ]
        by_name = params.get("SortBy") == "NAME"
        clusters.sort(key=lambda c: (c.name, c.seq) if by_name else (c.created_at, c.seq))
        if params.get("SortOrder") == "Descending":
            clusters.reverse()

        def summary(cluster: Cluster) -> dict[str, Any]:
            return {
                "ClusterArn": cluster.arn,
                "ClusterName": cluster.name,
                "CreationTime": _ts(cluster.created_at),
                "ClusterStatus": cluster.status.value,
            }

        return _paged(clusters, params, "ClusterSummaries", summary)

    def _list_nodes(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        cluster = self._cluster(params, "ListClusterNodes")
        nodes = [
            n
            for n in cluster.nodes.values()
            if _within(n.launched_at, params, "CreationTimeAfter", "CreationTimeBefore")
        ]
        contains = params.get("InstanceGroupNameContains")
        if contains:
            nodes = [n for n in nodes if str(contains).lower() in n.group.lower()]
        by_name = params.get("SortBy") == "NAME"
        nodes.sort(key=lambda n: (n.group, n.seq) if by_name else (n.launched_at, n.seq))
        if params.get("SortOrder") == "Descending":
            nodes.reverse()
        return _paged(nodes, params, "ClusterNodeSummaries", _node_summary)

    def _describe_node(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        cluster = self._cluster(params, "DescribeClusterNode")
        node_id = params.get("NodeId")
        if node_id is None:
            raise ValidationError("NodeId: required; the offline SageMaker identifies nodes by NodeId only")
        node = cluster.nodes.get(node_id)
        if node is None:
            raise NotFound("ResourceNotFound", f"Node {node_id} not found in cluster {cluster.name}.")
        details = _node_summary(node)
        request = cluster.groups[node.group].spec.request
        for key in ("LifeCycleConfig", "InstanceStorageConfigs", "OverrideVpcConfig"):
            if key in request:
                details[key] = request[key]
        details["ThreadsPerCore"] = request.get("ThreadsPerCore", 1)
        details["CapacityType"] = "OnDemand"
        return {"NodeDetails": details}

    def _list_events(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        cluster = self._cluster(params, "ListClusterEvents")
        events = [e for e in cluster.events if _within(e.time, params, "EventTimeAfter", "EventTimeBefore")]
        for param, attr in (
            ("InstanceGroupName", "group"),
            ("NodeId", "node_id"),
            ("ResourceType", "resource_type"),
        ):
            wanted = params.get(param)
            if wanted is not None:
                events = [e for e in events if getattr(e, attr) == wanted]
        if params.get("SortOrder", "Descending") == "Descending":  # the documented default
            events.reverse()
        return _paged(events, params, "Events", lambda e: _event(cluster, e))

    def _describe_event(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        cluster = self._cluster(params, "DescribeClusterEvent")
        for event in cluster.events:
            if event.event_id == params["EventId"]:
                return {"EventDetails": _event(cluster, event)}
        raise NotFound("ResourceNotFound", f"Event {params['EventId']} not found in cluster {cluster.name}.")


_DELETE_ERRORS = {
    "NodeIdNotFound": "The node does not exist in the cluster.",
    "InvalidNodeStatus": "The node is already shutting down.",
}


def _group_details(group: InstanceGroup) -> dict[str, Any]:
    spec = group.spec
    running = [n for n in group.nodes if n.status is NodeStatus.RUNNING]
    out: dict[str, Any] = {
        "InstanceGroupName": spec.name,
        "CurrentCount": len(running),
        "TargetCount": spec.count,
        "Status": group.status.value,
    }
    if spec.min_count is not None:
        out["MinCount"] = spec.min_count
    out.update(_echoed(spec.request))
    if spec.flexible:
        current = group.previous.types if group.updating and group.previous is not None else spec.types
        out["InstanceRequirements"] = {
            "CurrentInstanceTypes": list(current),
            "DesiredInstanceTypes": list(spec.types),
        }
        listed = list(dict.fromkeys([*spec.types, *current, *(n.instance_type for n in group.nodes)]))
        threads = spec.request.get("ThreadsPerCore", 1)
        out["InstanceTypeDetails"] = [
            {
                "InstanceType": t,
                "CurrentCount": sum(1 for n in running if n.instance_type == t),
                "ThreadsPerCore": threads,
            }
            for t in listed
        ]
    else:
        out["InstanceType"] = spec.types[0]
    if _scaling(group):
        out["ActiveOperations"] = {"Scaling": 1}
    return out


def _echoed(request: Mapping[str, Any]) -> dict[str, Any]:
    """The group's requested fields as ``ClusterInstanceGroupDetails`` names them.

    The emulator applies a group's settings at once: the settings in force (``Current...``) are the ones
    asked for (``Desired...``).
    """
    out = {key: request[key] for key in _GROUP_ECHO if key in request}
    for key, names in _GROUP_CURRENT_DESIRED.items():
        if key in request:
            out.update(dict.fromkeys(names, request[key]))
    for key, members in _NESTED_CURRENT_DESIRED.items():
        given = request.get(key)
        if isinstance(given, Mapping):
            details = {k: v for k, v in given.items() if k not in members}
            for member, names in members.items():
                if member in given:
                    details.update(dict.fromkeys(names, given[member]))
            out[key] = details
    return out


def _node_summary(node: Node) -> dict[str, Any]:
    return {
        "InstanceGroupName": node.group,
        "InstanceId": node.node_id,
        "InstanceType": node.instance_type,
        "LaunchTime": _ts(node.launched_at),
        "InstanceStatus": {"Status": node.status.value, "Message": _NODE_MESSAGES.get(node.status, "")},
    }


def _event(cluster: Cluster, event: ClusterEvent) -> dict[str, Any]:
    out: dict[str, Any] = {
        "EventId": event.event_id,
        "ClusterArn": cluster.arn,
        "ClusterName": cluster.name,
        "ResourceType": event.resource_type,
        "EventTime": _ts(event.time),
        "Description": event.description,
        "EventLevel": event.level,
    }
    if event.group is not None:
        out["InstanceGroupName"] = event.group
    if event.node_id is not None:
        out["InstanceId"] = event.node_id
    return out
