"""Ending the task in the triggerer: the work of ``execute_complete``, done where the wait ended.

When a wait is over, the task's resume in a worker used to record the outcome and return: a whole task
process (Airflow, botocore and the provider imported) for a few milliseconds of bookkeeping. With a
:class:`FinishPlan` in its kwargs, :class:`~airflow_provider_sm_prefs.triggers.capacity.SageMakerCapacityTrigger`
does that bookkeeping itself and ends the task with Airflow's ``TaskSuccessEvent`` / ``TaskFailedEvent``,
which carry the XComs:

* the same collaborators as the worker's resume build what it pushes: :class:`~.job_logs.JobLogPrinter`
  writes the ended job's log lines into the task log (the trigger's log is the task's),
  :func:`~.guardrail_check.with_guardrails` prices the selection, and
  :class:`~airflow_provider_sm_prefs.recording.CapacityRecorder` pushes the outcome's XCom keys and the
  capacity record and sends the metrics, into a stand-in task instance that keeps them;
* those XComs are stored through the Task SDK (:func:`store_xcoms`), as a task's own pushes are, before
  the end event. Not in the event: Airflow 3.0 to 3.3 store an end event's XComs JSON-encoded once more
  (``XComModel.set``), and a task reading them through the Task SDK gets a string where the worker's
  push gave a dict or a number. Where the Task SDK stores asynchronously (``XCom.aset``, Airflow 3.3)
  and the XCom backend serializes without I/O, every store is sent at once: the triggerer's supervisor
  answers its runner's requests between the rounds of its own loop (loading triggers, events, the
  heartbeat), so twelve stores one after the other wait twelve rounds; sent together they are served
  in one or two;
* the triggerer's supervisor builds its in-process execution API on the first call that needs it (its
  versioned routes and their schemas: 6-7 s on a loaded 2-core host, measured in docs/data/latency.json).
  Left to the first store, that wait lands between SageMaker's selection and the next task, so the
  first wait of a triggerer process that will end its task makes one read through the channel as soon
  as it starts (:func:`warm_up`), while it only waits;
* a failure is ended here only when the plan says so (no retry remains: Airflow before 3.3 would not
  retry a task a trigger failed); otherwise, and for an acceptance window that closed, the plain event
  resumes the task in a worker as before.

The operator decides whether a wait gets a plan (:mod:`airflow_provider_sm_prefs.operators.finishing`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow.triggers.base import TaskFailedEvent, TaskSuccessEvent, TriggerEvent

from airflow_provider_sm_prefs.domain.events import CapacityEvent, EventStatus
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.record import TaskInstanceRef

__all__ = ["FinishPlan", "end_task", "warm_up"]

#: The XCom key of a task's return value (``BaseOperator.do_xcom_push``).
RETURN_VALUE = "return_value"


@dataclass(frozen=True)
class FinishPlan:
    """What a trigger needs to end its task itself, as the deferring try decided (JSON-safe).

    :param ti: the deferring try (``TaskInstanceRef`` fields): the record's task instance.
    :param region: the region the record names (the deferring task's hook's).
    :param return_value: push the outcome as ``return_value`` (the operator's ``do_xcom_push``).
    :param selection: this end reports the selection (sends the capacity metrics); False at a job's end
        whose selection an earlier step reported.
    :param failures: end a failed wait here too (no retry remains); else it resumes in a worker.
    :param print_log: write the ended job's log lines into the task log (the operator's ``print_log``).
    :param max_log_lines: the most job lines written (the operator's ``max_log_lines``).
    :param guardrails: the guardrail report the job was submitted with (``GuardrailReport.as_dict()``).
    :param identity_tags: the tags the job was created with (the record's ``identity_tags``).
    """

    ti: dict[str, Any]
    region: str | None = None
    return_value: bool = True
    selection: bool = True
    failures: bool = False
    print_log: bool = True
    max_log_lines: int = 2000
    guardrails: dict[str, Any] | None = None
    identity_tags: dict[str, str] | None = field(default=None)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FinishPlan:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _TaskInstanceOfTheEvent:
    """The task instance as the recorder sees it: who it is, and every XCom pushed kept for the event."""

    def __init__(self, ref: Mapping[str, Any]) -> None:
        self.dag_id = ref["dag_id"]
        self.task_id = ref["task_id"]
        self.run_id = ref["run_id"]
        self.map_index = ref.get("map_index", -1)
        self.try_number = ref.get("try_number", 1)
        self.xcoms: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


def ends_here(plan: FinishPlan, received: CapacityEvent) -> bool:
    """Whether this event ends the task in the triggerer (else the plain event resumes it in a worker)."""
    if received.status is EventStatus.SUCCESS:
        return True
    return received.status is EventStatus.ERROR and plan.failures


async def end_task(
    plan: FinishPlan,
    received: CapacityEvent,
    kind: JobKind,
    preferences: list[dict[str, Any]],
    logs_hook: Any,
    log: Any,
) -> TriggerEvent | None:
    """The event that ends the task with ``received``'s outcome; None when a worker must resume it.

    The bookkeeping runs in a thread (reading the job's CloudWatch logs and the connection is blocking),
    then the XComs are stored (:func:`store_xcoms`) and the end event returned.

    :param preferences: the list the job was submitted with (the record's, as the worker's resume has it).
    :param logs_hook: makes the CloudWatch Logs hook (called only when logs are read).
    :param log: the trigger's logger, which writes into the task log.
    """
    if not ends_here(plan, received):
        return None
    from asgiref.sync import sync_to_async

    # Imported here: the completion's collaborators are not needed by a trigger that only waits.
    from airflow_provider_sm_prefs.completion import WaitCompletion
    from airflow_provider_sm_prefs.job_logs import JobLogPrinter
    from airflow_provider_sm_prefs.recording import CapacityRecorder, TryProgress

    ti = _TaskInstanceOfTheEvent(plan.ti)  # the XCom sink: what the completion pushes, stored below
    progress = TryProgress(
        job_name=received.job_name, preferences=list(preferences), identity_tags=plan.identity_tags
    )
    recorder = CapacityRecorder(lambda: kind.value, lambda: plan.region, log)
    printer = JobLogPrinter(kind, logs_hook, plan.print_log, plan.max_log_lines, log)
    completion = WaitCompletion(recorder, printer, plan.guardrails, log)
    # sync_to_async, not a bare thread: the Task SDK calls the work makes (the connection) go through the
    # triggerer's channel, which Airflow 3.0 reaches from such a thread only.
    work = sync_to_async(_complete, thread_sensitive=False)
    failed = await work(completion, plan, ti, received, progress)
    took = await store_xcoms(plan.ti, ti.xcoms)
    if failed:
        log.info("Ending the task failed from the triggerer (no retry remains; finish_in_triggerer=True)")
        return TaskFailedEvent()
    log.info(
        "Ending the task from the triggerer with %d XComs (stored in %.1fs): no worker resumes it "
        "(finish_in_triggerer=True)",
        len(ti.xcoms),
        took,
    )
    return TaskSuccessEvent()


def _complete(
    completion: Any, plan: FinishPlan, ti: _TaskInstanceOfTheEvent, received: CapacityEvent, progress: Any
) -> bool:
    """The completion (blocking: the job's CloudWatch logs, the connection), in a thread; True when the
    task ends failed, the failure's record in ``ti``'s XComs as a worker's resume leaves it."""
    context: Any = {"ti": ti}
    try:
        with completion.recorder.failures(context, progress):
            result = completion.complete(context, received, progress, selection=plan.selection).value
    except Exception as err:
        # What the worker's log says when execute_complete raises it; no traceback: it is the job's.
        completion.log.error("Task failed with exception: %s: %s", type(err).__name__, err)
        return True
    if plan.return_value:
        ti.xcoms[RETURN_VALUE] = result
    return False


async def store_xcoms(ref: Mapping[str, Any], xcoms: Mapping[str, Any]) -> float:
    """Push ``xcoms`` for the task instance ``ref`` as a task's own pushes go: the Task SDK's ``XCom``
    (the configured backend, its serialization), through the triggerer's channel to the execution API.

    All at once where :func:`_sent_together` allows it, else one after the other in a thread.

    :returns: the seconds it took (the task log shows it: slow stores mean a busy triggerer supervisor, a
        slow execution API or database).
    """
    started = time.monotonic()
    where = {
        "dag_id": ref["dag_id"],
        "task_id": ref["task_id"],
        "run_id": ref["run_id"],
        "map_index": ref.get("map_index", -1),
    }
    backend = _sent_together()
    if backend is not None:
        await asyncio.gather(*(backend.aset(key, value, **where) for key, value in xcoms.items()))
    else:
        from asgiref.sync import sync_to_async

        # Airflow 3.0 reaches the triggerer's channel from a sync_to_async thread only.
        await sync_to_async(_store_one_by_one, thread_sensitive=False)(where, xcoms)
    return time.monotonic() - started


def _sent_together() -> Any | None:
    """The XCom backend whose stores can be sent at once from the event loop, or None.

    ``XCom.aset`` is the Task SDK's (Airflow 3.3); its requests share the runner's one channel, each
    awaiting its own answer. A backend that serializes its own way (an object store's) may do I/O there,
    which must not run on the triggerer's event loop: such a backend stores one by one in a thread.
    """
    from airflow.sdk.bases.xcom import BaseXCom
    from airflow.sdk.execution_time.xcom import XCom

    if not hasattr(XCom, "aset"):
        return None
    if _function(XCom.serialize_value) is not _function(BaseXCom.serialize_value):
        return None
    return XCom


def _function(method: Any) -> Any:
    """The function behind a static method or a class method (bound to its class)."""
    return getattr(method, "__func__", method)


def _store_one_by_one(where: Mapping[str, Any], xcoms: Mapping[str, Any]) -> None:
    from airflow.sdk.execution_time.xcom import XCom

    for key, value in xcoms.items():
        XCom.set(key, value, **where)


#: The process whose triggerer channel :func:`warm_up` has read through (its pid), and the read in flight.
_warmed_in: int | None = None
_warming: set[asyncio.Task[None]] = set()


def warm_up(plan: FinishPlan, log: Any) -> None:
    """Once per triggerer process, as a wait that will end its task starts: read the task's capacity record
    through the triggerer's channel in the background, so that the supervisor builds its execution API
    now rather than while the task is ending (see the module). Out of a triggerer it does nothing."""
    global _warmed_in
    if _warmed_in == os.getpid() or not _in_a_triggerer():
        return
    _warmed_in = os.getpid()
    read = asyncio.get_running_loop().create_task(_first_read(plan.ti, log))
    _warming.add(read)
    read.add_done_callback(_warming.discard)


def _in_a_triggerer() -> bool:
    from airflow.sdk.execution_time import task_runner

    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    return type(comms).__name__ == "TriggerCommsDecoder"


async def _first_read(ref: Mapping[str, Any], log: Any) -> None:
    from asgiref.sync import sync_to_async

    from airflow_provider_sm_prefs.domain.record import RECORD_KEY

    def read() -> None:
        from airflow.sdk.execution_time.xcom import XCom

        XCom.get_one(
            key=RECORD_KEY,
            dag_id=ref["dag_id"],
            task_id=ref["task_id"],
            run_id=ref["run_id"],
            map_index=ref.get("map_index", -1),
        )

    started = time.monotonic()
    try:
        # A thread as the stores' sync path: Airflow 3.0 reaches the channel from such a thread only.
        await sync_to_async(read, thread_sensitive=False)()
    except Exception as err:  # the stores will say what is wrong, when the task ends
        log.debug("The first read through the triggerer's channel failed: %s", err)
        return
    log.info(
        "The triggerer's execution API answered this process's first read in %.1fs (Airflow builds it on "
        "first use; done while waiting so that ending a task does not wait for it)",
        time.monotonic() - started,
    )


def plan_for(ti: Any, **fields: Any) -> dict[str, Any]:
    """A :class:`FinishPlan` as trigger kwargs carry it, for the try of task instance ``ti``."""
    return FinishPlan(ti=asdict(TaskInstanceRef.of(ti)), **fields).as_dict()
