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
