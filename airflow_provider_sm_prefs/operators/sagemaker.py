"""Operators: submit a Training or Processing job with an instance preference list, once, and wait.

``execute`` and the methods a deferral resumes in read top to bottom here: the arguments checked, the
guardrails, submit-once, the stages of acceptance windows, the wait, the outcome and its record. Each
step is a collaborator called with explicit inputs: :class:`~.guardrails.GuardrailCheck`,
:class:`~.submission.SubmitOnce`, :class:`~.escalation.Escalation`, :class:`~.logs.JobLogPrinter`,
:class:`~airflow_provider_sm_prefs.recording.CapacityRecorder` and :func:`~.lineage.operator_lineage`.
What the try learns on the way is its :class:`~airflow_provider_sm_prefs.recording.TryProgress`; what
survives the try is its :class:`~airflow_provider_sm_prefs.domain.job_state.JobState`.

The module runs over 500 lines on purpose: the constructor documents and stores every argument of both
operators, and the orchestration stays in one place.
"""

from __future__ import annotations

import asyncio
import json
import marshal
from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator, Context

from airflow_provider_sm_prefs.callbacks import STOP_UNATTENDED_JOB, with_job_stop
from airflow_provider_sm_prefs.compat import AirflowFailException
from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.events import CapacityEvent, EventStatus, event_from_describe
from airflow_provider_sm_prefs.domain.guardrails import GuardrailReport
from airflow_provider_sm_prefs.domain.job_state import JobStateStore
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome, XComKey
from airflow_provider_sm_prefs.domain.preferences import (
    ACCEPT_AFTER,
    InstancePreference,
    InstancePreferenceList,
    build_request,
    check_request,
    job_level_count,
    to_seconds,
)
from airflow_provider_sm_prefs.domain.status import WaitFor, is_done, phase_of
from airflow_provider_sm_prefs.hooks.logs import SageMakerJobLogsHook
from airflow_provider_sm_prefs.hooks.sagemaker import (
    AwsSettings,
    SageMakerPreferenceHook,
    derive_job_name,
    service_now,
)
from airflow_provider_sm_prefs.links import (
    CapacityHistoryLink,
    SageMakerPreferenceJobLink,
    SageMakerPreferenceJobLogsLink,
    job_urls,
)
from airflow_provider_sm_prefs.operators.escalation import Escalation, KeepJob
from airflow_provider_sm_prefs.operators.guardrails import GUARDRAIL_FIELDS, GuardrailCheck, with_guardrails
from airflow_provider_sm_prefs.operators.lineage import operator_lineage
from airflow_provider_sm_prefs.operators.logs import DEFAULT_MAX_LOG_LINES, JobLogPrinter
from airflow_provider_sm_prefs.operators.submission import SubmitOnce, try_number_of
from airflow_provider_sm_prefs.operators.templates import has_template
from airflow_provider_sm_prefs.recording import CapacityRecorder, TryProgress
from airflow_provider_sm_prefs.task_state import GOES_ON, current_state, resumed_by_another_try
from airflow_provider_sm_prefs.triggers.capacity import (
    SageMakerCapacityTrigger,
    creation_time_of,
)
from airflow_provider_sm_prefs.triggers.dwell import deferred_now, min_defer_seconds

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors.base import OperatorLineage


async def _first_event(trigger: SageMakerCapacityTrigger) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise RuntimeError("the capacity trigger ended without an event")


def _windows_in_seconds(value: Any) -> Any:
    """A literal list with ``accept_after`` as seconds (JSON-safe in the serialized DAG), else as given."""
    if not isinstance(value, list):
        return value
    try:
        marshal.dumps(value)  # only builtin types inside: no timedelta, no InstancePreference
    except ValueError:
        pass
    else:
        return list(value)
    out: list[Any] = []
    for entry in value:
        if isinstance(entry, InstancePreference):
            entry = entry.as_dict()
        if isinstance(entry, Mapping) and isinstance(entry.get(ACCEPT_AFTER), timedelta):
            entry = {**entry, ACCEPT_AFTER: entry[ACCEPT_AFTER].total_seconds()}
        out.append(entry)
    return out


