"""SageMaker HyperPod calls for flexible instance groups: create or scale a group, describe, list its nodes.

The operator and the sensor call the sync methods; the trigger calls the async ones on a client it
borrows from the process's pool (:mod:`.pool`). Rejections become the domain's cluster errors, told apart
by cause: a configuration error (``ValidationException``, a missing cluster), a quota refusal
(``ResourceLimitExceeded``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from airflow_provider_sm_prefs.domain.exceptions import ClusterConfigError, ClusterQuotaError
from airflow_provider_sm_prefs.domain.hyperpod import FlexibleGroup, check_flexible, find_group
from airflow_provider_sm_prefs.domain.hyperpod_update import carried_fields
from airflow_provider_sm_prefs.hooks.base import ProviderAwsHook
from airflow_provider_sm_prefs.hooks.retry import error_code, error_message, retry_sync


def _not_found(err: ClientError) -> bool:
    return error_code(err) in {"ResourceNotFound", "ResourceNotFoundException"}


def scale_specification(
    group: FlexibleGroup, cluster: Mapping[str, Any], count: int | None = None
) -> dict[str, Any]:
    """The group's specification for UpdateCluster (``count`` overrides its count, and drops the minimum).

    An existing group keeps every field the task does not name: each ``ClusterInstanceGroupSpecification``
    field the group has in DescribeCluster is sent back as it is (:func:`.hyperpod_update.carried_fields`),
    because AWS does not document what an update that leaves one out does. Only the list, the count and
    the minimum are the task's; ``group_config`` and ``execution_role`` win over the group's own.

    :raises ClusterConfigError: if the existing group has one fixed ``InstanceType`` (nothing is sent).
    """
    spec = group.specification()
    if count is not None:
        spec["InstanceCount"] = count
        spec.pop("MinInstanceCount", None)
    current = find_group(cluster, group.group_name)
    if current is not None:
        check_flexible(str(cluster.get("ClusterName") or ""), current)
        for name, value in carried_fields(current).items():
            spec.setdefault(name, value)
    return spec


def busy_rollback_message(previous_count: int) -> str:
    """What a task says when the cluster refuses its rollback because it is updating."""
    return (
        f"the cluster is updating and refuses the rollback to {previous_count} nodes: scale it down once it is "
        f"InService (outside Continuous mode HyperPod rolls an unmet scale-up back itself within three hours; "
        f"the reconciler scales it back on a later pass)"
    )


def is_busy(err: BaseException) -> bool:
    """SageMaker refuses the update while the cluster is busy with another (outside Continuous mode)."""
    return isinstance(err, ClientError) and error_code(err) == "ConflictException"


class SageMakerHyperPodHook(ProviderAwsHook):
    """HyperPod cluster calls on the amazon provider's ``AwsBaseHook`` (client type ``sagemaker``).

    The arguments are ``AwsBaseHook``'s (``aws_conn_id``, ``region_name``, ``verify``, ``config``).
    """

    hook_name = "Amazon SageMaker HyperPod (flexible instance groups)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["client_type"] = "sagemaker"
        super().__init__(*args, **kwargs)

    def describe_cluster(self, cluster_name: str) -> dict[str, Any] | None:
        """DescribeCluster with transient retries; None when the cluster does not exist."""
        try:
            return dict(
                retry_sync(
                    lambda: self.conn.describe_cluster(ClusterName=cluster_name), f"Describe {cluster_name}"
                )
            )
        except ClientError as err:
            if _not_found(err):
                return None
            raise

    def create_cluster(
        self, cluster_name: str, group: FlexibleGroup, cluster_config: Mapping[str, Any]
    ) -> dict[str, Any]:
        """CreateCluster with the group (and any other groups ``cluster_config`` gives)."""
        config = dict(cluster_config)
        others = [
            g for g in config.pop("InstanceGroups", []) if g.get("InstanceGroupName") != group.group_name
        ]
        request = {"ClusterName": cluster_name, "InstanceGroups": [group.specification(), *others], **config}
        return self._submit(cluster_name, group, lambda: self.conn.create_cluster(**request))

    def scale_group(
        self,
        cluster_name: str,
        group: FlexibleGroup,
        cluster: Mapping[str, Any],
        count: int | None = None,
    ) -> dict[str, Any]:
        """UpdateCluster: add the group, or set an existing group's list and count (:func:`scale_specification`)."""
        return self.update_groups(cluster_name, group, [scale_specification(group, cluster, count)])

    def update_groups(
        self, cluster_name: str, group: FlexibleGroup, specifications: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """UpdateCluster with these group specifications (rejections become the domain's cluster errors)."""
        return self._submit(
            cluster_name,
            group,
            lambda: self.conn.update_cluster(ClusterName=cluster_name, InstanceGroups=specifications),
        )

    def _submit(self, cluster_name: str, group: FlexibleGroup, call: Any) -> dict[str, Any]:
        try:
            return dict(retry_sync(call, f"Scale {cluster_name}/{group.group_name}"))
        except ClientError as err:
            code, message = error_code(err), error_message(err)
            if code == "ResourceLimitExceeded":
                raise ClusterQuotaError(
                    cluster_name,
                    group.group_name,
                    "Rejected",
                    f"a type of instance_types lacks quota at the group's count ({group.describe()}); raise the "
                    f"quota or drop the type. AWS said: {message}",
                ) from err
            if _not_found(err):
                raise ClusterConfigError(
                    cluster_name, group.group_name, "NotFound", f"the cluster does not exist: {message}"
                ) from err
            raise ClusterConfigError(cluster_name, group.group_name, code or "Rejected", message) from err

    def group_node_types(self, cluster_name: str, group_name: str) -> dict[str, int]:
        """Running nodes of the group per instance type, from ListClusterNodes (every page)."""
        counts: dict[str, int] = {}
        paginator = self.conn.get_paginator("list_cluster_nodes")
        pages = paginator.paginate(ClusterName=cluster_name, InstanceGroupNameContains=group_name)
        for page in pages:
            for node in page.get("ClusterNodeSummaries", []):
                if node.get("InstanceGroupName") != group_name:
                    continue
                if (node.get("InstanceStatus") or {}).get("Status") != "Running":
                    continue
                counts[node["InstanceType"]] = counts.get(node["InstanceType"], 0) + 1
        return counts

    @staticmethod
    async def describe_cluster_async(client: Any, cluster_name: str) -> dict[str, Any] | None:
        """One DescribeCluster on an aiobotocore client; None when the cluster does not exist."""
        try:
            return dict(await client.describe_cluster(ClusterName=cluster_name))
        except ClientError as err:
            if _not_found(err):
                return None
            raise
