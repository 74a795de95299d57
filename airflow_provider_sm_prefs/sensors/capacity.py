"""A deferrable sensor for a job started elsewhere: wait until it leaves Pending, push the outcome."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any

# Not ``import warnings``: Airflow swaps a module-level ``warnings`` of an operator's module for one that
# adds 2 to every stacklevel, which would point these warnings past the caller.
from warnings import warn

from airflow.sdk import Context, PokeReturnValue

from airflow_provider_sm_prefs.compat import AirflowFailException
from airflow_provider_sm_prefs.completion import WaitCompletion
from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.events import CapacityEvent, deadline_passed, event_from_describe
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import to_seconds
from airflow_provider_sm_prefs.domain.status import JobSnapshot, WaitFor, is_done
from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings, SageMakerPreferenceHook, service_now
from airflow_provider_sm_prefs.links import CapacityHistoryLink
from airflow_provider_sm_prefs.operators.finishing import decide_finish
from airflow_provider_sm_prefs.operators.identity import deployment_claim
from airflow_provider_sm_prefs.recording import CapacityRecorder, TryProgress
from airflow_provider_sm_prefs.sensors.base import SageMakerBaseSensor
from airflow_provider_sm_prefs.task_state import resumed_by_another_try
from airflow_provider_sm_prefs.triggers.capacity import (
    CapacityWaitSpec,
    SageMakerCapacityTrigger,
    creation_time_of,
)
from airflow_provider_sm_prefs.triggers.dwell import deferral


class SageMakerCapacitySensor(SageMakerBaseSensor[SageMakerPreferenceHook]):
    """Wait for a SageMaker job submitted outside this DAG to get capacity (or to end).

    Pushes the same XCom keys as the operators and fails on the same distinct errors (capacity
    timeout, CPU-only capacity error, job failed, job stopped). It never stops the watched job on
    its own deadline unless ``stop_job_on_deadline`` is set: the job belongs to someone else.

    :param job_name: the SageMaker job to watch (templated).
    :param job_kind: ``training`` (default) or ``processing`` (templated).
    :param job_type: deprecated name of ``job_kind``; warns, and passing both is an error.
    :param wait_for: ``capacity`` (default) or ``completion``.
    :param max_pending: fail with a capacity timeout if no entry is selected this long after the
        job's CreationTime (timedelta or seconds).
    :param stop_job_on_deadline: also stop the job when ``max_pending`` passes.
    :param deferrable: wait in the triggerer (default) instead of poking from a worker.
    :param poll_interval: seconds between checks when deferred (``poke_interval`` when poking).
    :param min_defer_seconds: an event that resumes the sensor in a worker comes no sooner than this
        after it deferred (see the operators' parameter of the same name, apache/airflow#72716; an event
        that ends it in the triggerer is not held); 0 turns it off.
        Default: Airflow config ``[sm_prefs] min_defer_seconds``, else 15.
    :param finish_in_triggerer: the trigger ends the sensor itself when the wait is over (the outcome's
        XCom keys and record pushed from the triggerer; no worker resumes it), as the operators do (see
        :mod:`airflow_provider_sm_prefs.operators.finishing` for the waits that still resume).

    ``aws_conn_id``, ``region_name``, ``verify`` and ``botocore_config`` reach AWS as every amazon
    provider operator does (:class:`~airflow_provider_sm_prefs.sensors.base.SageMakerBaseSensor`).
    """

    template_fields: Sequence[str] = ("job_name", "job_kind", "aws_conn_id", "region_name", "verify")
    ui_color = "#e6f4ea"
    operator_extra_links = (CapacityHistoryLink(),)
    aws_hook_class = SageMakerPreferenceHook

    def __init__(
        self,
        *,
        job_name: str,
        job_kind: str | None = None,
        wait_for: str = WaitFor.CAPACITY.value,
        max_pending: timedelta | int | float | None = None,
        stop_job_on_deadline: bool = False,
        job_type: str | None = None,
        finish_in_triggerer: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.finish_in_triggerer = finish_in_triggerer
        self.job_name = job_name
        kind = _renamed_job_kind(job_kind, job_type)
        # A literal kind is checked now (DAG parse); a templated one once rendered (see ``kind``).
        self.job_kind = kind if "{{" in str(kind) else _job_kind(kind).value
        self.wait_for = WaitFor(wait_for).value
        self.max_pending_seconds = to_seconds(max_pending)
        self.stop_job_on_deadline = stop_job_on_deadline
        self._last_describe: dict[str, Any] | None = None
        self._progress = TryProgress()

    @property
    def job_type(self) -> str:
        """Deprecated name of ``job_kind`` (read-only)."""
        warn(_JOB_TYPE_DEPRECATED, DeprecationWarning, stacklevel=2)
        return self.job_kind

    @property
    def kind(self) -> JobKind:
        return _job_kind(self.job_kind)

    @cached_property
    def recorder(self) -> CapacityRecorder:
        """Pushes the outcome and record of the watched job, and records a failed try."""
        return CapacityRecorder(lambda: str(self.job_kind), lambda: self.hook.conn_region_name, self.log)

    def execute(self, context: Context) -> Any:
        self._progress.job_name = self.job_name
        with self.recorder.failures(context, self._progress):
            return self._watch(context)

    def _watch(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        result = self.poke(context)
        if result:
            return result.xcom_value if isinstance(result, PokeReturnValue) else None
        finishing = decide_finish(
            self,
            context.get("ti"),
            WaitFor(self.wait_for),
            windows=False,
            region=self.recorder.known_region(),
            selection=True,  # what the sensor's own push reports, whatever it waits for
        )
        finishing.say(self.log)
        self.defer(
            trigger=SageMakerCapacityTrigger.of(
                CapacityWaitSpec(
                    job_name=self.job_name,
                    job_kind=self.kind.value,
                    wait_for=self.wait_for,
                    poll_interval=self.poll_interval,
                    deadline_seconds=self.max_pending_seconds,
                    stop_on_deadline=self.stop_job_on_deadline,
                    stop_job_on_kill=False,
                    aws=AwsSettings.of(self),
                    creation_time=creation_time_of(self._last_describe),
                    finish=finishing.plan,
                    owner=deployment_claim().as_dict() if self.stop_job_on_deadline else None,
                    **deferral(True, self.min_defer_seconds),
                )
            ),
            method_name="execute_complete",
            kwargs={"deferred_by_try": getattr(context.get("ti"), "try_number", None)},
        )

    def poke(self, context: Context) -> bool | PokeReturnValue:
        kind = self.kind
        describe = self._last_describe = self.hook.describe_job(kind, self.job_name)
        if describe is None:
            raise errors.JobFailedError(
                self.job_name, None, f"SageMaker has no {self.job_kind} job with this name"
            )
        job = JobSnapshot.of(kind, describe, service_now(describe))
        if is_done(job.phase, self.wait_for):
            received = event_from_describe(kind, self.wait_for, describe, job.phase, now=job.now)
            return PokeReturnValue(is_done=True, xcom_value=self._complete(context, received))
        passed = deadline_passed(
            job, self.wait_for, self.job_name, self.max_pending_seconds, self.stop_job_on_deadline
        )
        if passed is not None:
            if passed.stop_job:
                try:
                    self.hook.stop_job(kind, self.job_name, deployment_claim())
                except errors.NotOursError as err:  # the deadline still fails the wait
                    self.log.error("%s", err)
            passed.event.outcome_or_raise()  # raises its CapacityTimeoutError
        self.log.info("%s: %s, still waiting", self.job_name, job.phase.value)
        return False

    def execute_complete(
        self, context: Context, event: dict[str, Any] | None = None, deferred_by_try: int | None = None
    ) -> Any:
        if resumed_by_another_try(context, deferred_by_try):
            return self.execute(context)
        self._progress.job_name = self.job_name
        with self.recorder.failures(context, self._progress):
            return self._complete(context, CapacityEvent.from_payload(event, self.job_name))

    def _complete(self, context: Context, received: CapacityEvent) -> dict[str, Any]:
        """The wait's end, as every task of the provider ends one (no job logs, no guardrails here)."""
        completion = WaitCompletion(self.recorder, None, None, self.log)
        return completion.complete(context, received, self._progress, selection=True).value


_JOB_TYPE_DEPRECATED = "SageMakerCapacitySensor: job_type is deprecated; use job_kind"


def _renamed_job_kind(job_kind: str | None, job_type: str | None) -> str:
    """``job_kind``, or the deprecated ``job_type`` with a warning; both at once is an error."""
    if job_type is None:
        return JobKind.TRAINING.value if job_kind is None else job_kind
    if job_kind is not None:
        raise TypeError(
            "SageMakerCapacitySensor: pass job_kind only (job_type is its deprecated name), not both"
        )
    # Past this helper, __init__ and the wrapper Airflow puts around it: the line that built the sensor.
    warn(_JOB_TYPE_DEPRECATED, DeprecationWarning, stacklevel=4)
    return job_type


def _job_kind(value: Any) -> JobKind:
    try:
        return JobKind(str(value).strip().lower())
    except ValueError:
        raise AirflowFailException(
            f"job_kind: {value!r} is not a job kind; use 'training' or 'processing'"
        ) from None
