"""Whether a running job the provider created has lost its owner: the reconciler's decisions. Pure.

A job carries the identity of the try that created it (:mod:`.identity`). The reconciler reads those
tags and the owning task instance's state now, and decides one of :class:`Decision`:

* ``STOP``: nothing will look after the job again: the task instance ended (``failed``, ``skipped``,
  ``removed``, ``upstream_failed``, or ``success`` without having handed the job off), or its DAG run or
  DAG is gone;
* ``KEEP``: the task may still own it (``running``, ``deferred``, ``queued``, ``scheduled``,
  ``up_for_retry``, ``up_for_reschedule``, ``restarting``, no state), a ``success`` that handed the running
  job off (``wait_for_completion=False``), or anything the reconciler is unsure of;
* ``REPORT_ONLY``: not the reconciler's to judge: no identity tags, another deployment's tags,
  incomplete or unreadable tags, a shortened run id that matches no run or more than one, a job tagged
  with the id an earlier release derived for this deployment (shared by every deployment with the same
  URLs: stopped only when the operator opts such jobs in).

A job its task handed off (``wait_for_completion=False``) carries the :data:`~.identity.HAND_OFF_KEY` tag
from its Create: a succeeded task's job with it is kept, whatever the task's XComs say.

It never stops a job without the provider's tags, a job of another deployment, or a job whose task might
still own it; every decision carries the reason a person reads in the report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.domain.identity import HAND_OFF_KEY, TAG_PREFIX, IdentityKey, tag_value

__all__ = [
    "GONE_STATES",
    "LIVE_STATES",
    "Decision",
    "Gone",
    "JobOwner",
    "OwnerState",
    "SeenJob",
    "Verdict",
    "decide",
    "identify",
    "looks_shortened",
    "report_row",
    "report_table",
]

#: Task instance states after which nothing of the task looks after its job again.
GONE_STATES = frozenset({"success", "failed", "skipped", "removed", "upstream_failed"})
#: States in which the task (this try or a later one, which reattaches) may still own the job.
LIVE_STATES = frozenset(
    {"running", "deferred", "queued", "scheduled", "up_for_retry", "up_for_reschedule", "restarting", "none"}
)
_SHORTENED = re.compile(r"\.\.[0-9a-f]{10}\Z")


class Decision(str, Enum):
    """What the reconciler does with one job."""

    STOP = "stop"
    KEEP = "keep"
    REPORT_ONLY = "report-only"


@dataclass(frozen=True)
class SeenJob:
    """A running job as listed: its name, kind (``training``/``processing``), status and tags.

    :param tags: ``{key: value}``; None when they could not be read (``tags_error`` says why).
    """

    name: str
    kind: str
    status: str
    tags: Mapping[str, str] | None
    tags_error: str = ""


@dataclass(frozen=True)
class JobOwner:
    """The task instance a job's identity tags name (values as tagged; ``run_id`` may be shortened)."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    try_number: int | None
    deployment: str
    hand_off: bool = False

    def describe(self) -> str:
        mapped = f"[{self.map_index}]" if self.map_index >= 0 else ""
        return f"{self.dag_id}.{self.task_id}{mapped} run {self.run_id} try {self.try_number}"


@dataclass(frozen=True)
class OwnerState:
    """The owning task instance now.

    :param state: its state (``"none"`` for none).
    :param try_number: its current try, when the source knows it.
    :param handed_off: for ``success``: True when the task ended with its job still running on purpose
        (its ``return_value`` names this job with a non-final ``job_status``: ``wait_for_completion=False``),
        False when it did not, None when unknown.
    """

    state: str
    try_number: int | None = None
    handed_off: bool | None = None


@dataclass(frozen=True)
class Gone:
    """The owning task instance does not exist: ``detail`` says what is missing (DAG, run or task)."""

    detail: str


@dataclass(frozen=True)
class Verdict:
    """A decision and the reason a person reads."""

    decision: Decision
    reason: str


def looks_shortened(value: str) -> bool:
    """Whether a tag value is :func:`~.identity.tag_value`'s shortened form (``<head>..<10 hex>``)."""
    return bool(_SHORTENED.search(value))


