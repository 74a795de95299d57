"""The job state: one typed, versioned record of what a task remembers across tries, and its only owner."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.guardrails import GuardrailReport
from airflow_provider_sm_prefs.domain.job_state import STATE_KEY, STATE_VERSION, JobState, JobStateStore
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.operators.windows import AcceptanceWindows, StageState
from airflow_provider_sm_prefs.recording import TryProgress

PACKAGE = Path(__file__).parent.parent / "airflow_provider_sm_prefs"
GOLDEN = Path(__file__).parent / "golden"


class _Store:
    def __init__(self, value: Any = None) -> None:
        self.values: dict[str, Any] = {} if value is None else {STATE_KEY: value}
        self.sets = 0

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def set(self, key: str, value: Any) -> None:
        self.sets += 1
        self.values[key] = json.loads(json.dumps(value))  # what a real store keeps: JSON


def _windows() -> AcceptanceWindows:
    """A task's acceptance windows, as a retry reads them from the job state (no AWS call needed)."""
    return AcceptanceWindows(
        JobKind.TRAINING, None, JobStateStore(None), TryProgress(), logging.getLogger("test")
    )


def test_the_state_of_the_previous_release_with_stages_and_guardrails_reads_back() -> None:
    stored = json.loads((GOLDEN / "state.json").read_text())["state"]
    assert "version" not in stored  # written before the state was versioned
    state = JobState.from_stored(stored)
    assert state is not None
    assert (state.job_name, state.kind, state.submission, state.max_tries, state.try_number) == (
        "golden-nightly",
        "training",
        1,
        3,
        2,
    )
    assert state.job_arn is None
    # A clear raises max_tries; a retry keeps it.
    assert state.cleared_since(4) and not state.cleared_since(3)
    # Try 2 owns the job: a kill of try 1 leaves it alone, a kill of try 2 or 3 does not.
    assert state.owned_by_later_try(1) and not state.owned_by_later_try(2)
    assert not state.owned_by_later_try(True)  # a bool is not a try number
    # The stage being stopped for the next one: a retry goes on with the next stage.
    assert state.staging is not None
    stages = StageState.from_dict(state.staging, JobKind.TRAINING)
    assert (stages.stage, stages.stopping_for_next, stages.base_name) == (1, True, "golden-nightly")
    assert _windows().continues(state, {"TrainingJobStatus": "Stopped"})
    report = GuardrailReport.from_dict(state.guardrails)
    assert report is not None and report.kept == [2, 3]


def test_this_release_writes_a_versioned_form_that_reads_back_equal() -> None:
    stored = json.loads((GOLDEN / "state.json").read_text())["state"]
    state = JobState.from_stored(stored)
    assert state is not None
    written = state.as_stored()
    assert written["version"] == STATE_VERSION
    # Every key the previous release wrote is written again with the same value.
    assert {k: written[k] for k in stored} == stored
    assert JobState.from_stored(json.loads(json.dumps(written))) == state


@pytest.mark.parametrize(
    "junk",
    [None, "nightly", 3, [], {}, {"job_name": ""}, {"submission": 2}, {"job_name": "j", "submission": "two"}],
)
def test_anything_unreadable_is_no_state_and_never_raises(junk: Any) -> None:
    assert JobState.from_stored(junk) is None


def test_a_form_of_a_later_release_is_read_for_the_keys_this_release_knows() -> None:
    # A downgrade: starting afresh would submit a second job next to the one the entry names.
    state = JobState.from_stored(
        {"version": STATE_VERSION + 1, "job_name": "j", "kind": "training", "new": 1}
    )
    assert state is not None and state.job_name == "j" and state.version == STATE_VERSION


def test_a_new_submission_starts_afresh_and_the_same_job_keeps_what_was_recorded_with_it() -> None:
    first = JobState(
        job_name="nightly",
        kind="training",
        job_arn="arn:aws:sagemaker:us-east-1:123456789012:training-job/nightly",
        guardrails={"kept": [1]},
        staging={"base_name": "nightly", "stage": 1},
        max_tries=1,
        try_number=1,
    )
    again = JobState.submitted(
        first, job_name="nightly", kind="training", submission=1, max_tries=1, try_number=2
    )
    assert (again.job_arn, again.guardrails, again.staging, again.try_number) == (
        first.job_arn,
        first.guardrails,
        first.staging,
        2,
    )
    retry = JobState.submitted(
        first, job_name="nightly-r2", kind="training", submission=2, max_tries=1, try_number=2
    )
    assert retry == JobState(job_name="nightly-r2", kind="training", submission=2, max_tries=1, try_number=2)
    assert JobState.submitted(
        None, job_name="n", kind="processing", submission=1, max_tries=None, try_number=1
    ) == (JobState(job_name="n", kind="processing", try_number=1))


def test_the_store_reads_modifies_and_writes_one_entry() -> None:
    backend = _Store()
    store = JobStateStore(backend)
    assert store.keeps_state and store.load() is None
    assert store.update(job_arn="arn") is None and backend.sets == 0  # nothing recorded: nothing to update
    store.save(JobState(job_name="nightly", kind="training", try_number=1))
    updated = store.update(job_arn="arn")
    assert updated is not None and updated.job_arn == "arn"
    assert backend.values[STATE_KEY] == {
        "job_name": "nightly",
        "kind": "training",
        "submission": 1,
        "job_arn": "arn",
        "try_number": 1,
        "version": STATE_VERSION,
    }


def test_without_a_state_store_nothing_is_kept_and_every_try_starts_as_a_first_one() -> None:
    store = JobStateStore.of({})
    assert not store.keeps_state
    store.save(JobState(job_name="nightly", kind="training"))
    assert store.load() is None and store.load_or_none() is None


def test_an_unreachable_store_raises_on_load_and_is_nothing_known_on_the_kill_paths() -> None:
    class Unreachable:
        def get(self, key: str) -> Any:
            raise ConnectionError("supervisor gone")

        def set(self, key: str, value: Any) -> None:
            raise ConnectionError("supervisor gone")

    store = JobStateStore(Unreachable())
    with pytest.raises(ConnectionError):
        store.load()
    assert store.load_or_none() is None


def test_no_other_module_knows_the_state_key_or_reaches_the_task_state_store() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).parts
        # compat/__init__.py is the backend that stands in for the task state store before Airflow 3.3.
        if path.name == "job_state.py" or "testing" in relative or relative == ("compat", "__init__.py"):
            continue
        text = path.read_text()
        if re.search(rf"[\"']{STATE_KEY}[\"']|\bSTATE_KEY\b|task_state_store", text):
            offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []
