"""The service's clock, read from a response (deadlines and plan windows are judged on it)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

__all__ = ["service_now"]


def service_now(response: Mapping[str, Any]) -> datetime:
    """The service's clock, from the response's ``Date`` header; the local clock if absent.

    Deadlines are computed on the service clock so that a skewed worker clock (or the offline
    SageMaker's accelerated clock) cannot move them.
    """
    headers = (response.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
    date = headers.get("date")
    if date:
        try:
            return parsedate_to_datetime(date).astimezone(timezone.utc)
        except (TypeError, ValueError):
            pass
    return datetime.now(timezone.utc)
