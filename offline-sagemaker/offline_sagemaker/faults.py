"""Fault injection for the emulated operations: connection drops, throttling, 5xx, latency.

Per call, in this order: ``drop_rate`` closes the connection; the per-operation rate limit (a token
bucket) and ``throttle_rate`` throttle; ``error_rate`` answers 500 or 503. Draws come from one seeded
random generator, so a scenario with a ``seed`` faults the same calls every run. ``latency_ms`` delays
every call before it runs; ``response_latency_ms`` delays the answer of one operation after it ran.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from dataclasses import replace
from enum import Enum
from typing import Any

from offline_sagemaker.exceptions import (
    ApiError,
    InternalFailure,
    ServiceUnavailable,
    ThrottlingError,
)
from offline_sagemaker.operations import OPERATIONS
from offline_sagemaker.scenario_types import Faults, Scenario

__all__ = ["Fault", "FaultInjector", "TokenBucket"]


class Fault(Enum):
    """One injected fault."""

    DROP = "dropped"
    THROTTLE = "throttled"
    ERROR_500 = "error500"
    ERROR_503 = "error503"

    @property
    def counter(self) -> str:
        """The statistics counter that counts it (``dropped``, ``throttled``, ``errors``)."""
        return "errors" if self in (Fault.ERROR_500, Fault.ERROR_503) else self.value

    def error(self) -> ApiError:
        """The error answered for it; a drop answers nothing."""
        if self is Fault.THROTTLE:
            return ThrottlingError()
        if self is Fault.ERROR_500:
            return InternalFailure()
        if self is Fault.ERROR_503:
            return ServiceUnavailable()
        raise ValueError("a dropped connection has no error answer")


class TokenBucket:
    """Allows ``rate`` calls per real second with a burst of one second's worth."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.tokens = self.capacity
        self.stamp = time.monotonic()

    def take(self) -> bool:
        """Spend a token if one is left."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class FaultInjector:
    """The faults and rate limits in force, starting with the scenario's. Not thread-safe (the service locks).

    :param scenario: the scenario whose ``faults``, ``rate_limits`` and ``seed`` apply.
    """

    def __init__(self, scenario: Scenario) -> None:
        self.faults: Faults = scenario.faults
        self._set_rate_limits(dict(scenario.rate_limits))
        self._rng = random.Random(scenario.seed)

    def _set_rate_limits(self, rate_limits: dict[str, float]) -> None:
        self.rate_limits = rate_limits
        self._buckets = {op: TokenBucket(rate) for op, rate in self.rate_limits.items()}

    @property
    def latency_seconds(self) -> float:
        """Added to every SageMaker response."""
        return self.faults.latency_ms / 1000.0

    def response_latency_seconds(self, operation: str) -> float:
        """Held between ``operation`` taking effect and its answer leaving."""
        return self.faults.response_latency_ms.get(operation, 0.0) / 1000.0

    def draw(self, operation: str) -> Fault | None:
        """The fault for one call of ``operation``, if any."""
        faults = self.faults
        rng = self._rng
        if faults.drop_rate and rng.random() < faults.drop_rate:
            return Fault.DROP
        bucket = self._buckets.get(operation)
        if bucket is not None and not bucket.take():
            return Fault.THROTTLE
        if faults.throttle_rate and rng.random() < faults.throttle_rate:
            return Fault.THROTTLE
        if faults.error_rate and rng.random() < faults.error_rate:
            return Fault.ERROR_500 if rng.random() < 0.5 else Fault.ERROR_503
        return None

    def update(
        self,
        changes: Mapping[str, float | None],
        rate_limits: Mapping[str, float] | None,
        response_latency_ms: Mapping[str, float] | None = None,
    ) -> None:
        """Change fault rates (None keeps a rate) and, unless None, replace the rate limits and the
        response latencies.

        :raises ValueError: naming the first invalid setting; nothing changes then.
        """
        _validate_rates(changes)
        if rate_limits is not None:
            _validate_rate_limits(rate_limits)
        if response_latency_ms is not None:
            _validate_response_latency(response_latency_ms)
        replaced: dict[str, Any] = {k: float(v) for k, v in changes.items() if v is not None}
        if response_latency_ms is not None:
            replaced["response_latency_ms"] = {op: float(ms) for op, ms in response_latency_ms.items()}
        self.faults = replace(self.faults, **replaced)
        if rate_limits is not None:
            self._set_rate_limits({op: float(rate) for op, rate in rate_limits.items()})

    def settings(self) -> dict[str, Any]:
        """The faults and rate limits in force."""
        return {**self.faults.as_dict(), "rate_limits": dict(self.rate_limits)}


def _validate_rates(changes: Mapping[str, float | None]) -> None:
    for key, value in changes.items():
        if value is None:
            continue
        limit = None if key == "latency_ms" else 1.0
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or value < 0
            or (limit and value > limit)
        ):
            raise ValueError(f"{key}: must be a number {'>= 0' if limit is None else 'between 0 and 1'}")


def _validate_rate_limits(rate_limits: Mapping[str, float]) -> None:
    for op, rate in rate_limits.items():
        if op not in OPERATIONS:
            raise ValueError(f"rate_limits.{op}: not an emulated operation ({', '.join(sorted(OPERATIONS))})")
        if isinstance(rate, bool) or not isinstance(rate, int | float) or rate <= 0:
            raise ValueError(f"rate_limits.{op}: must be a positive number of calls per second")


def _validate_response_latency(response_latency_ms: Mapping[str, float]) -> None:
    if not isinstance(response_latency_ms, Mapping):
        raise ValueError("response_latency_ms: must be a mapping of operation to milliseconds")
    for op, ms in response_latency_ms.items():
        if op not in OPERATIONS:
            raise ValueError(
                f"response_latency_ms.{op}: not an emulated operation ({', '.join(sorted(OPERATIONS))})"
            )
        if isinstance(ms, bool) or not isinstance(ms, int | float) or not math.isfinite(ms) or ms < 0:
            raise ValueError(f"response_latency_ms.{op}: must be a number of milliseconds >= 0")
