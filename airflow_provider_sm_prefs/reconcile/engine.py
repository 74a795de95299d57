"""One reconciler pass: list the running jobs, read their tags, decide, and (unless dry run) stop.

Every SageMaker call of a pass goes through one :class:`RateLimiter` (``max_calls_per_second``), so that
a pass over a big account stays far below SageMaker's request rates. Acting on a STOP decision
Describes the job again and reads its tags again right before ``Stop*``: a job no longer ``InProgress``
is left alone (another reconciler, its task or SageMaker ended it), a job whose identity tags changed
since they were judged is left alone and reported (nothing is stopped on tags that no longer say what
was decided), and a ``ValidationException`` of the Stop (it is already Stopping, Stopped or ended) counts
as already stopped. A second pass therefore finds nothing to stop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from airflow_provider_sm_prefs.domain.exceptions import NotOursError
from airflow_provider_sm_prefs.domain.identity import OwnerClaim, tag_value
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.reconcile import (
    Decision,
    JobOwner,
    SeenJob,
    Verdict,
    decide,
    identify,
    looks_shortened,
    report_row,
    report_table,
)
from airflow_provider_sm_prefs.hooks.retry import error_code, error_message
from airflow_provider_sm_prefs.reconcile.groups import GroupPass
from airflow_provider_sm_prefs.reconcile.sources import StateUnavailable, TaskStateSource

__all__ = ["RateLimiter", "ReconcileReport", "Reconciler"]

log = logging.getLogger(__name__)

RUNNING = "InProgress"
#: ListTags' page size (botocore's model allows 50 at least).
_TAGS_PAGE = 100


class RateLimiter:
    """At most ``per_second`` calls per second across the threads that share it (None or 0: no limit).

    :param clock: monotonic seconds (default :func:`time.monotonic`).
    :param sleep: waits that many seconds (default :func:`time.sleep`).
    """

    def __init__(
        self,
        per_second: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = 1.0 / per_second if per_second and per_second > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()
        self._clock = clock
        self._sleep = sleep

    def wait(self) -> None:
        """Block until the next call may go."""
        if not self.interval:
            return
        with self._lock:
            now = self._clock()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            self._sleep(slot - now)


@dataclass
class ReconcileReport:
    """What a pass saw, decided and did: one row per running job, and the counts."""

    dry_run: bool
    deployment_id: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    def count(self, **match: Any) -> int:
        return sum(all(row.get(k) == v for k, v in match.items()) for row in self.rows)

    def as_dict(self) -> dict[str, Any]:
        """The JSON-able report (the operator's return value)."""
        return {
            "dry_run": self.dry_run,
            "deployment_id": self.deployment_id,
            "seen": len(self.rows),
            "stopped": self.count(action="stopped"),
            "would_stop": self.count(action="would stop"),
            "scaled_back": sum(str(row.get("action", "")).startswith("scaled back") for row in self.rows),
            "would_scale_back": self.count(action="would scale back"),
            "kept": self.count(decision=Decision.KEEP.value),
            "unattributed": self.count(decision=Decision.REPORT_ONLY.value),
            "errors": sum(str(row.get("action", "")).startswith("error") for row in self.rows),
            "jobs": [dict(row) for row in self.rows],
        }

    def table(self) -> str:
        return report_table(self.rows)


class Reconciler:
    """Finds the running jobs of this deployment whose owning task is gone, and stops them; and the HyperPod
    groups whose last scale-up outlived its task, and scales them back.

    :param hook: a :class:`~airflow_provider_sm_prefs.hooks.sagemaker.SageMakerPreferenceHook`.
    :param source: where task states are read (:mod:`.sources`).
    :param deployment_id: only jobs tagged with this deployment are judged.
    :param dry_run: decide and report, stop nothing (the default).
    :param kinds: the job kinds to look at.
    :param max_calls_per_second: the limit of SageMaker calls of the pass (None: none).
    :param legacy_ids: the ids earlier releases derived for this deployment (jobs tagged with them are
        reported, not judged, unless ``adopt_legacy_ids``).
    :param adopt_legacy_ids: judge (and stop) jobs tagged with ``legacy_ids`` as this deployment's own.
    :param hyperpod_groups: also judge HyperPod groups whose last scale-up outlived its task, and (unless
        dry run) scale them back to the count that task found (:mod:`.groups`).
    """

    def __init__(
        self,
        hook: Any,
        source: TaskStateSource,
        deployment_id: str,
        *,
        dry_run: bool = True,
        kinds: Iterable[JobKind | str] = tuple(JobKind),
        max_calls_per_second: float | None = 5.0,
        legacy_ids: Iterable[str] = (),
        adopt_legacy_ids: bool = False,
        hyperpod_groups: bool = True,
    ) -> None:
        self.hook = hook
        self.hyperpod_groups = hyperpod_groups
        self.legacy_ids = [i for i in legacy_ids if i and i != deployment_id]
        self.adopt_legacy_ids = adopt_legacy_ids
        self.source = source
        self.deployment_id = deployment_id
        self.dry_run = dry_run
        self.kinds = [JobKind(k) for k in kinds]
        self.limiter = RateLimiter(max_calls_per_second)
        self._runs: dict[tuple[str, str], list[str]] = {}

    # ----------------------------------------------------------------------------------------- finding
    def running_jobs(self, kind: JobKind) -> Iterator[dict[str, Any]]:
        """The ``InProgress`` jobs of ``kind`` (List* summaries), every page."""
        spec = kind.spec
        paginator = self.hook.conn.get_paginator(spec.list)
        self.limiter.wait()
        for page in paginator.paginate(StatusEquals=RUNNING):
            yield from page.get(spec.summaries_field) or []
            self.limiter.wait()  # before the paginator's next request

    def tags_of(self, arn: str) -> dict[str, str]:
        """Every tag of ``arn`` (ListTags, every page)."""
        tags: dict[str, str] = {}
        token: str | None = None
        while True:
            self.limiter.wait()
            page = self.hook.conn.list_tags(
                ResourceArn=arn, MaxResults=_TAGS_PAGE, **({"NextToken": token} if token else {})
            )
            tags.update({t["Key"]: t.get("Value", "") for t in page.get("Tags") or []})
            token = page.get("NextToken")
            if not token:
                return tags

    def seen(self, kind: JobKind, summary: dict[str, Any]) -> SeenJob:
        spec = kind.spec
        name = str(summary[spec.name_field])
        try:
            tags: dict[str, str] | None = self.tags_of(str(summary[spec.arn_field]))
            error = ""
        except ClientError as err:
            tags, error = None, f"{error_code(err)}: {error_message(err)}"
        return SeenJob(name, kind.value, str(summary.get(spec.status_field, "")), tags, error)

    # ---------------------------------------------------------------------------------------- deciding
    def verdict(self, job: SeenJob) -> tuple[Verdict, JobOwner | None, str | None]:
        """The decision for ``job``, its owner (when tagged by this deployment) and the resolved run id."""
        owner = identify(job, self.deployment_id, self.legacy_ids, self.adopt_legacy_ids)
        if isinstance(owner, Verdict):
            return owner, None, None
        try:
            run_id = self.resolve_run_id(owner)
            if run_id is None:
                return (
                    Verdict(
                        Decision.REPORT_ONLY,
                        f"run id tag {owner.run_id!r} is shortened and matches no single run of "
                        f"{owner.dag_id!r} (none, or more than one): ambiguous, never stopped",
                    ),
                    owner,
                    None,
                )
            state = self.source.task_state(owner, run_id, job.name)
        except StateUnavailable as err:
            return Verdict(Decision.KEEP, f"owner's state could not be read: {err}"), owner, None
        return decide(owner, state), owner, run_id

    def resolve_run_id(self, owner: JobOwner) -> str | None:
        """The run id ``owner.run_id`` stands for: itself, or the one run whose shortened id it is."""
        if not looks_shortened(owner.run_id):
            return owner.run_id
        key = (owner.dag_id, owner.task_id)
        if key not in self._runs:
            self._runs[key] = self.source.run_ids(owner.dag_id, owner.task_id)
        matches = [run for run in self._runs[key] if tag_value(run) == owner.run_id]
        # Exactly one run must stand for the tag: a run whose id *is* the shortened text (a decoy, or a
        # coincidence) next to the run it was shortened from makes the tag ambiguous, and an ambiguous
        # owner is never judged.
        return matches[0] if len(matches) == 1 else None

    # ----------------------------------------------------------------------------------------- acting
    def stop(self, kind: JobKind, name: str, judged: OwnerClaim) -> str:
        """Stop ``name`` if it is still running and its tags still name the owner judged; what happened."""
        self.limiter.wait()
        described = self.hook.describe_job(kind, name)
        if described is None:
            return "gone"
        status = str(described.get(kind.spec.status_field, ""))
        if status != RUNNING:
            return f"already {status}"
        self.limiter.wait()
        try:
            stopped = self.hook.stop_job(kind, name, judged, described)
        except NotOursError as err:
            log.warning("Not stopping %s job %s: %s", kind.value, name, err.reason)
            return f"not stopped: its tags no longer name the owner judged ({err.reason})"
        return "stopped" if stopped else "already stopped"

    def run(self) -> ReconcileReport:
        """One pass over every running job of :attr:`kinds`."""
        report = ReconcileReport(dry_run=self.dry_run, deployment_id=self.deployment_id)
        for kind in self.kinds:
            for summary in self.running_jobs(kind):
                job = self.seen(kind, summary)
                verdict, owner, run_id = self.verdict(job)
                action = ""
                if verdict.decision is Decision.STOP:
                    judged = OwnerClaim.of_tags(job.tags)
                    action = "would stop" if self.dry_run else self._act(kind, job.name, judged)
                report.rows.append(_row(job, owner, run_id, verdict, action))
        if self.hyperpod_groups:
            report.rows.extend(GroupPass(self, self.tags_of).rows())
        log.info(
            "Reconciler pass (%s, deployment %s):\n%s",
            "dry run" if self.dry_run else "stopping",
            self.deployment_id,
            report.table(),
        )
        return report

    def _act(self, kind: JobKind, name: str, judged: OwnerClaim) -> str:
        try:
            return self.stop(kind, name, judged)
        except Exception as err:  # one job's failure is reported; the pass goes on
            log.warning("Could not stop %s job %s", kind.value, name, exc_info=True)
            return f"error: {type(err).__name__}: {err}"


def _row(
    job: SeenJob, owner: JobOwner | None, run_id: str | None, verdict: Verdict, action: str
) -> dict[str, Any]:
    return report_row(job.name, job.kind, job.status, owner, verdict, action, run_id)
