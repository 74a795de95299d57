"""The plan of a soak week: which night has which capacity, which API faults and when, which kill.

Apart from the driver (:mod:`harness.soak`) because the plan is pure: seeded, with no deployment, it is
what the soak's accounting tests check, and what a report's reader needs to reproduce a week.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

NIGHTLY = "sm_prefs_nightly_retrain"
FLEET = "e2e_fleet"
DAGS = (NIGHTLY, FLEET)
G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"

#: Nights of ``make soak``.
WEEK = 7
#: Emulated seconds the clock moves per step.
STEP = 900
#: Real seconds every unfinished task must have been deferred, unchanged, before the clock moves.
SETTLE = 5.0
#: Emulated job lifecycle: a job needs capacity at the end of Starting and trains JOB_RUNTIME seconds.
PHASES = {"starting": 60, "downloading": 30, "uploading": 30, "stopping": 10}
JOB_RUNTIME = 1800
#: The fleet's pending budget on the capacity-timeout night: shorter than any job frees its instance.
TIGHT_PENDING = 1800
RELAXED_PENDING = 7200
KINDS = ("plenty", "first-choice-scarce", "late-window", "capacity-timeout")


@dataclass
class NightPlan:
    """What one night does: its capacity, its API faults and when, and whether a component is killed."""

    index: int
    kind: str
    throttle_rate: float
    error_rate: float
    drop_rate: float
    #: Faults switch on at this step (-1: as the runs are triggered) and off at ``faults_off_step``.
    faults_on_step: int
    faults_off_step: int
    kill_triggerer_step: int | None = None
    kill_scheduler_step: int | None = None
    down_seconds: float = 3.0
    first_choice_free: int = 0


def plan_week(nights: int, fleet: int, seed: int) -> list[NightPlan]:
    """The seeded plan: one capacity-timeout night, one triggerer kill and one scheduler kill."""
    rng = random.Random(seed)
    timeout_night = rng.randrange(nights)
    kinds = [
        rng.choice(("plenty", "first-choice-scarce", "first-choice-scarce", "late-window"))
        for _ in range(nights)
    ]
    kinds[timeout_night] = "capacity-timeout"
    if nights >= 3 and "first-choice-scarce" not in kinds:
        kinds[(timeout_night + 1) % nights] = "first-choice-scarce"
    triggerer_night, scheduler_night = rng.randrange(nights), rng.randrange(nights)
    plans = []
    for i in range(nights):
        on = rng.randint(-1, 1)
        plans.append(
            NightPlan(
                index=i + 1,
                kind=kinds[i],
                throttle_rate=round(rng.uniform(0.05, 0.3), 3),
                error_rate=round(rng.uniform(0.01, 0.06), 3),
                drop_rate=round(rng.uniform(0.02, 0.06), 3),
                faults_on_step=on,
                faults_off_step=on + rng.randint(1, 3),
                kill_triggerer_step=rng.randint(0, 1) if i == triggerer_night else None,
                kill_scheduler_step=rng.randint(0, 1) if i == scheduler_night else None,
                down_seconds=round(rng.uniform(2.0, 8.0), 1),
                first_choice_free=rng.randint(0, max(1, fleet // 4)),
            )
        )
    return plans


def night_scenario(plan: NightPlan, fleet: int) -> tuple[dict[str, Any], int]:
    """The emulator scenario of a night and the fleet's ``max_pending`` for it.

    The nightly example asks for G6×2, G5×4, P4D×2; the fleet for G6×1, G5×1. P4D always has 2 free, so
    the example finds capacity every night; the fleet's capacity is what the night is about.
    """
    plenty = fleet + 8
    capacity: dict[str, list[dict[str, Any]]]
    pending = RELAXED_PENDING
    if plan.kind == "plenty":
        capacity = {G6: [{"from": 0, "free": plenty}], G5: [{"from": 0, "free": plenty}]}
    elif plan.kind == "first-choice-scarce":
        capacity = {G6: [{"from": 0, "free": plan.first_choice_free}], G5: [{"from": 0, "free": plenty}]}
    elif plan.kind == "late-window":
        # Nothing frees for the first 2 emulated hours, then everything does: every task waits.
        opens = 1800
        capacity = {
            G6: [{"from": 0, "to": opens, "free": 0}, {"from": opens, "free": plenty}],
            G5: [{"from": 0, "to": opens, "free": 0}, {"from": opens, "free": plenty}],
        }
    else:
        # At most 60 % of the fleet fits on G5, fewer when the example's G5×4 gets there first (else the
        # example falls back to P4D): the rest waits, and no job frees an instance before the pending
        # deadline (Starting + Downloading + runtime > TIGHT_PENDING). Whatever the order of submission,
        # at least 40 % of the fleet times out.
        pending = TIGHT_PENDING
        capacity = {G6: [{"from": 0, "free": 0}], G5: [{"from": 0, "free": math.ceil(0.6 * fleet)}]}
    capacity[P4D] = [{"from": 0, "free": 2}]
    scenario = {
        "name": f"soak-night-{plan.index}-{plan.kind}",
        "time_scale": 0,
        "job_runtime_seconds": JOB_RUNTIME,
        "phase_seconds": dict(PHASES),
        "pending_timeout_outcome": "stopped",
        "processing_when_no_capacity": "wait",
        "capacity": capacity,
    }
    return scenario, pending
