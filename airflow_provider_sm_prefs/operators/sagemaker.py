"""Operators: submit a Training or Processing job with an instance preference list, once, and wait.

``execute`` and the methods a deferral resumes in read top to bottom here, as a sequence of named
decisions: the arguments checked, submit-once (:class:`~.submission.Completed`,
:class:`~.submission.Reattach` or :class:`~.submission.Create`, matched once), the guardrails, the
stages of acceptance windows, one way to start a job, the wait, the outcome and its record. Each step is
a collaborator called with explicit inputs: :class:`~.guardrail_check.GuardrailCheck`,
:class:`~.submission.SubmitOnce`, :class:`~.windows.AcceptanceWindows`, :class:`~.job_logs.JobLogPrinter`,
:class:`~airflow_provider_sm_prefs.recording.CapacityRecorder` and :func:`~.openlineage.operator_lineage`.
What the try learns on the way is its :class:`~airflow_provider_sm_prefs.recording.TryProgress`; where it
runs is its :class:`~.task_try.TaskTry`; what survives the try is its
:class:`~airflow_provider_sm_prefs.domain.job_state.JobState`. What happens when the DAG is parsed lives
in :mod:`~.arguments` and :mod:`~.parse_time`.

What a try does when its wait ends (the resume methods) reads on in :mod:`~.resume`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from airflow.sdk import Context

from airflow_provider_sm_prefs.compat import AirflowFailException
from airflow_provider_sm_prefs.completion import WaitCompletion
from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.exceptions import NotOursError
from airflow_provider_sm_prefs.domain.identity import OwnerClaim
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome, XComKey
from airflow_provider_sm_prefs.domain.preferences import (
    InstancePreferenceList,
    build_request,
    job_level_count,
    to_seconds,
)
from airflow_provider_sm_prefs.domain.status import WaitFor
from airflow_provider_sm_prefs.domain.windows import StageLimits
from airflow_provider_sm_prefs.guardrail_check import (
    GUARDRAIL_FIELDS,
    GuardrailCheck,
    with_guardrails,
)
from airflow_provider_sm_prefs.hooks.logs import SageMakerJobLogsHook
from airflow_provider_sm_prefs.hooks.sagemaker import (
    SageMakerPreferenceHook,
)
from airflow_provider_sm_prefs.job_logs import JobLogPrinter
from airflow_provider_sm_prefs.links import persist_job_links
from airflow_provider_sm_prefs.operators.arguments import PreferenceOperatorArguments
from airflow_provider_sm_prefs.operators.finishing import FinishDecision, decide_finish
from airflow_provider_sm_prefs.operators.identity import IdentityTags, job_claim
from airflow_provider_sm_prefs.operators.openlineage import OperatorLineageMethods
from airflow_provider_sm_prefs.operators.parse_time import checked_regions
from airflow_provider_sm_prefs.operators.region_moves import RegionMoves
from airflow_provider_sm_prefs.operators.rendered import RenderedArguments, decode_config
from airflow_provider_sm_prefs.operators.resume import ResumeMethods
from airflow_provider_sm_prefs.operators.submission import Completed, Create, JobStart, Reattach, SubmitOnce
from airflow_provider_sm_prefs.operators.task_try import TaskTry
from airflow_provider_sm_prefs.operators.waiting import CapacityWait, TriggerSettings, Wait
from airflow_provider_sm_prefs.operators.windows import AcceptanceWindows
from airflow_provider_sm_prefs.recording import CapacityRecorder, TryProgress
from airflow_provider_sm_prefs.task_state import GOES_ON, current_state

#: A method a wait resumes in (``execute_complete``, ``execute_job_complete``).
Resume = Callable[..., "dict[str, Any] | None"]


class SageMakerPreferenceBaseOperator(
    RegionMoves, ResumeMethods, OperatorLineageMethods, PreferenceOperatorArguments
):
    """Submit a SageMaker job with an ordered list of acceptable instance types and wait for capacity.

    The list is checked against every documented rule before any AWS call (literal arguments already
    when the DAG is parsed). The job is submitted once per task: its name is recorded in the task's
    state store before Create, so a retry reattaches to a running job, returns a completed job's
    outcome, and only starts a new job (``-r2``, ``-r3``...) when the previous one failed or stopped.
    The task then defers until SageMaker selects an entry and pushes the outcome to XCom
    (see :class:`~airflow_provider_sm_prefs.domain.outcome.XComKey`), and with ``wait_for_completion``
    defers again until the job ends.

    Entries may carry ``accept_after`` (acceptance windows): the job is then submitted in stages, each
    offering the entries acceptable by then, and a stage still Pending when the next window opens is
    stopped and replaced by the next (``<name>-s2``...). See :mod:`airflow_provider_sm_prefs.domain.windows`.

    :param config: the Create* request, as for the stock SageMaker operators (templated). Without
        ``TrainingJobName``/``ProcessingJobName`` the name is derived from the task instance
        (``<dag>-<task>[-<map index>]-<hash of the run>``): unique per run, the same for every try.
    :param instance_preferences: the ordered list (templated), unless already inside ``config``.
    :param max_pending: longest wait for capacity (timedelta or seconds). For a training list with an
        accelerated entry it becomes MaxPendingTimeInSeconds (1800 s minimum); for processing and
        CPU-only lists, where SageMaker enforces nothing, the trigger stops the job when it passes.
    :param wait_for_completion: after capacity is acquired, also wait until the job ends.
    :param poll_interval: seconds between status checks at first.
    :param max_poll_interval: cap of the cadence, which grows 1.5× per unchanged poll (default: fixed).
    :param deferrable: wait in the triggerer (no worker slot held). Otherwise poll in the worker with
        the same semantics.
    :param stop_job_on_kill: stop the SageMaker job when the task is killed, marked or cleared.
    :param min_defer_seconds: an event that resumes the task in a worker comes no sooner than this after
        the task deferred, so a job that leaves Pending at once cannot race Airflow's scheduler
        (apache/airflow#72716, which fails such a task); an event that ends the task in the triggerer
        (``finish_in_triggerer``) has no such race and is not held. Adds at most this much to a wait that
        ends right away; 0 turns it off.
        Default: Airflow config ``[sm_prefs] min_defer_seconds``, else 15.
    :param print_log: once the job has ended, write its log lines into the task log (:class:`JobLogPrinter`).
    :param max_log_lines: the most job lines written (the last ones); the task log says what was cut.
    :param requirements: what every entry must offer (``WorkloadRequirements`` or a dict).
    :param max_hourly_cost: USD per hour for an entry's whole cluster; dearer entries are excluded.
    :param max_cost_increase: fraction (0.25 = +25 %) above the first remaining entry.
    :param preflight: ``prune`` (default), ``fail``, ``warn`` or ``off`` (see :class:`GuardrailCheck`).
    :param prices: ``{instance_type: USD per instance-hour}`` used instead of the Price List API.
    :param finish_in_triggerer: the trigger ends the task itself when only bookkeeping is left (one task
        process per job; :mod:`~airflow_provider_sm_prefs.operators.finishing` says which waits and why).
    :param identity_tags: tag the job with the DAG, task, run, map index, try and deployment that
        submitted it (keys under ``sm-prefs:``; see :mod:`airflow_provider_sm_prefs.domain.identity`), next
        to the config's own ``Tags``. Airflow config ``[sm_prefs] identity_tags = False`` turns them off
        for the whole deployment. The tags are set at Create only: a retry that reattaches keeps the job's.
    :param aws_conn_id: Airflow AWS connection (its extra may set ``endpoint_url``).
    :param region_name: AWS region; kept when deferring.
    :param verify: TLS verification setting; kept when deferring.
    :param botocore_config: botocore config dict; kept when deferring.
    """

    #: What this try learnt so far (job name, list, guardrails, stages, outcome): records and lineage.
    _progress: TryProgress
    #: This try's context and job state (once it started; on_kill reads them).
    _try: TaskTry
    #: The guardrail report the job was submitted with (``GuardrailReport.as_dict()``).
    _guardrails: dict[str, Any] | None
    #: This try's acceptance windows, once it started.
    _windows: AcceptanceWindows | None

    @cached_property
    def hook(self) -> SageMakerPreferenceHook:
        return self._aws().hook()

    @cached_property
    def recorder(self) -> CapacityRecorder:
        """Pushes this task's outcome and record, and records a failed try."""
        return CapacityRecorder(lambda: self.job_kind.value, lambda: self.hook.conn_region_name, self.log)

    @cached_property
    def job_logs(self) -> JobLogPrinter:
        """Prints an ended job's log lines into the task log (``print_log``, ``max_log_lines``)."""
        return JobLogPrinter(
            self.job_kind,
            lambda: SageMakerJobLogsHook(**self._aws().hook_kwargs()),
            self.print_log,
            self.max_log_lines,
            self.log,
        )

    def completion(self) -> WaitCompletion:
        """Ends this try's waits: the outcome with the job's logs, guardrails and stages, pushed."""
        region = self._region
        # A region's own list was not what the guardrails left of the list as written: its ranks are its own.
        own_list = region is not None and region.instance_preferences is not None
        return WaitCompletion(self.recorder, self.job_logs, None if own_list else self._guardrails, self.log)

    @cached_property
    def capacity_wait(self) -> CapacityWait:
        """Builds this task's capacity triggers and waits with them (rendered arguments)."""
        settings = TriggerSettings(
            self.poll_interval,
            self.max_poll_interval,
            self.stop_job_on_kill,
            self.min_defer_seconds,
            self._aws(),
        )
        return CapacityWait(self.job_kind, self.hook, settings)

    @cached_property
    def identity(self) -> IdentityTags:
        """The identity tags each Create of this task carries (``identity_tags``); a job this task hands off
        (``wait_for_completion=False``) records that at Create too."""
        return IdentityTags(self.identity_tags, hand_off=not self.wait_for_completion)

    @cached_property
    def submit_once(self) -> SubmitOnce:
        """Decides which job this try runs, and creates it."""
        return SubmitOnce(self.job_kind, self.hook, self.stop_job_on_kill, self.log)

    def guardrail_check(self) -> GuardrailCheck:
        """The guardrails of the rendered arguments."""
        values = tuple(getattr(self, name) for name in GUARDRAIL_FIELDS)
        return GuardrailCheck(self.job_kind, values, self._max_pending_seconds(), self.log)

    # -- preparation -----------------------------------------------------------------------------------
    def prepare(self) -> tuple[dict[str, Any], InstancePreferenceList, float | None]:
        """Validate the rendered arguments; return the request, the list and the client-side deadline."""
        rendered = self._arguments()
        prefs = rendered.preferences
        if rendered.max_pending is None and not self.job_kind.spec.pending_limit:
            self.log.warning(
                "No max_pending: SageMaker documents no limit on how long a %s job waits for capacity; "
                "set max_pending to bound it.",
                self.job_kind.value,
            )
        # build_request's request is the try's own to change (its job name, the guardrails' list).
        return copy.deepcopy(rendered.request), prefs, self._deadline(prefs)

    def _arguments(self) -> RenderedArguments:
        """The rendered arguments, checked: the config decoded, ``max_pending`` converted and the list
        parsed once per rendering (a resume in the same process reads what ``execute`` found).

        :raises InvalidInstancePreferencesError: naming each broken rule and its fix.
        """
        sources = (self.config, self.instance_preferences, self.max_pending, self.regions, self.region_name)
        rendered = self._rendered.get(sources, self._check_arguments)
        self._preferences = rendered.preferences
        return rendered

    def _check_arguments(self) -> RenderedArguments:
        config, max_pending = self._rendered_config(), self._max_pending_seconds()
        request, prefs = build_request(self.job_kind, config, self.instance_preferences, max_pending)
        regions = checked_regions(self.job_kind, self.regions, request, prefs, self.region_name)
        return RenderedArguments(config, request, prefs, max_pending, regions)

    def _max_pending_seconds(self) -> int | None:
        """``max_pending`` in seconds, converted once per rendering."""
        return self._pending.get((self.max_pending,), lambda: to_seconds(self.max_pending))

    def _total_pending(self, request: Mapping[str, Any]) -> int | None:
        """The bound of the whole wait: max_pending, else the config's MaxPendingTimeInSeconds."""
        given = self._max_pending_seconds()
        if given is not None:
            return given
        stopping = request.get("StoppingCondition")
        pending = stopping.get("MaxPendingTimeInSeconds") if isinstance(stopping, Mapping) else None
        try:
            return int(pending) if pending is not None else None
        except (TypeError, ValueError):
            return None

    def _rendered_config(self) -> Any:
        """The rendered config (a string of JSON is read, once per rendering); anything but a dict is
        reported by build_request."""
        return self._config.get((self.config,), lambda: decode_config(self.config))

    def _deadline(self, prefs: InstancePreferenceList) -> float | None:
        """The client-side deadline: max_pending where SageMaker enforces none (processing, CPU-only)."""
        max_pending = self._max_pending_seconds()
        server_enforced = self.job_kind.spec.pending_limit and prefs.waits_for_capacity
        deadline = None if server_enforced else max_pending
        return float(deadline) if deadline else None

    # -- execution -------------------------------------------------------------------------------------
    def _begin_try(self, context: Context) -> tuple[TaskTry, AcceptanceWindows]:
        """This try (its job state looked up once; on_kill reads it) and its acceptance windows.

        Both are kept when the same process resumes (a wait outside the triggerer). A new context is a new
        try: what the operator learnt in another one (``dag.test()`` runs the same instance again) is dropped.
        """
        if self._try.context is not context:
            self._try = TaskTry.of(context)
            self._progress, self._windows, self._guardrails, self._waited = TryProgress(), None, None, None
        if self._windows is None:
            self._move_to(None)
            self._windows = AcceptanceWindows(
                self.job_kind, self.hook, self._try.store, self._progress, self.log
            )
            if self.regions:
                # A try that goes on from a stage in another region acts on that stage's job there.
                recorded = self._windows.recorded()
                self._move_to(recorded.region if recorded is not None else None)
        return self._try, self._windows

    def execute(self, context: Context) -> dict[str, Any] | None:
        run, windows = self._begin_try(context)
        with self.recorder.failures(context, self._progress):
            return self._submit(run, windows)

    def _submit(self, run: TaskTry, windows: AcceptanceWindows) -> dict[str, Any] | None:
        kind, progress = self.job_kind, self._progress
        # 1. The rendered arguments, checked: nothing goes to AWS when they are wrong.
        guardrails = self.guardrail_check()
        try:
            request, prefs, deadline = self.prepare()
            guardrails.settings()
            self.identity.check(run.context, request)  # the tags Create will send
        except errors.InvalidInstancePreferencesError as err:
            # Not worth a retry: the same arguments render the same problems. Nothing was sent to AWS.
            raise AirflowFailException(str(err)) from err
        progress.preferences = prefs.as_list()
        base_name = self.submit_once.base_name(run.ti, request)
        self.log.info(
            "Instance preferences for %s: %s", base_name, prefs.describe(job_level_count(kind, request))
        )

        # 2. Submit once: this try's job is an earlier try's (return, reattach, next stage) or a new one.
        decision = self.submit_once.name_this_try(run.context, run.store, base_name, windows.continues)
        self._guardrails = run.recorded_guardrails()
        match decision:
            case Completed(outcome):
                return self._return_completed(run, windows, prefs, outcome)
            case Reattach(job_name, describe):
                # The job runs already (with the guardrails and stages it was submitted with).
                stages = windows.begin(prefs, job_name, self._total_pending(request))
                prefs = stages.listed if stages is not None else prefs
                return self._start(run, JobStart(job_name, prefs, deadline, describe=describe))
            case Create(job_name):
                # 3. What only a running task can check of its regions, then the guardrails before
                # Create: no Create call if a region is wrong or nothing remains.
                regions = self._arguments().regions
                self._check_regions_at_run_time(regions, request)
                request, prefs, report = guardrails.guard(
                    self.hook, self._rendered_config(), request, prefs, progress
                )
                self._guardrails = report.as_dict()
                run.store.update(guardrails=self._guardrails)
                # 4. Acceptance windows and regions: the list goes in stages, each its own job.
                stages = windows.begin(prefs, job_name, self._total_pending(request), regions)
                if stages is not None:
                    return self._start_stage(run, job_name, stages.limits(kind, stages.elapsed))
                request[kind.spec.name_field] = job_name
                return self._start(run, JobStart(job_name, prefs, self._deadline(prefs), request=request))

    def _return_completed(
        self,
        run: TaskTry,
        windows: AcceptanceWindows,
        prefs: InstancePreferenceList,
        outcome: CapacityOutcome,
    ) -> dict[str, Any]:
        """An earlier try's job completed: push its outcome again (a new try starts without the old XComs)."""
        windows.begin(prefs, outcome.job_name, None)
        outcome = windows.with_stages(with_guardrails(outcome, self._guardrails, self.log))
        self.log.info("Job already completed on an earlier try; returning its outcome: %s", outcome.summary())
        self._persist_links(run, outcome.job_name)
        self._progress.identity_tags = self.identity.push_recorded(run)
        return self.recorder.push(run.context, outcome, self._progress, selection=False)

    def _start(self, run: TaskTry, job: JobStart) -> dict[str, Any] | None:
        """Start a job: Create it under its recorded name (or take over the running one), then wait for capacity.

        The first submission, a reattach and every stage of acceptance windows start here.
        """
        self._progress.job_name = job.job_name
        self._persist_links(run, job.job_name)
        run.push(XComKey.JOB_NAME, job.job_name)
        region = self.recorder.known_region()
        if region is not None:  # before Create: a failure callback finds the job there
            run.push(XComKey.REGION, region)
        describe = job.describe
        if describe is None:
            assert job.request is not None
            request, tags = self.identity.tagged(run, job.request)
            claim = OwnerClaim.of_tags(tags)
            describe = self._create(run, request, job.offered or job.prefs, job.job_name, claim)
            self._progress.identity_tags = tags  # a rejected Create made no job to carry them
        else:
            self._progress.identity_tags = self.identity.push_recorded(run)
        self._record_arn(run, describe)
        return self._wait(run, WaitFor.CAPACITY, job.prefs, job.deadline)

    def _create(self, run: TaskTry, *create: Any) -> dict[str, Any]:
        """The try's Create (:meth:`SubmitOnce.create`'s arguments); a method of its own so that a test DAG
        can fail a try right after it."""
        return self.submit_once.create(run, *create)

    def _start_stage(self, run: TaskTry, job_name: str, limits: StageLimits) -> dict[str, Any] | None:
        """Start the current stage's job (its name already recorded) and wait for it, in its region."""
        assert self._windows is not None and self._windows.state is not None
        self._move_to(self._windows.state.region)
        return self._start(run, self._windows.stage_start(self._rendered_config(), limits, job_name))

    def _record_arn(self, run: TaskTry, describe: Mapping[str, Any]) -> None:
        """The job's ARN, once Create (or a Describe of the running job) gave it: in XCom and the job state."""
        arn = describe.get(self.job_kind.spec.arn_field)
        if not arn:
            return
        run.push(XComKey.JOB_ARN, arn)
        run.store.update(job_arn=str(arn))

    def _persist_links(self, run: TaskTry, job_name: str) -> None:
        if self.do_xcom_push:
            persist_job_links(run.context, self.job_kind.value, job_name, self.hook, self.log)

    # -- the wait --------------------------------------------------------------------------------------
    def _resume_for(self, wait_for: WaitFor) -> tuple[str, Resume]:
        """The method a wait resumes in: its name, which a deferral records (serialized deferrals name
        it, so it never changes), and the method itself, which a wait outside the triggerer calls."""
        match wait_for:
            case WaitFor.CAPACITY:
                return "execute_complete", self.execute_complete
            case WaitFor.COMPLETION:
                return "execute_job_complete", self.execute_job_complete

    def _wait(
        self, run: TaskTry, wait_for: WaitFor, prefs: InstancePreferenceList, deadline: float | None
    ) -> dict[str, Any] | None:
        """Wait in the triggerer (deferrable) or run the same trigger here; then resume with its event."""
        job_name, windows, waits = self._progress.job_name, self._windows, self.capacity_wait
        assert job_name is not None and windows is not None
        method_name, resume = self._resume_for(wait_for)
        resume_kwargs = {
            "preferences": prefs.as_list(),
            "deadline": deadline,
            "guardrails": self._guardrails,
            "deferred_by_try": run.try_number,  # a resume in another try starts that try over
        }
        self._waited = prefs  # a resume in this process reads it instead of the kwargs' JSON form
        wait = Wait(job_name, wait_for, prefs, deadline, self._claim(run, job_name))
        if not self.deferrable:
            event = waits.run_here(wait, windows)
        else:
            looked, describe = waits.look(wait, windows)
            if looked is None:
                finishing = self._finishing(run, wait_for)
                finishing.say(self.log)
                trigger = waits.trigger(wait, windows, describe, deferring=True, finish=finishing.plan)
                self.defer(trigger=trigger, method_name=method_name, kwargs=resume_kwargs)
            event = looked
        return resume(run.context, event, **resume_kwargs)

    def _claim(self, run: TaskTry, job_name: str) -> OwnerClaim:
        """What proves ``job_name`` this task instance's: the job state recorded with it (its identity tags,
        or this task's own Create), else the identity tags this try knows it was created with, else tags
        naming this deployment and task instance."""
        return job_claim(run.store.load_or_none(), job_name, run.context, self._progress.identity_tags)

    def _finishing(self, run: TaskTry, wait_for: WaitFor) -> FinishDecision:
        """Whether the trigger ends this task when the wait is over, or a worker resumes it."""
        return decide_finish(
            self,
            run.ti,
            wait_for,
            windows=self._windows is not None and self._windows.state is not None,
            region=self.recorder.known_region(),
            guardrails=self._guardrails,
            identity_tags=self._progress.identity_tags,
        )

    def on_kill(self) -> None:
        """The task process was told to stop: stop the SageMaker job with it, unless the task goes on.

        A user's mark or clear ends the task; a scheduler's orphan reset or a retry does not: then the
        next try reattaches to the job (see :mod:`airflow_provider_sm_prefs.task_state`).
        """
        job_name = self._progress.job_name
        if not (self.stop_job_on_kill and job_name):
            return
        ti = self._try.ti
        state = current_state(ti)
        mine = getattr(ti, "try_number", None)
        if state in GOES_ON or (state == "running" and self._try.taken_over_since(mine)):
            self.log.warning(
                "Try %s was killed while the task goes on (now %s): job %s is left to the try that follows, "
                "which reattaches to it",
                mine,
                state,
                job_name,
            )
            return
        try:
            self.hook.stop_job(self.job_kind, job_name, self._claim(self._try, job_name))
        except NotOursError as err:
            self.log.error("%s", err)


class SageMakerPreferenceTrainingOperator(SageMakerPreferenceBaseOperator):
    """Create a SageMaker Training job with ``ResourceConfig.InstancePreferences`` and wait for capacity.

    Per-entry training plans (``training_plan_arn``) back an entry with reserved capacity; put it
    first. See :class:`SageMakerPreferenceBaseOperator` for the parameters.
    """

    job_kind = JobKind.TRAINING


class SageMakerPreferenceProcessingOperator(SageMakerPreferenceBaseOperator):
    """Create a SageMaker Processing job with ``ClusterConfig.InstancePreferences`` and wait for capacity.

    SageMaker documents no pending limit for processing: use ``max_pending`` for a client-side one.
    See :class:`SageMakerPreferenceBaseOperator` for the parameters.
    """

    job_kind = JobKind.PROCESSING
