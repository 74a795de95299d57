"""A session token AWS refuses as expired while botocore takes it for fresh: renewed once, the call sent again.

botocore decides when to renew assumed-role credentials from the ``Expiration`` STS reported, read on the
host's clock. When that clock is behind AWS's, AWS refuses a token botocore still takes for fresh
(``ExpiredToken``, ``ExpiredTokenException``, ``RequestExpired``: :data:`~.retry.EXPIRED_TOKEN_CODES`), and
botocore would send that token again on every call until its own renewal time came, failing each.

:class:`TokenRenewal` answers botocore's retry step (the ``needs-retry`` event every client emits after a
response, the one its retry mode answers; no retry layer of its own): on such a refusal it renews the
credentials and has botocore send the request again at once, re-signed with the new ones. Once per call:
a second refusal of the same call, right after a renewal, is raised as :class:`AwsTokenExpiredError`,
which names the connection. A renewal AWS refuses raises :class:`~.base.AwsCredentialsError` as any
renewal does.

Many calls sharing one client (the triggers' shared async client) may be refused at once; the first to
take the credentials' refresh lock renews them, the others find them renewed since their request was signed
(:attr:`TokenRenewal.generation`) and only send it again: one STS call for the lot.

botocore and aiobotocore offer no public way to renew refreshable credentials before their expiry: the
renewal takes their refresh lock and calls their mandatory refresh (``_refresh_lock``,
``_protected_refresh``). Credentials without them are left as they are (:func:`renewable`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from airflow_provider_sm_prefs.domain.exceptions import SageMakerPreferencesError
from airflow_provider_sm_prefs.hooks.retry import EXPIRED_TOKEN_CODES

__all__ = ["AwsTokenExpiredError", "TokenRenewal", "renewable"]

log = logging.getLogger(__name__)

#: Keys of botocore's per-call request context (kept across the retries of one call).
_SIGNED_AT = "sm_prefs_credentials_generation"
_RENEWED = "sm_prefs_credentials_renewed"


class AwsTokenExpiredError(SageMakerPreferencesError):
    """AWS refused a connection's session token as expired right after it was renewed for that call.

    :param conn_id: the Airflow connection.
    :param role_arn: the role it assumes.
    :param operation: the AWS operation refused (e.g. ``DescribeTrainingJob``).
    :param code: AWS's error code (e.g. ``ExpiredTokenException``).
    :param reason: AWS's message.
    """

    def __init__(
        self, conn_id: str | None, role_arn: str | None, operation: str, code: str, reason: str
    ) -> None:
        self.conn_id, self.role_arn, self.operation, self.code, self.reason = (
            conn_id,
            role_arn,
            operation,
            code,
            reason,
        )
        super().__init__(
            f"AWS connection {conn_id!r} (role {role_arn}): {operation} was refused with {code} ({reason}) "
            "right after the connection's credentials were renewed for it. AWS takes brand-new credentials "
            "for expired: the host's clock is likely behind AWS's by more than a session lasts. Synchronise "
            "the host's clock (NTP), or ask for longer sessions (DurationSeconds in the connection's "
            "assume_role_kwargs)."
        )


def renewable(credentials: Any) -> bool:
    """Whether ``credentials`` are botocore's (or aiobotocore's) refreshable credentials, which
    :class:`TokenRenewal` knows how to renew."""
    return hasattr(credentials, "_refresh_lock") and callable(
        getattr(credentials, "_protected_refresh", None)
    )


class TokenRenewal:
    """Renews ``credentials`` once per call when AWS refuses their token as expired (see the module).

    :param credentials: the session's refreshable credentials (botocore's or aiobotocore's).
    :param conn_id: the Airflow connection, for the error.
    :param role_arn: the role it assumes, for the error.
    """

    def __init__(self, credentials: Any, conn_id: str | None, role_arn: str | None) -> None:
        self._credentials = credentials
        self.conn_id, self.role_arn = conn_id, role_arn
        #: Renewals so far; a request records it when signed, to tell whether another call renewed since.
        self.generation = 0

    def counting(self, refresh: Callable[[], Any]) -> Callable[[], Any]:
        """``refresh`` that counts its successful calls in :attr:`generation`."""

        def counted() -> Any:
            metadata = refresh()
            self.generation += 1
            return metadata

        return counted

    def register(self, events: Any, asynchronous: bool) -> None:
        """Answer the ``before-sign`` and ``needs-retry`` events of every client created from here on by
        ``events`` (a botocore or aiobotocore session, or a boto3 session's ``events``)."""
        events.register("before-sign", self._signing, unique_id=f"sm-prefs-signing-{id(self)}")
        answer = self._needs_retry_async if asynchronous else self._needs_retry
        events.register("needs-retry", answer, unique_id=f"sm-prefs-renewal-{id(self)}")

    def _signing(self, request: Any = None, **kwargs: Any) -> None:
        context = getattr(request, "context", None)
        if isinstance(context, dict):
            context[_SIGNED_AT] = self.generation

    def _refused(self, response: Any, request_dict: Any, operation: Any) -> dict[str, Any] | None:
        """The call's request context when AWS refused its token as expired; raises on a second refusal."""
        if not isinstance(response, tuple) or len(response) != 2 or not isinstance(response[1], dict):
            return None
        parsed: dict[str, Any] = response[1]
        code = str(parsed.get("Error", {}).get("Code", ""))
        if code not in EXPIRED_TOKEN_CODES or not isinstance(request_dict, dict):
            return None
        context: dict[str, Any] = request_dict.setdefault("context", {})
        name = str(getattr(operation, "name", "") or "the call")
        if context.get(_RENEWED):
            reason = str(parsed.get("Error", {}).get("Message", ""))
            refusal = ClientError(parsed, name)  # what botocore would have raised
            raise AwsTokenExpiredError(self.conn_id, self.role_arn, name, code, reason) from refusal
        context[_RENEWED] = True
        log.warning(
            "AWS refused the session token of connection %r as expired (%s on %s) before its reported "
            "expiry (clock skew between this host and AWS): renewing the credentials and sending it again",
            self.conn_id,
            code,
            name,
        )
        return context

    def _stale(self, context: dict[str, Any]) -> bool:
        """No renewal since the refused request was signed (call with the refresh lock held)."""
        return bool(context.get(_SIGNED_AT, self.generation) == self.generation)

    def _needs_retry(
        self, response: Any = None, request_dict: Any = None, operation: Any = None, **kwargs: Any
    ) -> int | None:
        context = self._refused(response, request_dict, operation)
        if context is None:
            return None
        with self._credentials._refresh_lock:
            if self._stale(context):
                self._credentials._protected_refresh(is_mandatory=True)
        return 0  # botocore sends the request again at once, signed with the renewed credentials

    async def _needs_retry_async(
        self, response: Any = None, request_dict: Any = None, operation: Any = None, **kwargs: Any
    ) -> int | None:
        context = self._refused(response, request_dict, operation)
        if context is None:
            return None
        async with self._credentials._refresh_lock:
            if self._stale(context):
                await self._credentials._protected_refresh(is_mandatory=True)
        return 0
