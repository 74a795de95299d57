"""Capacity insights of HyperPod instance groups (pure): per DAG/task and group, how many tries reached their
count, the fallback shares, the time to InService, the failures and the node mix over time (the
``cluster_groups`` section of :func:`~airflow_provider_sm_prefs.plugin.insights.insights`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_sm_prefs.plugin.figures import MIN_RECORDS, as_utc, figure, number, share, wait_figure
from airflow_provider_sm_prefs.plugin.stats import Entry, nodes_of

__all__ = ["cluster_groups"]


@dataclass
class _Group:
    """The tries of one HyperPod instance group by one DAG/task."""

    tries: int = 0
    reached: int = 0
    fell_back: int = 0
    nodes: int = 0
    fallback_nodes: int = 0
    waits: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    #: Every type seen, with its best rank in the lists as written.
    types: dict[str, int | None] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)

    def add(self, entry: Entry) -> None:
        record = entry.record
        nodes = nodes_of(record)
        self.tries += 1
        if record.failure_kind:
            self.failures[record.failure_kind] += 1
        elif nodes:
            self.reached += 1
            self.fell_back += record.fell_back is True
            self.nodes += sum(n["count"] for n in nodes)
            self.fallback_nodes += sum(n["count"] for n in nodes if n["rank"] != 1)
            if number(record.seconds_to_in_service) is not None:
                self.waits.append(float(record.seconds_to_in_service or 0))
        for node in nodes:
            self.types.setdefault(node["instance_type"], node["rank"])
        self.runs.append(
            {
                "run_id": record.run_id,
                "run_after": as_utc(entry.run_after).isoformat(),
                "try_number": record.try_number,
                "phase": record.phase,
                "failure_kind": record.failure_kind,
                "fell_back": record.fell_back,
                "target_count": record.target_count,
                "current_count": record.current_count,
                "counts": {n["instance_type"]: n["count"] for n in nodes},
            }
        )

    def as_dict(self) -> dict[str, Any]:
        ordered = sorted(self.types, key=lambda t: (self.types[t] is None, self.types[t] or 0, t))
        return {
            "tries": self.tries,
            "reached": self.reached,
            "fell_back": self.fell_back,
            "fallback_share": share(self.fell_back, self.reached),
            "nodes": self.nodes,
            "fallback_nodes": self.fallback_nodes,
            "fallback_node_share": share(self.fallback_nodes, self.nodes)
            if self.reached >= MIN_RECORDS
            else None,
            "to_in_service": wait_figure(self.waits),
            "failures": dict(sorted(self.failures.items())),
            "instance_types": ordered,
            "mix_over_time": sorted(self.runs, key=lambda run: (run["run_after"], run["try_number"])),
            **figure(self.reached),
        }


def cluster_groups(tries: Sequence[Entry]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str, str], _Group] = defaultdict(_Group)
    for entry in tries:
        record = entry.record
        groups[(record.dag_id, record.task_id, record.cluster_name or "", record.group_name or "")].add(entry)
    return [
        {"dag_id": k[0], "task_id": k[1], "cluster_name": k[2], "group_name": k[3], **groups[k].as_dict()}
        for k in sorted(groups)
    ]
