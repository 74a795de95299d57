"""The base of the provider's sensors: the arguments every wait takes, and its hook, in one place.

Each sensor watches something else (a job, a HyperPod group) but reaches AWS, looks and defers the same
way. Like the amazon provider's ``AwsBaseSensor``, the base takes those arguments and builds the sensor's
hook from them; a sensor adds only what it watches and names its hook class, so a setting every wait
shares is added once rather than once per sensor.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Generic, TypeVar

from airflow.sdk import BaseSensorOperator

from airflow_provider_sm_prefs.hooks.base import ProviderAwsHook
from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings

__all__ = ["SageMakerBaseSensor"]

HookT = TypeVar("HookT", bound=ProviderAwsHook)


class SageMakerBaseSensor(BaseSensorOperator, Generic[HookT]):
    """A sensor whose wait runs in a trigger: how it reaches AWS, how often it looks, how it defers.

    A sensor names its hook in :attr:`aws_hook_class`; :attr:`hook` is built from the connection
    arguments the first time it is used (never at DAG parse time).

    :param deferrable: wait in the triggerer (default) instead of in a worker.
    :param poll_interval: seconds between looks.
    :param min_defer_seconds: an event that resumes the sensor in a worker comes no sooner than this
        after it deferred (apache/airflow#72716; an event that ends it in the triggerer is not held); 0
        turns it off. Default: Airflow config ``[sm_prefs] min_defer_seconds``,
        else 15.
    :param aws_conn_id: the Airflow connection of type ``aws``.
    :param region_name: the AWS region; defaults to the connection's.
    :param verify: TLS verification, as for every amazon provider hook.
    :param botocore_config: a botocore config dict.
    """

    aws_hook_class: type[HookT]

    def __init__(
        self,
        *,
        deferrable: bool = True,
        poll_interval: float = 30.0,
        min_defer_seconds: float | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.min_defer_seconds = min_defer_seconds
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.verify = verify
        self.botocore_config = botocore_config

    @cached_property
    def hook(self) -> HookT:
        return self.aws_hook_class(**AwsSettings.of(self).hook_kwargs())
