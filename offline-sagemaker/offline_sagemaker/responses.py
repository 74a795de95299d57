"""HTTP answers of the offline SageMaker: AWS's JSON bodies and headers, error statuses, dropped connections.

The one place that turns service errors (:mod:`.exceptions`, which carry AWS error codes only) into HTTP
statuses, and the one piece of code that drops a connection, for both the WSGI app (:mod:`.wsgi`) and
the request handler's fast path (:mod:`.handler`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import email.utils
import json
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from offline_sagemaker.exceptions import ApiError, ValidationError

T = TypeVar("T")

__all__ = [
    "DATE_SET",
    "Response",
    "drop_connection",
    "dropped",
    "error_response",
    "http_date",
    "json_response",
    "page",
    "page_offset",
    "page_token",
    "status_for",
    "status_line",
]

#: WSGI environ key set when the response already carries a ``Date`` header (in emulated time).
DATE_SET = "sm_prefs.date_set"

_JSON_CONTENT_TYPE = "application/x-amz-json-1.1"
_REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
#: HTTP status per error code; every other error is the client's (400).
_STATUS_BY_CODE = {"InternalFailure": 500, "ServiceUnavailable": 503}


@dataclass
class Response:
    """One HTTP answer from the service layer (``drop`` = close the connection without answering)."""

    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    drop: bool = False


def status_for(error: ApiError) -> int:
    """The HTTP status AWS answers ``error`` with."""
    return _STATUS_BY_CODE.get(error.code, 400)


def status_line(status: int) -> str:
    """``200 OK``: the status and its reason phrase."""
    return f"{status} {_REASONS.get(status, 'OK')}"


def http_date(epoch: float) -> str:
    """An RFC 1123 ``Date`` header value."""
    return email.utils.formatdate(epoch, usegmt=True)


def json_response(status: int, payload: Any, date: float) -> Response:
    """A compact JSON answer in AWS's JSON protocol, dated ``date`` (emulated epoch seconds)."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    headers = [
        ("Content-Type", _JSON_CONTENT_TYPE),
        ("Content-Length", str(len(body))),
        ("x-amzn-RequestId", str(uuid.uuid4())),
        ("Date", http_date(date)),
    ]
    return Response(status, body, headers)


def error_response(error: ApiError, date: float) -> Response:
    """The AWS JSON error form: ``__type`` + ``message`` and the ``x-amzn-ErrorType`` header."""
    response = json_response(status_for(error), {"__type": error.code, "message": error.message}, date)
    response.headers.append(("x-amzn-ErrorType", error.code))
    return response


def dropped() -> Response:
    """The answer that is no answer: the connection is closed instead."""
    return Response(0, b"", [], drop=True)


def drop_connection(connection: socket.socket | None) -> bool:
    """Close ``connection`` without a byte of response, so the client sees it drop as on a reset.

    :returns: False when there is no socket to drop (the caller must answer some other way).
    """
    if connection is None:
        return False
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
    return True


def page_token(offset: int) -> str:
    """The ``NextToken`` of a listing's next page, starting at ``offset``."""
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def page(items: Sequence[T], token: Any, size: int) -> tuple[list[T], str | None]:
    """One page of a listing: the items from where ``token`` points, and the next page's token (None at
    the end)."""
    start = page_offset(token)
    end = start + size
    return list(items[start:end]), (page_token(end) if end < len(items) else None)


def page_offset(token: Any) -> int:
    """Where the page a ``NextToken`` names starts (0 without one); ValidationError for a forged token."""
    if not token:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(str(token).encode()))["offset"]
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise ValidationError("NextToken: invalid pagination token") from exc
    if not isinstance(offset, int) or offset < 0:
        raise ValidationError("NextToken: invalid pagination token")
    return offset