def identify(
    job: SeenJob, deployment_id: str, legacy_ids: Sequence[str] = (), adopt_legacy: bool = False
) -> JobOwner | Verdict:
    """The job's owner from its identity tags, or the REPORT_ONLY verdict when it is not ours to judge.

    :param legacy_ids: the ids earlier releases derived for this deployment from its URLs; every
        deployment with the same URLs shares them, so a job tagged with one is reported, not judged,
        unless ``adopt_legacy``.
    """
    if job.tags is None:
        return Verdict(Decision.REPORT_ONLY, f"tags unreadable: {job.tags_error or 'unknown error'}")
    ours = {k: v for k, v in job.tags.items() if k.startswith(TAG_PREFIX)}
    if not any(k in IdentityKey._value2member_map_ for k in ours):
        return Verdict(Decision.REPORT_ONLY, "no sm-prefs identity tags: not created by the provider")
    deployment = ours.get(IdentityKey.DEPLOYMENT.value, "")
    if deployment != tag_value(deployment_id):
        if deployment in {tag_value(legacy) for legacy in legacy_ids}:
            if not adopt_legacy:
                return Verdict(
                    Decision.REPORT_ONLY,
                    f"tagged with {deployment!r}, the id an earlier release derived for this deployment's URL; "
                    f"every deployment with the same URL shares it, so it may be another's: opt in with "
                    f"adopt_legacy_ids (--adopt-legacy-ids) once no other deployment uses that URL",
                )
        else:
            return Verdict(
                Decision.REPORT_ONLY,
                f"tagged by deployment {deployment!r}, not this one ({deployment_id!r})",
            )
    missing = [
        key.value
        for key in (IdentityKey.DAG_ID, IdentityKey.TASK_ID, IdentityKey.RUN_ID, IdentityKey.MAP_INDEX)
        if not ours.get(key.value)
    ]
    if missing:
        return Verdict(Decision.REPORT_ONLY, f"identity tags incomplete: {', '.join(missing)} missing")
    try:
        map_index = int(ours[IdentityKey.MAP_INDEX.value])
    except ValueError:
        return Verdict(
            Decision.REPORT_ONLY, f"identity tags unreadable: map-index {ours[IdentityKey.MAP_INDEX.value]!r}"
        )
    try_tag = ours.get(IdentityKey.TRY_NUMBER.value, "")
    return JobOwner(
        dag_id=ours[IdentityKey.DAG_ID.value],
        task_id=ours[IdentityKey.TASK_ID.value],
        run_id=ours[IdentityKey.RUN_ID.value],
        map_index=map_index,
        try_number=int(try_tag) if try_tag.isdigit() else None,
        deployment=deployment,
        hand_off=ours.get(HAND_OFF_KEY) == "true",
    )


def decide(owner: JobOwner, state: OwnerState | Gone) -> Verdict:
    """STOP or KEEP a job of this deployment from its owner's state now (:class:`Gone`: no such owner)."""
    if isinstance(state, Gone):
        return Verdict(Decision.STOP, f"owner gone: {state.detail}")
    tries = _tries(owner, state)
    if state.state in LIVE_STATES:
        later = (
            " (a later try reattaches to its task's running job)"
            if state.try_number is not None
            and owner.try_number is not None
            and state.try_number > owner.try_number
            else ""
        )
        return Verdict(Decision.KEEP, f"task is {state.state}{tries}: it may still own the job{later}")
    if state.state == "success":
        if owner.hand_off:
            return Verdict(
                Decision.KEEP,
                f"task succeeded{tries} and handed the running job off (tagged so at Create: "
                f"wait_for_completion=False)",
            )
        if state.handed_off:
            return Verdict(
                Decision.KEEP,
                f"task succeeded{tries} and handed the running job off (wait_for_completion=False)",
            )
        if state.handed_off is None:
            return Verdict(Decision.KEEP, f"task succeeded{tries}; whether it handed the job off is unknown")
        return Verdict(Decision.STOP, f"task is success{tries} without having handed the job off")
    if state.state in GONE_STATES:
        return Verdict(Decision.STOP, f"task is {state.state}{tries}: nothing will look after the job")
    return Verdict(Decision.KEEP, f"task is in an unknown state {state.state!r}{tries}: kept")


def _tries(owner: JobOwner, state: OwnerState) -> str:
    if state.try_number is None:
        return ""
    return f" at try {state.try_number}, job of try {owner.try_number}"


def report_row(
    name: str,
    kind: str,
    status: str,
    owner: JobOwner | None,
    verdict: Verdict,
    action: str,
    run_id: str | None = None,
) -> dict[str, Any]:
    """One row of a pass's report: a job (or a HyperPod group), its owner, the decision and what was done.

    :param run_id: the run the owner's tag was resolved to (default: the owner's own).
    """
    return {
        "job": name,
        "kind": kind,
        "status": status,
        "dag_id": owner.dag_id if owner else None,
        "task_id": owner.task_id if owner else None,
        "run_id": run_id or (owner.run_id if owner else None),
        "map_index": owner.map_index if owner else None,
        "try_number": owner.try_number if owner else None,
        "owner": owner.describe() if owner else "",
        "decision": verdict.decision.value,
        "reason": verdict.reason,
        "action": action,
    }


def report_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The report as a plain-text table: job, kind, status, dag/task/run/try, decision, action, reason."""
    columns = ("job", "kind", "status", "owner", "decision", "action", "reason")
    cells = [[str(row.get(c) if row.get(c) is not None else "") for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    widths[-1] = 0  # the reason is last: never padded
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)
