"""What a deferred task of the previous release left behind resumes with this release's code.

``tests/golden/`` holds the serialized forms an earlier release wrote, produced by that release's own
code (``release``/``commit`` in each file): the trigger's classpath and kwargs (in the ``trigger`` table
while a task waits), the task state store's submit-once record, the trigger's event payload and the
outcome record in XCom. Renaming or removing a trigger kwarg, a state key or an outcome field without a
compatibility path fails here. When a release changes a form, add a new golden file next to these: keep
the old ones, a deployment may still hold them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.events import CapacityEvent
from airflow_provider_sm_prefs.domain.guardrails import GuardrailReport
from airflow_provider_sm_prefs.domain.job_state import JobState, JobStateStore
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.record import CapacityRecord
from airflow_provider_sm_prefs.operators.windows import AcceptanceWindows
from airflow_provider_sm_prefs.recording import TryProgress
from airflow_provider_sm_prefs.triggers.capacity import RENAMED_KWARGS, SageMakerCapacityTrigger
from offline_sagemaker.jobs import training_config
from tests.airflow_versions import import_string

GOLDEN = Path(__file__).parent / "golden"
#: The operators' template fields added since the golden files were written, with their renderers. A row of
#: the previous release lacks them until its DAG is parsed again; their default (None) renders nothing.
ADDED_TEMPLATE_FIELDS = {"regions": "json"}
REQUIRED_OUTCOME_FIELDS = [
    f.name
    for f in dataclasses.fields(CapacityOutcome)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
]


def golden(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN / name).read_text())
    return data


def test_a_trigger_row_of_the_previous_release_rebuilds_with_every_kwarg_kept() -> None:
    row = golden("trigger.json")
    cls = import_string(row["classpath"])  # what the triggerer does with the row
    assert cls is SageMakerCapacityTrigger
    trigger = cls(**row["kwargs"])
    classpath, kwargs = trigger.serialize()
    assert classpath == row["classpath"]
    # Every kwarg the old release wrote is still a kwarg, with the same value once re-serialized.
    assert {k: kwargs[k] for k in row["kwargs"]} == row["kwargs"]


def test_a_staged_trigger_row_rebuilds_with_its_renamed_kwargs_under_the_new_names() -> None:
    row = golden("trigger_window.json")
    trigger = import_string(row["classpath"])(**row["kwargs"])
    _, kwargs = trigger.serialize()
    renamed = {RENAMED_KWARGS.get(k, k): v for k, v in row["kwargs"].items()}
    assert "escalate_after_seconds" in row["kwargs"]  # the form a release before the rename wrote
    assert {k: kwargs[k] for k in renamed} == renamed
    assert kwargs["window_closes_after_seconds"] == 3600.0


def test_a_trigger_of_the_previous_release_resumes_against_sagemaker(sm: Any) -> None:
    row = golden("trigger.json")
    client = sm.boto3_client("sagemaker")
    prefs = [
        {"InstanceType": p["instance_type"], "InstanceCount": p["instance_count"]}
        for p in row["kwargs"]["preferences"]
    ]
    client.create_training_job(**training_config(row["kwargs"]["job_name"], InstancePreferences=prefs))
    sm.advance(600)
    trigger = import_string(row["classpath"])(**row["kwargs"])

    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("no event")

    payload = asyncio.run(asyncio.wait_for(first(), 60))
    outcome = CapacityEvent.from_payload(payload).outcome_or_raise()
    assert (outcome.job_name, outcome.selected_instance_type, outcome.preference_rank) == (
        "golden-nightly",
        "ml.g6.48xlarge",
        1,
    )


def test_the_state_store_record_of_the_previous_release_reads_as_a_retry_with_its_guardrails() -> None:
    stored = golden("records.json")["state"]
    state = JobState.from_stored(stored)
    assert state is not None and (state.job_name, state.kind, state.submission) == (
        "golden-nightly",
        "training",
        1,
    )
    # No max_tries recorded: a later try is a retry (reattach), never mistaken for a clear.
    assert not state.cleared_since(3)
    # No stages recorded: the task waits as before, without windows.
    assert "staging" not in stored and state.staging is None
    assert not _windows().continues(state, {"TrainingJobStatus": "Stopped"})
    report = GuardrailReport.from_dict(state.guardrails)
    assert report is not None and report.kept == [2, 3]
    assert report.excluded[0]["instance_type"] == "ml.p5.48xlarge"


def test_the_outcome_and_record_of_the_previous_release_read_back() -> None:
    data = golden("records.json")
    outcome = CapacityOutcome.from_dict(data["outcome"])
    now = outcome.as_dict()
    # Every field the old release wrote reads back as it was; fields added since take their defaults.
    assert {k: now[k] for k in data["outcome"]} == data["outcome"]
    defaults = CapacityOutcome.from_dict({k: data["outcome"][k] for k in REQUIRED_OUTCOME_FIELDS}).as_dict()
    assert {k: v for k, v in now.items() if k not in data["outcome"]} == {
        k: v for k, v in defaults.items() if k not in data["outcome"]
    }
    event = CapacityEvent.from_payload(
        {
            "status": "success",
            "job_name": outcome.job_name,
            "job_kind": "training",
            "wait_for": "capacity",
            "phase": "running",
            "outcome": data["outcome"],
            "error_type": None,
            "job_status": "InProgress",
            "reason": None,
        }
    )
    assert event.outcome_or_raise() == outcome
    record = CapacityRecord.from_dict(data["record"])
    assert record is not None
    assert {k: v for k, v in record.as_dict().items() if k in data["record"]} == data["record"]


def _windows() -> AcceptanceWindows:
    """A task's acceptance windows, as a retry reads them from the job state (no AWS call needed)."""
    return AcceptanceWindows(
        JobKind.TRAINING, None, JobStateStore(None), TryProgress(), logging.getLogger("test")
    )


