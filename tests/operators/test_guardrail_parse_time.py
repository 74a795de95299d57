"""Guardrail arguments checked when the DAG is parsed: requirements, preflight, price caps (no AWS call)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.preferences import WorkloadRequirements
from airflow_provider_sm_prefs.domain.requirements import MixedAcceleratorRuntimesWarning
from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator

P4D, G5, TRN1 = "ml.p4d.24xlarge", "ml.g5.48xlarge", "ml.trn1.32xlarge"

CONFIG: dict[str, Any] = {
    "TrainingJobName": "parse",
    "AlgorithmSpecification": {
        "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1",
        "TrainingInputMode": "File",
    },
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
    "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
    "ResourceConfig": {"VolumeSizeInGB": 50, "InstanceCount": 1},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}


def test_literal_requirements_that_reject_an_entry_fail_the_dag_import() -> None:
    with pytest.raises(InvalidInstancePreferencesError) as info:
        SageMakerPreferenceTrainingOperator(
            task_id="t",
            config=CONFIG,
            instance_preferences=[P4D, G5],
            requirements=WorkloadRequirements(min_accelerator_memory_gib=40),
        )
    assert f"instance_preferences[1]: {G5} does not meet requirements.min_accelerator_memory_gib=40" in str(
        info.value
    )


def test_a_mixed_list_without_requirements_warns_at_parse_time_and_passes_with_them() -> None:
    with pytest.warns(MixedAcceleratorRuntimesWarning, match=f"cuda: {P4D}; neuron: {TRN1}"):
        SageMakerPreferenceTrainingOperator(task_id="t", config=CONFIG, instance_preferences=[P4D, TRN1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SageMakerPreferenceTrainingOperator(
            task_id="t2", config=CONFIG, instance_preferences=[P4D, G5], requirements={"accelerator": "cuda"}
        )


def test_invalid_literal_guardrail_arguments_fail_the_dag_import_all_at_once() -> None:
    with pytest.raises(InvalidInstancePreferencesError) as info:
        SageMakerPreferenceTrainingOperator(
            task_id="t",
            config=CONFIG,
            instance_preferences=[P4D],
            preflight="maybe",
            max_hourly_cost=-3,
            requirements={"accelerator": "tpu"},
        )
    text = str(info.value)
    assert "preflight: 'maybe' is not one of prune, fail, warn, off" in text
    assert "max_hourly_cost: -3 must be a number >= 0" in text
    assert "requirements.accelerator: 'tpu'" in text


def test_guardrail_values_rendered_as_text_are_read_back() -> None:
    """Without render_template_as_native_obj, Jinja hands the operator text."""
    operator = SageMakerPreferenceTrainingOperator(
        task_id="t",
        config=CONFIG,
        instance_preferences=[P4D],
        requirements="{{ params.requirements }}",
        max_hourly_cost="{{ params.cap }}",
        prices="{{ params.prices }}",
    )
    operator.requirements = "{'accelerator': 'cuda', 'efa': True}"
    operator.max_hourly_cost = "None"
    operator.prices = '{"ml.p4d.24xlarge": 37.69}'
    guardrails, requirements = operator.guardrail_check().settings()
    assert requirements == WorkloadRequirements(accelerator="cuda", efa=True)
    assert guardrails.max_hourly_cost is None and guardrails.prices == {P4D: 37.69}
