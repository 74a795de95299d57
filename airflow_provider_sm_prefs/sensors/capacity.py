"""A deferrable sensor for a job started elsewhere: wait until it leaves Pending, push the outcome."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_sm_prefs import exceptions as errors
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook, service_now
from airflow_provider_sm_prefs.operators.sagemaker import error_from_event
from airflow_provider_sm_prefs.outcome import (
    CapacityOutcome,
    outcome_from_describe,
    terminal_error,
    waiting_seconds,
)
from airflow_provider_sm_prefs.preferences import JobKind, to_seconds
from airflow_provider_sm_prefs.status import Phase, phase_of
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger, WaitFor, creation_time_of


class SageMakerCapacitySensor(BaseSensorOperator):
    """Wait for a SageMaker job submitted outside this DAG to get capacity (or to end).

    Pushes the same XCom keys as the operators and fails on the same distinct errors (capacity
    timeout, CPU-only capacity error, job failed, job stopped). It never stops the watched job on
    its own deadline unless ``stop_job_on_deadline`` is set: the job belongs to someone else.

    :param job_name: the SageMaker job to watch (templated).
    :param job_type: ``training`` or ``processing`` (templated).
    :param wait_for: ``capacity`` (default) or ``completion``.
    :param max_pending: fail with a capacity timeout if no entry is selected this long after the
        job's CreationTime (timedelta or seconds).
    :param stop_job_on_deadline: also stop the job when ``max_pending`` passes.
    :param deferrable: wait in the triggerer (default) instead of poking from a worker.
    :param poll_interval: seconds between checks when deferred (``poke_interval`` when poking).
    """

    template_fields: Sequence[str] = ("job_name", "job_type", "aws_conn_id", "region_name")
    ui_color = "#e6f4ea"

    def __init__(
        self,
        *,
        job_name: str,
        job_type: str = JobKind.TRAINING.value,
        wait_for: str = WaitFor.CAPACITY.value,
        max_pending: timedelta | int | float | None = None,
        stop_job_on_deadline: bool = False,
        deferrable: bool = True,
        poll_interval: float = 30.0,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_name = job_name
        # A literal kind is checked now (DAG parse); a templated one once rendered (see ``kind``).
        self.job_type = job_type if "{{" in str(job_type) else _job_kind(job_type).value
        self.wait_for = WaitFor(wait_for).value
        self.max_pending_seconds = to_seconds(max_pending)
        self.stop_job_on_deadline = stop_job_on_deadline
        self.deferrable = deferrable
        self._last_describe: dict[str, Any] | None = None
        self.poll_interval = poll_interval
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.verify = verify
        self.botocore_config = botocore_config

    @cached_property
    def hook(self) -> SageMakerPreferenceHook:
        return SageMakerPreferenceHook(
            aws_conn_id=self.aws_conn_id,
            region_name=self.region_name,
            verify=self.verify,
            config=self.botocore_config,
        )

    @property
    def kind(self) -> JobKind:
        return _job_kind(self.job_type)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        result = self.poke(context)
        if result:
            return result.xcom_value if isinstance(result, PokeReturnValue) else None
        self.defer(
            trigger=SageMakerCapacityTrigger(
                job_name=self.job_name,
                creation_time=creation_time_of(self._last_describe),
                job_kind=self.kind.value,
                wait_for=self.wait_for,
                poll_interval=self.poll_interval,
                deadline_seconds=self.max_pending_seconds,
                stop_on_deadline=self.stop_job_on_deadline,
                stop_job_on_kill=False,
                aws_conn_id=self.aws_conn_id,
                region_name=self.region_name,
                verify=self.verify,
                botocore_config=self.botocore_config,
            ),
            method_name="execute_complete",
        )

    def poke(self, context: Context) -> bool | PokeReturnValue:
        describe = self._last_describe = self.hook.describe_job(self.kind, self.job_name)
        if describe is None:
            raise errors.JobFailedError(
                self.job_name, None, f"SageMaker has no {self.job_type} job with this name"
            )
        phase = phase_of(self.kind, describe)
        now = service_now(describe)
        if phase.is_terminal():
            error = terminal_error(self.kind, describe, now=now)
            if error is not None:
                raise error
        if phase.is_terminal() or (self.wait_for == WaitFor.CAPACITY.value and phase is Phase.RUNNING):
            outcome = outcome_from_describe(self.kind, describe, now=now)
            return PokeReturnValue(is_done=True, xcom_value=self._push(context, outcome))
        if (
            phase is Phase.WAITING
            and self.max_pending_seconds
            and waiting_seconds(describe, now) >= self.max_pending_seconds
        ):
            if self.stop_job_on_deadline:
                self.hook.stop_job(self.kind, self.job_name)
            raise errors.CapacityTimeoutError(
                self.job_name,
                describe.get("TrainingJobStatus") or describe.get("ProcessingJobStatus"),
                f"no entry selected within max_pending={self.max_pending_seconds}s",
            )
        self.log.info("%s: %s, still waiting", self.job_name, phase.value)
        return False

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        if not event or event.get("status") != "success" or not event.get("outcome"):
            raise error_from_event(event or {"job_name": self.job_name, "reason": "no event"})
        return self._push(context, CapacityOutcome.from_dict(event["outcome"]))

    def _push(self, context: Context, outcome: CapacityOutcome) -> dict[str, Any]:
        for key, value in outcome.xcom_values().items():
            context["ti"].xcom_push(key=key, value=value)
        self.log.info("Capacity outcome: %s", outcome.summary())
        return outcome.as_dict()


def _job_kind(value: Any) -> JobKind:
    try:
        return JobKind(str(value).strip().lower())
    except ValueError:
        raise AirflowFailException(
            f"job_type: {value!r} is not a job kind; use 'training' or 'processing'"
        ) from None
