"""How the operators and the sensor leave their :class:`~airflow_provider_sm_prefs.record.CapacityRecord`.

One mixin for both: :meth:`CapacityRecording.push_outcome` pushes the outcome's XCom keys and the record
(and sends the capacity metrics, :mod:`.metrics`);
:meth:`CapacityRecording.recording_failures` wraps a task's entry points so a try that fails leaves a
record saying why before the exception goes on to Airflow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import TaskDeferred

from airflow_provider_sm_prefs import metrics
from airflow_provider_sm_prefs.exceptions import SageMakerPreferencesError
from airflow_provider_sm_prefs.outcome import CapacityOutcome
from airflow_provider_sm_prefs.record import RECORD_KEY, CapacityRecord, TaskInstanceRef


class CapacityRecording:
    """Mixin of the operators and the sensor (which provide ``hook``, ``log`` and the two attributes)."""

    #: The job this try submitted or watches, once known.
    _job_name: str | None
    #: The list as submitted, once validated (``InstancePreferenceList.as_list()``).
    _record_preferences: list[dict[str, Any]]
    #: What the guardrails before submit decided, for a failure record (``GuardrailReport.record_fields``).
    _record_guardrails: dict[str, Any] | None = None
    #: Submission stages that ended before this try failed (acceptance windows), for a failure record.
    _record_stages: list[dict[str, Any]] | None = None
    #: The outcome this try pushed last (OpenLineage's on-complete and on-failure read it).
    _pushed_outcome: CapacityOutcome | None = None
    hook: Any
    log: Any

    def _job_kind_value(self) -> str:
        raise NotImplementedError

    def _region(self) -> str | None:
        try:
            region = self.hook.conn_region_name
        except Exception:  # the record is a report; never fail the task for it
            return None
        return str(region) if region else None

    def push_outcome(
        self, context: Context, outcome: CapacityOutcome, selection: bool = True
    ) -> dict[str, Any]:
        """Push the outcome's XCom keys and this try's record; returns ``return_value``.

        :param selection: this push reports the selection (sends the capacity metrics); False for the
            push when the job ends after an earlier push reported it, or for a job an earlier try ran.
        """
        self._pushed_outcome = outcome
        ti = context["ti"]
        for key, value in outcome.xcom_values().items():
            ti.xcom_push(key=key, value=value)
        record = CapacityRecord.from_outcome(TaskInstanceRef.of(ti), outcome, self._region())
        ti.xcom_push(key=RECORD_KEY, value=record.as_dict())
        if selection:
            metrics.emit(record)
        return outcome.as_dict()

    @contextlib.contextmanager
    def recording_failures(self, context: Context) -> Iterator[None]:
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
                    self._job_kind_value(),
                    getattr(self, "_job_name", None),
                    list(getattr(self, "_record_preferences", []) or []),
                    self._region(),
                    guardrails=getattr(self, "_record_guardrails", None),
                    stages=getattr(self, "_record_stages", None),
                )
                context["ti"].xcom_push(key=RECORD_KEY, value=record.as_dict())
                metrics.emit(record)
            except Exception:
                self.log.warning("Could not record the failure of this try", exc_info=True)
            raise
