"""STS of the offline SageMaker: session credentials that expire on the emulated clock. A leaf.

The emulator answers STS ``AssumeRole``, ``AssumeRoleWithWebIdentity`` (unsigned, as on AWS) and, for its
own session credentials, ``GetCallerIdentity`` (query protocol: form body ``Action=...&Version=2011-06-15``,
XML answers). Every other STS call, and ``GetCallerIdentity`` with long-term keys, stays moto's.

Issued credentials are ``ASIA...`` keys with a session token starting with :data:`TOKEN_PREFIX`, valid for
``DurationSeconds`` emulated seconds. A request carrying an ``X-Amz-Security-Token`` is checked by
:meth:`CredentialStore.check`: an issued token past its expiry is *expired*; a token with the emulator's
prefix that it did not issue (or forgot in a reset) is *invalid*; any other token is invalid only when
``reject_unknown_tokens`` is on (off by default, so clients with made-up session tokens keep working).
``skew_seconds`` makes every issued session expire that many emulated seconds before the ``Expiration``
reported for it: AWS's clock ahead of the host's, as a client that trusts ``Expiration`` meets it.
:func:`refusal` renders the refusal in the protocol of the service called.

Clients decide when to refresh from the host clock, so ``Expiration`` is reported in host time: host now +
remaining emulated seconds / ``time_scale``; on a frozen clock (``time_scale`` 0) one year after host now,
so that clients never refresh by themselves (see docs/emulator.md, *STS*).
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import re
import secrets
import string
import urllib.parse
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from offline_sagemaker.exceptions import ApiError
from offline_sagemaker.responses import Response, error_response, http_date

__all__ = [
    "FROZEN_EXPIRATION_SECONDS",
    "STS_VERSION",
    "TOKEN_PREFIX",
    "CredentialStore",
    "Refusal",
    "Session",
    "StsError",
    "refusal",
    "sts_action",
]

STS_VERSION = "2011-06-15"
_NAMESPACE = f"https://sts.amazonaws.com/doc/{STS_VERSION}/"
#: Every session token the emulator issues starts with this.
TOKEN_PREFIX = "T2ZmbGluZVNhZ2VNYWtlcg"
#: Host seconds until the reported ``Expiration`` when the emulated clock is frozen (``time_scale`` 0).
FROZEN_EXPIRATION_SECONDS = 365 * 86400
_SERVED = frozenset({"AssumeRole", "AssumeRoleWithWebIdentity", "GetCallerIdentity"})
_MIN_DURATION, _MAX_DURATION, _DEFAULT_DURATION, _CHAINED_MAX = 900, 43200, 3600, 3600
_ROLE_ARN = re.compile(r"^arn:aws[\w-]*:iam::(\d{12}):role/(?:[\w+=,.@/-]*/)?([\w+=,.@-]{1,64})$")
_SESSION_NAME = re.compile(r"^[\w+=,.@-]{2,64}$")
_KEY_CHARS = string.ascii_uppercase + string.digits


class StsError(ApiError):
    """An STS error (query protocol): code, message and HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(code, message)
        self.status = status


class Refusal:
    """Why a request's security token is refused."""

    EXPIRED = "expired"
    INVALID = "invalid"


@dataclass(frozen=True)
class Session:
    """One set of session credentials the emulator issued."""

    access_key_id: str
    secret_access_key: str
    token: str
    expires: float  # emulated epoch seconds
    role_arn: str
    session_name: str
    role_id: str


