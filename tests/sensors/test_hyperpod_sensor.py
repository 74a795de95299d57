"""The HyperPod group sensor honours BaseSensorOperator's ``timeout``, ``soft_fail`` and ``mode`` (real
``dag.test()`` runs against the offline SageMaker)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sm_prefs.sensors.hyperpod import SageMakerHyperPodGroupSensor
from tests.operators.test_hyperpod_runs import LIFECYCLE, P4D, P5, P5E, ROLE, _client, _dags, _scenario

pytestmark = pytest.mark.usefixtures("airflow_db")


def _cluster_short_of_eight(sm: Any) -> None:
    """``nightly/gpu-workers`` InService at 2 nodes, on a clock that stands still (8 never come)."""
    sm.load_scenario(_scenario(p5=2, p5e=0, p4d=0))
    _client(sm).create_cluster(
        ClusterName="nightly",
        InstanceGroups=[
            {
                "InstanceGroupName": "gpu-workers",
                "InstanceRequirements": {"InstanceTypes": [P5, P5E, P4D]},
                "InstanceCount": 2,
                "ExecutionRole": ROLE,
                "LifeCycleConfig": LIFECYCLE,
            }
        ],
    )
    sm.advance(900)


def _state(dagrun: Any) -> str:
    (ti,) = dagrun.get_task_instances()
    return str(ti.state)


@pytest.mark.parametrize(("soft", "state"), [(False, "failed"), (True, "skipped")])
def test_a_failed_wait_fails_the_task_or_skips_it_under_soft_fail(sm: Any, soft: bool, state: str) -> None:
    _cluster_short_of_eight(sm)
    dagrun = getattr(_dags(), "hp_sensor_missing_soft" if soft else "hp_sensor_missing").test()
    assert _state(dagrun) == state


@pytest.mark.parametrize(("soft", "state"), [(False, "failed"), (True, "skipped")])
def test_the_sensor_timeout_bounds_a_wait_in_the_worker(
    sm: Any, soft: bool, state: str, capfd: pytest.CaptureFixture[str]
) -> None:
    _cluster_short_of_eight(sm)
    dagrun = getattr(_dags(), "hp_sensor_timeout_soft" if soft else "hp_sensor_timeout").test()
    assert _state(dagrun) == state
    out, err = capfd.readouterr()
    assert "nightly/gpu-workers: not ready within the sensor's timeout (3.0 s)" in out + err


def test_reschedule_mode_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"mode='reschedule' is not supported .* deferrable=True"):
        SageMakerHyperPodGroupSensor(task_id="w", cluster_name="c", group_name="g", mode="reschedule")


def test_a_deferral_carries_the_sensor_timeout(sm: Any) -> None:
    from datetime import timedelta

    from airflow_provider_sm_prefs.compat import TaskDeferred

    _cluster_short_of_eight(sm)
    sensor = SageMakerHyperPodGroupSensor(
        task_id="w", cluster_name="nightly", group_name="gpu-workers", target_count=8, timeout=5400
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({"ti": None})
    assert deferred.value.timeout == timedelta(seconds=5400)
