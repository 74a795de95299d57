"""Submit once: the job name recorded before Create, and what a later try does with it.

The name goes into the task's state store *before* ``Create*``. A retry then reattaches to a job that
still runs, returns a completed job's outcome, goes on to the next stage of acceptance windows, and only
submits a new job (``-r2``, ``-r3``...) when the previous one failed or stopped. A *clear* is not a
retry: the cleared task runs a new job whatever became of the previous one, stopping it first if it
still runs (``stop_job_on_kill``). A try past the task's retries (``try_number > max_tries + 1``: a
scheduler reset the task after losing its process) is neither: it reattaches or returns like a retry,
but never submits a new job; it ends as the lost try would have.

Every reattach, return and stop of an earlier job first proves the job this task instance's: its
identity tags, read right then, must name this deployment, DAG, task, run and map index (the tags
recorded before its Create; :meth:`JobState.claim`), or this task's own Create must have made it. A job
of the same name that is someone else's (another deployment running the same DAG, a fixed job name) is
never adopted, returned or stopped: the try fails with :class:`NotOursError` naming the owner its tags
claim.

What a try does is one of three tagged results (:data:`TryStart`), matched once by the operator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

from airflow.sdk import Context
from botocore.exceptions import ClientError

from airflow_provider_sm_prefs.compat import AirflowFailException
from airflow_provider_sm_prefs.domain.exceptions import JobStoppedError
from airflow_provider_sm_prefs.domain.identity import OwnerClaim
from airflow_provider_sm_prefs.domain.job_state import JobState, JobStateStore
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome, outcome_from_describe, terminal_error
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.domain.status import JobStatus, job_status
from airflow_provider_sm_prefs.hooks.sagemaker import derive_job_name, error_code, sanitize_job_name
from airflow_provider_sm_prefs.operators.identity import deployment_id, job_claim
from airflow_provider_sm_prefs.operators.task_try import try_number_of

if TYPE_CHECKING:
    from airflow_provider_sm_prefs.operators.task_try import TaskTry


def max_tries_of(context: Context) -> int | None:
    """The task instance's ``max_tries``: Airflow raises it when the task is cleared, never on a retry."""
    value = getattr(context.get("ti"), "max_tries", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def beyond_retries(context: Context) -> bool:
    """Whether this try is one the task's retries do not account for: ``try_number > max_tries + 1``.

    Retries stop at ``max_tries + 1`` and a clear raises ``max_tries``; only a scheduler that resets an
    orphaned task (its process was lost with a scheduler, or a starved scheduler took its own job for
    dead: ``adopt_or_reset_orphaned_tasks``) starts a try past it. That try resumes the lost one.
    """
    try_number, max_tries = try_number_of(context), max_tries_of(context)
    return try_number is not None and max_tries is not None and try_number > max_tries + 1


#: Whether an ended job of an earlier try is a stage its acceptance windows go on from
#: (``AcceptanceWindows.continues``).
ContinuesStages = Callable[[JobState, Mapping[str, Any]], bool]


@dataclass(frozen=True)
class Completed:
    """An earlier try's job completed: this try returns its outcome."""

    outcome: CapacityOutcome


@dataclass(frozen=True)
class Reattach:
    """An earlier try's job is this try's: still running, or a stage the windows go on from."""

    job_name: str
    describe: dict[str, Any]


@dataclass(frozen=True)
class Create:
    """This try creates job ``job_name``; the name is already recorded in the job state."""

    job_name: str


#: What submit-once decided for a try.
TryStart: TypeAlias = Completed | Reattach | Create


@dataclass(frozen=True)
class JobStart:
    """A job the operator starts: created under its recorded name, or taken over while it runs.

    :param job_name: the job's name (recorded before Create).
    :param prefs: the list the wait reports against (with a stage's windows, the whole list).
    :param deadline: the client-side deadline of the capacity wait, in seconds.
    :param request: the Create request (None when taking over a running job).
    :param offered: the list the Create request offers (default: ``prefs``).
    :param describe: the running job's Describe, when taking it over.
    """

    job_name: str
    prefs: InstancePreferenceList
    deadline: float | None
    request: dict[str, Any] | None = None
    offered: InstancePreferenceList | None = None
    describe: dict[str, Any] | None = None


class SubmitOnce:
    """The task's side of submit-once: which job this try runs, and its Create.

    :param job_kind: the kind of job.
    :param hook: the SageMaker hook of the task.
    :param stop_job_on_kill: a cleared task stops its still-running job before running again.
    :param log: the task's logger.
    """

    def __init__(self, job_kind: JobKind, hook: Any, stop_job_on_kill: bool, log: Any) -> None:
        self.job_kind = job_kind
        self.hook = hook
        self.stop_job_on_kill = stop_job_on_kill
        self.log = log

    def base_name(self, ti: Any, request: Mapping[str, Any]) -> str:
        """The config's job name, or one derived from the task instance (and the deployment, so that the same
        DAG run in two deployments of one account never shares a name) when the config gives none."""
        name_field = self.job_kind.spec.name_field
        given = request.get(name_field)
        if given:
            return str(given)
        map_index = getattr(ti, "map_index", -1)
        name = derive_job_name(
            ti.dag_id, ti.task_id, ti.run_id, -1 if map_index is None else int(map_index), deployment_id()
        )
        self.log.info("No %s in config: using %s, derived from this task instance and run", name_field, name)
        return name

    def name_this_try(
        self,
        context: Context,
        store: JobStateStore,
        base_name: str,
        continues_stages: ContinuesStages,
    ) -> TryStart:
        """Decide the job name for this try from the job state; reattach where a job already runs.

        The name is recorded before this returns, so it is known before any Create.
        """
        state = store.load()
        max_tries = max_tries_of(context)
        submission = 1
        name = sanitize_job_name(base_name)
        if state is not None:
            previous = state.job_name
            submission = state.submission
            # This try owns the job from now on: a killed earlier try's on_kill leaves it alone.
            state = replace(state, try_number=try_number_of(context))
            store.save(state)
            cleared = state.cleared_since(max_tries)
            describe = self.hook.describe_job(self.job_kind, previous)
            if describe is None:
                self.log.info(
                    "Job %s recorded on an earlier try never reached SageMaker; creating it now", previous
                )
                name = previous
            else:
                status = job_status(self.job_kind, describe)
                claim = job_claim(state, previous, context)
                self._prove_ours(previous, claim, describe, "take over")
                if not cleared:
                    resumed = self._resume_earlier_try(
                        context, state, previous, describe, status, continues_stages
                    )
                    if resumed is not None:
                        return resumed
                elif status is JobStatus.IN_PROGRESS:
                    self._stop_before_rerun(previous, claim)
                submission += 1
                name = sanitize_job_name(base_name, suffix=f"-r{submission}")
                self.log.info(
                    "%s %s from an earlier try ended %s; submitting %s",
                    "The task was cleared: running again instead of returning job" if cleared else "Job",
                    previous,
                    status.value,
                    name,
                )
        store.save(
            JobState.submitted(
                state,
                job_name=name,
                kind=self.job_kind.value,
                submission=submission,
                max_tries=max_tries,
                try_number=try_number_of(context),
            )
        )
        return Create(name)

    def _resume_earlier_try(
        self,
        context: Context,
        state: JobState,
        previous: str,
        describe: dict[str, Any],
        status: JobStatus,
        continues_stages: ContinuesStages,
    ) -> Completed | Reattach | None:
        """A retry's (or an orphan reset's) use of the earlier try's job; None: submit the next one."""
        if status is JobStatus.IN_PROGRESS:
            self.log.info("Reattaching to job %s from an earlier try (still %s)", previous, status.value)
            return Reattach(previous, describe)
        if status is JobStatus.COMPLETED:
            return Completed(outcome_from_describe(self.job_kind, describe, None))
        if continues_stages(state, describe):
            self.log.info(
                "Job %s was a stage of this task's acceptance windows; going on to the next", previous
            )
            return Reattach(previous, describe)
        if beyond_retries(context):
            self._end_as_the_lost_try(context, previous, describe)
        return None

    def _end_as_the_lost_try(self, context: Context, previous: str, describe: Mapping[str, Any]) -> NoReturn:
        """A try past the task's retries resumes a lost one: it ends as that try would have, with no new job.

        Submitting ``-rN`` here would be a second job the task's retries never allowed (the earlier try may
        well have stopped its job at its capacity deadline and been about to fail).
        """
        ti = context.get("ti")
        error = terminal_error(self.job_kind, describe) or JobStoppedError(
            previous, job_status(self.job_kind, describe).value, "ended before this try started"
        )
        self.log.error(
            "Try %s of this task goes past its retries (max_tries=%s): Airflow started it again after losing "
            "the previous try's process (an orphaned task reset), not as a retry. Job %s of that try ended "
            "%s; failing as that try would have, without submitting a new job",
            getattr(ti, "try_number", "?"),
            getattr(ti, "max_tries", "?"),
            previous,
            error.status,
        )
        raise error

    def _prove_ours(
        self, job_name: str, claim: OwnerClaim, describe: dict[str, Any] | None, act: str
    ) -> None:
        """Raise :class:`NotOursError` (failing the try) unless ``job_name``'s tags, read now, prove it ours."""
        check = self.hook.check_owner(self.job_kind, job_name, claim, describe)
        if not check.ours:
            error = check.error(act)
            self.log.error("%s", error)
            raise AirflowFailException(str(error)) from error

    def _stop_before_rerun(self, previous: str, claim: OwnerClaim) -> None:
        """A cleared task runs again: its job from before the clear stops first (``stop_job_on_kill``)."""
        if self.stop_job_on_kill:
            self.log.info(
                "The task was cleared while job %s still runs: stopping it before running again", previous
            )
            self.hook.stop_job(self.job_kind, previous, claim)
        else:
            self.log.warning(
                "The task was cleared while job %s still runs; stop_job_on_kill=False leaves it running "
                "next to the new job",
                previous,
            )

    def create(
        self,
        run: TaskTry,
        request: dict[str, Any],
        prefs: InstancePreferenceList,
        job_name: str,
        claim: OwnerClaim,
    ) -> dict[str, Any]:
        """Create the job (its name already recorded); a running job of that name is this task's only when its
        identity tags say so (``claim``: this try's identity; a Create whose answer was lost left them)."""
        kind = self.job_kind
        try:
            response: dict[str, Any] = self.hook.create_job(kind, request, prefs)
        except ClientError as err:
            if error_code(err) != "ResourceInUse":
                raise
            describe: dict[str, Any] | None = self.hook.describe_job(kind, job_name)
            if describe is not None and job_status(kind, describe) is JobStatus.IN_PROGRESS:
                self._prove_ours(job_name, claim, describe, "reattach to")
                self.log.info(
                    "Job %s already exists and is running: reattaching instead of creating a copy", job_name
                )
                return describe
            status = job_status(kind, describe).value if describe else "unknown"
            raise AirflowFailException(
                f"A SageMaker job named {job_name!r} already exists ({status}) and this task did not create it; "
                f"leave {kind.spec.name_field} out of config (the operator then derives a name unique to each run) "
                f"or make it unique per run, e.g. include {{{{ run_id }}}}"
            ) from err
        run.store.update(created=True)  # the name is ours for good: SageMaker never reuses a job name
        self.log.info("Submitted SageMaker %s job %s", kind.value, job_name)
        return response  # carries the ARN; the status is read once, right before deferring
