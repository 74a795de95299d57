"""What the constructor does at DAG parse time: XCom references, repeated lists, templated fields."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from airflow.sdk import DAG, BaseOperator

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.preferences import InstancePreference, check_request
from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator
from airflow_provider_sm_prefs.recording import TryProgress

P4D, G5 = "ml.p4d.24xlarge", "ml.g5.48xlarge"
CONFIG: dict[str, Any] = {
    "TrainingJobName": "parse",
    "AlgorithmSpecification": {"TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1"},
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
    "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
    "ResourceConfig": {"VolumeSizeInGB": 50, "InstanceCount": 1},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}


class _Produce(BaseOperator):
    def execute(self, context: Any) -> Any:
        return [P4D]


@pytest.mark.parametrize("where", ["config", "instance_preferences", "nested", "guardrail"])
def test_an_xcom_reference_in_any_template_field_makes_its_task_upstream(where: str) -> None:
    with DAG("parse_xcom", schedule=None, start_date=datetime(2026, 1, 1)):
        produce = _Produce(task_id="produce")
        kwargs: dict[str, Any] = {"config": dict(CONFIG), "instance_preferences": [P4D]}
        if where == "config":
            kwargs["config"] = produce.output
            kwargs["instance_preferences"] = None
        elif where == "instance_preferences":
            kwargs["instance_preferences"] = produce.output
        elif where == "nested":
            kwargs["config"]["RoleArn"] = produce.output["role"]
        else:
            kwargs["max_hourly_cost"] = produce.output
        train = SageMakerPreferenceTrainingOperator(task_id="train", max_pending=timedelta(hours=1), **kwargs)
    assert train.upstream_task_ids == {"produce"}


def test_literal_arguments_set_no_upstream_and_keep_every_setting() -> None:
    with DAG("parse_literal", schedule=None, start_date=datetime(2026, 1, 1)):
        train = SageMakerPreferenceTrainingOperator(
            task_id="train",
            config=CONFIG,
            instance_preferences=[P4D, {"instance_type": G5, "accept_after": timedelta(minutes=5)}],
            max_pending=timedelta(hours=1),
            poll_interval=7,
            print_log=False,
            botocore_config={"retries": {"mode": "adaptive"}},
        )
    assert train.upstream_task_ids == set()
    assert train.instance_preferences == [P4D, {"instance_type": G5, "accept_after": 300.0}]
    assert (train.poll_interval, train.print_log, train.wait_for_completion) == (7, False, True)
    assert train.botocore_config == {"retries": {"mode": "adaptive"}}
    assert train._progress == TryProgress() and train._windows is None


def test_a_repeated_list_is_checked_each_time_with_its_own_request() -> None:
    prefs = [{"instance_type": P4D, "instance_count": 2}]
    first = check_request("training", {"ResourceConfig": {}}, prefs, None)
    assert first.instance_types == [P4D]
    # The same list remembered from above, but this request breaks a rule of its own.
    with pytest.raises(
        InvalidInstancePreferencesError, match="counts are given both per entry and at job level"
    ):
        check_request("training", {"ResourceConfig": {"InstanceCount": 1}}, prefs, None)
    # Equal-looking values of another type are another list: "2" is a count as Jinja renders it, 2.5 is not.
    assert (
        check_request("training", {}, [{"instance_type": P4D, "instance_count": "2"}], None)[0].instance_count
        == 2
    )
    with pytest.raises(InvalidInstancePreferencesError, match=r"instance_preferences\[0\]"):
        check_request("training", {}, [{"instance_type": P4D, "instance_count": 2.5}], None)
    # A broken list reports its problems every time, and a caller extending them does not change the next.
    reported = []
    for _ in range(2):
        with pytest.raises(InvalidInstancePreferencesError) as info:
            check_request("training", {"ResourceConfig": {"InstanceType": G5}}, [P4D, P4D], None)
        reported.append(info.value.problems)
    assert reported[0] == reported[1]
    assert [p.split(":")[0] for p in reported[0]] == [
        "instance_preferences[1]",
        "ResourceConfig.InstanceType",
        "ResourceConfig.InstanceCount",
    ]


def test_instance_preference_objects_are_still_accepted() -> None:
    prefs = check_request(
        "training", {"ResourceConfig": {"InstanceCount": 1}}, [InstancePreference(P4D)], None
    )
    assert prefs.instance_types == [P4D]