@dataclass
class CredentialStore:
    """The session credentials issued, the revoked roles and the strictness about foreign tokens."""

    sessions: dict[str, Session] = field(default_factory=dict)
    revoked_roles: set[str] = field(default_factory=set)
    reject_unknown_tokens: bool = False
    #: Emulated seconds by which every issued session expires before its reported ``Expiration``: the
    #: check below runs that far ahead of the clock the expiry is reported from (clock skew).
    skew_seconds: float = 0.0
    #: Requests refused so far, per :class:`Refusal` kind (read-only, reported by :meth:`settings`).
    refused: dict[str, int] = field(default_factory=lambda: {Refusal.EXPIRED: 0, Refusal.INVALID: 0})

    def check(self, token: str | None, now: float) -> str | None:
        """:data:`Refusal.EXPIRED` / :data:`Refusal.INVALID` for a refused token, None if it may pass."""
        kind = self._check(token, now)
        if kind is not None:
            self.refused[kind] += 1
        return kind

    def _check(self, token: str | None, now: float) -> str | None:
        if not token:
            return None
        session = self.sessions.get(token)
        if session is not None:
            return Refusal.EXPIRED if now + self.skew_seconds >= session.expires else None
        if token.startswith(TOKEN_PREFIX) or self.reject_unknown_tokens:
            return Refusal.INVALID
        return None

    def settings(self) -> dict[str, Any]:
        """The controls in force, how many sessions were issued and how many requests were refused."""
        return {
            "revoked_roles": sorted(self.revoked_roles),
            "reject_unknown_tokens": self.reject_unknown_tokens,
            "skew_seconds": self.skew_seconds,
            "sessions": len(self.sessions),
            "refused": dict(self.refused),
        }

    def update(
        self,
        revoked_roles: Iterable[str] | None,
        reject_unknown_tokens: bool | None,
        skew_seconds: float | None = None,
    ) -> None:
        """Replace the revoked roles, the strictness and the skew; None keeps a setting."""
        if revoked_roles is not None:
            if isinstance(revoked_roles, str) or not all(isinstance(r, str) for r in revoked_roles):
                raise ValueError("revoked_roles: must be a list of role ARNs")
            self.revoked_roles = set(revoked_roles)
        if reject_unknown_tokens is not None:
            if not isinstance(reject_unknown_tokens, bool):
                raise ValueError("reject_unknown_tokens: must be true or false")
            self.reject_unknown_tokens = reject_unknown_tokens
        if skew_seconds is not None:
            if (
                isinstance(skew_seconds, bool)
                or not isinstance(skew_seconds, int | float)
                or skew_seconds < 0
            ):
                raise ValueError("skew_seconds: must be a number of seconds >= 0")
            self.skew_seconds = float(skew_seconds)

    # ----------------------------------------------------------------------------------- the API

    def answer(
        self,
        action: str,
        form: dict[str, str],
        security_token: str | None,
        now: float,
        time_scale: float,
        host_now: float,
    ) -> tuple[int, str] | None:
        """``(HTTP status, XML)`` for an STS call, or None when moto should answer it."""
        try:
            if action == "GetCallerIdentity":
                session = self.sessions.get(security_token or "")
                if session is None:
                    return None  # long-term keys: moto's answer, as before
                return 200, _caller_identity(session)
            if action in ("AssumeRole", "AssumeRoleWithWebIdentity"):
                chained = security_token in self.sessions
                session = self._assume(action, form, chained, now)
                return 200, _assumed(
                    action, form, session, _expiration(session.expires, now, time_scale, host_now)
                )
        except StsError as error:
            return error.status, _error_xml(error)
        return None

    def _assume(self, action: str, form: dict[str, str], chained: bool, now: float) -> Session:
        role_arn = form.get("RoleArn", "")
        session_name = form.get("RoleSessionName", "")
        _require(form, "RoleArn", "roleArn")
        _require(form, "RoleSessionName", "roleSessionName")
        if action == "AssumeRoleWithWebIdentity":
            _require(form, "WebIdentityToken", "webIdentityToken")
        duration = _duration(form.get("DurationSeconds"), chained)
        if not _SESSION_NAME.match(session_name):
            raise StsError(
                "ValidationError",
                f"1 validation error detected: Value '{session_name}' at 'roleSessionName' failed to satisfy "
                r"constraint: Member must satisfy regular expression pattern: [\w+=,.@-]*",
            )
        match = _ROLE_ARN.match(role_arn)
        if match is None:
            raise StsError("ValidationError", f"{role_arn} is invalid")
        if role_arn in self.revoked_roles:
            if action == "AssumeRole":
                message = f"User is not authorized to perform: sts:AssumeRole on resource: {role_arn}"
            else:
                message = "Not authorized to perform sts:AssumeRoleWithWebIdentity"
            raise StsError("AccessDenied", message, 403)
        session = Session(
            access_key_id="ASIA" + "".join(secrets.choice(_KEY_CHARS) for _ in range(16)),
            secret_access_key=base64.b64encode(secrets.token_bytes(30)).decode(),
            token=TOKEN_PREFIX + secrets.token_urlsafe(96),
            expires=now + duration,
            role_arn=role_arn,
            session_name=session_name,
            role_id="AROA" + "".join(secrets.choice(_KEY_CHARS) for _ in range(17)),
        )
        self.sessions[session.token] = session
        return session


