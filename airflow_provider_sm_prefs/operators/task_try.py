"""One try of an operator's task: Airflow's context and the task's job state, looked up once.

Every step of a try (submit-once, the ARN, the guardrails recorded with the job, whether a resume
belongs to another try, on_kill) reads the same :class:`TaskTry` instead of finding the store again.
A try resumed in the same process (a wait outside the triggerer) keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_sm_prefs.domain.job_state import JobStateStore
from airflow_provider_sm_prefs.domain.outcome import XComKey
from airflow_provider_sm_prefs.task_state import resumed_by_another_try

__all__ = ["TaskTry", "try_number_of"]


def try_number_of(context: Any) -> int | None:
    """The try number of the task instance in ``context`` (None when unknown)."""
    value = getattr(context.get("ti"), "try_number", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class TaskTry:
    """A task try: its context and its job state store.

    :param context: the Airflow context of the try (a mapping; on_kill may hold only ``ti``).
    :param store: the task's job state (:class:`JobStateStore`).
    """

    context: Any
    store: JobStateStore

    @classmethod
    def of(cls, context: Any) -> TaskTry:
        return cls(context, JobStateStore.of(context))

    def taken_over_since(self, try_number: Any) -> bool:
        """Whether the job state says a later try than ``try_number`` took the job over."""
        state = self.store.load_or_none()
        return state is not None and state.owned_by_later_try(try_number)

    @property
    def ti(self) -> Any:
        """The task instance (None before a try started, e.g. on_kill of an operator never run)."""
        return self.context.get("ti")

    @property
    def try_number(self) -> int | None:
        return try_number_of(self.context)

    def push(self, key: XComKey, value: Any) -> None:
        self.context["ti"].xcom_push(key=key.value, value=value)

    def resumed_by_another_try(self, deferred_by_try: int | None) -> bool:
        """Whether this try starts with another try's trigger event (:func:`resumed_by_another_try`).

        The deferral's own record says so where Airflow keeps it; ``dag.test()`` before 3.1 resumes with
        the event alone, and then the job state does: every try that runs ``execute`` takes the job over.
        """
        if resumed_by_another_try(self.context, deferred_by_try):
            return True
        if deferred_by_try is not None:
            return False
        state = self.store.load()
        return resumed_by_another_try(self.context, state.try_number if state is not None else None)

    def recorded_guardrails(self) -> dict[str, Any] | None:
        """The guardrail report the task's job was submitted with (by this try or an earlier one)."""
        state = self.store.load()
        return state.guardrails if state is not None else None

    def recorded_identity_tags(self) -> dict[str, str] | None:
        """The identity tags the task's job was created with (by this try or an earlier one)."""
        state = self.store.load()
        tags = state.identity_tags if state is not None else None
        return {str(k): str(v) for k, v in tags.items()} if tags else None


#: Before a task's first try: no context, no store (what on_kill sees on an operator that never ran).
NO_TRY = TaskTry({}, JobStateStore(None))
