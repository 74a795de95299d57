"""Every sensor takes the wait's arguments (AWS connection, cadence, deferral) and its hook from one base."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_provider_sm_prefs.hooks.hyperpod import SageMakerHyperPodHook
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook
from airflow_provider_sm_prefs.sensors.base import SageMakerBaseSensor
from airflow_provider_sm_prefs.sensors.capacity import SageMakerCapacitySensor
from airflow_provider_sm_prefs.sensors.hyperpod import SageMakerHyperPodGroupSensor

#: Every argument the base takes, each with a value other than its default.
SHARED: dict[str, Any] = {
    "deferrable": False,
    "poll_interval": 7.0,
    "min_defer_seconds": 0.0,
    "aws_conn_id": "sm_other",
    "region_name": "eu-west-1",
    "verify": "/etc/ssl/ca.pem",
    "botocore_config": {"retries": {"mode": "standard"}},
}
DEFAULTS: dict[str, Any] = {
    "deferrable": True,
    "poll_interval": 30.0,
    "min_defer_seconds": None,
    "aws_conn_id": "aws_default",
    "region_name": None,
    "verify": None,
    "botocore_config": None,
}


def _sensors(**kwargs: Any) -> list[SageMakerBaseSensor]:
    return [
        SageMakerCapacitySensor(task_id="job", job_name="watched", **kwargs),
        SageMakerHyperPodGroupSensor(task_id="group", cluster_name="c", group_name="g", **kwargs),
    ]


def _shared(sensor: SageMakerBaseSensor) -> dict[str, Any]:
    return {name: getattr(sensor, name) for name in SHARED}


def test_each_sensor_is_the_base_and_keeps_its_defaults() -> None:
    for sensor in _sensors():
        assert isinstance(sensor, SageMakerBaseSensor)
        assert _shared(sensor) == DEFAULTS


@pytest.mark.parametrize("how", ["arguments", "default_args"])
def test_each_sensor_stores_every_shared_argument_given_directly_or_by_default_args(how: str) -> None:
    with DAG("sensor_base", schedule=None, start_date=datetime(2025, 1, 1), default_args=dict(SHARED)):
        sensors = _sensors(**SHARED) if how == "arguments" else _sensors()
    for sensor in sensors:
        assert _shared(sensor) == SHARED


def test_the_group_sensor_still_pokes_at_its_poll_interval_and_the_job_sensor_at_airflows() -> None:
    job, group = _sensors(poll_interval=7.0)
    assert (job.poke_interval, group.poke_interval) == (60.0, 7.0)


def test_each_sensor_builds_the_hook_it_names_from_the_shared_arguments() -> None:
    job, group = _sensors(aws_conn_id="sm_other", region_name="eu-west-1", verify=False)
    assert (type(job.hook), type(group.hook)) == (SageMakerPreferenceHook, SageMakerHyperPodHook)
    for hook in (job.hook, group.hook):
        assert (hook.aws_conn_id, hook.region_name, hook.verify) == ("sm_other", "eu-west-1", False)
