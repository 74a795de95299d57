"""Capacity records for the page's pure tests: one job of a nightly training task per day."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any


def record_fields(n: int, day: datetime, preferences: list[dict[str, Any]]) -> dict[str, Any]:
    """What every record of job ``n`` holds besides its outcome: run ``run-n``, recorded ``n`` days after ``day``."""
    return {
        "dag_id": "nightly",
        "task_id": "train",
        "run_id": f"run-{n}",
        "map_index": -1,
        "try_number": 1,
        "job_kind": "training",
        "job_name": f"job-{n}",
        "job_arn": None,
        "region": "us-east-1",
        "preferences": preferences,
        "recorded_at": (day + timedelta(days=n)).isoformat(),
    }


#: A HyperPod instance group's list, most preferred first.
GROUP_TYPES = ["ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4d.24xlarge"]


def group_record_fields(n: int, day: datetime, counts: dict[str, int], target: int = 8) -> dict[str, Any]:
    """The record of try ``n`` of a nightly HyperPod group ``nightly/gpu-workers`` (run ``group-run-n``) that
    reached ``counts`` nodes per type (none: a shortfall), priced at USD 55/h (p5), 60/h (p5e), 38/h (p4d)."""
    prices = {"ml.p5.48xlarge": 55.0, "ml.p5e.48xlarge": 60.0, "ml.p4d.24xlarge": 38.0}
    nodes = [
        {
            "instance_type": t,
            "rank": GROUP_TYPES.index(t) + 1,
            "count": counts[t],
            "hourly_cost": prices[t] * counts[t],
        }
        for t in GROUP_TYPES
        if counts.get(t)
    ]
    current = sum(counts.values())
    fields: dict[str, Any] = {
        "dag_id": "nightly",
        "task_id": "scale",
        "run_id": f"group-run-{n}",
        "map_index": -1,
        "try_number": 1,
        "job_kind": "hyperpod-group",
        "region": "us-east-1",
        "preferences": list(GROUP_TYPES),
        "recorded_at": (day + timedelta(days=n)).isoformat(),
        "cluster_name": "nightly",
        "group_name": "gpu-workers",
        "target_count": target,
        "min_count": 4,
    }
    if not current:
        return {**fields, "failure_kind": "shortfall", "reason": "0 of 8 nodes", "job_status": "InService"}
    return {
        **fields,
        "phase": "reached-target" if current >= target else "reached-minimum",
        "current_count": current,
        "nodes": nodes,
        "fell_back": any(node["rank"] != 1 for node in nodes),
        "seconds_to_in_service": 600.0 * (n + 1),
        "accelerators_total": 8 * current,
        "hourly_cost": sum(node["hourly_cost"] for node in nodes),
        "first_choice_hourly_cost": 55.0 * current,
    }
