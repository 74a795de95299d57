"""Literal arguments are checked when the DAG file is parsed, by the rules execute() applies, cheaply."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.operators import (
    SageMakerPreferenceBaseOperator,
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)
from airflow_provider_sm_prefs.operators.templates import has_template

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"
OPERATORS: dict[str, type[SageMakerPreferenceBaseOperator]] = {
    "training": SageMakerPreferenceTrainingOperator,
    "processing": SageMakerPreferenceProcessingOperator,
}


def training(resource: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {
        "TrainingJobName": "nightly",
        "RoleArn": "arn:aws:iam::123456789012:role/sm",
        "ResourceConfig": {"VolumeSizeInGB": 50, **(resource or {})},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        **top,
    }


def processing(cluster: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {
        "ProcessingJobName": "prep",
        "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30, **(cluster or {})}},
        **top,
    }


GPU = [
    {"instance_type": "ml.g6e.48xlarge", "instance_count": 2},
    {"instance_type": "ml.g5.48xlarge", "instance_count": 4},
]

# (kind, config, instance_preferences, max_pending): each breaks at least one rule.
INVALID: dict[str, tuple[str, Any, Any, Any]] = {
    "unknown type": ("training", training(), [{"instance_type": "ml.g5.48xlarg", "instance_count": 1}], None),
    "training-only type": ("processing", processing({"InstanceCount": 1}), ["ml.p4d.24xlarge"], 3600),
    "duplicate": ("training", training({"InstanceCount": 1}), ["ml.g5.xlarge", "ml.g5.xlarge"], None),
    "six entries": (
        "training",
        training({"InstanceCount": 1}),
        [
            "ml.g5.xlarge",
            "ml.g5.2xlarge",
            "ml.g5.4xlarge",
            "ml.g5.8xlarge",
            "ml.g5.12xlarge",
            "ml.g5.16xlarge",
        ],
        None,
    ),
    "unknown and job-level keys": (
        "training",
        training(),
        [{"instance_type": "ml.g5.xlarge", "instance_count": 1, "VolumeSizeInGB": 9, "cnt": 1}],
        None,
    ),
    "mixed key styles": (
        "training",
        training(),
        [{"instance_type": "ml.g5.xlarge", "InstanceCount": 1}],
        None,
    ),
    "count out of range": (
        "processing",
        processing(),
        [{"instance_type": "ml.m5.xlarge", "instance_count": 101}],
        None,
    ),
    "counts on some entries": ("training", training(), [GPU[0], "ml.g5.48xlarge"], None),
    "job-level type": ("training", training({"InstanceType": "ml.m5.xlarge"}), GPU, None),
    "counts in both places": ("training", training({"InstanceCount": 2}), GPU, None),
    "no count": ("training", training(), ["ml.g5.48xlarge"], None),
    "job count as string zero": ("training", training({"InstanceCount": "0"}), ["ml.g5.48xlarge"], None),
    "spot": ("training", training(EnableManagedSpotTraining=True), GPU, None),
    "instance groups": ("training", training({"InstanceGroups": [{"InstanceGroupName": "a"}]}), GPU, None),
    "plans in both places": (
        "training",
        training({"TrainingPlanArn": PLAN}),
        [{"instance_type": "ml.p5.48xlarge", "instance_count": 1, "training_plan_arn": PLAN}],
        None,
    ),
    "bad plan ARN": (
        "training",
        training(),
        [{"instance_type": "ml.p5.48xlarge", "instance_count": 1, "training_plan_arn": "arn:x"}],
        None,
    ),
    "pending in config too short": (
        "training",
        training(StoppingCondition={"MaxPendingTimeInSeconds": 60}),
        GPU,
        None,
    ),
    "max_pending below minimum": ("training", training(), GPU, timedelta(minutes=5)),
    "max_pending above maximum": ("training", training(), GPU, timedelta(days=40)),
    "max_pending conflicts with config": (
        "training",
        training(StoppingCondition={"MaxPendingTimeInSeconds": 3600}),
        GPU,
        7200,
    ),
    "max_pending not a duration": ("training", training(), GPU, "soon"),
    "processing pending field": (
        "processing",
        processing({"InstanceCount": 1}, StoppingCondition={"MaxPendingTimeInSeconds": 3600}),
        ["ml.m5.xlarge"],
        None,
    ),
    "processing plan": (
        "processing",
        processing({"InstanceCount": 1}, TrainingPlanArn=PLAN),
        ["ml.m5.xlarge"],
        None,
    ),
    "list in both places": (
        "processing",
        processing({"InstanceCount": 1, "InstancePreferences": [{"InstanceType": "ml.m5.xlarge"}]}),
        ["ml.c5.xlarge"],
        None,
    ),
    "list missing": ("processing", processing({"InstanceCount": 1}), None, None),
    "cluster not a dict": ("processing", {"ProcessingResources": "big"}, ["ml.m5.xlarge"], None),
    "config not a dict": ("training", ["not", "a", "dict"], GPU, None),
}


def _problems(action: Callable[[], object]) -> list[str]:
    with pytest.raises(InvalidInstancePreferencesError) as err:
        action()
    return err.value.problems


@pytest.mark.parametrize("case", sorted(INVALID))
def test_literal_arguments_fail_at_parse_time_with_the_problems_execute_reports(case: str) -> None:
    kind, config, prefs, max_pending = INVALID[case]
    operator = OPERATORS[kind]

    def at_parse() -> object:
        return operator(task_id="t", config=config, instance_preferences=prefs, max_pending=max_pending)

    # The same arguments, rendered from templates at execute time: prepare() is what execute() calls.
    templated = operator(
        task_id="t", config="{{ params.config }}", instance_preferences=prefs, max_pending=max_pending
    )
    templated.config = config
    assert _problems(at_parse) == _problems(templated.prepare)


def test_valid_literal_arguments_are_not_rendered_at_parse_time(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_render(*args: Any) -> None:
        raise AssertionError("the request was rendered (deep-copied) at parse time")

    monkeypatch.setattr(InstancePreferenceList, "_rendered", no_render)
    config = training()
    op = SageMakerPreferenceTrainingOperator(
        task_id="t", config=config, instance_preferences=GPU, max_pending=timedelta(hours=2)
    )
    assert op.config is config and config == training()
    with pytest.raises(AssertionError, match="rendered"):
        op.prepare()


@pytest.mark.parametrize(
    ("config", "prefs", "max_pending"),
    [
        (training({"InstanceCount": "{{ params.count }}"}), ["ml.nope"], None),
        (training(), [{"instance_type": "{{ params.first }}", "instance_count": 1}, "ml.nope"], None),
        (training(), "{{ params.prefs }}", "soon"),
        (training(), GPU, "{{ params.max_pending }}"),
        (training(Tags=[("{% if x %}a{% endif %}", "v")]), [], None),
        ({"{{ params.key }}": 1}, None, None),
    ],
)
def test_templated_arguments_are_checked_at_execute_time_only(
    config: Any, prefs: Any, max_pending: Any
) -> None:
    SageMakerPreferenceTrainingOperator(
        task_id="t", config=config, instance_preferences=prefs, max_pending=max_pending
    )


class _Str(str):
    pass


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{{ ds }}", True),
        ("{% raw %}", True),
        ("{ {", False),
        ({"a": [1, ("x", {"k": "{{ ds }}"})]}, True),
        ({"{{ ds }}": 1}, True),
        ({("{{ ds }}",): 1}, True),  # keys are searched like values
        ([{1, "{{ ds }}"}], False),  # sets are not searched
        ([b"{{ ds }}", 31611], False),  # neither bytes nor numbers (31611 is b"{{" when marshalled)
        ([_Str("{{ ds }}")], True),
        ([MappingProxyType({"k": "{{ ds }}"})], True),
        ([MappingProxyType({"k": "v"}), timedelta(1)], False),
        (timedelta(hours=1), False),
        (None, False),
    ],
)
def test_has_template(value: Any, expected: bool) -> None:
    assert has_template(value) is expected


def test_literal_acceptance_windows_are_checked_when_the_dag_is_parsed() -> None:
    prefs = [
        {"instance_type": "ml.p5.48xlarge", "instance_count": 2, "training_plan_arn": PLAN},
        {"instance_type": "ml.g6e.48xlarge", "instance_count": 2, "accept_after": timedelta(hours=4)},
        {"instance_type": "ml.g5.48xlarge", "instance_count": 4, "accept_after": timedelta(hours=2)},
    ]
    with pytest.raises(
        InvalidInstancePreferencesError, match=r"instance_preferences\[2\]\.accept_after: 2h is earlier"
    ):
        SageMakerPreferenceTrainingOperator(
            task_id="t", config=training(), instance_preferences=prefs, max_pending=timedelta(hours=6)
        )
    prefs[1]["accept_after"], prefs[2]["accept_after"] = timedelta(hours=2), timedelta(hours=4)
    op = SageMakerPreferenceTrainingOperator(
        task_id="t", config=training(), instance_preferences=prefs, max_pending=timedelta(hours=6)
    )
    # Stored as seconds: the serialized DAG holds JSON.
    assert [e.get("accept_after") for e in op.instance_preferences] == [None, 7200.0, 14400.0]
