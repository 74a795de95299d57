"""The amazon provider's ``AwsBaseHook`` with the provider's botocore retry mode: the base of every hook here.

``AwsBaseHook.config`` is the one config every client of a hook is built from (``conn``,
``get_async_conn``, ``get_session``); overriding it gives the sync clients, the triggers' shared async
clients and the guardrails' look-ups the same retry mode (:func:`~.retry.with_default_retries`).

A connection that assumes a role (``role_arn``) gets refreshable credentials from the amazon provider;
this hook changes these things about them:

* a refresh that AWS refuses (the role was revoked, the web identity token is no longer accepted) raises
  :class:`AwsCredentialsError`, which names the connection and the role, instead of a bare
  ``AccessDenied ... AssumeRole``; throttling and 5xx stay botocore's to retry;
* on the async clients (the triggers' shared client, one per process and settings), the STS call of a
  refresh runs in a thread: the amazon provider hands aiobotocore its blocking refresh, which would hold
  the triggerer's event loop, and every wait in it, for the length of each AssumeRole.
* botocore renews assumed-role credentials 15 minutes (advisory) and 10 minutes (mandatory) before they
  expire, whatever they last: a 15-minute session (``DurationSeconds`` 900, AssumeRole's minimum) is due
  from the moment it is issued, and every call of every client made an AssumeRole. Both windows are fitted
  to the session each renewal brings (:func:`fit_refresh_windows`): at most half its lifetime (advisory)
  and a third (mandatory), so a session serves calls for at least half its life; sessions of 30 minutes
  and more keep botocore's windows;
* an async client's session (``get_async_conn``, whose synchronous part runs in a thread) has already
  read the botocore data its client needs (:func:`preload_client_data`): aiobotocore creates the client
  on the event loop, and parsing the service model and the endpoint data there held every wait of a
  triggerer for 90-200 ms (600-800 ms on a busy host) when the first trigger of a process opened it;
* a token AWS refuses as expired while botocore takes it for fresh (the host's clock behind AWS's) is
  renewed and the call sent again, once per call, on the sync and the async clients alike
  (:mod:`~.renewal`); a second refusal right after raises :class:`~.renewal.AwsTokenExpiredError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
from collections.abc import Callable
from typing import Any

from airflow.providers.amazon.aws.hooks import base_aws
from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook, BaseSessionFactory
from botocore.config import Config
from botocore.exceptions import ClientError, DataNotFoundError
from botocore.utils import parse_timestamp

from airflow_provider_sm_prefs.domain.exceptions import SageMakerPreferencesError
from airflow_provider_sm_prefs.hooks.renewal import TokenRenewal, renewable
from airflow_provider_sm_prefs.hooks.retry import (
    error_code,
    error_message,
    is_transient,
    with_default_retries,
)

__all__ = ["AwsCredentialsError", "ProviderAwsHook", "fit_refresh_windows", "preload_client_data"]

#: botocore's refresh windows (seconds before expiry): renew when convenient, and before any call.
ADVISORY_REFRESH_SECONDS = 15 * 60
MANDATORY_REFRESH_SECONDS = 10 * 60


class AwsCredentialsError(SageMakerPreferencesError):
    """AWS refused to renew a connection's temporary credentials (AssumeRole or AssumeRoleWithWebIdentity).

    :param conn_id: the Airflow connection.
    :param role_arn: the role it assumes.
    :param code: AWS's error code (e.g. ``AccessDenied``).
    :param reason: AWS's message.
    """

    def __init__(self, conn_id: str | None, role_arn: str | None, code: str | None, reason: str) -> None:
        self.conn_id, self.role_arn, self.code, self.reason = conn_id, role_arn, code, reason
        super().__init__(
            f"AWS connection {conn_id!r} could not renew its credentials for role {role_arn}: "
            f"{code or 'error'}: {reason}. Check that the role still exists and trusts the connection's "
            "identity; waits on this connection cannot go on without it."
        )


def _naming_connection(refresh: Callable[[], Any], conn_id: str | None, role_arn: str | None) -> Any:
    """``refresh`` whose refused (not transient) STS errors become :class:`AwsCredentialsError`."""

    @functools.wraps(refresh)
    def wrapped() -> Any:
        try:
            return refresh()
        except ClientError as err:
            if is_transient(err):
                raise
            raise AwsCredentialsError(conn_id, role_arn, error_code(err), error_message(err)) from err

    return wrapped


def fit_refresh_windows(credentials: Any, expiry: Any) -> None:
    """Fit the refresh windows of ``credentials`` (botocore's or aiobotocore's refreshable credentials) to
    a session that expires at ``expiry`` (a datetime, or STS's ``Expiration`` as text): at most half the
    time left (advisory) and a third (mandatory), never more than botocore's 15 and 10 minutes.

    Without it a session of 15 minutes or less is due for renewal the moment it is issued (botocore's
    advisory window is 15 minutes), and every call renews it.
    """
    try:
        when = expiry if isinstance(expiry, datetime.datetime) else parse_timestamp(expiry)
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        left = (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    except (TypeError, ValueError, OverflowError):
        return
    if left <= 0:
        return
    credentials._advisory_refresh_timeout = min(ADVISORY_REFRESH_SECONDS, left / 2)
    credentials._mandatory_refresh_timeout = min(MANDATORY_REFRESH_SECONDS, left / 3)


def _fitting(refresh: Callable[[], Any], credentials: Any) -> Callable[[], Any]:
    """``refresh`` that fits the refresh windows of ``credentials`` to each session it brings."""

    @functools.wraps(refresh)
    def fitted() -> Any:
        metadata = refresh()
        if isinstance(metadata, dict) and metadata.get("expiry_time"):
            fit_refresh_windows(credentials, metadata["expiry_time"])
        return metadata

    return fitted


def _in_thread(refresh: Callable[[], Any]) -> Callable[[], Any]:
    """An async refresh for aiobotocore (it awaits what ``refresh_using`` returns): the blocking STS call
    runs in a thread. aiobotocore holds its own lock around it, so the waits sharing the client make one
    call per refresh, not one each."""

    async def refresh_in_thread() -> Any:
        return await asyncio.to_thread(refresh)

    return refresh_in_thread


#: The data files botocore reads to create any client (endpoints.json alone is 1.2 MB of JSON).
CLIENT_DATA = ("endpoints", "partitions", "sdk-default-configuration", "_retry")
#: The per-service files it reads (the service model, several MB for SageMaker, and its endpoint rules).
SERVICE_DATA = ("service-2", "endpoint-rule-set-1")


def preload_client_data(session: Any, service_name: str) -> None:
    """Have ``session``'s data loader read what creating a ``service_name`` client reads, so that creating
    it later (on an event loop) finds it in the loader's cache. Missing files are left to botocore."""
    loader = session.get_component("data_loader")
    for type_name in SERVICE_DATA:
        with contextlib.suppress(DataNotFoundError):
            loader.load_service_model(service_name, type_name, api_version=None)
    for name in CLIENT_DATA:
        with contextlib.suppress(DataNotFoundError):
            loader.load_data_with_path(name)


class _RefreshingSessionFactory(BaseSessionFactory):
    """The amazon provider's session factory, with the credential refresh described in the module."""

    def _create_session_with_assume_role(
        self, session_kwargs: dict[str, Any], deferrable: bool = False
    ) -> Any:
        conn_id, role_arn = self.conn.conn_id, self.role_arn
        if not isinstance(conn_id, str):
            conn_id = None
        if self.conn.assume_role_method == "assume_role_with_web_identity":
            fetcher = self._get_web_identity_credential_fetcher()
            fetch = _naming_connection(fetcher.fetch_credentials, conn_id, role_arn)
            self._get_web_identity_credential_fetcher = lambda: fetcher  # type: ignore[method-assign]
            fetcher.fetch_credentials = fetch
        else:
            self._refresh_credentials = _naming_connection(  # type: ignore[method-assign]
                super()._refresh_credentials, conn_id, role_arn
            )
        session = super()._create_session_with_assume_role(session_kwargs, deferrable=deferrable)
        # (aio)botocore's refreshable credentials keep the refresh function here; an amazon provider or
        # (aio)botocore that keeps it elsewhere gets its own refresh (blocking, on the async clients) and no
        # renewal of refused tokens, rather than a broken session.
        credentials: Any = getattr(session, "_credentials", None) if deferrable else session.get_credentials()
        refresh = getattr(credentials, "_refresh_using", None)
        if not callable(refresh):
            return session
        # The first session (AssumeRole's, fetched above; web identity's come with the first call).
        if getattr(credentials, "_expiry_time", None) is not None:
            fit_refresh_windows(credentials, credentials._expiry_time)
        refresh = _fitting(refresh, credentials)
        if renewable(credentials):
            renewal = TokenRenewal(credentials, conn_id, role_arn)
            refresh = renewal.counting(refresh)
            renewal.register(session if deferrable else session.events, asynchronous=deferrable)
        credentials._refresh_using = _in_thread(refresh) if deferrable else refresh
        return session


_FACTORIES: dict[type[BaseSessionFactory], type[BaseSessionFactory]] = {}


def _refreshing(base: type[BaseSessionFactory]) -> type[BaseSessionFactory]:
    """The session factory ``base`` (the amazon provider's, or the deployment's own) with our refresh."""
    if base is BaseSessionFactory:
        return _RefreshingSessionFactory
    factory = _FACTORIES.get(base)
    if factory is None:
        factory = _FACTORIES[base] = type(f"Refreshing{base.__name__}", (_RefreshingSessionFactory, base), {})
    return factory


class ProviderAwsHook(AwsBaseHook):
    """``AwsBaseHook`` whose clients retry in botocore's ``standard`` mode unless the user chose a mode.

    The arguments are ``AwsBaseHook``'s (``aws_conn_id``, ``region_name``, ``verify``, ``config``,
    ``client_type``). A ``retries`` entry in ``config`` or in the connection's ``config_kwargs`` is
    kept as is. Assumed-role credentials refresh as the module says.
    """

    def get_session(self, region_name: str | None = None, deferrable: bool = False) -> Any:
        """``AwsBaseHook.get_session``, from the configured session factory (``[aws] session_factory``)
        with the credential refresh described in the module."""
        factory = _refreshing(base_aws.SessionFactory)
        session = factory(conn=self.conn_config, region_name=region_name, config=self.config).create_session(
            deferrable=deferrable
        )
        if deferrable and isinstance(self.client_type, str):
            # get_async_conn runs this in a thread; the client is then created on the event loop.
            preload_client_data(session, self.client_type)
        return session

    @property
    def config(self) -> Config:
        """The user's botocore config (hook argument, else the connection's), with the default retries."""
        return with_default_retries(self.conn_config.botocore_config)