class SageMakerPreferenceBaseOperator(BaseOperator):
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
    stopped and replaced by the next (``<name>-s2``...). See :mod:`airflow_provider_sm_prefs.domain.escalation`.

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
    :param min_defer_seconds: the trigger reports nothing sooner than this after the task deferred, so
        a job that leaves Pending at once cannot race Airflow's scheduler (apache/airflow#72716, which
        fails such a task). Adds at most this much to a wait that ends right away; 0 turns it off.
        Default: Airflow config ``[sm_prefs] min_defer_seconds``, else 15.
    :param print_log: once the job has ended, write its log lines into the task log (:class:`JobLogPrinter`).
    :param max_log_lines: the most job lines written (the last ones); the task log says what was cut.
    :param requirements: what every entry must offer (``WorkloadRequirements`` or a dict).
    :param max_hourly_cost: USD per hour for an entry's whole cluster; dearer entries are excluded.
    :param max_cost_increase: fraction (0.25 = +25 %) above the first remaining entry.
    :param preflight: ``prune`` (default), ``fail``, ``warn`` or ``off`` (see :class:`GuardrailCheck`).
    :param prices: ``{instance_type: USD per instance-hour}`` used instead of the Price List API.
    :param aws_conn_id: Airflow AWS connection (its extra may set ``endpoint_url``).
    :param region_name: AWS region; kept when deferring.
    :param verify: TLS verification setting; kept when deferring.
    :param botocore_config: botocore config dict; kept when deferring.
    """

    job_kind: ClassVar[JobKind]
    template_fields: Sequence[str] = (
        "config",
        "instance_preferences",
        "max_pending",
        "aws_conn_id",
        "region_name",
        "verify",
        *GUARDRAIL_FIELDS,
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {"config": "json", "instance_preferences": "json"}
    operator_extra_links = (
        SageMakerPreferenceJobLink(),
        SageMakerPreferenceJobLogsLink(),
        CapacityHistoryLink(),
    )
    ui_color = "#e6f4ea"

    config: Any
    instance_preferences: Any
    max_pending: Any
    aws_conn_id: str | None
    region_name: str | None
    verify: bool | str | None
    wait_for_completion: bool
    poll_interval: float
    max_poll_interval: float | None
    deferrable: bool
    stop_job_on_kill: bool
    min_defer_seconds: float | None
    print_log: bool
    max_log_lines: int
    botocore_config: dict[str, Any] | None
    requirements: Any
    max_hourly_cost: Any
    max_cost_increase: Any
    preflight: Any
    prices: Any
    #: What this try learnt so far (job name, list, guardrails, stages, outcome): records and lineage.
    _progress: TryProgress
    #: The task instance and its job state, for on_kill.
    _task_context: tuple[Any, JobStateStore]
    #: The guardrail report the job was submitted with (``GuardrailReport.as_dict()``).
    _guardrails: dict[str, Any] | None
    #: This try's acceptance windows, once it started.
    _escalation: Escalation | None

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        """``.partial()`` with :data:`STOP_UNATTENDED_JOB` after the user's (or the DAG's) failure callbacks.

        ``.partial()`` does not call ``__init__``; what it records is what the scheduler reads to decide
        whether a mapped task failed outside its process gets a failure callback. Airflow 3.0 to 3.2 record
        only the callbacks given (none by default), and a DAG's ``default_args`` callback replaces the
        operator's default on every minor: the stop is added here, after whatever Airflow merged in.
        """
        mapped = super().partial(**kwargs)
        mapped.kwargs["on_failure_callback"] = with_job_stop(mapped.kwargs.get("on_failure_callback"))
        return mapped

    def __init__(
        self,
        *,
        config: dict[str, Any],
        instance_preferences: Any = None,
        max_pending: timedelta | int | float | str | None = None,
        wait_for_completion: bool = True,
        poll_interval: float = 30.0,
        max_poll_interval: float | None = None,
        deferrable: bool = True,
        stop_job_on_kill: bool = True,
        min_defer_seconds: float | None = None,
        print_log: bool = True,
        max_log_lines: int = DEFAULT_MAX_LOG_LINES,
        requirements: Any = None,
        max_hourly_cost: float | str | None = None,
        max_cost_increase: float | str | None = None,
        preflight: str = "prune",
        prices: dict[str, float] | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        on_failure_callback: Any = STOP_UNATTENDED_JOB,
        **kwargs: Any,
    ) -> None:
        # Stop the job if the task fails for good while it still runs, also when Airflow fails the task
        # without running it (scheduler race apache/airflow#72716): see callbacks.py. The default is also
        # what .partial() records for mapped tasks; a user's callbacks run first.
        super().__init__(on_failure_callback=with_job_stop(on_failure_callback), **kwargs)
        # Stored in one step: during __init__, BaseOperator.__setattr__ only looks for a converter (none
        # of these names has one) and records kwargs that apply_defaults overwrites when __init__
        # returns; XCom references are found afterwards. Setting them one by one, on every parse of
        # every task, was most of what this operator added to a DAG's parse time (docs/performance.md).
        vars(self).update(
            config=config,
            instance_preferences=(
                instance_preferences.as_list()
                if isinstance(instance_preferences, InstancePreferenceList)
                else _windows_in_seconds(instance_preferences)
            ),
            max_pending=max_pending,
            aws_conn_id=aws_conn_id,
            region_name=region_name,
            verify=verify,
            requirements=requirements.as_dict() if hasattr(requirements, "as_dict") else requirements,
            max_hourly_cost=max_hourly_cost,
            max_cost_increase=max_cost_increase,
            preflight=preflight,
            prices=prices,
            wait_for_completion=wait_for_completion,
            poll_interval=poll_interval,
            max_poll_interval=max_poll_interval,
            deferrable=deferrable,
            stop_job_on_kill=stop_job_on_kill,
            min_defer_seconds=min_defer_seconds,
            print_log=print_log,
            max_log_lines=max_log_lines,
            botocore_config=botocore_config,
            _progress=TryProgress(),
            _task_context=(None, JobStateStore(None)),
            _guardrails=None,
            _escalation=None,
        )
        # Literal arguments fail the DAG import at parse time; templated ones are checked in execute().
        request = (config, self.instance_preferences, max_pending if isinstance(max_pending, str) else None)
        guardrails = (
            self.requirements,
            max_hourly_cost,
            max_cost_increase,
            preflight,
            prices,
        )  # GUARDRAIL_FIELDS
        everything_literal = not has_template((request, guardrails))  # one pass for the common case
        prefs = None  # the parsed list, when literal
        if everything_literal or not has_template(request):
            prefs = check_request(self.job_kind, config, self.instance_preferences, to_seconds(max_pending))
        if everything_literal or not has_template(guardrails):
            GuardrailCheck(self.job_kind, guardrails, max_pending, self.log).check_at_parse_time(
                prefs, config
            )

    def _set_xcomargs_dependencies(self) -> None:
        """Airflow's search of the template fields for XComArgs, skipped when they are plain literals.

        ``marshal`` takes only trees of exact builtin types, which cannot hold an XComArg; any other
        value (an ``.output``, a custom type) gets Airflow's full walk (see docs/performance.md for the cost).
        """
        values = [getattr(self, name, None) for name in self.template_fields]
        try:
            marshal.dumps([v for v in values if not isinstance(v, timedelta)])
        except ValueError:
            super()._set_xcomargs_dependencies()

    @cached_property
    def hook(self) -> SageMakerPreferenceHook:
        return AwsSettings.of(self).hook()

    @cached_property
    def recorder(self) -> CapacityRecorder:
        """Pushes this task's outcome and record, and records a failed try."""
        return CapacityRecorder(lambda: self.job_kind.value, lambda: self.hook.conn_region_name, self.log)

    @cached_property
    def job_logs(self) -> JobLogPrinter:
        """Prints an ended job's log lines into the task log (``print_log``, ``max_log_lines``)."""
        return JobLogPrinter(
            self.job_kind,
            lambda: SageMakerJobLogsHook(**AwsSettings.of(self).hook_kwargs()),
            self.print_log,
            self.max_log_lines,
            self.log,
        )

    @cached_property
    def submit_once(self) -> SubmitOnce:
        """Decides which job this try runs, and creates it."""
        return SubmitOnce(self.job_kind, self.hook, self.stop_job_on_kill, self.log)

    def guardrail_check(self) -> GuardrailCheck:
        """The guardrails of the rendered arguments."""
        values = tuple(getattr(self, name) for name in GUARDRAIL_FIELDS)
        return GuardrailCheck(self.job_kind, values, self.max_pending, self.log)

    # -- preparation -----------------------------------------------------------------------------------
    def prepare(self) -> tuple[dict[str, Any], InstancePreferenceList, float | None]:
        """Validate the rendered arguments; return the request, the list and the client-side deadline."""
        request, prefs = build_request(
            self.job_kind, self._rendered_config(), self.instance_preferences, to_seconds(self.max_pending)
        )
        max_pending = to_seconds(self.max_pending)
        if max_pending is None and self.job_kind is JobKind.PROCESSING:
            self.log.warning(
                "No max_pending: SageMaker documents no limit on how long a processing job waits for capacity; "
                "set max_pending to bound it."
            )
        return request, prefs, self._deadline(prefs)

    def _total_pending(self, request: Mapping[str, Any]) -> int | None:
        """The bound of the whole wait: max_pending, else the config's MaxPendingTimeInSeconds."""
        given = to_seconds(self.max_pending)
        if given is not None:
            return given
        stopping = request.get("StoppingCondition")
        pending = stopping.get("MaxPendingTimeInSeconds") if isinstance(stopping, Mapping) else None
        try:
            return int(pending) if pending is not None else None
        except (TypeError, ValueError):
            return None

    def _preferences_of_resume(self, given: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """The list the job was submitted with: the deferral's own, else (``dag.test()`` resumes with the
        event alone) the rendered arguments' list, which ``execute`` checked and submitted."""
        if given is not None:
            return list(given)
        try:
            _, prefs = build_request(
                self.job_kind,
                self._rendered_config(),
                self.instance_preferences,
                to_seconds(self.max_pending),
            )
        except errors.InvalidInstancePreferencesError:
            return []
        return prefs.as_list()

    def _rendered_config(self) -> Any:
        """The rendered config (a string of JSON is read); anything but a dict is reported by build_request."""
        config = self.config
        if isinstance(config, str):
            try:
                config = json.loads(config)
            except ValueError:
                raise errors.InvalidInstancePreferencesError(
                    ["config: rendered to a string that is not JSON"]
                ) from None
        return config

    def _deadline(self, prefs: InstancePreferenceList) -> float | None:
        """The client-side deadline: max_pending where SageMaker enforces none (processing, CPU-only)."""
        max_pending = to_seconds(self.max_pending)
        server_enforced = self.job_kind is JobKind.TRAINING and prefs.waits_for_capacity
        deadline = None if server_enforced else max_pending
        return float(deadline) if deadline else None

    # -- execution -------------------------------------------------------------------------------------
    def _begin_try(self, context: Context) -> Escalation:
        """This try's job state (for on_kill) and acceptance windows; kept when the same process resumes."""
        store = JobStateStore.of(context)
        self._task_context = (context.get("ti"), store)
        if self._escalation is None:
            self._escalation = Escalation(self.job_kind, self.hook, store, self._progress, self.log)
        return self._escalation

    def execute(self, context: Context) -> dict[str, Any] | None:
        escalation = self._begin_try(context)
        with self.recorder.failures(context, self._progress):
            return self._submit_and_wait(context, escalation)

    def _submit_and_wait(self, context: Context, escalation: Escalation) -> dict[str, Any] | None:
        kind, progress = self.job_kind, self._progress
        # 1. The rendered arguments, checked: nothing goes to AWS when they are wrong.
        guardrails = self.guardrail_check()
        try:
            request, prefs, deadline = self.prepare()
            guardrails.settings()
        except errors.InvalidInstancePreferencesError as err:
            # Not worth a retry: the same arguments render the same problems. Nothing was sent to AWS.
            raise AirflowFailException(str(err)) from err
        progress.preferences = prefs.as_list()
        base_name = self._base_name(context, request)
        self.log.info(
            "Instance preferences for %s: %s", base_name, prefs.describe(job_level_count(kind, request))
        )

        # 2. Submit once: this try's job is an earlier try's (reattach, return, next stage) or a new one.
        store = JobStateStore.of(context)
        existing = self.submit_once.name_this_try(context, store, base_name, escalation.continues)
        recorded = store.load()
        self._guardrails = recorded.guardrails if recorded is not None else None
        if isinstance(existing, CapacityOutcome):
            escalation.begin(prefs, existing.job_name, None)
            existing = escalation.with_stages(with_guardrails(existing, self._guardrails, self.log))
            self.log.info(
                "Job already completed on an earlier try; returning its outcome: %s", existing.summary()
            )
            self._persist_links(context, existing.job_name)  # a new try starts without the old XComs
            return self.recorder.push(context, existing, progress, selection=False)
        job_name, describe = existing

        # 3. The guardrails before Create: no Create call if nothing remains.
        if describe is None:
            request, prefs, report = guardrails.guard(
                self.hook, self._rendered_config(), request, prefs, progress
            )
            deadline = self._deadline(prefs)
            self._guardrails = report.as_dict()
            store.update(guardrails=self._guardrails)

        # 4. Acceptance windows: the list goes in stages, each its own job.
        staging = escalation.begin(prefs, job_name, self._total_pending(request))
        if staging is not None:
            prefs = staging.submitted
            if describe is None:
                return self._submit_stage(context, job_name, staging.limits(kind, staging.elapsed))

        # 5. Create (the name is already recorded), then wait for capacity.
        progress.job_name = job_name
        request[kind.spec.name_field] = job_name
        self._persist_links(context, job_name)
        context["ti"].xcom_push(key=XComKey.JOB_NAME.value, value=job_name)
        if describe is None:
            describe = self._create(context, request, prefs, job_name)
        self._record_arn(context, describe)
        return self._wait(context, WaitFor.CAPACITY, prefs, deadline)

    def _create(
        self, context: Context, request: dict[str, Any], prefs: InstancePreferenceList, job_name: str
    ) -> dict[str, Any]:
        return self.submit_once.create(request, prefs, job_name)

    def _submit_stage(self, context: Context, job_name: str, limits: Any) -> dict[str, Any] | None:
        """Create the current stage's job (its name already recorded) and wait for it."""
        assert self._escalation is not None and self._escalation.staging is not None
        staging = self._escalation.staging
        request = self._escalation.stage_request(self._rendered_config(), limits, job_name)
        self._progress.job_name = job_name
        self._persist_links(context, job_name)
        context["ti"].xcom_push(key=XComKey.JOB_NAME.value, value=job_name)
        describe = self._create(context, request, staging.current.preferences(staging.submitted), job_name)
        self._record_arn(context, describe)
        return self._wait(context, WaitFor.CAPACITY, staging.submitted, None)

    def _record_arn(self, context: Context, describe: Mapping[str, Any]) -> None:
        """The job's ARN, once Create (or a Describe of the running job) gave it: in XCom and the job state."""
        arn = describe.get(self.job_kind.spec.arn_field)
        if not arn:
            return
        context["ti"].xcom_push(key=XComKey.JOB_ARN.value, value=arn)
        JobStateStore.of(context).update(job_arn=str(arn))

    def _base_name(self, context: Context, request: Mapping[str, Any]) -> str:
        """The config's job name, or one derived from the task instance when the config gives none."""
        name_field = self.job_kind.spec.name_field
        given = request.get(name_field)
        if given:
            return str(given)
        ti = context["ti"]
        map_index = getattr(ti, "map_index", -1)
        name = derive_job_name(ti.dag_id, ti.task_id, ti.run_id, -1 if map_index is None else int(map_index))
        self.log.info("No %s in config: using %s, derived from this task instance and run", name_field, name)
        return name

    def _persist_links(self, context: Context, job_name: str) -> None:
        if not self.do_xcom_push:
            return
        try:
            job_url, logs_url = job_urls(
                self.job_kind.value,
                job_name,
                region_name=self.hook.conn_region_name,
                aws_partition=self.hook.conn_partition,
                endpoint_url=self.hook.conn_config.get_service_endpoint_url("sagemaker"),
            )
        except Exception:  # links are a convenience; never fail the task for them
            self.log.debug("Could not resolve the job's links", exc_info=True)
            return
        SageMakerPreferenceJobLink.persist(context, job_url)
        SageMakerPreferenceJobLogsLink.persist(context, logs_url)

    # -- the wait --------------------------------------------------------------------------------------
    def _trigger(
        self,
        wait_for: WaitFor,
        prefs: InstancePreferenceList,
        deadline: float | None,
        describe: Mapping[str, Any] | None = None,
        deferring: bool = False,
    ) -> SageMakerCapacityTrigger:
        job_name = self._progress.job_name
        assert job_name is not None
        escalate_after = None
        staging = self._escalation.staging if self._escalation is not None else None
        if staging is not None and wait_for is WaitFor.CAPACITY:
            escalate_after, deadline = staging.timers(self.job_kind, describe)
        return SageMakerCapacityTrigger(
            job_name=job_name,
            creation_time=creation_time_of(describe),
            escalate_after_seconds=escalate_after,
            job_kind=self.job_kind.value,
            wait_for=wait_for.value,
            preferences=prefs.as_list(),
            poll_interval=self.poll_interval,
            max_poll_interval=self.max_poll_interval,
            deadline_seconds=deadline if wait_for is WaitFor.CAPACITY else None,
            stop_on_deadline=True,
            stop_job_on_kill=self.stop_job_on_kill,
            aws_conn_id=self.aws_conn_id,
            region_name=self.region_name,
            verify=self.verify,
            botocore_config=self.botocore_config,
            deferred_at=deferred_now() if deferring else None,
            min_defer_seconds=min_defer_seconds(self.min_defer_seconds) if deferring else None,
        )

    def _wait(
        self, context: Context, wait_for: WaitFor, prefs: InstancePreferenceList, deadline: float | None
    ) -> dict[str, Any] | None:
        """Wait in the triggerer (deferrable) or run the same trigger here; then resume with its event."""
        job_name = self._progress.job_name
        assert job_name is not None and self._escalation is not None
        method = "execute_complete" if wait_for is WaitFor.CAPACITY else "execute_job_complete"
        staging = self._escalation.staging
        if not self.deferrable:
            describe = None
            if staging is not None and wait_for is WaitFor.CAPACITY:
                describe = self.hook.describe_job(self.job_kind, job_name)
                self._escalation.note_origin(describe)
            event = asyncio.run(_first_event(self._trigger(wait_for, prefs, deadline, describe)))
        else:
            # Look before deferring: a reattached or fast job may already be past the wait, and then
            # this look is the answer. Otherwise the trigger starts from it (CreationTime) instead of
            # Describing the job again.
            kind = self.job_kind
            describe = self.hook.describe_job(kind, job_name)
            self._escalation.note_origin(describe)
            phase = phase_of(kind, describe) if describe is not None else None
            if describe is None or phase is None or not is_done(phase, wait_for):
                self.defer(
                    trigger=self._trigger(wait_for, prefs, deadline, describe, deferring=True),
                    method_name=method,
                    kwargs={
                        "preferences": prefs.as_list(),
                        "deadline": deadline,
                        "guardrails": self._guardrails,
                        "deferred_by_try": try_number_of(context),
                    },
                )
            event = event_from_describe(
                kind, wait_for, describe, phase, prefs, now=service_now(describe)
            ).as_payload()
        resume: Any = getattr(self, method)
        result: dict[str, Any] | None = resume(
            context,
            event,
            preferences=prefs.as_list(),
            deadline=deadline,
            guardrails=self._guardrails,
            deferred_by_try=try_number_of(context),  # this very try: no need to ask the job state
        )
        return result

    # -- after the wait --------------------------------------------------------------------------------
    def execute_complete(
        self,
        context: Context,
        event: dict[str, Any] | None = None,
        preferences: list[dict[str, Any]] | None = None,
        deadline: float | None = None,
        guardrails: dict[str, Any] | None = None,
        deferred_by_try: int | None = None,
    ) -> dict[str, Any] | None:
        """Resume after capacity: push the outcome; then wait for completion if asked."""
        if self._resumed_by_another_try(context, deferred_by_try):
            return self.execute(context)
        progress = self._progress
        progress.preferences = self._preferences_of_resume(preferences)
        escalation = self._begin_try(context)
        # dag.test() resumes with the event alone: the report is also in the job state.
        self._guardrails = self._guardrails or guardrails or self._recorded_guardrails(context)
        with self.recorder.failures(context, progress):
            if escalation.staging is None:
                staging = escalation.load()
                progress.stages = list(staging.history) if staging else None
            received = CapacityEvent.from_payload(event, progress.job_name or "?")
            if escalation.handles(received):
                progress.job_name = received.job_name
                return self._escalate(context)
            return self._resume_capacity(context, event)

    def _escalate(self, context: Context) -> dict[str, Any] | None:
        """The current stage's window closed: keep a job that got capacity, else go on to the next stage."""
        assert self._escalation is not None and self._progress.job_name is not None
        step = self._escalation.escalate(self._progress.job_name)
        if isinstance(step, KeepJob):
            return self._resume_capacity(context, step.event)
        return self._submit_stage(context, step.job_name, step.limits)

    def _resume_capacity(self, context: Context, event: dict[str, Any] | None) -> dict[str, Any] | None:
        """The end of the capacity wait: push the outcome; then wait for completion if asked."""
        assert self._escalation is not None
        progress, staging = self._progress, self._escalation.staging
        preferences = staging.submitted.as_list() if staging else progress.preferences
        received = CapacityEvent.from_payload(event, progress.job_name or "?")
        if staging is not None and received.status is not EventStatus.SUCCESS:
            progress.stages = [*staging.history, self._escalation.failed_stage(received)]
        outcome = self.job_logs.outcome_with_logs(received)
        progress.job_name = outcome.job_name
        outcome = self._escalation.with_stages(with_guardrails(outcome, self._guardrails, self.log))
        self.log.info("Capacity acquired: %s", outcome.summary())
        result = self.recorder.push(context, outcome, progress)
        if self.wait_for_completion and not received.job_ended:
            prefs = InstancePreferenceList.from_response(preferences or outcome.preferences, self.job_kind)
            return self._wait(context, WaitFor.COMPLETION, prefs, None)
        return result

    def execute_job_complete(
        self,
        context: Context,
        event: dict[str, Any] | None = None,
        preferences: list[dict[str, Any]] | None = None,
        deadline: float | None = None,
        guardrails: dict[str, Any] | None = None,
        deferred_by_try: int | None = None,
    ) -> dict[str, Any] | None:
        """Resume after the job ended."""
        if self._resumed_by_another_try(context, deferred_by_try):
            return self.execute(context)
        progress = self._progress
        progress.preferences = self._preferences_of_resume(preferences)
        escalation = self._begin_try(context)
        self._guardrails = guardrails = guardrails or self._recorded_guardrails(context)
        with self.recorder.failures(context, progress):
            if escalation.staging is None:
                escalation.load()
            outcome = self.job_logs.outcome_with_logs(
                CapacityEvent.from_payload(event, progress.job_name or "?")
            )
            report = GuardrailReport.from_dict(guardrails)
            outcome = escalation.with_stages(report.apply(outcome) if report else outcome)
            self.log.info("Job finished: %s", outcome.summary())
            return self.recorder.push(context, outcome, progress, selection=False)

    @staticmethod
    def _resumed_by_another_try(context: Context, deferred_by_try: int | None) -> bool:
        """Whether this try starts with another try's trigger event (:func:`resumed_by_another_try`).

        The deferral's own record says so where Airflow keeps it; ``dag.test()`` before 3.1 resumes with
        the event alone, and then the job state does: every try that runs ``execute`` takes the job over.
        """
        if resumed_by_another_try(context, deferred_by_try):
            return True
        if deferred_by_try is not None:
            return False
        state = JobStateStore.of(context).load()
        return resumed_by_another_try(context, state.try_number if state is not None else None)

    @staticmethod
    def _recorded_guardrails(context: Context) -> dict[str, Any] | None:
        """The guardrail report an earlier try of this task submitted its job with."""
        state = JobStateStore.of(context).load()
        return state.guardrails if state is not None else None

    def on_kill(self) -> None:
        """The task process was told to stop: stop the SageMaker job with it, unless the task goes on.

        A user's mark or clear ends the task; a scheduler's orphan reset or a retry does not: then the
        next try reattaches to the job (see :mod:`airflow_provider_sm_prefs.task_state`).
        """
        job_name = self._progress.job_name
        if not (self.stop_job_on_kill and job_name):
            return
        ti, store = self._task_context
        state = current_state(ti)
        mine = getattr(ti, "try_number", None)
        if state in GOES_ON or (state == "running" and _taken_over(store, mine)):
            self.log.warning(
                "Try %s was killed while the task goes on (now %s): job %s is left to the try that follows, "
                "which reattaches to it",
                mine,
                state,
                job_name,
            )
            return
        self.hook.stop_job(self.job_kind, job_name)

    # -- OpenLineage -----------------------------------------------------------------------------------
    def _lineage(self, *, finished: bool) -> OperatorLineage[Any, Any]:
        return operator_lineage(
            self.job_kind,
            self._rendered_config,
            self.instance_preferences,
            self.max_pending,
            self._progress,
            finished=finished,
        )

    def get_openlineage_facets_on_start(self) -> OperatorLineage[Any, Any]:
        """The request's S3 inputs and outputs, and the preference list (nothing selected yet)."""
        return self._lineage(finished=False)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        """As on start, with the outcome: the selected entry, its rank, the wait, costs; for a completed
        training job the model artifact SageMaker reports instead of the output prefix."""
        return self._lineage(finished=True)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        """As on complete: the outcome when SageMaker had selected an entry before the task failed."""
        return self._lineage(finished=True)


def _taken_over(store: JobStateStore, try_number: Any) -> bool:
    """Whether the job state says a later try than ``try_number`` took the job over."""
    state = store.load_or_none()
    return state is not None and state.owned_by_later_try(try_number)


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
