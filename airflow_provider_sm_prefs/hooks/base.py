"""The amazon provider's ``AwsBaseHook`` with the provider's botocore retry mode: the base of every hook here.

``AwsBaseHook.config`` is the one config every client of a hook is built from (``conn``,
``get_async_conn``, ``get_session``); overriding it gives the sync clients, the triggers' shared async
clients and the guardrails' look-ups the same retry mode (:func:`~.retry.with_default_retries`).
"""

from __future__ import annotations

from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook
from botocore.config import Config

from airflow_provider_sm_prefs.hooks.retry import with_default_retries

__all__ = ["ProviderAwsHook"]


class ProviderAwsHook(AwsBaseHook):
    """``AwsBaseHook`` whose clients retry in botocore's ``standard`` mode unless the user chose a mode.

    The arguments are ``AwsBaseHook``'s (``aws_conn_id``, ``region_name``, ``verify``, ``config``,
    ``client_type``). A ``retries`` entry in ``config`` or in the connection's ``config_kwargs`` is
    kept as is.
    """

    @property
    def config(self) -> Config:
        """The user's botocore config (hook argument, else the connection's), with the default retries."""
        return with_default_retries(self.conn_config.botocore_config)
