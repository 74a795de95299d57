"""The operators' default failure callback: never leave a SageMaker job running with no task watching it.

A task of :class:`~airflow_provider_sm_prefs.operators.sagemaker.SageMakerPreferenceBaseOperator` can end
``failed`` without any of the operator's code running: Airflow 3.3.2's scheduler fails a task whose
trigger fired within one scheduler loop of its deferral ("finished with state success, but the task
instance's state attribute is queued/running", apache/airflow#72716), and a task that dies outside the
task runner is failed by the scheduler too. On that path Airflow does not run the task, but it does send
a ``TaskCallbackRequest`` to the DAG processor, which runs the task's ``on_failure_callback`` (final
failure) or ``on_retry_callback`` (a retry follows).

:class:`StopUnattendedJob` is that ``on_failure_callback``. It finds the job the task recorded (XCom
``job_name``; the task state store where one is reachable) and stops it when it is still
``InProgress``. It runs only on the final failure: a retry reattaches to the running job (see
``_reattach_or_name``), so ``on_retry_callback`` is left alone. Failures the operator handled itself
need nothing: a capacity timeout already stopped its job (``Stopping``/``Stopped``), a failed or stopped
job has ended. ``stop_job_on_kill=False`` means the user wants the job to outlive its task: then nothing
is stopped.

It runs in the DAG processor (scheduler path) or in the task runner (worker path). In the DAG processor
``context["task"]`` is the task as parsed from the DAG file: for ``.partial().expand()`` a
``MappedOperator`` whose settings are read from its partial arguments, with templates rendered against
the callback's context where possible.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_provider_sm_prefs.domain.exceptions import NotOursError
from airflow_provider_sm_prefs.domain.job_state import JobStateStore
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import XComKey
from airflow_provider_sm_prefs.domain.status import JobStatus, job_status

log = logging.getLogger(__name__)

#: Operator arguments the callback needs to reach SageMaker the way the task did.
_SETTINGS = ("aws_conn_id", "region_name", "verify", "botocore_config", "stop_job_on_kill")


class StopUnattendedJob:
    """``on_failure_callback`` that stops the task's SageMaker job when it is still running.

    Stateless: one shared instance (:data:`STOP_UNATTENDED_JOB`) serves every task; what it needs comes
    from the callback's context.
    """

    __name__ = "stop_unattended_sagemaker_job"

    def __call__(self, context: Mapping[str, Any]) -> None:
        task = context.get("task")
        ti = context.get("ti") or context.get("task_instance")
        if task is None or ti is None:
            log.warning("No task in the failure callback's context; cannot look for its SageMaker job")
            return
        kind, settings = operator_settings(task, context)
        if kind is None:
            return
        if not settings.get("stop_job_on_kill", True):
            log.info("stop_job_on_kill=False: leaving the SageMaker job of %s running", ti)
            return
        job_name = recorded_job_name(context)
        if not job_name:
            log.info("%s recorded no SageMaker job: nothing to stop", ti)
            return
        from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings

        region_name, conn_id = job_region(task, context, settings)
        hook = AwsSettings(
            aws_conn_id=conn_id,
            region_name=region_name,
            verify=settings.get("verify"),
            botocore_config=settings.get("botocore_config"),
        ).hook()
        describe = hook.describe_job(kind, job_name)
        if describe is None:
            log.info("SageMaker job %s of %s does not exist: nothing to stop", job_name, ti)
            return
        status = job_status(kind, describe)
        if status is not JobStatus.IN_PROGRESS:
            log.info("SageMaker job %s of %s is %s: nothing to stop", job_name, ti, status.value)
            return
        log.warning(
            "%s failed for good while its SageMaker job %s is still InProgress: stopping the job so it "
            "does not run unattended",
            ti,
            job_name,
        )
        from airflow_provider_sm_prefs.operators.identity import job_claim

        claim = job_claim(JobStateStore.of(context).load_or_none(), job_name, context)
        try:
            hook.stop_job(kind, job_name, claim)
        except NotOursError as err:
            log.error("%s", err)

    def __repr__(self) -> str:
        return "STOP_UNATTENDED_JOB"


#: The callback every operator of this provider carries by default.
STOP_UNATTENDED_JOB = StopUnattendedJob()

Callback = Callable[[Any], Any]


def with_job_stop(callbacks: Callback | Sequence[Callback] | None) -> list[Callback]:
    """The user's ``on_failure_callback`` (None, one, or a list), followed by :data:`STOP_UNATTENDED_JOB`.

    Idempotent: a list that already holds a :class:`StopUnattendedJob` is returned as it is (copied).
    The user's callbacks run first, so they see the job as the failure left it.
    """
    if callbacks is None:
        combined: list[Callback] = []
    elif callable(callbacks):
        combined = [callbacks]
    else:
        combined = list(callbacks)
    if not any(isinstance(c, StopUnattendedJob) for c in combined):
        combined.append(STOP_UNATTENDED_JOB)
    return combined


def operator_settings(task: Any, context: Mapping[str, Any]) -> tuple[JobKind | None, dict[str, Any]]:
    """The job kind and AWS settings of ``task``: an operator instance or a ``MappedOperator``."""
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    operator_class = getattr(task, "operator_class", None)
    if isinstance(task, MappedOperator) and isinstance(operator_class, type):
        # Never unmapped in the DAG processor: its partial arguments over the __init__ defaults.
        kind = getattr(operator_class, "job_kind", None)
        partial = task.partial_kwargs or {}
        defaults = _init_defaults(operator_class)
        settings = {name: partial.get(name, defaults.get(name)) for name in _SETTINGS}
    else:
        kind = getattr(task, "job_kind", None)
        settings = {name: getattr(task, name, None) for name in _SETTINGS}
        if settings["stop_job_on_kill"] is None:
            settings["stop_job_on_kill"] = True
    if not isinstance(kind, JobKind):
        log.warning("%r is not a SageMaker preference operator; the job-stop callback does nothing", task)
        return None, settings
    for name in ("aws_conn_id", "region_name"):
        settings[name] = _rendered(task, settings[name], context)
    return kind, settings


def _init_defaults(operator_class: type) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for klass in reversed(operator_class.__mro__):
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            parameters = inspect.signature(init).parameters
        except (TypeError, ValueError):
            continue
        defaults.update(
            (name, p.default)
            for name, p in parameters.items()
            if name in _SETTINGS and p.default is not inspect.Parameter.empty
        )
    return defaults


def _rendered(task: Any, value: Any, context: Mapping[str, Any]) -> Any:
    """``value`` rendered against the context when it is a template (the DAG processor sees it raw)."""
    if not isinstance(value, str) or ("{{" not in value and "{%" not in value):
        return value
    try:
        return task.render_template(value, context)
    except Exception:
        log.warning("Could not render %r in the failure callback; using it as is", value, exc_info=True)
        return value


def job_region(task: Any, context: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[Any, Any]:
    """The region and connection of the task's job: where the try recorded it (XCom ``region``, pushed
    before each Create) when a stage moved it to one of the task's ``regions``, else the task's own."""
    region = _own_xcom(context, XComKey.REGION)
    own = (settings.get("region_name"), settings.get("aws_conn_id"))
    if not isinstance(region, str) or not region or region == own[0]:
        return own
    regions = getattr(task, "regions", None)
    if regions is None:
        regions = (getattr(task, "partial_kwargs", None) or {}).get("regions")
    for entry in regions if isinstance(regions, list | tuple) else []:
        if isinstance(entry, Mapping) and entry.get("region") == region:
            return region, entry.get("aws_conn_id") or own[1]
    return region, own[1]


def recorded_job_name(context: Mapping[str, Any]) -> str | None:
    """The job this task try submitted or reattached to (XCom), else its last recorded submission.

    The XCom is pushed before the task defers and is readable from the DAG processor. The task state
    store also covers a try that failed before pushing it (the previous try's job, still running), but
    the DAG processor cannot reach it: there it is skipped.
    """
    name = _own_xcom(context, XComKey.JOB_NAME)
    if isinstance(name, str) and name:
        return name
    state = JobStateStore.of(context).load_or_none()
    return state.job_name if state is not None else None


def _own_xcom(context: Mapping[str, Any], key: XComKey) -> Any:
    """The task instance's own XCom ``key`` (None when it cannot be read)."""
    ti = context.get("ti") or context.get("task_instance")
    try:
        return ti.xcom_pull(  # type: ignore[union-attr]
            task_ids=ti.task_id,  # type: ignore[union-attr]
            key=key.value,
            map_indexes=getattr(ti, "map_index", -1),
        )
    except Exception:
        log.warning("Could not read XCom %s", key.value, exc_info=True)
        return None
