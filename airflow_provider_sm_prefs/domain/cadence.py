"""What a pass of the shared List loop lists, and how often it may run (pure: no I/O, no clock).

Windows: a pass lists only the creation-time windows of the waiting jobs (``CreationTimeAfter`` and
``CreationTimeBefore`` around each *cohort*: waiters created within :data:`COHORT_GAP` of each other,
at most :data:`MAX_WINDOWS` windows, :data:`WINDOW_MARGIN` on each side). Jobs created between cohorts or
after the newest waiter (in a busy account, most of them: other teams' jobs keep being created while
ours wait) cost no page.

Cadence: a pass costs one call per 100 jobs created in its windows, of any status, so with many waiters
it is cheap to look more often than each trigger's ``poll_interval``. The loop keeps its List calls at
or below :data:`LIST_COST_SHARE` of what per-job polling at ``poll_interval`` would send, and passes at
least every ``poll_interval`` and at most every ``poll_interval / 3``: a lone waiter is listed as often
as it would have Described itself, a thousand are detected three times sooner. The share is a budget
(:class:`ListBudget`): each second of waiting earns ``LIST_COST_SHARE / poll_interval`` calls per
waiter, each page spends one, and what a pass at the fastest cadence left unspent carries over (at most
:data:`CREDIT_WINDOW` seconds of earnings), so the pace holds while a wave of waiters drains instead of
slowing as the last jobs of the wave wait.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

#: List calls per second stay at or below this share of the Describe rate per-job polling would need.
LIST_COST_SHARE = 1 / 25
#: Unspent List credit carries over, up to this many seconds of what the current waiters earn.
CREDIT_WINDOW = 600.0
#: Passes come at least every ``poll_interval`` and at most every ``poll_interval * FASTEST_SHARE``.
FASTEST_SHARE = 1 / 3

#: Waiting jobs created within this long of each other are listed in one creation-time window ...
COHORT_GAP = timedelta(minutes=15)
#: ... a pass lists at most this many windows (the closest neighbours merge) ...
MAX_WINDOWS = 8
#: ... and each window reaches this far past its first and last waiter's CreationTime. The waiters'
#: CreationTimes come from Describe, on the clock the filter uses: a second covers the filter's strict
#: "after"/"before". (A wide margin would keep jobs that got capacity in the window of the later ones
#: and the pass would not get cheaper as a wave of jobs leaves.)
WINDOW_MARGIN = timedelta(seconds=1)


def cohort_windows(created: Iterable[datetime]) -> list[tuple[datetime, datetime]]:
    """``(CreationTimeAfter, CreationTimeBefore)`` windows covering every waiter's CreationTime.

    Waiters created within :data:`COHORT_GAP` of each other share a window; with more than
    :data:`MAX_WINDOWS` windows, the two with the smallest gap between them merge until that many are
    left. Each window reaches :data:`WINDOW_MARGIN` past its first and last waiter.
    """
    times = sorted(set(created))
    if not times:
        return []
    spans = [[times[0], times[0]]]
    for moment in times[1:]:
        if moment - spans[-1][1] <= COHORT_GAP:
            spans[-1][1] = moment
        else:
            spans.append([moment, moment])
    while len(spans) > MAX_WINDOWS:
        closest = min(range(len(spans) - 1), key=lambda i: spans[i + 1][0] - spans[i][1])
        spans[closest][1] = spans[closest + 1][1]
        del spans[closest + 1]
    return [(first - WINDOW_MARGIN, last + WINDOW_MARGIN) for first, last in spans]


def earn_rate(poll_interval: float, waiters: int) -> float:
    """List calls per second the budget allows for ``waiters`` jobs polled every ``poll_interval``."""
    return LIST_COST_SHARE * waiters / poll_interval


def list_cadence(poll_interval: float, waiters: int, pages: int, credit: float = 0.0) -> float:
    """Seconds between pass starts for ``waiters`` jobs listed in ``pages`` pages (module docstring).

    :param credit: calls saved earlier (:class:`ListBudget`); a pass they cover may come sooner.
    """
    if not waiters:
        return poll_interval
    affordable = max(0.0, max(1, pages) - credit) / earn_rate(poll_interval, waiters)
    return min(poll_interval, max(poll_interval * FASTEST_SHARE, affordable))


@dataclass
class ListBudget:
    """List calls earned at :data:`LIST_COST_SHARE` of per-job polling, spent one per page.

    Over any stretch of time the loop's List calls stay within the share of what per-job polling of
    the waiters of that time would have sent, plus at most :data:`CREDIT_WINDOW` seconds of earnings
    saved before it; a debt (a pass longer than the cadence allowed) delays the next pass instead.
    """

    credit: float = 0.0
    at: float | None = None

    def spend(self, now: float, poll_interval: float, waiters: int, pages: int) -> float:
        """Earn for the time since the last pass started, spend ``pages``; the credit left.

        The first pass is not charged: it stands for the look each trigger would take on its own when it
        starts waiting.
        """
        rate = earn_rate(poll_interval, waiters)
        if self.at is None:  # the first pass: nothing earned yet, nothing owed for it
            self.at = now
            return self.credit
        self.credit += rate * max(0.0, now - self.at)
        self.at = now
        self.credit = max(-float(pages), min(self.credit - pages, rate * CREDIT_WINDOW))
        return self.credit
