"""Domain exceptions. Each job-level error carries the job name, its status and AWS's reason."""

from __future__ import annotations

from collections.abc import Iterable


class SageMakerPreferencesError(Exception):
    """Base class of every error this provider raises on purpose."""


class InvalidInstancePreferencesError(SageMakerPreferencesError, ValueError):
    """The preference list, or the request around it, breaks one or more of SageMaker's rules.

    Raised before anything is sent to AWS. ``problems`` lists every rule broken, each naming the
    field (``instance_preferences[2]``) and how to fix it.
    """

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} with the instance preference request"
        super().__init__(head + ":\n" + "\n".join(f"  - {p}" for p in self.problems))


class NotOursError(SageMakerPreferencesError):
    """A resource the provider was about to stop, adopt or rewrite is not provably its own: nothing was done.

    :param resource: the job or cluster (group) name.
    :param act: what was refused (``stop``, ``reattach to``, ``roll back``...).
    :param claimed_owner: the owner the resource's identity tags claim, as a person reads it.
    :param reason: why it is not ours.
    """

    def __init__(self, resource: str, act: str, claimed_owner: str, reason: str) -> None:
        self.resource = resource
        self.act = act
        self.claimed_owner = claimed_owner
        self.reason = reason
        super().__init__(
            f"Refusing to {act} {resource!r}: it is not provably this task's ({reason}); its tags claim "
            f"{claimed_owner}. Nothing was changed. If two deployments share an account and region, give "
            f"each its own [sm_prefs] deployment_id; if the job name is fixed in config, make it unique per "
            f"run (leave it out and the operator derives one)"
        )


class SageMakerJobError(SageMakerPreferencesError):
    """A SageMaker job did not reach the outcome the task needs.

    :param job_name: the SageMaker job's name.
    :param status: the job's status when the error was decided (e.g. ``Failed``, ``Stopped``).
    :param reason: AWS's FailureReason or error message, or this provider's own explanation.
    """

    summary = "SageMaker job error"

    def __init__(self, job_name: str, status: str | None, reason: str | None) -> None:
        self.job_name = job_name
        self.status = status
        self.reason = reason
        self.log_tail: list[str] = []
        super().__init__(
            f"{self.summary}: job {job_name!r} status={status or 'unknown'}: {reason or 'no reason given'}"
        )

    def add_log_tail(self, lines: list[str]) -> None:
        """Append the job's last log lines to the message (``reason`` stays AWS's FailureReason alone)."""
        if not lines:
            return
        self.log_tail = list(lines)
        self.args = (f"{self.args[0]}\nLast lines of the job's logs:\n" + "\n".join(lines), *self.args[1:])


class QuotaExceededError(SageMakerJobError):
    """SageMaker rejected the request (ResourceLimitExceeded): an entry of the list lacks quota.

    SageMaker checks the quota of EVERY entry at its count, so one entry without quota rejects the
    whole request even if an earlier entry would have started.
    """

    summary = "Service quota rejects the preference list"

    def __init__(self, job_name: str, reason: str, instance_type: str | None = None) -> None:
        self.instance_type = instance_type
        super().__init__(job_name, "Rejected", reason)


class CapacityTimeoutError(SageMakerJobError):
    """No entry got capacity within the pending budget (SageMaker's MaxPendingTimeInSeconds or ours)."""

    summary = "Timed out waiting for capacity"


class CapacityUnavailableError(SageMakerJobError):
    """A CPU-only list found no capacity: SageMaker evaluates such lists once and fails the job."""

    summary = "No capacity for any entry"


class JobFailedError(SageMakerJobError):
    """The job failed after it started (or SageMaker failed it for a reason other than capacity)."""

    summary = "SageMaker job failed"


class JobStoppedError(SageMakerJobError):
    """The job was stopped by someone or something other than this task."""

    summary = "SageMaker job was stopped"


class JobSubmissionError(SageMakerJobError):
    """SageMaker refused the Create request for a reason other than quota."""

    summary = "SageMaker refused the job"


class PreflightError(SageMakerPreferencesError):
    """The guardrails before submit left nothing to submit, or ``preflight="fail"`` found an entry that
    cannot run now. Nothing was sent to Create*.

    :param summary: what was decided.
    :param lines: one line per entry, naming it, its rank in the list as written, the check and the reason.
    :param excluded: the exclusions themselves (``guardrails.Exclusion``), for the failure record.
    """

    def __init__(self, summary: str, lines: Iterable[str], excluded: Iterable[object] = ()) -> None:
        self.summary = summary
        self.lines = list(lines)
        self.excluded = list(excluded)
        super().__init__(summary + ":\n" + "\n".join(f"  - {line}" for line in self.lines))


class ClusterGroupError(SageMakerPreferencesError):
    """A HyperPod instance group did not reach the count the task needs.

    :param cluster_name: the HyperPod cluster.
    :param group_name: the instance group.
    :param status: the group's (or cluster's) status when the error was decided.
    :param reason: AWS's message or this provider's own explanation.
    """

    summary = "HyperPod instance group error"

    def __init__(self, cluster_name: str, group_name: str, status: str | None, reason: str | None) -> None:
        self.cluster_name = cluster_name
        self.group_name = group_name
        self.status = status
        self.reason = reason
        super().__init__(
            f"{self.summary}: {cluster_name}/{group_name} status={status or 'unknown'}: "
            f"{reason or 'no reason given'}"
        )


class GroupCapacityShortfallError(ClusterGroupError):
    """The group did not reach its target (nor an accepted minimum) within the task's wait."""

    summary = "Not enough capacity for the instance group"


class GroupRolledBackError(ClusterGroupError):
    """HyperPod rolled the group back (MinInstanceCount not met within three hours, or a failed update)."""

    summary = "HyperPod rolled the instance group back"


class ClusterConfigError(ClusterGroupError):
    """SageMaker refused the cluster request as invalid (ValidationException), or the cluster is missing."""

    summary = "HyperPod refused the cluster request"


class ClusterQuotaError(ClusterGroupError):
    """SageMaker refused the request for quota (ResourceLimitExceeded) on a type of the list."""

    summary = "Service quota rejects the instance group"


class ClusterFailedError(ClusterGroupError):
    """The cluster or the group failed."""

    summary = "HyperPod cluster or instance group failed"
