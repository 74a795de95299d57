"""The documented example of the test config helper runs, and its config is what the emulator accepts."""

from __future__ import annotations

import doctest
from typing import Any

from offline_sagemaker import jobs


def test_docstring_example_runs() -> None:
    result = doctest.testmod(jobs)
    assert result.attempted > 0 and result.failed == 0


def test_config_is_accepted_by_the_offline_sagemaker(offline_sagemaker: Any) -> None:
    config = jobs.training_config("helper", max_runtime_seconds=7200, tags={"team": "ml"}, InstanceCount=1)
    assert config["Tags"] == [{"Key": "team", "Value": "ml"}]
    config["ResourceConfig"]["InstancePreferences"] = [{"InstanceType": "ml.g5.48xlarge"}]
    client = offline_sagemaker.boto3_client("sagemaker")
    client.create_training_job(**config)
    described = client.describe_training_job(TrainingJobName="helper")
    assert described["StoppingCondition"]["MaxRuntimeInSeconds"] == 7200
    assert described["ResourceConfig"]["InstancePreferences"][0]["InstanceType"] == "ml.g5.48xlarge"
