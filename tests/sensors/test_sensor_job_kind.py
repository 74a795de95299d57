"""The sensor's ``job_kind`` argument, and ``job_type``, its name in earlier releases."""

from __future__ import annotations

import json
import warnings
from datetime import datetime
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_provider_sm_prefs.compat import AirflowFailException
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.sensors import SageMakerCapacitySensor


def sensor(**kwargs: Any) -> SageMakerCapacitySensor:
    return SageMakerCapacitySensor(task_id="watch", job_name="watched", **kwargs)


def test_job_kind_names_the_kind_and_is_templated() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        watched = sensor(job_kind="Processing")
    assert (watched.job_kind, watched.kind) == ("processing", JobKind.PROCESSING)
    assert "job_kind" in watched.template_fields and "job_type" not in watched.template_fields
    assert sensor().kind is JobKind.TRAINING
    assert sensor(job_kind="{{ params.kind }}").job_kind == "{{ params.kind }}"  # checked once rendered


def test_a_literal_job_kind_that_is_no_kind_fails_at_parse() -> None:
    with pytest.raises(AirflowFailException, match="job_kind: 'batch' is not a job kind"):
        sensor(job_kind="batch")


def test_job_type_still_works_and_warns_at_the_line_that_passed_it() -> None:
    with pytest.warns(DeprecationWarning, match="job_type is deprecated; use job_kind") as caught:
        watched = sensor(job_type="processing")
    assert watched.kind is JobKind.PROCESSING and watched.job_kind == "processing"
    assert [w.filename for w in caught] == [__file__]
    with pytest.warns(DeprecationWarning, match="use job_kind"):
        assert watched.job_type == "processing"  # read-only alias of job_kind


def test_job_type_and_job_kind_together_is_an_error() -> None:
    with pytest.raises(TypeError, match="pass job_kind only"):
        sensor(job_kind="training", job_type="training")


def test_a_dag_serialized_with_job_type_still_deserializes() -> None:
    """What a DAG of the previous release left in the metadata database: ``job_type`` as template field."""
    from tests.airflow_versions import DagSerialization

    with DAG("sensor_job_kind", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        sensor(job_kind="processing")
    encoded = DagSerialization.to_dict(dag)
    task = encoded["dag"]["tasks"][0]["__var"]
    assert task["job_kind"] == "processing"
    previous = json.loads(
        json.dumps(encoded).replace('"job_kind"', '"job_type"')  # the earlier release's field name
    )
    old = DagSerialization.from_dict(previous).get_task("watch")
    assert "job_type" in old.template_fields
    assert old.job_type == "processing"  # type: ignore[attr-defined]
    new = DagSerialization.from_dict(encoded).get_task("watch")
    assert new.job_kind == "processing"  # type: ignore[attr-defined]
