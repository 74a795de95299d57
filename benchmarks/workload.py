"""The benchmark's workload: N training jobs that wait a random time for one scarce instance type.

Every job is submitted with the same three-entry preference list. The first and third entries never
have capacity; the second (``ml.p4d.24xlarge``) gains one instance at each of N random moments, and
the emulator serves waiting jobs first-in first-out, so the k-th job created gets capacity at the k-th
step. Jobs end one emulated second after they start (``job_runtime_seconds: 1``, no download or
upload phase): the stock trigger only reports terminal states, so this puts the moment each variant
can see "capacity acquired" within milliseconds of the selection. Each step is paired with a
step down just before that job ends, so an instance freed by a finished job never starts a second job.

Other jobs of the account (a history of ended jobs, a stream of short new ones) are
:mod:`benchmarks.background`'s; a workload only says how many.

All times in a scenario are emulated seconds since the scenario was loaded.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList, build_request

#: The ordered list every benchmark job is submitted with; only the second entry ever gets capacity.
PREFERENCES: list[dict[str, Any]] = [
    {"instance_type": "ml.p5.48xlarge", "instance_count": 1},
    {"instance_type": "ml.p4d.24xlarge", "instance_count": 1},
    {"instance_type": "ml.g5.48xlarge", "instance_count": 1},
]
SCARCE_TYPE = "ml.p4d.24xlarge"
NEVER_TYPES = ("ml.p5.48xlarge", "ml.g5.48xlarge")
JOB_RUNTIME_SECONDS = 1.0
#: Step times are multiples of this (emulated seconds). The emulator adds them to its start epoch
#: (about 1.8e9, where one float ulp is 2**-22 s) and subtracts it again; on a 2**-10 grid both are
#: exact, so a job sees the step at exactly its boundary. Off the grid, rounding put some selections
#: a hair before the window opened and they were made at the next boundary instead, late.
_GRID = 2.0**-10
#: The step down comes this long (emulated seconds, on the grid) before the job that took the step ends.
_STEP_DOWN_EARLY = 8 * _GRID
#: SageMaker's upper bound for MaxPendingTimeInSeconds (28 days): no job expires during a run.
MAX_PENDING_SECONDS = 2_419_200
#: The access key id the harness signs its own calls with; the trigger process signs with
#: ``processes.FAKE_KEY``, and the emulator counts calls per access key id.
HARNESS_KEY = "bench-harness"

CONFIG: dict[str, Any] = {
    "AlgorithmSpecification": {
        "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311",
        "TrainingInputMode": "File",
    },
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
    "OutputDataConfig": {"S3OutputPath": "s3://sm-prefs-bench/models/"},
    "ResourceConfig": {"VolumeSizeInGB": 50},
    "StoppingCondition": {"MaxRuntimeInSeconds": 86_400},
}


@dataclass(frozen=True)
class Workload:
    """One run's jobs and capacity schedule.

    :param name: scenario name (also the job-name prefix).
    :param n_jobs: how many jobs are submitted.
    :param time_scale: emulated seconds per real second.
    :param first_step: emulated seconds (since load) of the earliest capacity step.
    :param span: emulated seconds over which the N steps are spread.
    :param seed: seed of the step times; the same seed gives every variant the same schedule.
    :param rate_limits: ``{operation: calls per second}`` the emulator enforces (empty = none).
    :param history_jobs: ended jobs of others created before ours (see :mod:`benchmarks.background`).
    :param churn_rate: short jobs of others created per emulated hour while ours wait.
    """

    name: str
    n_jobs: int
    time_scale: float
    first_step: float
    span: float
    seed: int
    rate_limits: dict[str, float]
    history_jobs: int = 0
    churn_rate: float = 0.0

    @property
    def job_names(self) -> list[str]:
        """Job names in submission order."""
        return [f"{self.name}-{k:05d}" for k in range(self.n_jobs)]

    def step_times(self) -> list[float]:
        """Emulated seconds (since load) of the N capacity steps, ascending."""
        rng = random.Random(self.seed)
        return sorted(
            round((self.first_step + rng.uniform(0.0, self.span)) / _GRID) * _GRID for _ in range(self.n_jobs)
        )

    @property
    def last_step(self) -> float:
        """Emulated second of the last capacity step."""
        steps = self.step_times()
        return steps[-1] if steps else self.first_step

    def capacity_windows(self) -> list[dict[str, Any]]:
        """The scarce type's pool as contiguous ``{from, to, free}`` windows."""
        changes: list[tuple[float, int]] = []
        for step in self.step_times():
            changes.append((step, +1))
            changes.append((step + JOB_RUNTIME_SECONDS - _STEP_DOWN_EARLY, -1))
        changes.sort()
        windows: list[dict[str, Any]] = []
        start, free = 0.0, 0
        for when, delta in changes:
            if when > start:
                if windows and windows[-1]["free"] == free:
                    windows[-1]["to"] = when
                else:
                    windows.append({"from": start, "to": when, "free": free})
                start = when
            free += delta
        windows.append({"from": start, "free": max(free, 0)})
        return windows

    def scenario(self) -> dict[str, Any]:
        """The emulator scenario (a mapping in the scenario-file form).

        Background jobs need nothing here: their type is not listed under ``capacity``, so unlimited.
        """
        description = f"{self.n_jobs} jobs wait for {SCARCE_TYPE}, which frees one instance at a time"
        if self.history_jobs or self.churn_rate:
            description += f"; other jobs: {self.history_jobs} ended before, {self.churn_rate:g} new per hour"
        return {
            "name": self.name,
            "description": description,
            "time_scale": self.time_scale,
            "job_runtime_seconds": JOB_RUNTIME_SECONDS,
            "pending_timeout_outcome": "stopped",
            "phase_seconds": {"starting": 60, "downloading": 0, "uploading": 0, "stopping": 30},
            "capacity": {
                SCARCE_TYPE: self.capacity_windows(),
                **{t: [{"from": 0, "free": 0}] for t in NEVER_TYPES},
            },
            "rate_limits": dict(self.rate_limits),
            "seed": self.seed,
        }

    def write_scenario(self, path: Path) -> Path:
        """Write the scenario as JSON (which the emulator reads as YAML) and return the path."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.scenario(), indent=1), encoding="utf-8")
        return path


def preference_list() -> list[dict[str, Any]]:
    """The list in the form the operator hands to the trigger (``InstancePreferenceList.as_list()``)."""
    return InstancePreferenceList(PREFERENCES, "training").as_list()


def create_request(job_name: str) -> dict[str, Any]:
    """The CreateTrainingJob request the operator would send for ``job_name``."""
    request, _ = build_request(
        "training", {**CONFIG, "TrainingJobName": job_name}, PREFERENCES, MAX_PENDING_SECONDS
    )
    return request


_SESSIONS: dict[str, Any] = {}
_SESSION_LOCK = threading.Lock()


def harness_client(emulator: Any, service_name: str = "sagemaker") -> Any:
    """A boto3 client on the emulator's endpoint signed with :data:`HARNESS_KEY`.

    One session per region (building one loads every service model); sessions are not thread-safe.
    """
    import boto3

    with _SESSION_LOCK:
        session = _SESSIONS.get(emulator.region)
        if session is None:
            session = _SESSIONS[emulator.region] = boto3.session.Session(
                aws_access_key_id=HARNESS_KEY, aws_secret_access_key=HARNESS_KEY, region_name=emulator.region
            )
        return session.client(service_name, endpoint_url=emulator.endpoint_url)


def submit_jobs(emulator: Any, names: Sequence[str], threads: int = 8) -> int:
    """Create every job (boto3, a few threads, in name order as far as threads allow), signed with
    :data:`HARNESS_KEY`.

    :param emulator: an ``OfflineSageMaker``/``RemoteSageMaker`` handle.
    :returns: how many jobs were created.
    """
    local = threading.local()

    def create(name: str) -> bool:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = harness_client(emulator)
        client.create_training_job(**create_request(name))
        return True

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        return sum(1 for ok in pool.map(create, names) if ok)


def selection_time(job: Mapping[str, Any]) -> float | None:
    """Emulated epoch second at which the emulator selected an entry for ``job`` (its admin view).

    Read from the timeline: the first entry after Pending whose secondary status is past it.
    """
    seen_pending = False
    for entry in job.get("timeline") or []:
        status = entry.get("secondary_status")
        if status == "Pending":
            seen_pending = True
            continue
        if seen_pending and status not in (None, "Starting"):
            return float(entry["emulated_time"])
    selected = job.get("selected_at")
    return float(selected) if selected is not None else None


def pending_seconds(job: Mapping[str, Any]) -> float | None:
    """Emulated seconds between creation and selection."""
    selected = selection_time(job)
    if selected is None:
        return None
    return max(0.0, selected - float(job["created_at"]))