def _serialized_now() -> dict[str, Any]:
    """This release's serialized form of the DAG the golden file was written from."""
    import importlib.util

    from tests.airflow_versions import DagSerialization

    spec = importlib.util.spec_from_file_location("sm_prefs_golden_dag", GOLDEN / "sm_prefs_golden_dag.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data: dict[str, Any] = json.loads(json.dumps(DagSerialization.to_dict(module.dag), default=str))
    return data


def _comparable(data: dict[str, Any]) -> dict[str, Any]:
    dag = {k: v for k, v in data["dag"].items() if k not in ("fileloc", "_processor_dags_folder")}
    return {**data, "dag": dag}


def test_a_dag_serialized_by_the_previous_release_loads_and_is_what_this_release_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.airflow_versions import AIRFLOW_V_3_3_PLUS, DagSerialization

    stored = golden("serialized_dag.json")["serialized"]
    if stored["__version"] > DagSerialization.SERIALIZER_VERSION:
        # The previous release ran on Airflow 3.3, whose format 3 Airflow 3.0 cannot read; an upgrade of the
        # provider never moves a deployment back to an older Airflow, so no 3.0 scheduler meets that row.
        pytest.skip(f"serialized format {stored['__version']} is newer than this Airflow's")

    # Loaded as the api-server loads it to show links (SerializedDagModel sets this class-wide flag
    # from each load's load_op_links, so an earlier dag.test() in the process may have left it off).
    monkeypatch.setattr(DagSerialization, "_load_operator_extra_links", True)

    from airflow_provider_sm_prefs.operators import (
        SageMakerPreferenceProcessingOperator,
        SageMakerPreferenceTrainingOperator,
    )

    dag = DagSerialization.from_dict(stored)  # what the scheduler does with the row
    for task_id, cls in (
        ("train", SageMakerPreferenceTrainingOperator),
        ("process", SageMakerPreferenceProcessingOperator),
        ("mapped", SageMakerPreferenceTrainingOperator),
    ):
        task = dag.get_task(task_id)
        # The scheduler renders and the UI shows the same fields (a row of the previous release lacks the
        # fields added since until the DAG is parsed again), and every extra link still resolves.
        kept = tuple(f for f in cls.template_fields if f not in ADDED_TEMPLATE_FIELDS)
        assert tuple(task.template_fields) == kept
        assert set(task.operator_extra_link_dict) == {link.name for link in cls.operator_extra_links}
    if not AIRFLOW_V_3_3_PLUS:  # the golden was written on Airflow 3.3; each minor writes its own form
        return
    # This release writes the same form; only the sensor's job_type became job_kind (both load), and the
    # operators gained the template fields of ADDED_TEMPLATE_FIELDS.
    expected = json.loads(json.dumps(stored).replace('"job_type"', '"job_kind"'))
    for task in expected["dag"]["tasks"]:
        fields = task["__var"].get("template_fields")
        if fields and "max_pending" in fields:
            fields.insert(fields.index("max_pending") + 1, "regions")
            task["__var"]["template_fields_renderers"].update(ADDED_TEMPLATE_FIELDS)
    assert _comparable(_serialized_now()) == _comparable(expected)
