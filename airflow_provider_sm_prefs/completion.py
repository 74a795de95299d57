"""The end of a wait, written once: the worker's resume, the triggerer's end and the sensor all call it.

When a wait for capacity (or for the job's end) is over, the same steps turn its event into what
downstream tasks read: the outcome (with the job's log lines printed first, when asked), in terms of the
list as written with its cost (the guardrails), with the stages of acceptance windows, said in the task
log, then pushed with the try's record (XCom keys, capacity record, metrics). The one thing that differs
between the callers is where the pushes go, the XCom sink: the ``ti`` of ``context`` is the worker's task
instance (``ti.xcom_push``), or, in the triggerer, a collector whose values are then stored through the
triggerer's channel (:mod:`airflow_provider_sm_prefs.triggers.finish`).

The module sits at the package root, below ``operators/``, ``sensors/`` and ``triggers/``, which all
import it; it imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from airflow_provider_sm_prefs.domain.events import CapacityEvent
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.status import WaitFor
from airflow_provider_sm_prefs.guardrail_check import with_guardrails
from airflow_provider_sm_prefs.job_logs import JobLogPrinter
from airflow_provider_sm_prefs.recording import CapacityRecorder, TryProgress

__all__ = ["Completed", "WaitCompletion"]


class Completed(NamedTuple):
    """What a completed wait gave: the outcome as pushed, and the task's ``return_value``."""

    outcome: CapacityOutcome
    value: dict[str, Any]


@dataclass(frozen=True)
class WaitCompletion:
    """How one task ends its waits.

    :param recorder: pushes the outcome and the try's record to the ``ti`` of the context it is given.
    :param logs: prints an ended job's log lines into the task log first (None: a task that prints none).
    :param guardrails: the report the job was submitted with (``GuardrailReport.as_dict()``), if any.
    :param log: the task log (the worker's, or the trigger's, which writes into the same task log).
    """

    recorder: CapacityRecorder
    logs: JobLogPrinter | None
    guardrails: Mapping[str, Any] | None
    log: Any

    def complete(
        self,
        context: Any,
        received: CapacityEvent,
        progress: TryProgress,
        *,
        selection: bool,
        stages: Callable[[CapacityOutcome], CapacityOutcome] | None = None,
    ) -> Completed:
        """Turn ``received`` into the task's outcome and push it; the event's domain exception is raised
        (with the job's last log lines) when the wait failed.

        :param context: the task's context; its ``ti`` is the XCom sink.
        :param selection: this push reports the selection (capacity metrics, the selection's cost in the
            log); False for the push when the job ends after an earlier push reported it.
        :param stages: adds the stages of acceptance windows to the outcome (the operator's windows).
        """
        outcome = (
            self.logs.outcome_with_logs(received) if self.logs is not None else received.outcome_or_raise()
        )
        progress.job_name = outcome.job_name
        outcome = with_guardrails(outcome, self.guardrails, self.log if selection else None)
        if stages is not None:
            outcome = stages(outcome)
        ended = received.wait_for == WaitFor.COMPLETION.value
        self.log.info("%s: %s", "Job finished" if ended else "Capacity acquired", outcome.summary())
        return Completed(outcome, self.recorder.push(context, outcome, progress, selection=selection))
