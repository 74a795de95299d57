"""The HyperPod group operator, the sensors and the reconciler take the AWS arguments, and their hook, from one
base; the operator and the sensors take the wait's arguments from it too."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_provider_sm_prefs.hooks.hyperpod import SageMakerHyperPodHook
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook
from airflow_provider_sm_prefs.operators.aws_task import AwsTask, AwsWaitingTask
from airflow_provider_sm_prefs.operators.hyperpod import SageMakerHyperPodGroupOperator
from airflow_provider_sm_prefs.operators.reconciler import SageMakerJobReconcilerOperator
from airflow_provider_sm_prefs.sensors.base import SageMakerBaseSensor

#: Every AWS argument, each with a value other than its default.
AWS: dict[str, Any] = {
    "aws_conn_id": "sm_other",
    "region_name": "eu-west-1",
    "verify": "/etc/ssl/ca.pem",
    "botocore_config": {"retries": {"mode": "standard"}},
}
#: Every argument of a wait, each with a value other than its default.
WAIT: dict[str, Any] = {**AWS, "deferrable": False, "poll_interval": 7.0, "min_defer_seconds": 0.0}
WAIT_DEFAULTS: dict[str, Any] = {
    "aws_conn_id": "aws_default",
    "region_name": None,
    "verify": None,
    "botocore_config": None,
    "deferrable": True,
    "poll_interval": 30.0,
    "min_defer_seconds": None,
}


def _assert_built_from_aws(hook: Any) -> None:
    assert (hook.aws_conn_id, hook.region_name, hook.verify) == ("sm_other", "eu-west-1", "/etc/ssl/ca.pem")
    assert hook.config.retries == {"mode": "standard"}  # botocore_config, as a botocore Config


def _group_operator(**kwargs: Any) -> SageMakerHyperPodGroupOperator:
    return SageMakerHyperPodGroupOperator(
        task_id="scale",
        cluster_name="c",
        group_name="g",
        instance_types=["ml.g5.xlarge"],
        instance_count=1,
        **kwargs,
    )


def test_the_group_operator_and_the_sensors_wait_on_one_base() -> None:
    assert issubclass(SageMakerHyperPodGroupOperator, AwsWaitingTask)
    assert issubclass(SageMakerBaseSensor, AwsWaitingTask)
    assert issubclass(SageMakerJobReconcilerOperator, AwsTask)
    assert not issubclass(SageMakerJobReconcilerOperator, AwsWaitingTask)  # a pass does not defer


def test_the_group_operator_keeps_the_wait_defaults() -> None:
    operator = _group_operator()
    assert {name: getattr(operator, name) for name in WAIT} == WAIT_DEFAULTS


@pytest.mark.parametrize("how", ["arguments", "default_args"])
def test_the_group_operator_stores_every_wait_argument_given_directly_or_by_default_args(how: str) -> None:
    with DAG("aws_task", schedule=None, start_date=datetime(2025, 1, 1), default_args=dict(WAIT)):
        operator = _group_operator(**WAIT) if how == "arguments" else _group_operator()
    assert {name: getattr(operator, name) for name in WAIT} == WAIT


def test_the_group_operator_builds_its_hook_from_every_aws_argument() -> None:
    hook = _group_operator(**AWS).hook
    assert type(hook) is SageMakerHyperPodHook
    _assert_built_from_aws(hook)


def test_the_reconciler_takes_every_aws_argument_and_builds_its_hook_from_them() -> None:
    reconciler = SageMakerJobReconcilerOperator(task_id="reconcile", **AWS)
    hook = reconciler.hook
    assert type(hook) is SageMakerPreferenceHook
    _assert_built_from_aws(hook)
    assert not hasattr(reconciler, "deferrable")
