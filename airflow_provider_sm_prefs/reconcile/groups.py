"""The reconciler's HyperPod part: groups whose last scale-up outlived the task that asked for it.

A task that scales a group up writes the ledger entry :class:`~.domain.hyperpod_rollback.ScaleUp` (an
Airflow Variable of this deployment) before its request, and scales the group back itself when its wait
fails. When it could not (killed ``-9``, its run deleted, its rollback met a busy cluster), the group is
left larger than anyone wants. A pass reads, for every group of every cluster, the ledger entry and the
owning task's state, and decides with :func:`~.domain.hyperpod_rollback.scale_up_verdict` and
:func:`~.domain.hyperpod_rollback.decide_scale_back`:

* it acts only on a cluster whose ``sm-prefs:deployment`` tag names this deployment, on a group whose
  last recorded scale-up is this deployment's and which still targets exactly the count that scale-up
  asked for, when the owning task is gone or ended without success;
* it scales the group back to the count the task found, never below, changing nothing else; right before
  the update it reads the cluster's tags, the ledger entry and the group again, and acts only if all
  three still say what was judged.

Groups with no entry, another deployment's entry, or a count changed since are reported, never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from botocore.exceptions import ClientError

from airflow_provider_sm_prefs.domain.hyperpod_rollback import (
    RollbackResult,
    ScaleUp,
    decide_scale_back,
    plan_rollback,
    scale_up_key,
    scale_up_verdict,
)
from airflow_provider_sm_prefs.domain.identity import IdentityKey, tag_value
from airflow_provider_sm_prefs.domain.kinds import GROUP_KIND
from airflow_provider_sm_prefs.domain.reconcile import Decision, JobOwner, Verdict, report_row
from airflow_provider_sm_prefs.hooks.hyperpod import is_busy
from airflow_provider_sm_prefs.hooks.retry import error_code, error_message
from airflow_provider_sm_prefs.reconcile.sources import StateUnavailable

__all__ = ["GROUP_KIND", "GroupPass"]

log = logging.getLogger(__name__)

_DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})


class GroupPass:
    """The HyperPod groups of one reconciler pass.

    :param reconciler: the pass's :class:`~.engine.Reconciler`: its hook, task state source, deployment,
        dry run and rate limiter.
    :param tags_of: reads every tag of an ARN (the pass's, rate limited).
    """

    def __init__(self, reconciler: Any, tags_of: Callable[[str], dict[str, str]]) -> None:
        self.r = reconciler
        self.tags_of = tags_of
        self.region = str(getattr(reconciler.hook, "conn_region_name", None) or "")

    def clusters(self) -> Iterator[dict[str, Any]]:
        """Every cluster's summary (ListClusters, every page)."""
        paginator = self.r.hook.conn.get_paginator("list_clusters")
        self.r.limiter.wait()
        for page in paginator.paginate():
            yield from page.get("ClusterSummaries") or []
            self.r.limiter.wait()

    def rows(self) -> Iterator[dict[str, Any]]:
        """One row per group that is this deployment's or has a ledger entry."""
        try:
            summaries = list(self.clusters())
        except ClientError as err:
            if error_code(err) not in _DENIED:
                raise
            log.warning(
                "HyperPod groups not reconciled: ListClusters is not granted (%s)", error_message(err)
            )
            yield _row(
                "*",
                "",
                None,
                Verdict(
                    Decision.REPORT_ONLY,
                    "HyperPod groups not reconciled: this role may not call ListClusters (grant the "
                    "HyperPod statements of docs/iam-reconciler-policy.json, or turn hyperpod_groups off)",
                ),
                "",
            )
            return
        for summary in summaries:
            yield from self.cluster_rows(str(summary["ClusterName"]), str(summary["ClusterArn"]))

    def ours(self, arn: str) -> bool:
        tags = self.tags_of(arn)
        return tags.get(IdentityKey.DEPLOYMENT.value) == tag_value(self.r.deployment_id)

    def entry(self, cluster_name: str, group_name: str) -> ScaleUp | None:
        return ScaleUp.from_stored(
            self.r.source.variable(scale_up_key(self.region, cluster_name, group_name))
        )

    def cluster_rows(self, name: str, arn: str) -> Iterator[dict[str, Any]]:
        try:
            ours = self.ours(arn)
            self.r.limiter.wait()
            describe = self.r.hook.conn.describe_cluster(ClusterName=name)
        except ClientError as err:
            yield _row(name, "", None, Verdict(Decision.REPORT_ONLY, f"unreadable: {error_code(err)}"), "")
            return
        for group in describe.get("InstanceGroups") or []:
            group_name = str(group.get("InstanceGroupName"))
            try:
                entry = self.entry(name, group_name)
            except StateUnavailable as err:
                if ours:
                    yield _row(
                        name, group_name, group, Verdict(Decision.KEEP, f"ledger unreadable: {err}"), ""
                    )
                continue
            if entry is None and not ours:
                continue  # not this deployment's cluster, and no task of it scaled the group
            yield self.judge(name, group, entry, ours)

    def judge(self, cluster: str, group: dict[str, Any], entry: ScaleUp | None, ours: bool) -> dict[str, Any]:
        verdict = scale_up_verdict(entry, group, self.r.deployment_id, ours)
        owner: JobOwner | None = None
        if isinstance(verdict, JobOwner):
            owner = verdict
            assert entry is not None
            try:
                state = self.r.source.task_state(owner, owner.run_id, f"{cluster}/{entry.group_name}")
                verdict = decide_scale_back(entry, state)
            except StateUnavailable as err:
                verdict = Verdict(Decision.KEEP, f"owner's state could not be read: {err}")
        action = ""
        if verdict.decision is Decision.STOP:
            assert entry is not None
            action = "would scale back" if self.r.dry_run else self.act(cluster, entry)
        return _row(cluster, str(group.get("InstanceGroupName")), group, verdict, action, owner)

    def act(self, cluster: str, judged: ScaleUp) -> str:
        """Scale back if the cluster's tags, the ledger entry and the group still say what was judged."""
        try:
            self.r.limiter.wait()
            describe = self.r.hook.conn.describe_cluster(ClusterName=cluster)
            if not self.ours(str(describe.get("ClusterArn") or "")):
                return "not scaled back: the cluster no longer carries this deployment's tag"
            if self.entry(cluster, judged.group_name) != judged:
                return "not scaled back: a newer scale-up was recorded since it was judged"
            plan = plan_rollback(describe, judged.group_name, judged.target_count, judged.previous_count)
            if plan.result is not None:
                return f"not scaled back: {plan.reason}"
            self.r.limiter.wait()
            self.r.hook.conn.update_cluster(ClusterName=cluster, InstanceGroups=[plan.specification])
        except ClientError as err:
            if is_busy(err):
                return f"not scaled back: {RollbackResult.BUSY.value} (the cluster is updating; the next pass tries)"
            log.warning("Could not scale %s/%s back", cluster, judged.group_name, exc_info=True)
            return f"error: {error_code(err)}: {error_message(err)}"
        except StateUnavailable as err:
            return f"not scaled back: the ledger could not be read again ({err})"
        log.warning(
            "Scaled %s/%s back to %d nodes: its last scale-up's task is gone",
            cluster,
            judged.group_name,
            judged.previous_count,
        )
        return f"scaled back to {judged.previous_count}"


def _row(
    cluster: str,
    group_name: str,
    group: dict[str, Any] | None,
    verdict: Verdict,
    action: str,
    owner: JobOwner | None = None,
) -> dict[str, Any]:
    status = f"{group.get('Status', '')}, target {group.get('TargetCount', 0)}" if group else ""
    name = f"{cluster}/{group_name}" if group_name else cluster
    return report_row(name, GROUP_KIND, status, owner, verdict, action)
