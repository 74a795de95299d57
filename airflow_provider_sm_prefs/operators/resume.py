"""The operators' resume: what a try does when its wait ends (``execute_complete``, ``execute_job_complete``).

The second half of a try's flow, read top to bottom after
:class:`~airflow_provider_sm_prefs.operators.sagemaker.SageMakerPreferenceBaseOperator`'s first: the event
(or its absence under ``dag.test()``) is either a closed acceptance window (the next stage starts), or the
end of the wait, which :class:`~airflow_provider_sm_prefs.completion.WaitCompletion` turns into the task's
outcome; then the wait for the job's end, if asked. The method names are what serialized deferrals name:
they never change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import Context

from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.events import CapacityEvent, EventStatus
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.domain.status import WaitFor
from airflow_provider_sm_prefs.domain.windows import StageLimits
from airflow_provider_sm_prefs.operators.rendered import RenderedArguments
from airflow_provider_sm_prefs.operators.task_try import TaskTry
from airflow_provider_sm_prefs.operators.windows import AcceptanceWindows, KeepJob, NextStage
from airflow_provider_sm_prefs.recording import CapacityRecorder, TryProgress

if TYPE_CHECKING:
    from airflow_provider_sm_prefs.completion import WaitCompletion

__all__ = ["ResumeMethods"]


class ResumeMethods:
    """The resume methods of the preference operators (a mixin of
    :class:`~airflow_provider_sm_prefs.operators.sagemaker.SageMakerPreferenceBaseOperator`, whose
    attributes and first-half methods it uses)."""

    job_kind: ClassVar[JobKind]
    wait_for_completion: bool
    _progress: TryProgress
    _guardrails: dict[str, Any] | None
    _windows: AcceptanceWindows | None
    #: The list this process last waited with (:meth:`_wait`), if any.
    _waited: InstancePreferenceList | None

    if TYPE_CHECKING:
        log: Any

        @property
        def recorder(self) -> CapacityRecorder: ...

        def execute(self, context: Context) -> dict[str, Any] | None: ...
        def completion(self) -> WaitCompletion: ...
        def _begin_try(self, context: Context) -> tuple[TaskTry, AcceptanceWindows]: ...
        def _rendered_config(self) -> Any: ...
        def _arguments(self) -> RenderedArguments: ...
        def _start_stage(self, run: TaskTry, job_name: str, limits: StageLimits) -> dict[str, Any] | None: ...
        def _wait(
            self, run: TaskTry, wait_for: WaitFor, prefs: InstancePreferenceList, deadline: float | None
        ) -> dict[str, Any] | None: ...

    def execute_complete(
        self, context: Context, event: dict[str, Any] | None = None, **deferral: Any
    ) -> dict[str, Any] | None:
        """Resume after capacity: push the outcome; then wait for completion if asked.

        ``deferral``: the deferral's keyword arguments (see :meth:`_resume_try`).
        """
        return self._resume(context, WaitFor.CAPACITY, event, deferral)

    def execute_job_complete(
        self, context: Context, event: dict[str, Any] | None = None, **deferral: Any
    ) -> dict[str, Any] | None:
        """Resume after the job ended (``deferral``: see :meth:`_resume_try`)."""
        return self._resume(context, WaitFor.COMPLETION, event, deferral)

    def _resume(
        self, context: Context, wait_for: WaitFor, event: dict[str, Any] | None, deferral: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The end of a wait: a closed window goes on to the next stage, else the wait's completion."""
        run = self._resume_try(context, **deferral)
        if run is None:
            return self.execute(context)
        progress, windows = self._progress, self._windows
        capacity = wait_for is WaitFor.CAPACITY
        assert windows is not None
        with self.recorder.failures(context, progress):
            if windows.state is None:
                stages = windows.load()
                if capacity:
                    progress.stages = list(stages.history) if stages else None
            if event is None:
                # A job's run has no client-side bound: only the capacity wait's deadline is waited on again.
                return self._wait_again(run, wait_for, deferral.get("deadline") if capacity else None)
            received = CapacityEvent.from_payload(event, progress.job_name or "?")
            if not capacity:
                completion = self.completion()
                return completion.complete(
                    context, received, progress, selection=False, stages=windows.with_stages
                ).value
            if windows.ends_stage(received):
                progress.job_name = received.job_name
                return self._close_window(run)
            return self._resume_capacity(run, event)

    def _resume_try(
        self,
        context: Context,
        preferences: list[dict[str, Any]] | None = None,
        deadline: float | None = None,
        guardrails: dict[str, Any] | None = None,
        deferred_by_try: int | None = None,
    ) -> TaskTry | None:
        """What both resume methods do first: this try, with the list and guardrails the job was submitted
        with; None when the event is another try's and this try must run from the beginning.

        The arguments are the deferral's keyword arguments (those of earlier releases too), named once here:
        ``preferences``, the list the job was submitted with; ``deadline``, the capacity wait's client-side
        bound (read only when a wait ended without an event and is waited on again); ``guardrails``, the
        report the job was submitted with; ``deferred_by_try``, the try that deferred. ``dag.test()``
        resumes with the event alone: the list is then the rendered arguments', the guardrail report the
        job state's.
        """
        run, _ = self._begin_try(context)
        if run.resumed_by_another_try(deferred_by_try):
            return None
        self._progress.preferences = self._preferences_of_resume(preferences)
        self._guardrails = self._guardrails or guardrails or run.recorded_guardrails()
        self._progress.identity_tags = self._progress.identity_tags or run.recorded_identity_tags()
        return run

    def _wait_again(self, run: TaskTry, wait_for: WaitFor, deadline: float | None) -> dict[str, Any] | None:
        """The wait ended without an event (a runner of triggers in the task's process, ``dag.test()``,
        resumes with the deferral's arguments alone): nothing is known about the job, so it is neither an
        error nor a closed window. Look at the recorded job again and wait on (a stage's window still counts
        from its job's CreationTime), or resume at once when the look shows the wait over."""
        state = run.store.load()
        if state is None:
            raise errors.JobFailedError(
                self._progress.job_name or "?",
                None,
                "the wait ended without an event and the task's job state records no job to look at",
            )
        stages = self._windows.state if self._windows is not None else None
        listed = stages.listed if stages is not None else None
        prefs = listed or self._submitted_list(self._progress.preferences)
        self._progress.job_name = state.job_name
        self.log.warning(
            "The wait for %s ended without an event (a trigger run in the task's process stopped early): "
            "looking at the job again and waiting on",
            state.job_name,
        )
        return self._wait(run, wait_for, prefs, deadline)

    def _close_window(self, run: TaskTry) -> dict[str, Any] | None:
        """The current stage's window closed: keep a job that got capacity, else go on to the next stage."""
        assert self._windows is not None and self._progress.job_name is not None
        match self._windows.close_window(self._progress.job_name):
            case KeepJob(event):
                return self._resume_capacity(run, event)
            case NextStage(job_name, limits):
                return self._start_stage(run, job_name, limits)

    def _resume_capacity(self, run: TaskTry, event: dict[str, Any] | None) -> dict[str, Any] | None:
        """The end of the capacity wait: push the outcome; then wait for completion if asked."""
        assert self._windows is not None
        progress, stages = self._progress, self._windows.state
        preferences = stages.listed.as_list() if stages else progress.preferences
        received = CapacityEvent.from_payload(event, progress.job_name or "?")
        if stages is not None and received.status is not EventStatus.SUCCESS:
            progress.stages = [*stages.history, self._windows.failed_stage(received)]
        outcome, result = self.completion().complete(
            run.context, received, progress, selection=True, stages=self._windows.with_stages
        )
        if self.wait_for_completion and not received.job_ended:
            prefs = stages.listed if stages else self._submitted_list(preferences or outcome.preferences)
            return self._wait(run, WaitFor.COMPLETION, prefs, None)
        return result

    def _preferences_of_resume(self, given: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """The list the job was submitted with: the deferral's own, else (``dag.test()`` resumes with the
        event alone) the rendered arguments' list, which ``execute`` checked and submitted (parsed once per
        rendered values: a resume in the process that ran ``execute`` reads what it parsed)."""
        if given is not None:
            return list(given)
        try:
            return self._arguments().preferences.as_list()
        except errors.InvalidInstancePreferencesError:
            return []

    def _submitted_list(self, preferences: list[dict[str, Any]]) -> InstancePreferenceList:
        """The list a wait reports against, from its JSON form: the one this process waited with when it
        is that list (a wait outside the triggerer, ``dag.test()``), else read from the form."""
        waited = self._waited
        if waited is not None and waited.as_list() == preferences:
            return waited
        return InstancePreferenceList.from_response(preferences, self.job_kind)
