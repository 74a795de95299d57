"""The accounting of a soak night: what counts as a duplicate job, an unattended job, an API fault.

Apart from the driver (:mod:`harness.soak`) because these are the soak's verdicts: pure functions of
the emulator's job ledger and Airflow's task states, tested without a deployment
(tests/test_soak_accounting.py), and the rules the report's footnotes state.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.rest import ACTIVE_TI_STATES
from harness.soak_plan import FLEET, NIGHTLY

#: What a failed task's log shows when the injected capacity shortage failed it.
CAPACITY_TIMEOUT_MARK = "CapacityTimeoutError"
#: The API faults the offline SageMaker injects, as its stats count them.
FAULT_KINDS = ("throttled", "errors", "dropped")
_LINEAGE = re.compile(r"^(?P<base>.+?)(?:-r(?P<submission>\d+))?$")


@dataclass
class NightResult:
    """What one night counted (a row of the report): runs and task states, jobs, the verdicts, faults."""

    index: int
    kind: str
    runs: dict[str, str] = field(default_factory=dict)
    task_states: dict[str, dict[str, int]] = field(default_factory=dict)
    jobs_created: int = 0
    create_calls: int = 0
    fell_back: int = 0
    duplicates: list[str] = field(default_factory=list)
    unattended: list[str] = field(default_factory=list)
    capacity_failures: list[str] = field(default_factory=list)
    foreign_failures: list[str] = field(default_factory=list)
    faults: dict[str, Any] = field(default_factory=dict)
    kills: list[str] = field(default_factory=list)
    steps: int = 0
    emulated_hours: float = 0.0
    seconds: float = 0.0
    timed_out: bool = False


def lineage(name: str) -> tuple[str, int]:
    """A job name's lineage (base name) and submission number: ``-rN`` marks the N-th, none the first."""
    match = _LINEAGE.match(name)
    assert match is not None  # the pattern matches every non-empty name
    return match["base"], int(match["submission"] or 1)


def duplicates_of(jobs: Sequence[Mapping[str, Any]], owned: Callable[[str], bool]) -> list[str]:
    """Jobs that are a second job of one task's lineage while the earlier had not failed or stopped.

    A lineage is a base job name; ``-rN`` marks the N-th submission of it (see operators/submission.py).
    A job ``owned`` rejects (no task of the night owns its lineage) counts as a duplicate as well.
    """
    lineages: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    found = []
    for job in jobs:
        base, submission = lineage(job["name"])
        if not owned(base):
            found.append(f"{job['name']} (no task of the night owns it)")
            continue
        lineages.setdefault(base, []).append((submission, job))
    for members in lineages.values():
        members.sort(key=lambda m: (m[1].get("created_at") or 0, m[0]))
        for (_, earlier), (_, later) in itertools.pairwise(members):
            ended_ok = earlier["status"] in ("Failed", "Stopped") and (
                earlier.get("end_time") is not None
                and later.get("created_at") is not None
                and earlier["end_time"] <= later["created_at"]
            )
            if not ended_ok:
                found.append(f"{later['name']} (while {earlier['name']} was {earlier['status']})")
    return found


def fault_counts(stats: Mapping[str, Any]) -> dict[str, Any]:
    """The API faults the emulator injected, by kind (:data:`FAULT_KINDS`), of all SageMaker calls."""
    counts: dict[str, Any] = {kind: sum(stats.get(kind, {}).values()) for kind in FAULT_KINDS}
    counts["calls"] = sum(stats.get("operations", {}).values())
    counts["summary"] = (
        f"{counts['throttled']} throttled + {counts['errors']} 5xx + {counts['dropped']} dropped "
        f"of {counts['calls']} calls"
    )
    return counts


def owners_of(jobs: Sequence[Mapping[str, Any]], prefix: str) -> dict[str, tuple[str, str, int]]:
    """Task of each job lineage: the fleet's are named ``<prefix>-NNN``, the others are the example's."""
    owners: dict[str, tuple[str, str, int]] = {}
    for job in jobs:
        base, _ = lineage(job["name"])
        index = base[len(prefix) + 1 :]
        if base.startswith(prefix + "-") and index.isdigit():
            owners[base] = (FLEET, "job", int(index))
        elif not base.startswith("soak"):
            owners[base] = (NIGHTLY, "train", -1)
    return owners


def unattended_of(
    jobs: Sequence[Mapping[str, Any]],
    owners: Mapping[str, tuple[str, str, int]],
    ti_state: Mapping[tuple[str, str, int], str | None],
) -> list[str]:
    """Jobs still InProgress whose task is not running, deferred, queued or waiting for a retry."""
    found = []
    for job in jobs:
        if job["status"] != "InProgress":
            continue
        owner = owners.get(lineage(job["name"])[0])
        state = ti_state.get(owner) if owner is not None else None
        if state not in ACTIVE_TI_STATES:
            found.append(f"{job['name']} (task is {state})")
    return found
