"""The job state: everything a task remembers about its SageMaker job across tries (one typed owner).

A task try can die anywhere: a worker killed between recording the job name and Create's response, a
retry, an orphan reset, a stage of an acceptance window stopped for the next. What the next try needs to
do the right thing — reattach, return, go on to the next stage, or submit ``-r2`` — is one
:class:`JobState`, kept under :data:`STATE_KEY` in the task instance's state store. This module is the
only one that knows its keys: the operators, the kill paths and the failure callback read and write it
through :class:`JobStateStore`.

The stored form is versioned (:data:`STATE_VERSION`). :func:`JobState.from_stored` reads every form an
earlier release wrote (one migration path, :func:`_migrate`), and returns None for anything it cannot
read, so an unreadable entry makes a try start afresh rather than fail.

Where the entry lives is the store's business: :meth:`JobStateStore.of` takes the task's state store
from the context (``task_state_store``, Airflow 3.3); before 3.3 the compatibility module installs a
:attr:`JobStateStore.fallback` that keeps it in an Airflow Variable. A context with neither gets a store
that keeps nothing, and the callers behave as on a first try.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar, Protocol

from airflow_provider_sm_prefs.domain.identity import OwnerClaim

log = logging.getLogger(__name__)

__all__ = ["STATE_KEY", "STATE_VERSION", "JobState", "JobStateStore", "KeyValueStore"]

#: The task state store key of the job state (unchanged since the first release).
STATE_KEY = "sm_prefs_job"
#: The version this release writes. Entries without ``version`` were written by earlier releases.
STATE_VERSION = 1


@dataclass(frozen=True)
class JobState:
    """What survives a task's tries. JSON-safe via :meth:`as_stored`.

    :param job_name: the job this task submitted or is about to submit (recorded *before* Create).
    :param kind: ``training`` or ``processing``.
    :param submission: 1 for the first job, N for ``<name>-rN`` after an earlier job failed or stopped.
    :param job_arn: the job's ARN, once Create answered.
    :param max_tries: the task instance's ``max_tries`` at submission; a clear raises it, a retry does not.
    :param try_number: the try that owns the job now; a kill of an older try leaves the job alone.
    :param staging: the stages of acceptance windows (``StageState.as_dict()``, read by
        ``operators.windows``); it also says whether a stage is being stopped for the next one (stored
        as its ``escalating`` flag). ``staging`` is the stored key.
    :param guardrails: the guardrails' decision the job was submitted with (``GuardrailReport.as_dict()``).
    :param identity_tags: the identity tags the job was created with (``AirflowIdentity.as_dict()``); a
        later try that reattaches reports these, not its own. Recorded before Create: they are also what
        the job's tags must name before the task stops or adopts it (:meth:`claim`).
    :param created: this task's Create of ``job_name`` succeeded (True), so the job is its own even
        without identity tags; None until then (a reattach after a lost answer never sets it).
    :param version: the form's version (:data:`STATE_VERSION`).
    """

    job_name: str
    kind: str
    submission: int = 1
    job_arn: str | None = None
    max_tries: int | None = None
    try_number: int | None = None
    staging: dict[str, Any] | None = None
    guardrails: dict[str, Any] | None = None
    identity_tags: dict[str, Any] | None = None
    created: bool | None = None
    version: int = STATE_VERSION

    def as_stored(self) -> dict[str, Any]:
        """The form written to the store (fields left at None are left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_stored(cls, data: Any) -> JobState | None:
        """The state of any release's stored form; None when there is none or it cannot be read."""
        if not isinstance(data, Mapping):
            return None
        try:
            migrated = _migrate(data)
            if not migrated.get("job_name"):
                return None
            return cls(
                job_name=str(migrated["job_name"]),
                kind=str(migrated.get("kind") or ""),
                submission=_int(migrated.get("submission")) or 1,
                job_arn=_str(migrated.get("job_arn")),
                max_tries=_int(migrated.get("max_tries")),
                try_number=_int(migrated.get("try_number")),
                staging=_dict(migrated.get("staging")),
                guardrails=_dict(migrated.get("guardrails")),
                identity_tags=_dict(migrated.get("identity_tags")),
                created=True if migrated.get("created") is True else None,
            )
        except (TypeError, ValueError) as err:
            log.warning("Unreadable job state in the task state store (%s); starting afresh", err)
            return None

    # -- what a later try asks of it ---------------------------------------------------------------------
    def claim(self) -> OwnerClaim:
        """What proves :attr:`job_name` this task instance's: the recorded identity tags, or its own Create."""
        return OwnerClaim.of_tags(self.identity_tags, created=bool(self.created))

    def cleared_since(self, max_tries: int | None) -> bool:
        """Whether the task was cleared since this submission (a retry keeps ``max_tries``).

        Clearing sets ``max_tries = try_number + retries`` (``clear_task_instances``), so it grows with
        every clear; a state without ``max_tries`` (the first release's) counts as a retry.
        """
        return self.max_tries is not None and max_tries is not None and max_tries > self.max_tries

    def owned_by_later_try(self, try_number: Any) -> bool:
        """Whether a later try than ``try_number`` took the job over."""
        return (
            isinstance(self.try_number, int)
            and isinstance(try_number, int)
            and not isinstance(try_number, bool)
            and self.try_number > try_number
        )

    @classmethod
    def submitted(
        cls,
        previous: JobState | None,
        *,
        job_name: str,
        kind: str,
        submission: int,
        max_tries: int | None,
        try_number: int | None,
    ) -> JobState:
        """The state once this try records ``job_name``, before Create.

        The same job as ``previous`` keeps what was recorded with it (its ARN, guardrails, stages); a new
        submission starts afresh. ``max_tries`` tells a later try whether the task was cleared in between.
        """
        kept = previous if previous is not None and previous.job_name == job_name else cls(job_name, kind)
        return replace(kept, kind=kind, submission=submission, max_tries=max_tries, try_number=try_number)


def _migrate(data: Mapping[str, Any]) -> dict[str, Any]:
    """Any stored form, as this release's keys.

    * no ``version`` (releases before the job state was versioned): ``job_name``, ``submission``,
      ``kind``, ``guardrails``; later ``max_tries``, ``try_number`` and ``staging`` were added
      (``identity_tags`` came with version 1, optional: a form without it reads as None). The keys
      already mean what they mean now: nothing to rename.
    * version 1: this release.
    * a later version (a downgrade): read for the keys this release knows. Starting afresh instead
      would submit a second job next to the one the entry names.

    A later release that changes a key adds its step here, so every older form goes one way.
    """
    version = data.get("version")
    if version is not None and version != STATE_VERSION:
        log.warning(
            "Job state of version %r (this release writes %d): reading the keys it knows",
            version,
            STATE_VERSION,
        )
    return {k: v for k, v in data.items() if k != "version"}


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    return int(str(value))


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _dict(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


class KeyValueStore(Protocol):
    """What the job state needs of a store: Airflow's task state store has this shape."""

    def get(self, key: str) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...


class JobStateStore:
    """Reads and writes one task instance's :class:`JobState`.

    :param backend: the task's state store (``context["task_state_store"]``); None keeps nothing.
    """

    #: Where a context has no ``task_state_store`` (Airflow before 3.3): the backend of the context's task
    #: instance. Set by the provider's compatibility module (``airflow_provider_sm_prefs.compat``).
    fallback: ClassVar[Callable[[Mapping[str, Any]], KeyValueStore | None] | None] = None

    def __init__(self, backend: KeyValueStore | None) -> None:
        self.backend = backend

    @classmethod
    def of(cls, context: Mapping[str, Any]) -> JobStateStore:
        """The job state store of the task whose context this is."""
        backend = context.get("task_state_store")
        if backend is None and cls.fallback is not None:
            backend = cls.fallback(context)
        return cls(backend)

    @property
    def keeps_state(self) -> bool:
        """Whether what is saved survives this try (False: every try starts as a first one)."""
        return self.backend is not None

    def load(self) -> JobState | None:
        """The recorded state; None when nothing (readable) is recorded.

        A store that cannot be reached raises: the caller decides whether that fails the try.
        """
        if self.backend is None:
            return None
        return JobState.from_stored(self.backend.get(STATE_KEY))

    def load_or_none(self) -> JobState | None:
        """:meth:`load` where an unreachable store means "nothing known" (kill paths, callbacks)."""
        try:
            return self.load()
        except Exception as err:  # the DAG processor's supervisor does not serve the store
            log.info("Task state store not reachable here (%s)", type(err).__name__)
            return None

    def save(self, state: JobState) -> None:
        if self.backend is not None:
            self.backend.set(STATE_KEY, state.as_stored())

    def update(self, **changes: Any) -> JobState | None:
        """Change some fields of the recorded state (read, replace, write); None when none is recorded."""
        state = self.load()
        if state is None:
            return None
        state = replace(state, **changes)
        self.save(state)
        return state
