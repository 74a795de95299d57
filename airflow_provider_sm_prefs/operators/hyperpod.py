"""Operator: scale a HyperPod flexible instance group on an ordered list of instance types, once, and wait.

``execute`` reads top to bottom: the group checked (every documented rule, before any AWS call), the
request made once (a retry after a kill finds the request in the task's state and in the cluster, and
waits for it instead of asking again), the wait in the triggerer, and the outcome: nodes per type in list
order, the mix's accelerators and cost. A wait that fails (rollback, shortfall, a failed group) scales
the group back to where this task found it, unless ``rollback_on_failure=False``. The operator never
deletes a cluster or a group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from airflow.sdk import Context

from airflow_provider_sm_prefs.compat import AirflowFailException, set_variable
from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.hyperpod import (
    GROUP_STATE_KEY,
    FlexibleGroup,
    GroupRequest,
    check_flexible,
    find_group,
    pending_bound,
    provisions_continuously,
    took_effect,
)
from airflow_provider_sm_prefs.domain.hyperpod_event import GroupEvent
from airflow_provider_sm_prefs.domain.hyperpod_outcome import GroupOutcome, group_outcome, request_fields
from airflow_provider_sm_prefs.domain.hyperpod_rollback import (
    SCALE_UP_DESCRIPTION,
    RollbackResult,
    ScaleUp,
    plan_rollback,
    scale_up_key,
)
from airflow_provider_sm_prefs.domain.identity import IDENTITY_XCOM_KEY, with_identity
from airflow_provider_sm_prefs.domain.job_state import JobStateStore
from airflow_provider_sm_prefs.domain.kinds import GROUP_KIND
from airflow_provider_sm_prefs.domain.service_model import cluster_instance_types
from airflow_provider_sm_prefs.hooks.clock import service_now
from airflow_provider_sm_prefs.hooks.hyperpod import SageMakerHyperPodHook, busy_rollback_message
from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings
from airflow_provider_sm_prefs.operators.aws_task import AwsWaitingTask
from airflow_provider_sm_prefs.operators.identity import identity_of, identity_tags_enabled
from airflow_provider_sm_prefs.operators.task_try import try_number_of
from airflow_provider_sm_prefs.recording import CapacityRecorder, TryProgress
from airflow_provider_sm_prefs.triggers.dwell import deferral
from airflow_provider_sm_prefs.triggers.hyperpod import HyperPodGroupSpec, HyperPodGroupTrigger

#: XCom key of the whole outcome (``GroupOutcome.as_dict()``); the return value holds the same dict.
OUTCOME_KEY = "hyperpod_outcome"


def seconds_of(value: Any, name: str) -> float | None:
    """``value`` (seconds or a timedelta) in seconds; None stays None."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    raise errors.InvalidInstancePreferencesError(
        [f"{name}: {value!r} must be a number of seconds or a timedelta, not negative"]
    )


@dataclass(frozen=True)
class Wait:
    """Submission's decision: wait for ``request`` (just made, or an earlier try's that took effect).

    ``continuous``: the cluster provisions in ``NodeProvisioningMode: Continuous`` (as DescribeCluster
    reports it, or as ``cluster_config`` creates it), where HyperPod has no three-hour rule.
    """

    request: GroupRequest
    reattached: bool
    continuous: bool = False


