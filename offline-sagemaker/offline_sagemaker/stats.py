"""Call counters of the offline SageMaker (``GET /_emulator/stats``). A leaf; the service locks around it."""

from __future__ import annotations

from typing import Any

__all__ = ["Stats"]


class Stats:
    """Every call received, the faulted ones by kind, the rejected ones by error code, calls per job,
    calls per access key id (the ``Credential=`` of a request's SigV4 ``Authorization`` header), and the
    calls whose answer is held back by a response latency (they took effect; their client does not know
    yet)."""

    def __init__(self) -> None:
        self._operations: dict[str, int] = {}
        self._faults: dict[str, dict[str, int]] = {"throttled": {}, "errors": {}, "dropped": {}}
        self._rejected: dict[str, dict[str, int]] = {}
        self._per_job: dict[str, dict[str, int]] = {}
        self._per_key: dict[str, dict[str, int]] = {}
        self._in_flight: dict[str, int] = {}

    def called(self, operation: str, job_name: str | None, access_key_id: str | None = None) -> None:
        """A call of ``operation`` arrived (about job ``job_name``, if it names one; signed with
        ``access_key_id``, if it was signed)."""
        _bump(self._operations, operation)
        if job_name is not None:
            _bump(self._per_job.setdefault(job_name, {}), operation)
        if access_key_id is not None:
            _bump(self._per_key.setdefault(access_key_id, {}), operation)

    def faulted(self, operation: str, counter: str) -> None:
        """A call was faulted; ``counter`` is ``throttled``, ``errors`` or ``dropped``."""
        _bump(self._faults[counter], operation)

    def rejected(self, operation: str, code: str) -> None:
        """The service itself answered a call with error ``code``."""
        _bump(self._rejected.setdefault(operation, {}), code)

    def answer_held(self, operation: str) -> None:
        """A call of ``operation`` took effect; its answer is held back."""
        _bump(self._in_flight, operation)

    def answer_released(self, operation: str) -> None:
        """The held answer of a call of ``operation`` goes out."""
        left = self._in_flight.get(operation, 0) - 1
        if left > 0:
            self._in_flight[operation] = left
        else:
            self._in_flight.pop(operation, None)

    def snapshot(self) -> dict[str, Any]:
        """The counters as JSON-ready dicts (copies)."""
        return {
            "operations": dict(self._operations),
            "throttled": dict(self._faults["throttled"]),
            "errors": dict(self._faults["errors"]),
            "dropped": dict(self._faults["dropped"]),
            "rejected": {op: dict(codes) for op, codes in self._rejected.items()},
            "jobs": {name: dict(ops) for name, ops in self._per_job.items()},
            "access_keys": {key: dict(ops) for key, ops in self._per_key.items()},
            "in_flight": dict(self._in_flight),
        }


def _bump(counter: dict[str, int], key: str) -> None:
    counter[key] = counter.get(key, 0) + 1
