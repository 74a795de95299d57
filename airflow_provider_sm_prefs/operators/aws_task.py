"""The arguments every task of the provider that reaches AWS takes, and the hook built from them, in one place.

The HyperPod group operator, the sensors and the reconciler reach AWS the same way: an Airflow connection,
a region, TLS verification, a botocore config, and a hook of their own class built from those four the
first time it is used (never at DAG parse time). The operator and the sensors also wait the same way: in
the triggerer or not, at a poll interval, reporting no sooner than a least deferral. The amazon provider
repeats such arguments in ``AwsBaseOperator`` and ``AwsBaseSensor``; here :class:`AwsTask` and
:class:`AwsWaitingTask` store them once, so a setting they share is added, defaulted and stored in one
place. A task names its hook class in ``aws_hook_class`` and adds only its own arguments.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Generic, TypeVar

from airflow.sdk import BaseOperator

from airflow_provider_sm_prefs.hooks.base import ProviderAwsHook
from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings

__all__ = ["AwsTask", "AwsWaitingTask", "HookT"]

#: The hook class a task names in ``aws_hook_class``.
HookT = TypeVar("HookT", bound=ProviderAwsHook)


class AwsTask(BaseOperator, Generic[HookT]):
    """A task that reaches AWS through a hook of class :attr:`aws_hook_class`, built from its arguments.

    :param aws_conn_id: the Airflow connection of type ``aws`` (its extra may set ``endpoint_url``).
    :param region_name: the AWS region; defaults to the connection's.
    :param verify: TLS verification, as for every amazon provider hook.
    :param botocore_config: a botocore config dict.
    """

    aws_hook_class: type[HookT]

    def __init__(
        self,
        *,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.verify = verify
        self.botocore_config = botocore_config

    @cached_property
    def hook(self) -> HookT:
        """The task's hook, built from the (rendered) connection arguments when first used."""
        return self.aws_hook_class(**AwsSettings.of(self).hook_kwargs())


class AwsWaitingTask(AwsTask[HookT]):
    """An :class:`AwsTask` whose wait for AWS runs in a trigger (or, not deferrable, in the worker).

    :param deferrable: wait in the triggerer (default) instead of in a worker.
    :param poll_interval: seconds between looks.
    :param min_defer_seconds: an event that resumes the task in a worker comes no sooner than this after
        it deferred (apache/airflow#72716; an event that ends it in the triggerer is not held); 0 turns it
        off. Default: Airflow config ``[sm_prefs] min_defer_seconds``, else 15.
    """

    def __init__(
        self,
        *,
        deferrable: bool = True,
        poll_interval: float = 30.0,
        min_defer_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.min_defer_seconds = min_defer_seconds
