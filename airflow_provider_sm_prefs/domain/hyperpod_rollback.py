"""Scaling a HyperPod group back: the one rule every rollback follows, and the ledger of scale-ups. Pure.

A task that scaled a group up puts the group back to the count it found when its wait fails or the task
is killed (the operator in a worker, the trigger in the triggerer). When the task can no longer do it
itself (its worker was killed ``-9``, its rollback met a cluster busy updating, its run was deleted), the
reconciler does, from the ledger entry the task wrote *before* its request (:class:`ScaleUp`). All of
them decide with :func:`plan_rollback` and send :func:`rollback_specification`:

* a rollback is the task's to make only while its scale-up is still the group's last change: the group
  targets the count the task asked for (:func:`~.hyperpod.rollback_refusal`); anything else was changed
  since by someone else, whose change a rollback would undo;
* it sets the count back to the one the task found, never lower, and changes nothing else: every field of
  the group as it stands (its list of instance types included) is sent back as it is.

The ledger lives in the deployment's own metadata database (an Airflow Variable per group,
:func:`scale_up_key`), not in a tag: a task role may not tag a cluster it did not create, and a tag
anyone with ``AddTags`` can write would let them have a reconciler scale a group down.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.domain.hyperpod import GroupRequest, find_group, rollback_refusal
from airflow_provider_sm_prefs.domain.hyperpod_update import carried_fields
from airflow_provider_sm_prefs.domain.identity import AirflowIdentity
from airflow_provider_sm_prefs.domain.reconcile import (
    GONE_STATES,
    LIVE_STATES,
    Decision,
    Gone,
    JobOwner,
    OwnerState,
    Verdict,
)

__all__ = [
    "SCALE_UP_DESCRIPTION",
    "SCALE_UP_PREFIX",
    "RollbackPlan",
    "RollbackResult",
    "ScaleUp",
    "decide_scale_back",
    "plan_rollback",
    "rollback_specification",
    "scale_up_key",
    "scale_up_verdict",
]

#: The Airflow Variables of the ledger: ``sm_prefs_scale_up.<region>.<cluster>.<group>``.
SCALE_UP_PREFIX = "sm_prefs_scale_up"
#: The description of a ledger Variable, as the Variables page shows it.
SCALE_UP_DESCRIPTION = (
    "The last scale-up of a HyperPod group by a task of this deployment (airflow-provider-sm-prefs): the "
    "reconciler scales the group back from it when the task is gone. Kept by the provider; do not edit."
)


class RollbackResult(str, Enum):
    """What a rollback did (the value is what a trigger's event carries under ``rollback``)."""

    DONE = "done"
    #: The group is at or below the count the task found (HyperPod rolled it back, or it is gone).
    NOT_NEEDED = "not-needed"
    #: The group changed since the task's scale-up: no longer the task's to scale back.
    REFUSED = "refused"
    #: The cluster refused the update while it was busy with another (outside Continuous mode).
    BUSY = "busy"
    #: The cluster never accepted the rollback within the bound of the wait.
    GAVE_UP = "gave-up"


@dataclass(frozen=True)
class RollbackPlan:
    """Whether to send a rollback now: ``result`` None means send ``specification``.

    :param result: the rollback's end when nothing is to be sent (not needed, refused).
    :param reason: what a person reads in the log or the report.
    :param specification: the group's ``ClusterInstanceGroupSpecification`` at the count the task found.
    """

    result: RollbackResult | None
    reason: str
    specification: dict[str, Any] | None = None


def rollback_specification(current: Mapping[str, Any], count: int) -> dict[str, Any]:
    """Group ``current`` (its ``ClusterInstanceGroupDetails``) at ``count`` nodes, every other field kept.

    The list of instance types is the one the group heads for (``DesiredInstanceTypes``, else
    ``CurrentInstanceTypes``); no minimum is sent (an old minimum above the count would be refused).
    """
    spec: dict[str, Any] = {"InstanceGroupName": current["InstanceGroupName"], "InstanceCount": count}
    requirements = current.get("InstanceRequirements") or {}
    types = requirements.get("DesiredInstanceTypes") or requirements.get("CurrentInstanceTypes")
    if types:
        spec["InstanceRequirements"] = {"InstanceTypes": list(types)}
    elif current.get("InstanceType"):
        spec["InstanceType"] = current["InstanceType"]
    spec.update(carried_fields(current))
    return spec


def plan_rollback(
    describe: Mapping[str, Any] | None, group_name: str, target_count: int, previous_count: int
) -> RollbackPlan:
    """Whether and how to put ``group_name`` back to ``previous_count`` after a scale-up to ``target_count``.

    :param describe: DescribeCluster's answer now (None: the cluster is gone).
    """
    current = find_group(describe, group_name) if describe is not None else None
    if current is None:
        return RollbackPlan(RollbackResult.NOT_NEEDED, "the cluster or the group no longer exists")
    target = int(current.get("TargetCount") or 0)
    if target <= previous_count:
        return RollbackPlan(
            RollbackResult.NOT_NEEDED,
            f"the group targets {target} nodes, not above the {previous_count} the scale-up found",
        )
    refusal = rollback_refusal(current, target_count)
    if refusal is not None:
        return RollbackPlan(RollbackResult.REFUSED, refusal)
    return RollbackPlan(
        None,
        f"scale back from {target} to {previous_count} nodes",
        rollback_specification(current, previous_count),
    )


def scale_up_key(region: str, cluster_name: str, group_name: str) -> str:
    """The ledger's Variable of one group (cluster and group names are ``[a-zA-Z0-9-]``, 63 at most)."""
    return f"{SCALE_UP_PREFIX}.{region}.{cluster_name}.{group_name}"


@dataclass(frozen=True)
class ScaleUp:
    """The last scale-up of a group a task of this deployment asked for, written before the request.

    :param deployment: the deployment id of the task.
    :param dag_id: the task's DAG.
    :param task_id: the task.
    :param run_id: the run (whole: the ledger is Airflow's, not a tag).
    :param map_index: the mapped task's index, -1 when not mapped.
    :param try_number: the try that made the request.
    :param cluster_name: the cluster.
    :param group_name: the group.
    :param previous_count: the count the task found (0 for a new group).
    :param target_count: the count it asked for.
    :param rollback: the task's ``rollback_on_failure``: False keeps the scale-up whatever happens.
    """

    deployment: str
    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    try_number: int | None
    cluster_name: str
    group_name: str
    previous_count: int
    target_count: int
    rollback: bool = True
    version: int = 1

    @classmethod
    def of(cls, identity: AirflowIdentity, request: GroupRequest, rollback: bool) -> ScaleUp:
        """The entry of ``request``, made by the try ``identity`` names."""
        return cls(
            deployment=identity.deployment_id,
            dag_id=identity.dag_id,
            task_id=identity.task_id,
            run_id=identity.run_id,
            map_index=identity.map_index,
            try_number=identity.try_number,
            cluster_name=request.cluster_name,
            group_name=request.group_name,
            previous_count=request.previous_count,
            target_count=request.target_count,
            rollback=rollback,
        )

    def as_stored(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_stored(cls, value: Any) -> ScaleUp | None:
        """The entry of a Variable's value; None for none, or for anything unreadable."""
        try:
            data = json.loads(value) if isinstance(value, str) else value
            if not isinstance(data, Mapping):
                return None
            known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
            entry = cls(**known)
            int(entry.previous_count), int(entry.target_count), int(entry.map_index)
        except (TypeError, ValueError):
            return None
        return entry

    def owner(self) -> JobOwner:
        return JobOwner(
            dag_id=self.dag_id,
            task_id=self.task_id,
            run_id=self.run_id,
            map_index=int(self.map_index),
            try_number=self.try_number,
            deployment=self.deployment,
        )


def scale_up_verdict(
    entry: ScaleUp | None,
    current: Mapping[str, Any] | None,
    deployment_id: str,
    cluster_is_ours: bool,
) -> Verdict | JobOwner:
    """The group's verdict from its ledger entry and its details now, or its owner to ask Airflow about.

    :param current: the group's ``ClusterInstanceGroupDetails`` now (None: no such group).
    :param cluster_is_ours: the cluster's ``sm-prefs:deployment`` tag names this deployment.
    """
    if entry is None:
        return Verdict(Decision.REPORT_ONLY, "no scale-up of this deployment is recorded for this group")
    if entry.deployment != deployment_id:
        return Verdict(Decision.REPORT_ONLY, f"last scaled by deployment {entry.deployment!r}, not this one")
    if current is None:
        return Verdict(Decision.KEEP, "the group no longer exists")
    target = int(current.get("TargetCount") or 0)
    if target <= entry.previous_count:
        return Verdict(
            Decision.KEEP,
            f"targets {target} nodes, not above the {entry.previous_count} its last scale-up found",
        )
    if target != entry.target_count:
        return Verdict(
            Decision.REPORT_ONLY,
            f"targets {target} nodes, not the {entry.target_count} its last recorded scale-up asked for: "
            f"changed since by someone else, never scaled back",
        )
    if not entry.rollback:
        return Verdict(
            Decision.KEEP, "its task keeps the scale-up whatever happens (rollback_on_failure=False)"
        )
    if not cluster_is_ours:
        return Verdict(
            Decision.REPORT_ONLY,
            f"the cluster does not carry this deployment's sm-prefs:deployment tag ({deployment_id!r}): "
            f"never scaled back; tag it so to let the reconciler act",
        )
    return entry.owner()


def decide_scale_back(entry: ScaleUp, state: OwnerState | Gone) -> Verdict:
    """STOP (scale back to ``entry.previous_count``) or KEEP, from the owning task's state now."""
    back = f"scale back to the {entry.previous_count} nodes it found"
    if isinstance(state, Gone):
        return Verdict(Decision.STOP, f"owner gone: {state.detail}; {back}")
    if state.state in LIVE_STATES:
        return Verdict(Decision.KEEP, f"task is {state.state}: it may still own the scale-up")
    if state.state == "success":
        return Verdict(Decision.KEEP, "task succeeded: the scale-up is its result")
    if state.state in GONE_STATES:
        return Verdict(Decision.STOP, f"task is {state.state} and its scale-up stands; {back}")
    return Verdict(Decision.KEEP, f"task is in an unknown state {state.state!r}: kept")
