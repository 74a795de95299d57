"""SageMaker job statuses and the phases this provider derives from a Describe response (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.preferences import JobKind


class JobStatus(str, Enum):
    """TrainingJobStatus / ProcessingJobStatus (processing has no Deleting)."""

    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    DELETING = "Deleting"

    def is_terminal(self) -> bool:
        return self in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.STOPPED, JobStatus.DELETING)


#: Secondary statuses during which no instance has been provisioned for the job yet.
WAITING_SECONDARY = frozenset({"Starting", "Pending"})


class Phase(str, Enum):
    """Where a job stands, as far as capacity is concerned."""

    WAITING = "waiting"  # no entry selected yet (Starting/Pending, or processing without Selected*)
    RUNNING = "running"  # an entry was selected; the job is running
    STOPPING = "stopping"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"

    def is_terminal(self) -> bool:
        return self in (Phase.COMPLETED, Phase.FAILED, Phase.STOPPED)


def cluster_of(kind: JobKind, describe: Mapping[str, Any]) -> Mapping[str, Any]:
    """ResourceConfig (training) or ProcessingResources.ClusterConfig (processing) of a Describe response."""
    if kind is JobKind.TRAINING:
        return describe.get("ResourceConfig") or {}
    return (describe.get("ProcessingResources") or {}).get("ClusterConfig") or {}


def job_status(kind: JobKind, describe: Mapping[str, Any]) -> JobStatus:
    key = "TrainingJobStatus" if kind is JobKind.TRAINING else "ProcessingJobStatus"
    return JobStatus(describe[key])


def selected(kind: JobKind, describe: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """``(SelectedInstanceType, SelectedInstanceCount)``; both None while no entry is selected."""
    cluster = cluster_of(kind, describe)
    return cluster.get("SelectedInstanceType"), cluster.get("SelectedInstanceCount")


def phase_of(kind: JobKind, describe: Mapping[str, Any]) -> Phase:
    """Derive the capacity phase from a Describe response.

    Training leaves WAITING when SageMaker reports a selected entry or a secondary status past
    Starting/Pending. Processing has no secondary status: the only documented sign of a selection
    is ``SelectedInstanceType``.
    """
    status = job_status(kind, describe)
    if status is JobStatus.COMPLETED:
        return Phase.COMPLETED
    if status is JobStatus.FAILED:
        return Phase.FAILED
    if status in (JobStatus.STOPPED, JobStatus.DELETING):
        return Phase.STOPPED
    if status is JobStatus.STOPPING:
        return Phase.STOPPING
    instance_type, _ = selected(kind, describe)
    if instance_type:
        return Phase.RUNNING
    if kind is JobKind.TRAINING:
        secondary = describe.get("SecondaryStatus")
        if secondary and secondary not in WAITING_SECONDARY:
            return Phase.RUNNING
    return Phase.WAITING
