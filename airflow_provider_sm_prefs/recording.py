"""How the operators and the sensors leave their :class:`~airflow_provider_sm_prefs.domain.record.CapacityRecord`.

:class:`CapacityRecorder` serves them all: :meth:`~CapacityRecorder.push` pushes a job's outcome's XCom
keys and the record (and sends the capacity metrics, :mod:`.metrics`); :meth:`~CapacityRecorder.record`
pushes the record alone (a HyperPod instance group's outcome has its own XCom key); :meth:`~CapacityRecorder.failures` wraps a
task's entry points so a try that fails leaves a record saying why before the exception goes on to
Airflow. What a failure record says comes from the try's :class:`TryProgress`, which the task fills in
as it goes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow.sdk import Context

from airflow_provider_sm_prefs import metrics
from airflow_provider_sm_prefs.compat import TaskDeferred, xcom_push
from airflow_provider_sm_prefs.domain.exceptions import SageMakerPreferencesError
from airflow_provider_sm_prefs.domain.hyperpod_outcome import GroupOutcome
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.record import RECORD_KEY, CapacityRecord, TaskInstanceRef

__all__ = ["CapacityRecorder", "TryProgress"]


@dataclass
class TryProgress:
    """What one task try has learnt so far: the failure record, lineage and the kill path read it.

    :param job_name: the job this try submitted or watches, once known.
    :param preferences: the list as submitted, once validated (``InstancePreferenceList.as_list()``).
    :param guardrails: what the guardrails before submit decided (``GuardrailReport.record_fields()``).
    :param stages: submission stages that ended before now (acceptance windows).
    :param outcome: the outcome this try pushed last.
    :param group: what is known of a HyperPod instance group (``hyperpod_outcome.request_fields``).
    :param identity_tags: the identity tags the job was created with, once known (by this try or an
        earlier one).
    """

    job_name: str | None = None
    preferences: list[dict[str, Any]] = field(default_factory=list)
    guardrails: dict[str, Any] | None = None
    stages: list[dict[str, Any]] | None = None
    outcome: CapacityOutcome | None = None
    group: dict[str, Any] | None = None
    identity_tags: dict[str, str] | None = None


class CapacityRecorder:
    """Pushes a try's outcome and record, and leaves a record for a try that fails.

    :param job_kind: ``training``, ``processing`` (the sensor's may be known only once rendered) or
        ``hyperpod-group`` (:data:`~airflow_provider_sm_prefs.domain.kinds.GROUP_KIND`).
    :param region: the region the job runs in (read when a record is made; None when unknown).
    :param log: the task's logger.
    """

    def __init__(self, job_kind: Callable[[], str], region: Callable[[], str | None], log: Any) -> None:
        self.job_kind = job_kind
        self.region = region
        self.log = log

    def known_region(self) -> str | None:
        """The region records name (None when it cannot be read: a record never fails the task)."""
        try:
            region = self.region()
        except Exception:  # the record is a report; never fail the task for it
            return None
        return str(region) if region else None

    def push(
        self, context: Context, outcome: CapacityOutcome, progress: TryProgress, selection: bool = True
    ) -> dict[str, Any]:
        """Push the outcome's XCom keys and this try's record; returns ``return_value``.

        :param selection: this push reports the selection (sends the capacity metrics); False for the
            push when the job ends after an earlier push reported it, or for a job an earlier try ran.
        """
        progress.outcome = outcome
        ti = context["ti"]
        for key, value in outcome.xcom_values().items():
            xcom_push(ti, key, value)
        self.record(context, outcome, selection, identity_tags=progress.identity_tags)
        return outcome.as_dict()

    def record(
        self,
        context: Context,
        outcome: CapacityOutcome | GroupOutcome,
        selection: bool = True,
        identity_tags: Mapping[str, str] | None = None,
    ) -> CapacityRecord:
        """Push this try's record of ``outcome`` (and send its metrics when it reports the selection)."""
        record = CapacityRecord.from_outcome(
            TaskInstanceRef.of(context["ti"]), outcome, self.known_region(), identity_tags=identity_tags
        )
        context["ti"].xcom_push(key=RECORD_KEY, value=record.as_dict())
        if selection:
            metrics.emit(record)
        return record

    @contextlib.contextmanager
    def failures(self, context: Context, progress: TryProgress) -> Iterator[None]:
        """Leave a failure record for any exception but a deferral, then let it go on."""
        try:
            yield
        except TaskDeferred:
            raise
        except Exception as err:
            cause = err.__cause__ if isinstance(err.__cause__, SageMakerPreferencesError) else err
            try:
                record = CapacityRecord.from_error(
                    TaskInstanceRef.of(context["ti"]),
                    cause,
                    self.job_kind(),
                    progress.job_name,
                    list(progress.preferences),
                    self.known_region(),
                    guardrails=progress.guardrails,
                    stages=progress.stages,
                    group=progress.group,
                    identity_tags=progress.identity_tags,
                )
                context["ti"].xcom_push(key=RECORD_KEY, value=record.as_dict())
                metrics.emit(record)
            except Exception:
                self.log.warning("Could not record the failure of this try", exc_info=True)
            raise
