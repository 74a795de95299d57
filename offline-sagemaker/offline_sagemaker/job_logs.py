"""What a job's containers write to CloudWatch Logs, derived from the job's own timeline. Pure data.

SageMaker writes one stream per instance into ``/aws/sagemaker/TrainingJobs`` or
``/aws/sagemaker/ProcessingJobs``, named ``<job name>/algo-<n>-<epoch seconds>``, from when the instance
starts. The emulator stores nothing: a job's streams follow from its selection, start and end times and
the scenario's ``job_logs`` lines, so the events visible at an emulated moment are exactly those written
up to it (a running job's streams grow as its clock advances).

- Each instance writes the scenario's lines for its kind, spread evenly over the job's run time
  (training: after Downloading; processing: from the start); instance ``n`` writes ``n - 1`` ms after
  the first, so the streams interleave in a stable order.
- A job that fails after it started ends its first instance's stream with the ``failure`` lines and the
  FailureReason. A stopped job's lines end where it stopped. A job that never got an instance has no
  streams.
"""

from __future__ import annotations

from dataclasses import dataclass

from offline_sagemaker.models import Job, JobKind, TrainingStatus
from offline_sagemaker.scenario_types import Scenario

__all__ = ["LOG_GROUPS", "LogEvent", "LogStream", "job_streams", "kind_of_group"]

#: The log group of each job kind, as AWS names them.
LOG_GROUPS: dict[JobKind, str] = {
    JobKind.TRAINING: "/aws/sagemaker/TrainingJobs",
    JobKind.PROCESSING: "/aws/sagemaker/ProcessingJobs",
}


def kind_of_group(group: str) -> JobKind | None:
    """The job kind whose logs ``group`` holds (a name or a log group ARN), or None."""
    for kind, name in LOG_GROUPS.items():
        if group == name or group.endswith(f":log-group:{name}") or group.endswith(f":log-group:{name}:*"):
            return kind
    return None


@dataclass(frozen=True)
class LogEvent:
    """One line: epoch milliseconds (emulated) and the text."""

    timestamp: int
    message: str


@dataclass(frozen=True)
class LogStream:
    """One instance's stream with every event the job writes to it (see :meth:`visible`)."""

    name: str
    created: float
    events: tuple[LogEvent, ...]

    def visible(self, now: float) -> list[LogEvent]:
        """The events written up to the emulated ``now``."""
        limit = int(now * 1000)
        return [event for event in self.events if event.timestamp <= limit]


def _run_window(job: Job, scenario: Scenario) -> tuple[float, float]:
    """When the container runs its own code: from (training: after Downloading) to the planned end."""
    assert job.start_time is not None
    if job.kind is JobKind.TRAINING:
        begin = job.start_time + scenario.phase_seconds.downloading
        runtime = job.spec.runtime_seconds or scenario.job_runtime_seconds
    else:
        begin = job.start_time
        runtime = job.spec.runtime_seconds or scenario.effective_processing_runtime
    return begin, begin + runtime


def job_streams(job: Job, scenario: Scenario) -> list[LogStream]:
    """The streams of ``job``, one per selected instance; empty while (or if) it has no instance."""
    if job.selected is None or job.start_time is None:
        return []
    count = job.selected.count
    begin, planned_end = _run_window(job, scenario)
    end = min(planned_end, job.end_time) if job.end_time is not None else planned_end
    lines = scenario.job_logs.training if job.kind is JobKind.TRAINING else scenario.job_logs.processing
    step = (planned_end - begin) / len(lines)
    created = job.start_time
    streams: list[LogStream] = []
    for index in range(1, count + 1):
        host = f"algo-{index}"
        fields = {
            "job_name": job.name,
            "host": host,
            "instance_type": job.selected.instance_type,
            "instance_count": count,
        }
        events = [
            LogEvent(int((begin + i * step) * 1000) + index - 1, line.format(**fields))
            for i, line in enumerate(lines)
            if begin + i * step < end
        ]
        if index == 1 and job.status is TrainingStatus.FAILED and job.end_time is not None:
            tail = [line.format(**fields) for line in scenario.job_logs.failure]
            tail.append(job.failure_reason or "the job failed")
            # One millisecond apart, ending when the job failed: readers sort by time.
            first = int(job.end_time * 1000) - len(tail) + 1
            events += [LogEvent(first + i, message) for i, message in enumerate(tail)]
        streams.append(LogStream(f"{job.name}/{host}-{int(created)}", created, tuple(events)))
    return streams
