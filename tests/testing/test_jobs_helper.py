"""The documented example of the test config helper runs, and its config is what the emulator accepts."""

from __future__ import annotations

import doctest
from typing import Any

from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.testing import jobs


def test_docstring_example_runs() -> None:
    result = doctest.testmod(jobs)
    assert result.attempted > 0 and result.failed == 0


def test_config_is_accepted_by_the_offline_sagemaker(offline_sagemaker: Any) -> None:
    config = jobs.training_config("helper", max_runtime_seconds=7200, tags={"team": "ml"})
    assert config["Tags"] == [{"Key": "team", "Value": "ml"}]
    request, _ = build_request("training", config, [{"instance_type": "ml.g5.48xlarge", "instance_count": 1}])
    client = offline_sagemaker.boto3_client("sagemaker")
    client.create_training_job(**request)
    described = client.describe_training_job(TrainingJobName="helper")
    assert described["StoppingCondition"]["MaxRuntimeInSeconds"] == 7200
    assert described["ResourceConfig"]["InstancePreferences"][0]["InstanceType"] == "ml.g5.48xlarge"
