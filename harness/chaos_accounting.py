"""The chaos run's verdicts: what counts as a duplicate job, a record that differs from its job, a
foreign stop, and whether a run passed.

Apart from the driver (:mod:`harness.chaos`) because these are pure functions of the offline
SageMaker's ledger, Airflow's task states and XCom records, and the reconcilers' ledgers: tested without
a deployment (tests/test_chaos_accounting.py), and the rules the report states.

The chaos run's job names are not the soak's (:mod:`harness.soak_accounting`): a base name may be the
operator's derived one and a task may have ``-sN`` acceptance-window stages besides ``-rN``
resubmissions, and a duplicate is any earlier job of the task not ended, so the lineage and the
duplicate rule are its own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

#: A task's jobs: its base name (``<prefix>-NNN`` given in the config, or the operator's derived
#: ``<dag>-<task>-<map index>-<10 hex digits>``), then ``-rN`` resubmissions and ``-sN`` stages.
_LINEAGE = re.compile(
    r"^(?P<base>.+?-(?:\d{3}|[0-9a-f]{10}))(?:-r(?P<submission>\d+))?(?:-s(?P<stage>\d+))?$"
)
#: The call a foreign stop is counted in (the offline SageMaker counts it per job and per access key id).
STOP_OPERATION = "StopTrainingJob"
#: A job's statuses once it has ended.
TERMINAL_JOB = ("Completed", "Failed", "Stopped")


def lineage(name: str) -> str | None:
    """The task's base job name of one of its jobs (``-rN`` resubmissions, ``-sN`` stages stripped)."""
    match = _LINEAGE.match(name)
    return match["base"] if match else None


def ended_at(job: Mapping[str, Any]) -> float | None:
    """When a job reached its terminal status (emulated epoch), None while it has not."""
    if job["status"] not in TERMINAL_JOB:
        return None
    return float(job["last_modified"])


def duplicates_of(jobs: Sequence[Mapping[str, Any]], owners: Mapping[str, int]) -> list[str]:
    """Jobs created while another job of the same task had not ended, and jobs no task owns."""
    by_task: dict[str, list[Mapping[str, Any]]] = {}
    found = []
    for job in jobs:
        base = lineage(job["name"])
        if base is None or base not in owners:
            found.append(f"{job['name']} (no task owns it)")
            continue
        by_task.setdefault(base, []).append(job)
    for members in by_task.values():
        members.sort(key=lambda j: j["created_at"])
        for i, later in enumerate(members[1:], start=1):
            for earlier in members[:i]:
                end = ended_at(earlier)
                if end is None or end > later["created_at"] or earlier["status"] == "Completed":
                    found.append(f"{later['name']} (while {earlier['name']} was {earlier['status']})")
    return found


def record_mismatches(record: Mapping[str, Any], describe: Mapping[str, Any]) -> list[str]:
    """Where a task's XCom record and its job's DescribeTrainingJob disagree."""
    resources = describe.get("ResourceConfig") or {}
    prefs = resources.get("InstancePreferences") or []
    selected = resources.get("SelectedInstanceType")
    ranks = [i + 1 for i, p in enumerate(prefs) if p.get("InstanceType") == selected]
    expected = {
        "job_name": describe["TrainingJobName"],
        "job_arn": describe["TrainingJobArn"],
        "selected_instance_type": selected,
        "selected_instance_count": resources.get("SelectedInstanceCount"),
        "preference_rank": ranks[0] if ranks else None,
        "job_status": describe["TrainingJobStatus"],
    }
    return [
        f"{key}: XCom {record.get(key)!r}, Describe {value!r}"
        for key, value in expected.items()
        if record.get(key) != value
    ]


def passed(result: Mapping[str, Any]) -> bool:
    """A deployment's verdict: no duplicate, no job left running, no foreign failure, no record mismatch,
    at least one record checked, no wrong stop by its reconciler."""
    return (
        not any(result[key] for key in ("duplicates", "unattended", "foreign_failures", "record_mismatches"))
        and result["records_checked"] > 0
        and not result.get("reconciler", {}).get("wrong_stops")
    )


def foreign_stops(
    owner_of: Mapping[str, str | None],
    stopped_by: Mapping[str, Sequence[str]],
    stop_calls: Mapping[str, int],
    sent: Mapping[str, int],
    total: int,
) -> dict[str, Any]:
    """Stops of a job by a deployment other than the one that owns it, from what each side recorded.

    :param owner_of: each job's owner: the deployment id its ``sm-prefs:deployment`` tag names (None:
        untagged, or no such job).
    :param stopped_by: per deployment id, the jobs its reconciler stopped (its ledger).
    :param stop_calls: per job, the ``StopTrainingJob`` calls the offline SageMaker received.
    :param sent: per deployment id, the ``StopTrainingJob`` calls signed with its access key id.
    :param total: every ``StopTrainingJob`` call the offline SageMaker received.

    Found: a job a reconciler stopped whose tag names another deployment (exactly attributed); a stop of a
    job no deployment owns; calls reaching a deployment's jobs beyond those its own key sent (a lower bound
    of the other side's stops of its jobs: the ledger counts calls per job and per key, not per pair); and
    calls signed by no deployment's key. ``count`` adds them up.
    """
    items: list[str] = []
    count = 0
    for deployment, jobs in stopped_by.items():
        for job in jobs:
            if owner_of.get(job) != deployment:
                items.append(f"{job} (of {owner_of.get(job)}) stopped by the reconciler of {deployment}")
                count += 1
    received: Counter[str] = Counter()
    for job, calls in sorted(stop_calls.items()):
        owner = owner_of.get(job)
        if owner is not None and owner in sent:
            received[owner] += calls
        elif calls:
            items.append(f"{job} (owned by no deployment: tag {owner}) received {calls} {STOP_OPERATION}")
            count += calls
    for deployment, own in sent.items():
        extra = received[deployment] - own
        if extra > 0:
            items.append(
                f"{extra} {STOP_OPERATION} calls reached the jobs of {deployment} beyond the {own} it sent"
            )
            count += extra
    unsigned = total - sum(sent.values())
    if unsigned > 0:
        items.append(f"{unsigned} {STOP_OPERATION} calls signed by no deployment's access key")
        count += unsigned
    return {
        "count": count,
        "items": items,
        "sent": dict(sent),
        "received": {d: received[d] for d in sent},
        "total_calls": total,
    }
