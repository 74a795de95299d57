"""The chaos run's plan: its fleet of mapped tasks, the offline SageMaker's world, and the kill schedule.

Apart from the driver (:mod:`harness.chaos`) because the plan is pure: seeded and with no deployment, it
is what tests/test_chaos_accounting.py checks, and what a report's reader needs to run the same schedule
again (same seed: the same fleet, components, gaps and pauses).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_sm_prefs.hooks.sagemaker import derive_job_name
from harness.redis import REDIS
from offline_sagemaker.jobs import training_config

DAG_ID = "e2e_chaos"
TASK_ID = "job"
G6, G5, P4D, P5 = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge"
#: Emulated seconds per real second.
TIME_SCALE = 60
#: Emulated job lifecycle (seconds): at 60x a job trains 30 real seconds.
PHASES = {"starting": 60, "downloading": 30, "uploading": 30, "stopping": 30}
JOB_RUNTIME = 1800
#: Instances free all the time: fewer than the fleet, so jobs wait Pending for those that finish, and the
#: one g6 keeps most ``window`` tasks in stage 1 until stage 2 opens.
CAPACITY = {G6: 1, G5: 4, P4D: 2, P5: 0}
#: When stage 2 of a ``window`` task opens (emulated seconds after stage 1's creation).
WINDOW = 900
#: SageMaker's minimum MaxPendingTimeInSeconds: the ``timeout`` tasks' budget.
TIGHT_PENDING = 1800
RELAXED_PENDING = 6 * 3600
#: Create answers this late after creating the job: the instant a worker dies without the answer.
CREATE_LATENCY_MS = 3000
KINDS = ("fallback", "window", "timeout")
#: Components killed at random; the broker and the database are restarted once each besides.
RANDOM_TARGETS = ("worker", "worker-2", "scheduler", "scheduler-2", "triggerer", "triggerer-2", "api-server")
ONCE_TARGETS = (REDIS, "postgres", "dag-processor", "worker-mid-create")


def plan_fleet(fleet: int, seed: int, prefix: str | None) -> list[dict[str, Any]]:
    """The mapped tasks' arguments: 60 % ``fallback``, 20 % ``window``, 20 % ``timeout`` (at least one
    of each), shuffled by ``seed``. Each carries its kind in a tag. Job names ``<prefix>-NNN``; with
    ``prefix`` None the config gives none and the operator derives each (unique per deployment)."""
    rng = random.Random(f"fleet:{seed}")
    windows = timeouts = max(1, fleet // 5)
    kinds = ["window"] * windows + ["timeout"] * timeouts
    kinds += ["fallback"] * (fleet - len(kinds))
    rng.shuffle(kinds)
    prefs = {
        "fallback": [
            {"instance_type": G6, "instance_count": 1},
            {"instance_type": G5, "instance_count": 1},
            {"instance_type": P4D, "instance_count": 1},
        ],
        "window": [
            {"instance_type": G6, "instance_count": 1},
            {"instance_type": G5, "instance_count": 1, "accept_after": WINDOW},
        ],
        "timeout": [{"instance_type": P5, "instance_count": 1}],
    }
    specs = []
    for i, kind in enumerate(kinds):
        config = training_config(f"{prefix}-{i:03d}", max_runtime_seconds=86400, tags={"chaos-kind": kind})
        if prefix is None:
            del config["TrainingJobName"]
        specs.append(
            {
                "config": config,
                "instance_preferences": prefs[kind],
                "max_pending": TIGHT_PENDING if kind == "timeout" else RELAXED_PENDING,
            }
        )
    return specs


def fleet_owners(
    specs: Sequence[Mapping[str, Any]], run_id: str, deployment_id: str | None
) -> dict[str, int]:
    """Each task's base job name and its map index: the config's name, else the one the operator derives
    for the task instance in the deployment ``deployment_id`` (:func:`derive_job_name`)."""
    owners = {}
    for index, spec in enumerate(specs):
        given = spec["config"].get("TrainingJobName")
        owners[str(given or derive_job_name(DAG_ID, TASK_ID, run_id, index, deployment_id))] = index
    return owners


def scenario() -> dict[str, Any]:
    """The offline SageMaker's world for the run."""
    return {
        "name": "chaos",
        "time_scale": TIME_SCALE,
        "job_runtime_seconds": JOB_RUNTIME,
        "phase_seconds": dict(PHASES),
        "pending_timeout_outcome": "stopped",
        "capacity": {t: [{"from": 0, "free": n}] for t, n in CAPACITY.items()},
    }


def kind_of(spec: Mapping[str, Any]) -> str:
    """A task's kind (:data:`KINDS`), from the tag :func:`plan_fleet` gave its config."""
    tags = {t["Key"]: t["Value"] for t in spec["config"].get("Tags", [])}
    return str(tags.get("chaos-kind", "fallback"))


@dataclass
class PlannedKill:
    """One kill of the schedule: ``gap`` real seconds after the previous restart, ``target`` down for
    ``pause`` seconds."""

    target: str
    gap: float
    pause: float


def plan_kills(kills: int, seed: int) -> list[PlannedKill]:
    """``kills`` kills (at least one per :data:`ONCE_TARGETS` entry and per kind of component): the
    once-only targets at seeded places in the first half (a Create is in flight early, when tasks submit),
    the rest drawn from :data:`RANDOM_TARGETS`."""
    rng = random.Random(f"kills:{seed}")
    kills = max(kills, len(ONCE_TARGETS) + 4)
    targets = [rng.choice(RANDOM_TARGETS) for _ in range(kills - len(ONCE_TARGETS))]
    for kind in ("worker", "scheduler", "triggerer", "api-server"):  # every kind at least once
        if not any(t.partition("-")[0] == kind.partition("-")[0] for t in targets):
            targets[rng.randrange(len(targets))] = kind
    half = max(1, kills // 2)
    for once in ONCE_TARGETS:
        targets.insert(0 if once == "worker-mid-create" else rng.randrange(1, half), once)
    return [
        PlannedKill(target=t, gap=round(rng.uniform(2.0, 9.0), 1), pause=round(rng.uniform(1.0, 6.0), 1))
        for t in targets
    ]
