"""Which path ends a deferred wait: the triggerer itself, or a worker resuming the task.

A wait whose end needs nothing but bookkeeping (push the outcome and the record, send the metrics, print
the job's logs) is ended by its trigger (:mod:`airflow_provider_sm_prefs.triggers.finish`): one task
process per job instead of two, and the next task scheduled as soon as the trigger fires. Everything else
keeps the worker's resume, and the task log says why when the task defers:

* ``finish_in_triggerer=False`` on the operator;
* acceptance windows: the task itself decides, at each window, to keep the job or submit the next stage;
* a capacity wait followed by a wait for the job's end (``wait_for_completion``): the worker records the
  selection and defers again; that second wait is ended in the triggerer;
* OpenLineage enabled for the task: its listener runs only in a worker;
* the task runs in process with its trigger (``dag.test()``): there a trigger's end event would reach the
  task as a bare state, its XComs lost.

A failed wait (capacity timeout, job failed or stopped) is ended in the triggerer only when no retry
remains: before Airflow 3.3 a task a trigger fails is failed for good, whatever its retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_sm_prefs.compat import runs_triggers_inline
from airflow_provider_sm_prefs.domain.status import WaitFor
from airflow_provider_sm_prefs.operators.openlineage import lineage_listener_expected
from airflow_provider_sm_prefs.triggers.finish import plan_for

__all__ = ["FinishDecision", "decide_finish"]


@dataclass(frozen=True)
class FinishDecision:
    """A wait's path: ``plan`` (trigger kwargs) when the triggerer ends the task, else why a worker does."""

    plan: dict[str, Any] | None
    reason: str

    def say(self, log: Any) -> None:
        """One line in the task log, when the task defers: which path and why."""
        log.info("%s", self.reason)


def decide_finish(
    task: Any,
    ti: Any,
    wait_for: WaitFor,
    *,
    windows: bool,
    region: str | None,
    guardrails: dict[str, Any] | None = None,
    identity_tags: dict[str, str] | None = None,
    selection: bool | None = None,
) -> FinishDecision:
    """Whether ``task``'s wait for ``wait_for`` is ended by its trigger (see the module).

    :param task: the operator or sensor (its ``finish_in_triggerer``, ``wait_for_completion``,
        ``do_xcom_push``, ``print_log``, ``max_log_lines``, ``retries``; a missing one is off).
    :param ti: the deferring try's task instance.
    :param windows: the task submits in stages (acceptance windows).
    :param selection: the end reports the selection (sends the capacity metrics); default: a capacity
        wait does, the wait for a job's end does not (its selection was reported before).
    """
    resume = "The task resumes in a worker when the wait is over"
    if not getattr(task, "finish_in_triggerer", True):
        return FinishDecision(None, f"{resume} (finish_in_triggerer=False)")
    if windows:
        return FinishDecision(None, f"{resume}: acceptance windows decide each stage there")
    if wait_for is WaitFor.CAPACITY and getattr(task, "wait_for_completion", False):
        return FinishDecision(
            None, f"{resume} to record the selection, then waits for the job's end in the triggerer"
        )
    if ti is None:  # an operator run by hand, outside a task: nothing to end
        return FinishDecision(None, f"{resume}: no task instance to end")
    if runs_triggers_inline():
        return FinishDecision(None, f"{resume}: the trigger runs in this process (dag.test())")
    if lineage_listener_expected(task):
        return FinishDecision(None, f"{resume}: OpenLineage is enabled for this task and emits from a worker")
    failures = not _may_retry(task, ti)
    plan = plan_for(
        ti,
        region=region,
        return_value=bool(getattr(task, "do_xcom_push", True)),
        selection=wait_for is WaitFor.CAPACITY if selection is None else selection,
        failures=failures,
        print_log=bool(getattr(task, "print_log", False)),
        max_log_lines=int(getattr(task, "max_log_lines", 0) or 0),
        guardrails=guardrails,
        identity_tags=identity_tags,
    )
    failed = "ended there too" if failures else "resumed in a worker (a retry remains)"
    return FinishDecision(
        plan,
        "The triggerer ends this task when the wait is over: no worker resumes it "
        f"(finish_in_triggerer=True); a failed wait is {failed}",
    )


def _may_retry(task: Any, ti: Any) -> bool:
    """Whether a failure of this try would be retried (Airflow's eligibility: try number within max tries)."""
    max_tries = getattr(ti, "max_tries", None)
    if max_tries is None:
        max_tries = getattr(task, "retries", 0) or 0
    try_number = getattr(ti, "try_number", 1) or 1
    return bool(getattr(task, "retries", 0)) and int(try_number) <= int(max_tries)
