"""HyperPod test DAGs: one per way a flexible group's wait can end (tests/operators/test_hyperpod_runs.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task

from airflow_provider_sm_prefs.operators.hyperpod import SageMakerHyperPodGroupOperator
from airflow_provider_sm_prefs.sensors.hyperpod import SageMakerHyperPodGroupSensor

ROLE = "arn:aws:iam::123456789012:role/SageMakerHyperPodNodeRole"
LIFECYCLE = {"SourceS3Uri": "s3://sm-prefs-demo/hyperpod/lifecycle/", "OnCreate": "on_create.sh"}
TYPES = ["ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4d.24xlarge"]
FAST = {"poll_interval": 0.2, "min_defer_seconds": 0}


def _dag(dag_id: str) -> DAG:
    # Paused when a running deployment parses them (tests/e2e runs hp_page with dag.test() there): a
    # scheduler that took up the dag.test() run's task instances would have its task process killed.
    return DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=datetime(2026, 9, 15),
        catchup=False,
        is_paused_upon_creation=True,
    )


def _group(task_id: str, **kwargs: Any) -> SageMakerHyperPodGroupOperator:
    args: dict[str, Any] = {
        "cluster_name": "nightly",
        "group_name": "gpu-workers",
        "instance_types": TYPES,
        "instance_count": 8,
        "execution_role": ROLE,
        "group_config": {"LifeCycleConfig": LIFECYCLE},
        "cluster_config": {},
        **FAST,
    }
    args.update(kwargs)
    return SageMakerHyperPodGroupOperator(task_id=task_id, **args)


@task
def consume(outcome: dict[str, Any]) -> dict[str, Any]:
    """What the next task sees of the outcome."""
    return {"mix": outcome["mix"], "ranks": outcome["accelerators_total"]}


with _dag("hp_target") as hp_target:
    consume(_group("scale", min_instance_count=4).output)

with _dag("hp_window") as hp_window:
    consume(_group("scale", min_instance_count=4, accept_after=1200).output)

with _dag("hp_shortfall") as hp_shortfall:
    _group("scale", max_pending=1800)

with _dag("hp_invalid") as hp_invalid:
    _group("scale", instance_types="ml.p5.48xlarge,{{ 'ml.p5.48xlarge' }}")

with _dag("hp_tagged") as hp_tagged:
    _group("scale", instance_count=2, cluster_config={"Tags": [{"Key": "team", "Value": "ml"}]})

with _dag("hp_tag_clash") as hp_tag_clash:
    _group("scale", instance_count=2, cluster_config={"Tags": [{"Key": "sm-prefs:task-id", "Value": "mine"}]})

with _dag("hp_sensor") as hp_sensor:
    consume(
        SageMakerHyperPodGroupSensor(
            task_id="watch", cluster_name="nightly", group_name="gpu-workers", **FAST
        ).output
    )

# The capacity page's group: a fallback mix in one run, a shortfall in another (tests/plugin, tests/e2e).
with _dag("hp_page") as hp_page:
    _group("scale", min_instance_count=4, max_pending=1800)

# A group someone else made, scaled by tasks that name only the list and the count
# (tests/operators/test_hyperpod_runs.py: what a scale keeps, refuses, and how long it waits).
_ONLY_LIST_AND_COUNT: dict[str, Any] = {"execution_role": None, "group_config": None, "cluster_config": None}

with _dag("hp_keeps_fields") as hp_keeps_fields:
    _group("scale_up", instance_count=6, **_ONLY_LIST_AND_COUNT) >> _group(
        "scale_down", instance_count=1, **_ONLY_LIST_AND_COUNT
    )

with _dag("hp_fixed_type") as hp_fixed_type:
    _group("scale", instance_count=4, **_ONLY_LIST_AND_COUNT)

with _dag("hp_continuous") as hp_continuous:
    _group("scale", instance_count=8, **_ONLY_LIST_AND_COUNT)  # no max_pending

# The sensor with BaseSensorOperator's own arguments (tests/sensors/test_hyperpod_sensor.py): a group that
# does not exist, watched with and without soft_fail; a group that never gets its nodes, watched in the
# worker with a short timeout, with and without soft_fail.
for _soft in (False, True):
    _suffix = "_soft" if _soft else ""
    with _dag(f"hp_sensor_missing{_suffix}") as _missing_dag:
        SageMakerHyperPodGroupSensor(
            task_id="watch", cluster_name="nightly", group_name="no-such-group", soft_fail=_soft, **FAST
        )
    globals()[f"hp_sensor_missing{_suffix}"] = _missing_dag
    with _dag(f"hp_sensor_timeout{_suffix}") as _timeout_dag:
        SageMakerHyperPodGroupSensor(
            task_id="watch",
            cluster_name="nightly",
            group_name="gpu-workers",
            target_count=8,
            deferrable=False,
            timeout=3,
            soft_fail=_soft,
            **FAST,
        )
    globals()[f"hp_sensor_timeout{_suffix}"] = _timeout_dag
