"""Percentiles of the benchmark's figures, by the capacity page's method.

A module of its own because both the run figures (:mod:`benchmarks.metrics`) and the call model
(:mod:`benchmarks.call_model`) summarise with it, and the method must be one: a published p95 and the
capacity page's p95 of the same samples agree figure for figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated ``q``-th percentile (0..100), None for no values.

    The capacity page's :func:`airflow_provider_sm_prefs.plugin.stats.percentile`, figure for figure (a
    test holds them equal). Not imported from there: that package imports Airflow, which this driver
    process keeps out (its own logging, no Airflow home). ``statistics.quantiles(method="inclusive")``
    is the same method but rounds differently in the last bit, so published figures could move.
    """
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: Sequence[float]) -> dict[str, float | int | None]:
    """Count, p50, p95, p99, max and mean of ``values`` (None for each figure of no values)."""
    return {
        "count": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
        "mean": (sum(values) / len(values)) if values else None,
    }
