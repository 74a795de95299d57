"""Lineage of a job, read off the Create* request and the outcome (pure), and the facet class around it."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import attrs
import jsonschema
import pytest

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.lineage import (
    SCHEMA_RESOURCE,
    S3Location,
    capacity_facet_fields,
    job_inputs,
    job_outputs,
    s3_location,
)
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome

PREFS = [
    {"instance_type": "ml.g6.48xlarge", "instance_count": 2, "training_plan_arn": None},
    {"instance_type": "ml.g5.48xlarge", "instance_count": 4, "training_plan_arn": None},
]


def channel(uri: str) -> dict[str, Any]:
    return {"ChannelName": "c", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri}}}


def outcome(**overrides: Any) -> CapacityOutcome:
    base: dict[str, Any] = {
        "job_name": "nightly",
        "job_kind": "training",
        "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/nightly",
        "selected_instance_type": "ml.g5.48xlarge",
        "selected_instance_count": 4,
        "preference_rank": 2,
        "fell_back": True,
        "pending_seconds": 1227.0,
        "capacity": "on-demand",
        "accelerators": {"model": "A10G", "total": 32, "memory_gib_per_device": 24},
        "job_status": "Completed",
        "preferences": PREFS,
        "billable_seconds": 1980,
        "hourly_cost": 65.16,
        "first_choice_hourly_cost": 26.7,
        "cost_increase": 1.4404,
        "estimated_cost": 35.84,
        "excluded": [{"instance_type": "ml.p5.48xlarge", "rank": 1, "kind": "quota", "reason": "quota is 0"}],
        "model_artifacts": "s3://models/out/nightly/output/model.tar.gz",
        "stages": [
            {
                "stage": 1,
                "entries": ["ml.g6.48xlarge"],
                "job_name": "nightly",
                "pending_seconds": 3610.2,
                "ended": "escalated",
                "created_at": "2026-11-29T19:30:00+00:00",
            },
            {
                "stage": 2,
                "entries": ["ml.g6.48xlarge", "ml.g5.48xlarge"],
                "job_name": "nightly-s2",
                "pending_seconds": 12.0,
                "ended": "selected",
                "created_at": "2026-11-29T20:30:12+00:00",
            },
        ],
    }
    return CapacityOutcome(**{**base, **overrides})


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket/prefix/part/", S3Location("bucket", "prefix/part/")),
        ("s3://bucket/model.tar.gz", S3Location("bucket", "model.tar.gz")),
        ("s3://bucket", S3Location("bucket", "")),
        ("file:///opt/ml/input", None),
        ("s3:///no-bucket", None),
        ("{{ params.uri }}", None),
        (None, None),
    ],
)
def test_s3_uris_become_openlineage_s3_names(uri: Any, expected: S3Location | None) -> None:
    assert s3_location(uri) == expected


def test_a_whole_bucket_is_named_slash_as_the_amazon_provider_names_it() -> None:
    location = s3_location("s3://bucket/")
    assert location is not None and (location.namespace, location.name) == ("s3://bucket", "/")


def test_training_inputs_are_the_s3_channels_in_order_each_once() -> None:
    request = {
        "InputDataConfig": [
            channel("s3://data/train/"),
            channel("s3://data/validation/"),
            channel("s3://data/train/"),
            {"ChannelName": "fsx", "DataSource": {"FileSystemDataSource": {"FileSystemId": "fs-1"}}},
        ]
    }
    assert [(s.namespace, s.name) for s in job_inputs(JobKind.TRAINING, request)] == [
        ("s3://data", "train/"),
        ("s3://data", "validation/"),
    ]


def test_training_output_is_the_model_artifact_once_known_else_the_output_path() -> None:
    request = {"OutputDataConfig": {"S3OutputPath": "s3://models/out"}}
    assert job_outputs(JobKind.TRAINING, request) == [S3Location("models", "out")]
    assert job_outputs(JobKind.TRAINING, request, outcome(model_artifacts=None)) == [
        S3Location("models", "out")
    ]
    assert job_outputs(JobKind.TRAINING, request, outcome()) == [
        S3Location("models", "out/nightly/output/model.tar.gz")
    ]


def test_processing_inputs_and_outputs_are_the_s3_ones() -> None:
    request = {
        "ProcessingInputs": [
            {
                "InputName": "raw",
                "S3Input": {"S3Uri": "s3://data/raw/", "LocalPath": "/opt/ml/processing/in"},
            },
            {"InputName": "athena", "DatasetDefinition": {"AthenaDatasetDefinition": {"Catalog": "c"}}},
        ],
        "ProcessingOutputConfig": {
            "Outputs": [{"OutputName": "f", "S3Output": {"S3Uri": "s3://data/features"}}]
        },
    }
    assert job_inputs(JobKind.PROCESSING, request) == [S3Location("data", "raw/")]
    assert job_outputs(JobKind.PROCESSING, request) == [S3Location("data", "features")]
    assert job_inputs(JobKind.PROCESSING, {}) == [] and job_outputs(JobKind.PROCESSING, {}) == []


def test_facet_fields_before_selection_hold_the_list_only() -> None:
    fields = capacity_facet_fields(JobKind.TRAINING, PREFS, job_name="nightly")
    assert fields["jobKind"] == "training" and fields["jobName"] == "nightly"
    assert fields["preferences"] == [
        {
            "instanceType": "ml.g6.48xlarge",
            "instanceCount": 2,
            "trainingPlanArn": None,
            "acceptAfterSeconds": None,
        },
        {
            "instanceType": "ml.g5.48xlarge",
            "instanceCount": 4,
            "trainingPlanArn": None,
            "acceptAfterSeconds": None,
        },
    ]
    windowed = capacity_facet_fields(JobKind.TRAINING, [{**PREFS[1], "accept_after": 1800.0}])
    assert windowed["preferences"][0]["acceptAfterSeconds"] == 1800.0
    assert fields["selectedInstanceType"] is None and fields["preferenceRank"] is None


def test_facet_fields_after_selection_carry_choice_rank_wait_and_costs() -> None:
    fields = capacity_facet_fields(JobKind.TRAINING, [], outcome())
    assert (fields["selectedInstanceType"], fields["selectedInstanceCount"]) == ("ml.g5.48xlarge", 4)
    assert (fields["preferenceRank"], fields["fellBack"], fields["pendingSeconds"]) == (2, True, 1227.0)
    assert (fields["acceleratorModel"], fields["acceleratorsTotal"]) == ("A10G", 32)
    assert (fields["hourlyCost"], fields["estimatedCost"]) == (65.16, 35.84)
    assert len(fields["preferences"]) == 2  # the outcome's list, as written
    # The guardrails' reason text stays in the capacity record; the facet says which entry and why in one word.
    assert fields["excluded"] == [{"instanceType": "ml.p5.48xlarge", "rank": 1, "kind": "quota"}]
    # Acceptance windows: each stage, its job and how it ended.
    assert [(s["stage"], s["jobName"], s["ended"]) for s in fields["stages"]] == [
        (1, "nightly", "escalated"),
        (2, "nightly-s2", "selected"),
    ]


def schema() -> dict[str, Any]:
    text = resources.files("airflow_provider_sm_prefs").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    own: dict[str, Any] = json.loads(text)["$defs"]["SageMakerCapacityRunFacet"]["allOf"][1]
    return own


def test_facet_class_schema_and_fields_name_the_same_fields() -> None:
    from airflow_provider_sm_prefs.operators.lineage_facet import SageMakerCapacityRunFacet

    declared = {f.name for f in attrs.fields(SageMakerCapacityRunFacet) if not f.name.startswith("_")}
    assert declared == set(schema()["properties"]) == set(capacity_facet_fields(JobKind.TRAINING, []))


@pytest.mark.parametrize("with_outcome", [False, True])
def test_emitted_facet_validates_against_the_shipped_schema(with_outcome: bool) -> None:
    from openlineage.client.serde import Serde

    from airflow_provider_sm_prefs.operators.lineage_facet import SCHEMA_URL, SageMakerCapacityRunFacet

    fields = capacity_facet_fields(JobKind.TRAINING, PREFS, outcome() if with_outcome else None, "nightly")
    facet = SageMakerCapacityRunFacet(**fields)
    emitted = json.loads(Serde.to_json(facet))
    jsonschema.validate(emitted, schema())
    assert emitted["_schemaURL"] == SCHEMA_URL
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**emitted, "preferenceRank": 0}, schema())


def test_operators_import_and_build_without_the_openlineage_provider() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['openlineage'] = None\n"  # the OpenLineage client, which the provider needs too
        "from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator\n"
        "op = SageMakerPreferenceTrainingOperator(task_id='t', config={'TrainingJobName': 'n', "
        "'AlgorithmSpecification': {'TrainingImage': 'i', 'TrainingInputMode': 'File'}, 'RoleArn': 'r', "
        "'OutputDataConfig': {'S3OutputPath': 's3://b/o'}, 'ResourceConfig': {'VolumeSizeInGB': 1, 'InstanceCount': 1}, "
        "'StoppingCondition': {'MaxRuntimeInSeconds': 60}}, instance_preferences=['ml.m5.xlarge'], "
        "requirements=None, preflight='off')\n"
        "try:\n"
        "    op.get_openlineage_facets_on_start()\n"
        "except ImportError:\n"
        "    print('no lineage without the provider')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no lineage without the provider" in result.stdout