def sts_action(method: str, content_type: str, body: bytes) -> tuple[str, dict[str, str]] | None:
    """``(Action, form)`` of an STS request the emulator answers (form body with STS's ``Version``)."""
    if method != "POST" or "x-www-form-urlencoded" not in content_type:
        return None
    form = {key: values[0] for key, values in urllib.parse.parse_qs(body.decode("utf-8", "replace")).items()}
    action = form.get("Action", "")
    if form.get("Version") != STS_VERSION or action not in _SERVED:
        return None
    return action, form


def _require(form: dict[str, str], name: str, member: str) -> None:
    if not form.get(name):
        raise StsError(
            "ValidationError",
            f"1 validation error detected: Value null at '{member}' failed to satisfy constraint: "
            "Member must not be null",
        )


def _duration(raw: str | None, chained: bool) -> int:
    if raw is None or raw == "":
        return _DEFAULT_DURATION
    try:
        duration = int(raw)
    except ValueError:
        raise StsError("ValidationError", f"Value '{raw}' at 'durationSeconds' is not a number") from None
    if duration < _MIN_DURATION:
        constraint = f"Member must have value greater than or equal to {_MIN_DURATION}"
    elif duration > _MAX_DURATION:
        constraint = f"Member must have value less than or equal to {_MAX_DURATION}"
    else:
        if chained and duration > _CHAINED_MAX:
            raise StsError(
                "ValidationError",
                "The requested DurationSeconds exceeds the 1 hour session limit for roles assumed by role "
                "chaining.",
            )
        return duration
    raise StsError(
        "ValidationError",
        f"1 validation error detected: Value '{duration}' at 'durationSeconds' failed to satisfy "
        f"constraint: {constraint}",
    )


def _expiration(expires: float, now: float, time_scale: float, host_now: float) -> float:
    """Host epoch seconds at which clients should consider the credentials expired."""
    if time_scale <= 0:
        return host_now + FROZEN_EXPIRATION_SECONDS
    return host_now + (expires - now) / time_scale


