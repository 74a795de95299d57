"""What a HyperPod flexible instance group ended up with: nodes per type in list order, the mix's
accelerators and its cost next to the all-first-choice cost. Pure domain code: no Airflow, no boto.

HyperPod reports the mix in ``ClusterInstanceGroupDetails.InstanceTypeDetails`` (per type ``CurrentCount``);
:func:`group_outcome` turns it into the :class:`GroupOutcome` handed to the next tasks. The capacity record
carries the outcome's fields under the same names, as it does a job's (:mod:`.schema`), with
``job_kind`` :data:`~.kinds.GROUP_KIND` (importable from here too, as it always was).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from airflow_provider_sm_prefs.domain.catalog import UnknownInstanceTypeError, lookup
from airflow_provider_sm_prefs.domain.hyperpod import MAX_GROUP_TYPES, FlexibleGroup, GroupPhase
from airflow_provider_sm_prefs.domain.kinds import GROUP_KIND as GROUP_KIND
from airflow_provider_sm_prefs.domain.schema import OUTCOME_ONLY

_TIMES = "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True, slots=True)
class TypeCount:
    """Nodes of one type in a group: its place in the list and its hardware in total."""

    instance_type: str
    rank: int | None
    count: int
    accelerator_model: str | None = None
    accelerators: int = 0
    accelerator_memory_gib: float = 0.0
    hourly_cost: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def type_counts(
    group: FlexibleGroup,
    details: Sequence[Mapping[str, Any]],
    prices: Mapping[str, float] | None = None,
) -> list[TypeCount]:
    """Nodes per type from ``InstanceTypeDetails``, in list order (types not in the list last).

    Types with no node are left out; prices are per node-hour (None where unknown).
    """
    counts: dict[str, int] = {}
    for detail in details:
        instance_type = str(detail.get("InstanceType"))
        counts[instance_type] = counts.get(instance_type, 0) + int(detail.get("CurrentCount") or 0)
    ordered = sorted(
        (t for t, n in counts.items() if n > 0),
        key=lambda t: (group.rank_of(t) or MAX_GROUP_TYPES + 1, t),
    )
    result = []
    for instance_type in ordered:
        count = counts[instance_type]
        model, per_node, memory = _hardware(instance_type)
        price = (prices or {}).get(instance_type)
        result.append(
            TypeCount(
                instance_type=instance_type,
                rank=group.rank_of(instance_type),
                count=count,
                accelerator_model=model,
                accelerators=per_node * count,
                accelerator_memory_gib=memory * per_node * count,
                hourly_cost=None if price is None else round(price * count, 4),
            )
        )
    return result


def _hardware(instance_type: str) -> tuple[str | None, int, float]:
    try:
        spec = lookup(instance_type)
    except UnknownInstanceTypeError:
        return None, 0, 0.0
    return spec.accelerator_model, spec.accelerators, float(spec.accelerator_memory_gib)


def node_mix(nodes: Sequence[Mapping[str, Any]]) -> str:
    """``2 × ml.p5.48xlarge + 4 × ml.p4d.24xlarge`` from nodes per type (``TypeCount.as_dict()``, as the
    outcome and the record carry them); ``no nodes`` for none. Unreadable items are left out."""
    parts = [
        f"{node['count']} {_TIMES} {node['instance_type']}"
        for node in nodes
        if isinstance(node, Mapping)
        and isinstance(node.get("instance_type"), str)
        and isinstance(node.get("count"), int)
        and not isinstance(node.get("count"), bool)
    ]
    return " + ".join(parts) if parts else "no nodes"


def describe_mix(counts: Sequence[TypeCount]) -> str:
    """``2 × ml.p5.48xlarge + 4 × ml.p4d.24xlarge = 16 × H100 + 32 × A100`` (accelerators by model)."""
    if not counts:
        return "no nodes"
    nodes = node_mix([c.as_dict() for c in counts])
    by_model: dict[str, int] = {}
    for c in counts:
        if c.accelerator_model and c.accelerators:
            by_model[c.accelerator_model] = by_model.get(c.accelerator_model, 0) + c.accelerators
    if not by_model:
        return f"{nodes}, no accelerators"
    return f"{nodes} = " + " + ".join(f"{n} {_TIMES} {model}" for model, n in by_model.items())


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """What a flexible group ended up with, for XCom and the capacity record.

    The capacity record carries every field not ``OUTCOME_ONLY`` under the same name (:mod:`.schema`);
    ``mix`` is not carried: the record's ``nodes`` say the same (:func:`node_mix`).

    :param cluster_name: the cluster.
    :param group_name: the instance group.
    :param phase: how the wait ended (:class:`GroupPhase` value).
    :param target_count: the count the task asked for.
    :param current_count: nodes running when the wait ended.
    :param min_count: ``MinInstanceCount`` as HyperPod reports it.
    :param nodes: nodes per type in list order (:class:`TypeCount` as dicts).
    :param preferences: the ordered list the group was asked for.
    :param fell_back: whether any node runs on a type other than the first choice.
    :param seconds_to_in_service: from the request to the end of the wait.
    :param accelerators_total: accelerators over the whole mix.
    :param accelerator_memory_gib_total: accelerator memory over the whole mix.
    :param mix: :func:`describe_mix` of the nodes.
    :param hourly_cost: the mix's cost per hour (None if a type has no price).
    :param first_choice_hourly_cost: the cost per hour had every node been the first choice.
    :param job_kind: :data:`GROUP_KIND`, as the capacity record names the kind of what it records.
    """

    cluster_name: str
    group_name: str
    phase: str
    target_count: int
    current_count: int
    min_count: int | None
    nodes: list[dict[str, Any]]
    preferences: list[str]
    fell_back: bool
    seconds_to_in_service: float | None
    accelerators_total: int
    accelerator_memory_gib_total: float
    mix: str = field(metadata=OUTCOME_ONLY)
    hourly_cost: float | None = None
    first_choice_hourly_cost: float | None = None
    job_kind: str = GROUP_KIND

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupOutcome:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})

    def summary(self) -> str:
        waited = "" if self.seconds_to_in_service is None else f" after {self.seconds_to_in_service:.0f} s"
        return (
            f"{self.cluster_name}/{self.group_name}: {self.current_count} of {self.target_count} nodes "
            f"({self.phase}){waited}: {self.mix}"
        )


def group_outcome(
    cluster_name: str,
    group: FlexibleGroup,
    details: Mapping[str, Any],
    phase: GroupPhase,
    requested_at: datetime | None,
    now: datetime | None,
    prices: Mapping[str, float] | None = None,
) -> GroupOutcome:
    """The outcome from the group's ``ClusterInstanceGroupDetails`` at the end of the wait."""
    counts = type_counts(group, details.get("InstanceTypeDetails") or (), prices)
    if not counts and details.get("InstanceType") and int(details.get("CurrentCount") or 0):
        # A group of one fixed type reports no InstanceTypeDetails.
        counts = type_counts(
            group,
            [{"InstanceType": details["InstanceType"], "CurrentCount": details["CurrentCount"]}],
            prices,
        )
    current = sum(c.count for c in counts)
    costs = [c.hourly_cost for c in counts]
    first_price = (prices or {}).get(group.first_choice or "")
    seconds = None
    if requested_at is not None and now is not None:
        seconds = round(max(0.0, (now - requested_at).total_seconds()), 3)
    minimum = details.get("MinCount")
    return GroupOutcome(
        cluster_name=cluster_name,
        group_name=group.group_name,
        phase=phase.value,
        target_count=group.instance_count,
        current_count=current,
        min_count=None if minimum is None else int(minimum),
        nodes=[c.as_dict() for c in counts],
        preferences=list(group.instance_types),
        fell_back=any(c.instance_type != group.first_choice for c in counts),
        seconds_to_in_service=seconds,
        accelerators_total=sum(c.accelerators for c in counts),
        accelerator_memory_gib_total=sum(c.accelerator_memory_gib for c in counts),
        mix=describe_mix(counts),
        hourly_cost=None if not counts or None in costs else round(sum(c for c in costs if c is not None), 4),
        first_choice_hourly_cost=None if first_price is None else round(first_price * current, 4),
    )


def request_fields(cluster_name: str, group_name: str, group: FlexibleGroup | None = None) -> dict[str, Any]:
    """What a failed try's capacity record knows of the group it asked for, by the record's field names.

    :param group: the checked group, once known (its list, target and minimum count); else the names only.
    """
    known: dict[str, Any] = {"cluster_name": cluster_name, "group_name": group_name}
    if group is not None:
        known |= {
            "group_name": group.group_name,
            "preferences": list(group.instance_types),
            "target_count": group.instance_count,
            "min_count": group.min_instance_count,
        }
    return known
