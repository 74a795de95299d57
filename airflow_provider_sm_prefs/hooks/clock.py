"""The service's clock, read from a response (deadlines and plan windows are judged on it)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Any

__all__ = ["ServiceClock", "service_now"]


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


class ServiceClock:
    """The service's clock between its answers: the last answer's ``Date`` advanced at the rate the
    service's clock was seen to run against this process's (``loop`` seconds, e.g. the event loop's time).

    AWS's clock runs at this process's rate; the rate is measured only to follow a clock that clearly runs
    faster (the offline SageMaker's compressed time, :data:`COMPRESSED`), so that a window of two emulated
    hours on a clock at 240x is seen closing after 30 s, not at the next answer. ``Date`` has a resolution
    of one second: a rate is measured over at least :data:`MIN_SPAN` seconds of this process's time.
    """

    #: A measured rate below this is the ordinary clock (1.0): over :data:`MIN_SPAN`, one second of
    #: ``Date`` resolution reads at most 1.4x.
    COMPRESSED = 2.0
    MIN_SPAN = 2.5
    #: The shortest wait for a time on the service's clock (waking early costs the caller one Describe).
    FLOOR = 0.5

    def __init__(self) -> None:
        self.last: datetime | None = None
        self._at = 0.0
        self._base: tuple[datetime, float] | None = None
        self.rate = 1.0
        #: A rate was measured (two answers at least :data:`MIN_SPAN` apart).
        self.measured = False

    def observe(self, date: datetime, loop: float) -> None:
        """An answer's ``Date``, read at ``loop``: the newest is the base of :meth:`now`; the rate is
        measured against an answer at least :data:`MIN_SPAN` older."""
        if self._base is None:
            self._base = (date, loop)
        elif loop - self._base[1] >= self.MIN_SPAN:
            measured = (date - self._base[0]).total_seconds() / (loop - self._base[1])
            self.rate = measured if measured >= self.COMPRESSED else 1.0
            self._base, self.measured = (date, loop), True
        self.last, self._at = date, loop

    def now(self, loop: float) -> datetime | None:
        """The service's time at ``loop``; None before any answer."""
        if self.last is None:
            return None
        return self.last + timedelta(seconds=(loop - self._at) * self.rate)

    def wait_for(self, loop: float, since: datetime, seconds: float | None, cap: float) -> float:
        """``cap``, or less: this process's seconds from ``loop`` until the service's clock is ``seconds``
        past ``since`` (None: ``cap``), at its rate, never less than :data:`FLOOR`; while no rate is
        measured yet (or the service not read at all: the first pass has not answered), no more than the
        span that measures one."""
        if seconds is None:
            return cap
        if not self.measured:
            cap = min(cap, self.MIN_SPAN + 0.5)
        now = self.now(loop)
        if now is None:
            return cap
        left = seconds - (now - since).total_seconds()
        return max(self.FLOOR, min(cap, left / self.rate))
