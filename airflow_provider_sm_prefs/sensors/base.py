"""The base of the provider's sensors: the arguments every wait takes, and its hook, in one place.

Each sensor watches something else (a job, a HyperPod group) but reaches AWS, looks and defers the same
way. Like the amazon provider's ``AwsBaseSensor``, the base takes those arguments and builds the sensor's
hook from them (through :class:`~airflow_provider_sm_prefs.operators.aws_task.AwsWaitingTask`, which the
HyperPod group operator shares); a sensor adds only what it watches and names its hook class, so a setting
every wait shares is added once rather than once per sensor or operator.
"""

from __future__ import annotations

from airflow.sdk import BaseSensorOperator

from airflow_provider_sm_prefs.operators.aws_task import AwsWaitingTask, HookT

__all__ = ["SageMakerBaseSensor"]


class SageMakerBaseSensor(AwsWaitingTask[HookT], BaseSensorOperator):
    """A sensor whose wait runs in a trigger: how it reaches AWS, how often it looks, how it defers.

    A sensor names its hook in :attr:`aws_hook_class`; :attr:`hook` is built from the connection
    arguments the first time it is used (never at DAG parse time). The arguments (``deferrable``,
    ``poll_interval``, ``min_defer_seconds``, ``aws_conn_id``, ``region_name``, ``verify``,
    ``botocore_config``) are :class:`~airflow_provider_sm_prefs.operators.aws_task.AwsWaitingTask`'s,
    documented there: the HyperPod group operator takes the same.
    """