def _iso(epoch: float) -> str:
    """Whole seconds as AWS writes them, rounded up: never reported expired before it is."""
    return datetime.datetime.fromtimestamp(math.ceil(epoch), datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def _account(session: Session) -> str:
    match = _ROLE_ARN.match(session.role_arn)
    return match.group(1) if match else "123456789012"


def _assumed_arn(session: Session) -> str:
    match = _ROLE_ARN.match(session.role_arn)
    role = match.group(2) if match else "role"
    return f"arn:aws:sts::{_account(session)}:assumed-role/{role}/{session.session_name}"


def _subject(token: str) -> str:
    """The ``sub`` claim of a JWT, or a stable stand-in for an opaque token."""
    parts = token.split(".")
    if len(parts) == 3:
        try:
            payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
            if isinstance(payload, dict) and isinstance(payload.get("sub"), str):
                return str(payload["sub"])
        except ValueError:
            pass
    return uuid.uuid5(uuid.NAMESPACE_OID, token).hex


def _assumed(action: str, form: dict[str, str], session: Session, expiration: float) -> str:
    extra = ""
    if action == "AssumeRoleWithWebIdentity":
        extra = (
            f"<SubjectFromWebIdentityToken>{escape(_subject(form['WebIdentityToken']))}</SubjectFromWebIdentityToken>"
            f"<Audience>sts.amazonaws.com</Audience>"
            f"<Provider>{escape(form.get('ProviderId') or 'offline-sagemaker')}</Provider>"
        )
    return (
        f'<{action}Response xmlns="{_NAMESPACE}"><{action}Result>{extra}'
        f"<AssumedRoleUser><Arn>{escape(_assumed_arn(session))}</Arn>"
        f"<AssumedRoleId>{session.role_id}:{escape(session.session_name)}</AssumedRoleId></AssumedRoleUser>"
        f"<Credentials><AccessKeyId>{session.access_key_id}</AccessKeyId>"
        f"<SecretAccessKey>{session.secret_access_key}</SecretAccessKey>"
        f"<SessionToken>{session.token}</SessionToken>"
        f"<Expiration>{_iso(expiration)}</Expiration></Credentials>"
        f"</{action}Result><ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
        f"</{action}Response>"
    )


def _caller_identity(session: Session) -> str:
    return (
        f'<GetCallerIdentityResponse xmlns="{_NAMESPACE}"><GetCallerIdentityResult>'
        f"<Arn>{escape(_assumed_arn(session))}</Arn>"
        f"<UserId>{session.role_id}:{escape(session.session_name)}</UserId>"
        f"<Account>{_account(session)}</Account>"
        f"</GetCallerIdentityResult><ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
        "</GetCallerIdentityResponse>"
    )


def _error_xml(error: ApiError, namespace: str = _NAMESPACE) -> str:
    return (
        f'<ErrorResponse xmlns="{namespace}"><Error><Type>Sender</Type><Code>{error.code}</Code>'
        f"<Message>{escape(error.message)}</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>"
    )


# ------------------------------------------------------------------------------------- refusals

#: (expired, invalid) error codes and messages per protocol.
_JSON_CODES = (
    ("ExpiredTokenException", "The security token included in the request is expired"),
    ("UnrecognizedClientException", "The security token included in the request is invalid."),
)
_QUERY_CODES = (
    ("ExpiredToken", "The security token included in the request is expired"),
    ("InvalidClientTokenId", "The security token included in the request is invalid."),
)
_S3_CODES = (
    ("ExpiredToken", "The provided token has expired."),
    ("InvalidToken", "The provided token is malformed or otherwise invalid."),
)


def refusal(kind: str, target: str | None, authorization: str | None, date: float) -> Response:
    """The answer to a request whose security token is refused, in the protocol of the service called.

    :param target: the request's ``X-Amz-Target`` (JSON protocol) or None (query protocol, or S3).
    :param authorization: the ``Authorization`` header (its credential scope names S3).
    """
    index = 0 if kind == Refusal.EXPIRED else 1
    if target:
        code, message = _JSON_CODES[index]
        response = error_response(ApiError(code, message), date)
        if target.startswith("AmazonSQS."):
            # SQS speaks JSON with awsQueryCompatible: botocore reads the query code from this header.
            response.headers.append(("x-amzn-query-error", f"{_QUERY_CODES[index][0]};Sender"))
        return response
    if authorization and "/s3/aws4_request" in authorization:
        code, message = _S3_CODES[index]
        body = (
            f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message>"
            f"<RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId></Error>"
        ).encode()
        status = 400
    else:
        code, message = _QUERY_CODES[index]
        body = _error_xml(ApiError(code, message)).encode()
        status = 403
    headers = [
        ("Content-Type", "text/xml"),
        ("Content-Length", str(len(body))),
        ("x-amzn-RequestId", str(uuid.uuid4())),
        ("Date", http_date(date)),
    ]
    return Response(status, body, headers)
