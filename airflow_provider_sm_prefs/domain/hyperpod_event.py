"""The HyperPod group wait's one event: what a look at the cluster saw, and how the wait ended. Pure.

The trigger (or the worker's inline wait) makes one :class:`GroupEvent` per look at the cluster, ends the
wait with the first that decides, and sends it as :meth:`GroupEvent.as_payload`; the operator and the
sensor read it back with :meth:`GroupEvent.from_payload`. Every phase is a :class:`~.hyperpod.GroupPhase`
member and a rollback's end a :class:`~.hyperpod_rollback.RollbackResult` member: nobody branches on a
string or on whether a key exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_provider_sm_prefs.domain.exceptions import (
    ClusterFailedError,
    ClusterGroupError,
    GroupCapacityShortfallError,
    GroupRolledBackError,
)
from airflow_provider_sm_prefs.domain.hyperpod import GroupPhase
from airflow_provider_sm_prefs.domain.hyperpod_rollback import RollbackResult

__all__ = ["SUCCESS_PHASES", "GroupEvent"]

#: Phases the task takes as success; every other phase ends the wait with an error.
SUCCESS_PHASES = frozenset({GroupPhase.REACHED_TARGET, GroupPhase.REACHED_MINIMUM})
_ERRORS: Mapping[GroupPhase, type[ClusterGroupError]] = {
    GroupPhase.ROLLED_BACK: GroupRolledBackError,
    GroupPhase.SHORTFALL: GroupCapacityShortfallError,
}


@dataclass(frozen=True)
class GroupEvent:
    """One look at the group the task waits for, and (once it decides) the wait's end.

    :param phase: what the look says.
    :param group: the group's ``ClusterInstanceGroupDetails`` as seen (None: no such group).
    :param cluster_status: the cluster's status (None: no such cluster).
    :param elapsed: seconds since the request, on the service's clock.
    :param now: the service's time of the look.
    :param reason: why a failed wait failed, in words.
    :param rollback: how the scale-up's rollback ended, when the trigger made one before reporting.
    """

    phase: GroupPhase
    group: Mapping[str, Any] | None
    cluster_status: str | None
    elapsed: float
    now: datetime | None
    reason: str | None = None
    rollback: RollbackResult | None = None

    @property
    def succeeded(self) -> bool:
        return self.phase in SUCCESS_PHASES

    def as_payload(self) -> dict[str, Any]:
        """The trigger event's JSON payload (``status`` is success or error, as every event of ours)."""
        payload: dict[str, Any] = {
            "status": "success" if self.succeeded else "error",
            "phase": self.phase.value,
            "group": dict(self.group) if self.group is not None else None,
            "cluster_status": self.cluster_status,
            "elapsed": round(self.elapsed, 3),
            "now": self.now.isoformat() if self.now is not None else None,
            "reason": self.reason,
        }
        if self.rollback is not None:
            payload["rollback"] = self.rollback.value
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any] | None) -> GroupEvent:
        """The event of a payload (any release's); a payload that says nothing readable is a failure."""
        payload = payload or {}
        phase = payload.get("phase")
        known = phase in GroupPhase._value2member_map_
        event_phase = GroupPhase(phase) if known else GroupPhase.FAILED
        if event_phase in SUCCESS_PHASES and payload.get("status") != "success":
            event_phase = GroupPhase.FAILED
        rollback = payload.get("rollback")
        now = payload.get("now")
        return cls(
            phase=event_phase,
            group=payload.get("group") if isinstance(payload.get("group"), Mapping) else None,
            cluster_status=payload.get("cluster_status"),
            elapsed=float(payload.get("elapsed") or 0.0),
            now=datetime.fromisoformat(now) if isinstance(now, str) and now else None,
            reason=payload.get("reason")
            if known
            else (payload.get("reason") or "the wait ended without an event"),
            rollback=RollbackResult(rollback) if rollback in RollbackResult._value2member_map_ else None,
        )

    def error(self, cluster_name: str, group_name: str) -> ClusterGroupError:
        """The error a failed wait stands for: a rollback, a capacity shortfall, or a failure."""
        status = (self.group or {}).get("Status") or self.cluster_status
        return _ERRORS.get(self.phase, ClusterFailedError)(cluster_name, group_name, status, self.reason)
