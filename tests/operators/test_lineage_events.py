"""OpenLineage events of real dag.test() runs against the offline SageMaker, written by Airflow's
OpenLineage provider (its listener, file transport) and read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.lineage import FACET_NAME

pytestmark = pytest.mark.usefixtures("airflow_db")

SCRIPT = Path(__file__).resolve().parent / "emit_lineage.py"
DAG_IDS = ("t_lineage_train", "t_lineage_train_fails", "t_lineage_process")
G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"


@pytest.fixture(scope="module")
def lineage_run(
    offline_sm_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]], str]]:
    """Run the lineage DAGs once (first choice scarce); the task states, the events, the file's text."""
    offline_sm_server.load_scenario(
        {"time_scale": 600, "job_runtime_seconds": 600, "capacity": {G6: [{"from": 0, "free": 0}]}}
    )
    events_file = tmp_path_factory.mktemp("lineage") / "events.jsonl"
    env = {**os.environ, **offline_sm_server.airflow_env(conn_id="aws_default")}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(events_file), *DAG_IDS],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("STATES ")]
    text = events_file.read_text()
    yield json.loads(line.removeprefix("STATES ")), [json.loads(x) for x in text.splitlines()], text
    offline_sm_server.load_scenario("default")


def events_of(events: list[dict[str, Any]], job: str, event_type: str) -> list[dict[str, Any]]:
    return [e for e in events if e["job"]["name"] == job and e["eventType"] == event_type]


def datasets(event: dict[str, Any], side: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event[side]]


def test_the_runs_end_as_the_scenario_says(lineage_run: Any) -> None:
    states, _, _ = lineage_run
    assert states == {
        "t_lineage_train": {"train": "success"},
        "t_lineage_train_fails": {"train": "failed"},
        "t_lineage_process": {"prepare": "success"},
    }


def test_training_complete_event_has_channels_model_artifact_and_the_fallback(lineage_run: Any) -> None:
    _, events, _ = lineage_run
    (complete,) = events_of(events, "t_lineage_train.train", "COMPLETE")
    assert datasets(complete, "inputs") == [
        ("s3://lineage-data", "train/"),
        ("s3://lineage-data", "validation/"),
    ]
    # The artifact SageMaker reported for the completed job, not only the configured prefix.
    assert datasets(complete, "outputs") == [
        ("s3://lineage-models", "nightly/lineage-train/output/model.tar.gz")
    ]
    facet = complete["run"]["facets"][FACET_NAME]
    assert facet["_schemaURL"].endswith("SageMakerCapacityRunFacet.json#/$defs/SageMakerCapacityRunFacet")
    assert facet["_producer"].startswith("https://pypi.org/project/airflow-provider-sm-prefs/")
    assert (facet["selectedInstanceType"], facet["selectedInstanceCount"]) == (G5, 4)
    assert (facet["preferenceRank"], facet["fellBack"], facet["capacity"]) == (2, True, "on-demand")
    assert (facet["acceleratorModel"], facet["acceleratorsTotal"]) == ("A10G", 32)
    assert facet["jobName"] == "lineage-train" and facet["jobStatus"] == "Completed"
    assert [p["instanceType"] for p in facet["preferences"]] == [G6, G5, "ml.p4d.24xlarge"]
    # Costs from the DAG's prices: 4 × 16.29 against the first choice's 2 × 13.35.
    assert facet["hourlyCost"] == pytest.approx(65.16)
    assert facet["firstChoiceHourlyCost"] == pytest.approx(26.7)
    assert facet["billableSeconds"] > 0 and facet["estimatedCost"] > 0
    assert facet["pendingSeconds"] >= 0


def test_training_start_events_carry_the_list_and_the_configured_output_path(lineage_run: Any) -> None:
    _, events, _ = lineage_run
    starts = events_of(events, "t_lineage_train.train", "START")
    assert starts  # one per run of the task: the first, and each resume from a deferral
    for start in starts:
        assert datasets(start, "outputs") == [("s3://lineage-models", "nightly")]
        assert len(start["inputs"]) == 2
        facet = start["run"]["facets"][FACET_NAME]
        assert facet["jobName"] == "lineage-train" and len(facet["preferences"]) == 3
        assert "selectedInstanceType" not in facet  # nothing is selected when a task starts


def test_failed_job_emits_a_fail_event_with_datasets_and_the_list(lineage_run: Any) -> None:
    _, events, _ = lineage_run
    (fail,) = events_of(events, "t_lineage_train_fails.train", "FAIL")
    assert len(fail["inputs"]) == 2
    assert datasets(fail, "outputs") == [("s3://lineage-models", "nightly")]  # no model was written
    facet = fail["run"]["facets"][FACET_NAME]
    assert facet["jobName"] == "lineage-train-fails"
    assert [p["instanceType"] for p in facet["preferences"]] == [G6, G5, "ml.p4d.24xlarge"]


def test_processing_complete_event_has_inputs_outputs_and_selection(lineage_run: Any) -> None:
    _, events, _ = lineage_run
    (complete,) = events_of(events, "t_lineage_process.prepare", "COMPLETE")
    assert datasets(complete, "inputs") == [("s3://lineage-data", "raw/2026-09-15/")]
    assert datasets(complete, "outputs") == [("s3://lineage-data", "features/")]
    facet = complete["run"]["facets"][FACET_NAME]
    assert facet["jobKind"] == "processing"
    assert (facet["selectedInstanceType"], facet["preferenceRank"]) == ("ml.c7i.4xlarge", 1)


def test_no_hyperparameter_or_environment_value_reaches_any_event(lineage_run: Any) -> None:
    from tests.dags.sm_prefs_lineage_dags import SECRET_VALUES

    _, events, text = lineage_run
    assert len(events) >= 6
    for value in SECRET_VALUES:
        assert value not in text
    assert "HyperParameters" not in text and "Environment" not in text


def test_a_config_that_rendered_to_junk_still_gives_lineage_without_datasets() -> None:
    from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator

    op = SageMakerPreferenceTrainingOperator(
        task_id="train", config="{{ params.config }}", instance_preferences=[G6, G5], preflight="off"
    )
    op.config = "not json"  # as rendered; the task itself fails on it without an AWS call
    lineage = op.get_openlineage_facets_on_start()
    assert (lineage.inputs, lineage.outputs) == ([], [])
    facet = lineage.run_facets[FACET_NAME]
    assert facet.jobKind == "training" and facet.selectedInstanceType is None