class SageMakerHyperPodGroupOperator(AwsWaitingTask[SageMakerHyperPodHook]):
    """Create a HyperPod cluster with a flexible instance group, add the group, or scale it, and wait.

    :param cluster_name: the HyperPod cluster (templated).
    :param group_name: the instance group (templated).
    :param instance_types: 1 to 20 acceptable types, most preferred first (templated). HyperPod puts each
        node on the first type with capacity, so the group may end up a mix.
    :param instance_count: the group's target count (templated).
    :param min_instance_count: ``MinInstanceCount``: the group becomes InService at this count (templated).
    :param execution_role: the nodes' IAM role; for an existing group, its own is kept when not given.
    :param group_config: other ``ClusterInstanceGroupSpecification`` fields (``LifeCycleConfig``...). An
        existing group keeps every field it has that ``group_config`` does not give (``TrainingPlanArn``,
        ``OverrideVpcConfig``...): a scale changes only the list and the count. A group created with one
        fixed ``InstanceType`` cannot take a list: the task fails before any update, naming the fix.
    :param cluster_config: other ``CreateCluster`` fields; given, a missing cluster is created, else a
        missing cluster fails the task.
    :param accept_after: seconds (or a timedelta) from the request after which ``min_instance_count``
        running nodes end the wait as success (0: as soon as the group is InService at its minimum);
        None: only the target does.
    :param max_pending: seconds (or a timedelta) after which a group short of its target (and of an accepted
        minimum) fails the task as a capacity shortfall; None: HyperPod's own three-hour rule. In
        ``NodeProvisioningMode: Continuous`` HyperPod retries without end and never rolls an unmet
        scale-up back, so None there means three hours (``CONTINUOUS_MAX_PENDING_SECONDS``), and the task
        log says so.
    :param rollback_on_failure: scale the group back to its count before the request when the wait fails
        or the task is killed (a new group goes back to 0 nodes). Never deletes a cluster or a group.
    :param deferrable: wait in the triggerer (no worker slot); False waits in the worker.
    :param poll_interval: seconds between DescribeCluster calls.
    :param min_defer_seconds: the trigger reports nothing sooner than this after the deferral
        (apache/airflow#72716); default: ``[sm_prefs] min_defer_seconds``, else 15.
    :param identity_tags: a cluster this task creates carries the DAG, task, run, map index, try and
        deployment (keys under ``sm-prefs:``) next to ``cluster_config``'s own ``Tags``; off with False or
        ``[sm_prefs] identity_tags = False``. A cluster that exists already is never re-tagged.
    :param aws_conn_id: Airflow AWS connection (its extra may set ``endpoint_url``).
    :param region_name: AWS region; kept when deferring.
    :param verify: TLS verification setting; kept when deferring.
    :param botocore_config: botocore config dict; kept when deferring.
    """

    template_fields: Sequence[str] = (
        "cluster_name",
        "group_name",
        "instance_types",
        "instance_count",
        "min_instance_count",
        "execution_role",
        "group_config",
        "cluster_config",
    )
    ui_color = "#b9d7f4"
    aws_hook_class = SageMakerHyperPodHook

    def __init__(
        self,
        *,
        cluster_name: str,
        group_name: str,
        instance_types: Sequence[str] | str,
        instance_count: int | str,
        min_instance_count: int | str | None = None,
        execution_role: str | None = None,
        group_config: Mapping[str, Any] | None = None,
        cluster_config: Mapping[str, Any] | None = None,
        accept_after: float | timedelta | None = None,
        max_pending: float | timedelta | None = None,
        rollback_on_failure: bool = True,
        identity_tags: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cluster_name = cluster_name
        self.group_name = group_name
        self.instance_types = instance_types
        self.instance_count = instance_count
        self.min_instance_count = min_instance_count
        self.execution_role = execution_role
        self.group_config = group_config
        self.cluster_config = cluster_config
        self.accept_after = accept_after
        self.max_pending = max_pending
        self.rollback_on_failure = rollback_on_failure
        self.identity_tags = identity_tags
        self._identity: dict[str, str] | None = None
        #: What CreateCluster sends: ``cluster_config`` with the try's identity tags, once execute checked it.
        self._create_config: Mapping[str, Any] | None = cluster_config
        # Literal arguments are checked at parse time (cheap: no service model read, no AWS call).
        self._accept_after = seconds_of(accept_after, "accept_after")
        self._max_pending = seconds_of(max_pending, "max_pending")
        if not _templated(instance_types, instance_count, min_instance_count, group_name):
            self._group(allowed_types=None)

    @cached_property
    def recorder(self) -> CapacityRecorder:
        """Leaves this try's capacity record: the group's outcome, or why the try failed."""
        return CapacityRecorder(lambda: GROUP_KIND, lambda: self.hook.conn_region_name, self.log)

    def _group(self, allowed_types: frozenset[str] | None) -> FlexibleGroup:
        types = self.instance_types
        if isinstance(types, str):
            types = [t.strip() for t in types.split(",") if t.strip()]
        return FlexibleGroup.parse(
            self.group_name,
            types,
            self.instance_count,
            self.min_instance_count,
            self.execution_role,
            self.group_config,
            allowed_types=allowed_types,
        )

    # -- execution ---------------------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        progress = TryProgress(group=request_fields(self.cluster_name, self.group_name))
        with self.recorder.failures(context, progress):
            try:
                group = self._group(allowed_types=cluster_instance_types())
                self._create_config = self._tagged_cluster_config(context)
            except errors.InvalidInstancePreferencesError as err:
                raise AirflowFailException(str(err)) from err  # the same arguments render the same problems
            progress.group = request_fields(self.cluster_name, group.group_name, group)
            self.log.info(
                "Flexible instance group %s/%s: %s", self.cluster_name, group.group_name, group.describe()
            )
            self._running_context = context  # on_kill runs without one
            decision = self._submit_once(context, group)
            if decision.reattached:
                self.log.info(
                    "The request of an earlier try took effect; waiting for it instead of asking again"
                )
            max_pending = self._pending_bound(group, decision)
            if self.deferrable:
                self.defer(
                    trigger=self._trigger(group, decision.request, max_pending, deferring=True),
                    method_name="execute_complete",
                )
            event = asyncio.run(self._trigger(group, decision.request, max_pending).wait()).as_payload()
        return self.execute_complete(context, event)

    def _pending_bound(self, group: FlexibleGroup, decision: Wait) -> float | None:
        """``max_pending``, or three hours in Continuous mode when the task gave none (said in the log)."""
        bound = pending_bound(self._max_pending, decision.continuous)
        if bound != self._max_pending:
            self.log.warning(
                "%s is in NodeProvisioningMode Continuous, where HyperPod never rolls an unmet scale-up "
                "back: without max_pending the wait for %s ends after %.0f s as a capacity shortfall; set "
                "max_pending to choose the bound",
                self.cluster_name,
                group.group_name,
                bound,
            )
        return bound

    def _tagged_cluster_config(self, context: Context) -> Mapping[str, Any] | None:
        """``cluster_config`` with this try's identity tags after its own (checked before any AWS call)."""
        if self.cluster_config is None:
            return None
        identity = identity_of(context) if identity_tags_enabled(self.identity_tags) else None
        tags = with_identity(self.cluster_config.get("Tags"), identity, field="cluster_config.Tags")
        config = {k: v for k, v in self.cluster_config.items() if k != "Tags"}
        if tags:
            config["Tags"] = tags
        self._identity = identity.as_dict() if identity is not None else None
        return config

    def _submit_once(self, context: Context, group: FlexibleGroup) -> Wait:
        """Reattach to an earlier try's request that took effect, or record a new one and make it."""
        store = _GroupStateStore(context)
        earlier = store.load()
        cluster = self.hook.describe_cluster(self.cluster_name)
        continuous = provisions_continuously(cluster if cluster is not None else self._create_config)
        if earlier is not None and earlier.is_for(self.cluster_name, group) and took_effect(earlier, cluster):
            if earlier.requested_at is None:  # killed before AWS answered: the cluster's clock stands in
                earlier = store.save(replace(earlier, requested_at=service_now(cluster or {}).isoformat()))
            return Wait(earlier, reattached=True, continuous=continuous)
        current = find_group(cluster, group.group_name) if cluster is not None else None
        if current is not None:
            check_flexible(self.cluster_name, current)  # before the request is recorded or made
        previous = int((current or {}).get("TargetCount") or (current or {}).get("CurrentCount") or 0)
        if earlier is not None and earlier.is_for(self.cluster_name, group):
            previous = earlier.previous_count  # an earlier try's request never reached AWS
        request = store.save(
            GroupRequest(
                cluster_name=self.cluster_name,
                group_name=group.group_name,
                target_count=group.instance_count,
                previous_count=previous,
                created_cluster=cluster is None,
                created_group=current is None,
                try_number=try_number_of(context),
            )
        )
        self._record_scale_up(context, request)
        if cluster is None:
            if self._create_config is None:
                raise errors.ClusterConfigError(
                    self.cluster_name,
                    group.group_name,
                    "NotFound",
                    "the cluster does not exist; create it first or give cluster_config to create it here",
                )
            answer = self.hook.create_cluster(self.cluster_name, group, self._create_config)
            if self._identity:
                context["ti"].xcom_push(key=IDENTITY_XCOM_KEY, value=self._identity)
        else:
            answer = self.hook.scale_group(self.cluster_name, group, cluster)
        self.log.info(
            "Asked for %d nodes of %s/%s (%d before)",
            group.instance_count,
            self.cluster_name,
            group.group_name,
            previous,
        )
        return Wait(
            store.save(replace(request, requested_at=service_now(answer).isoformat())),
            reattached=False,
            continuous=continuous,
        )

    def _record_scale_up(self, context: Context, request: GroupRequest) -> None:
        """The group's ledger entry, before the request: the reconciler scales the group back from it if this
        task ends without doing so itself (killed ``-9``, its run deleted). A failed write is logged only:
        the task's own rollback does not need it."""
        if request.target_count <= request.previous_count:
            return
        key = scale_up_key(str(self.hook.conn_region_name or ""), self.cluster_name, request.group_name)
        try:
            entry = ScaleUp.of(identity_of(context), request, rollback=bool(self.rollback_on_failure))
            set_variable(key, entry.as_stored(), SCALE_UP_DESCRIPTION)
        except Exception:
            self.log.warning(
                "Could not record the scale-up in the Airflow Variable %s: if this task cannot scale the group "
                "back itself, the reconciler will not either",
                key,
                exc_info=True,
            )

    def _trigger(
        self,
        group: FlexibleGroup,
        request: GroupRequest,
        max_pending: float | None,
        deferring: bool = False,
    ) -> HyperPodGroupTrigger:
        assert request.requested_at is not None
        spec = HyperPodGroupSpec(
            cluster_name=self.cluster_name,
            group=group.as_dict(),
            previous_count=request.previous_count,
            requested_at=request.requested_at,
            accept_after_seconds=self._accept_after,
            max_pending_seconds=max_pending,
            poll_interval=self.poll_interval,
            rollback=self.rollback_on_failure,
            aws=AwsSettings.of(self),
            **deferral(deferring, self.min_defer_seconds),
        )
        return HyperPodGroupTrigger.of(spec)

    # -- after the wait ----------------------------------------------------------------------------
    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Push the outcome, or roll back and fail with an error that names the cause."""
        progress = TryProgress(group=request_fields(self.cluster_name, self.group_name))
        with self.recorder.failures(context, progress):
            return self._complete(context, event or {}, progress)

    def _complete(self, context: Context, event: dict[str, Any], progress: TryProgress) -> dict[str, Any]:
        group = self._group(allowed_types=None)
        progress.group = request_fields(self.cluster_name, group.group_name, group)
        request = _GroupStateStore(context).load()
        ended = GroupEvent.from_payload(event)
        if not ended.succeeded:
            if ended.rollback is None:  # the trigger rolls back before its event; this wait did not
                self._rollback(group, request)
            elif ended.rollback is RollbackResult.REFUSED:
                self.log.error(
                    "%s/%s was not scaled back: it changed since this task's scale-up (the trigger's log says how)",
                    self.cluster_name,
                    group.group_name,
                )
            elif ended.rollback is RollbackResult.DONE:
                self.log.warning(
                    "Scaled %s/%s back to where this task found it", self.cluster_name, group.group_name
                )
            raise ended.error(self.cluster_name, group.group_name)
        requested_at = request.requested_at if request is not None else None
        outcome = group_outcome(
            self.cluster_name,
            group,
            ended.group or {},
            ended.phase,
            datetime.fromisoformat(requested_at) if requested_at else None,
            ended.now,
            self._prices(group),
        )
        self._check_nodes(outcome)
        self.log.info("Instance group ready: %s", outcome.summary())
        context["ti"].xcom_push(key=OUTCOME_KEY, value=outcome.as_dict())
        self.recorder.record(context, outcome)
        return outcome.as_dict()

    def _check_nodes(self, outcome: GroupOutcome) -> None:
        """ListClusterNodes agrees with DescribeCluster's per-type counts (logged if a node moved since)."""
        try:
            listed = self.hook.group_node_types(self.cluster_name, outcome.group_name)
        except Exception:  # the outcome stands on DescribeCluster; the node list is a cross-check
            self.log.debug("Could not list the group's nodes", exc_info=True)
            return
        described = {n["instance_type"]: n["count"] for n in outcome.nodes}
        if listed != described:
            self.log.warning("Nodes listed now %s differ from DescribeCluster's %s", listed, described)

    def _prices(self, group: FlexibleGroup) -> dict[str, float]:
        """On-Demand prices per node-hour where the connection's Pricing API answers; {} otherwise."""
        from airflow_provider_sm_prefs.domain.kinds import JobKind
        from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook

        prices: dict[str, float] = {}
        try:
            hook = SageMakerPreferenceHook(**AwsSettings.of(self).hook_kwargs())
            for instance_type in group.instance_types:
                price = hook.lookups.hourly_price(JobKind.TRAINING, instance_type)
                if price is not None:
                    prices[instance_type] = price
        except Exception:  # prices are a report, never a reason to fail the task
            self.log.debug("Could not read prices", exc_info=True)
        return prices

    def _rollback(self, group: FlexibleGroup, request: GroupRequest | None) -> None:
        """Scale the group back to its count before this task's request (never deletes anything)."""
        if not self.rollback_on_failure or request is None or not request.is_for(self.cluster_name, group):
            return
        name = f"{self.cluster_name}/{group.group_name}"
        plan = plan_rollback(
            self.hook.describe_cluster(self.cluster_name),
            group.group_name,
            request.target_count,
            request.previous_count,
        )
        if plan.result is RollbackResult.REFUSED:
            self.log.error("Not rolling back %s: %s", name, plan.reason)
        if plan.specification is None:
            return
        try:
            self.hook.update_groups(self.cluster_name, group, [plan.specification])
        except errors.ClusterConfigError as err:
            if err.status != "ConflictException":
                raise
            self.log.error("%s: %s", name, busy_rollback_message(request.previous_count))
            return
        self.log.warning("Scaled %s back to %d nodes (rollback_on_failure)", name, request.previous_count)

    def on_kill(self) -> None:
        """The task was killed while waiting in the worker: roll the scale-up back."""
        context = getattr(self, "_running_context", None)
        if context is None:
            return
        try:
            self._rollback(self._group(allowed_types=None), _GroupStateStore(context).load())
        except Exception:
            self.log.exception("Could not roll back %s/%s", self.cluster_name, self.group_name)


class _GroupStateStore:
    """The task instance's :class:`GroupRequest`, beside its job state in the same store."""

    def __init__(self, context: Mapping[str, Any]) -> None:
        self.backend = JobStateStore.of(context).backend

    def load(self) -> GroupRequest | None:
        return None if self.backend is None else GroupRequest.from_stored(self.backend.get(GROUP_STATE_KEY))

    def save(self, request: GroupRequest) -> GroupRequest:
        if self.backend is not None:
            self.backend.set(GROUP_STATE_KEY, request.as_stored())
        return request


def _templated(*values: Any) -> bool:
    return any(isinstance(v, str) and "{{" in v for v in values) or any(
        isinstance(v, (list, tuple)) and any(isinstance(x, str) and "{{" in x for x in v) for v in values
    )
