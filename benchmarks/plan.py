"""What shapes a benchmark run: sizes, variants, cadences, time scale and budget (:class:`Plan`).

A module of its own because every part of the benchmark reads it: the command line builds it
(:mod:`benchmarks.run`), one run follows its schedule (:mod:`benchmarks.single_run`), and the result
records it so that a published figure can be run again with the same plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from benchmarks.background import HISTORY_AGE_SECONDS
from benchmarks.variants import ALL_VARIANTS, EVENT_MODES
from benchmarks.workload import Workload


@dataclass(frozen=True)
class Plan:
    """Everything that shapes a benchmark run (recorded in the result).

    :param sizes: numbers of concurrent jobs.
    :param variants: variant keys, run in this order at each size.
    :param throttled_size: N of the throttled runs (None: none).
    :param throttled_variants: the variants of the throttled runs (None: every one in ``variants``).
    :param throttle_rate: DescribeTrainingJob and ListTrainingJobs calls per second the emulator allows.
    :param poll_interval: every variant's cadence (seconds).
    :param time_scale: emulated seconds per real second.
    :param span: real seconds over which the N capacity steps come.
    :param quiet: real seconds between the clock jump and the first step (the waiting-only window;
        one poll interval, so every per-job poller polls about once in it).
    :param tail: real seconds after the last step before stragglers are given up.
    :param throttled_tail: the same for the throttled runs (where the per-job pollers fall behind and
        always use all of it).
    :param warm_cap_base: warm-up cap, fixed part (seconds).
    :param warm_cap_per_job: warm-up cap per job (seconds).
    :param throttled_warm_cap: warm-up cap of the throttled runs (under the rate limit the per-job
        pollers cannot look at every job quickly anyway; what is measured there is failures).
    :param warm_cap_max: the warm-up cap never exceeds this (its value at N=3,000, so sizes up to
        3,000 keep their schedule, and N=10,000 does not wait 8 minutes for a look it may never take).
    :param setup_per_job: expected submission time per job (seconds), to place the first step.
    :param history_jobs: ended jobs of others created before ours (0: none).
    :param churn_rate: short jobs of others created per emulated hour while ours wait (0: none).
    :param setup_per_background_job: expected creation time per history job (seconds).
    :param parse_processes: fresh processes per DAG file in the parse-cost benchmark (0: skip it).
    :param parse_repeat: parses per process.
    :param budget: seconds the whole run may take; runs that would not fit are skipped.
    :param seed: seed of the capacity schedules (per N: ``seed + N``).
    :param smoke: the tiny configuration of the test suite.
    :param log_level: Airflow log level in the trigger process (its log goes to the run directory).
    :param profile: run the trigger process under cProfile (diagnosis only: inflates CPU figures).
    :param prespawn: start the next run's trigger process (its imports) while this run is measured;
        only for the smoke test, where the figures do not matter and time does.
    """

    sizes: tuple[int, ...] = (100, 1000, 3000)
    variants: tuple[str, ...] = (*ALL_VARIANTS, *EVENT_MODES)
    throttled_size: int | None = 1000
    throttled_variants: tuple[str, ...] | None = ALL_VARIANTS
    throttle_rate: float = 10.0
    poll_interval: float = 30.0
    time_scale: float = 60.0
    span: float = 40.0
    quiet: float = 30.0
    tail: float = 60.0
    throttled_tail: float = 45.0
    warm_cap_base: float = 15.0
    warm_cap_per_job: float = 0.05
    throttled_warm_cap: float = 30.0
    warm_cap_max: float = 165.0
    setup_per_job: float = 0.004
    history_jobs: int = 3000
    churn_rate: float = 300.0
    setup_per_background_job: float = 0.001
    parse_processes: int = 10
    parse_repeat: int = 5
    budget: float = 2700.0
    seed: int = 20261129
    smoke: bool = False
    log_level: str = "INFO"
    profile: bool = False
    prespawn: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def warm_cap(self, n_jobs: int, throttled: bool = False) -> float:
        """Longest warm-up waited for at ``n_jobs`` before the capacity steps start anyway."""
        cap = min(self.warm_cap_base + self.warm_cap_per_job * n_jobs, self.warm_cap_max)
        return min(cap, self.throttled_warm_cap) if throttled else cap

    def history_seconds(self) -> float:
        """Expected real seconds to create the history jobs."""
        return self.setup_per_background_job * self.history_jobs

    def workload(self, n_jobs: int, throttled: bool) -> Workload:
        """The scenario shared by every variant at this size."""
        ts = self.time_scale
        # Emulated seconds until the first step if the warm-up uses its whole cap (the clock jump
        # shortens the wait when the variant is ready sooner).
        first_real = 10.0 + self.setup_per_job * n_jobs + self.warm_cap(n_jobs, throttled) + self.quiet
        if self.history_jobs:
            # ... after the history is created and the clock jumps past its age.
            first_real += self.history_seconds() + HISTORY_AGE_SECONDS / ts
        rates = (
            {"DescribeTrainingJob": self.throttle_rate, "ListTrainingJobs": self.throttle_rate}
            if throttled
            else {}
        )
        return Workload(
            name=f"bench-n{n_jobs}{'-thr' if throttled else ''}",
            n_jobs=n_jobs,
            time_scale=ts,
            first_step=math.ceil(first_real * ts),
            span=self.span * ts,
            seed=self.seed + n_jobs,
            rate_limits=rates,
            history_jobs=self.history_jobs,
            churn_rate=self.churn_rate,
        )

    def estimate(self, n_jobs: int, variant: str, throttled: bool) -> float:
        """Rough real seconds one run takes (to respect the budget): a quarter of the warm-up cap,
        and half a poll interval after the last step (all of the tail when throttled)."""
        warm = self.warm_cap(n_jobs, throttled) / 4
        tail = self.tail_for(throttled) if throttled else self.poll_interval / 2
        return (
            10.0 + self.setup_per_job * n_jobs + self.history_seconds() + warm + self.quiet + self.span + tail
        )

    def tail_for(self, throttled: bool) -> float:
        """Real seconds after the last step before stragglers are given up."""
        return self.throttled_tail if throttled else self.tail

    def runs(self) -> list[tuple[int, str, bool]]:
        """``(N, variant, throttled)`` in execution order: the throttled runs right after their size.

        The largest sizes come last, so that a tight budget drops them rather than the runs the
        targets are judged on.
        """
        throttled = [
            v for v in self.variants if self.throttled_variants is None or v in self.throttled_variants
        ]
        order: list[tuple[int, str, bool]] = []
        for n in self.sizes:
            order += [(n, v, False) for v in self.variants]
            if n == self.throttled_size:
                order += [(n, v, True) for v in throttled]
        if self.throttled_size and self.throttled_size not in self.sizes:
            order += [(self.throttled_size, v, True) for v in throttled]
        return order


SMOKE = Plan(
    sizes=(12,),
    variants=(*ALL_VARIANTS, *EVENT_MODES),
    throttled_size=12,
    throttled_variants=ALL_VARIANTS,
    throttle_rate=5.0,
    poll_interval=1.0,
    time_scale=60.0,
    span=1.5,
    # Two real seconds of waiting only: room for the harness's own calls before it on a busy host.
    quiet=2.0,
    tail=3.0,
    throttled_tail=3.0,
    warm_cap_base=3.0,
    warm_cap_per_job=0.0,
    parse_processes=1,
    parse_repeat=2,
    # About 50 s alone, with room for a busy machine. The smoke test lifts it (a skipped run has no
    # figures to check) and reports a run slower than this instead of failing.
    budget=200.0,
    # A few hundred others' jobs in the List window, so that a pass takes several pages.
    history_jobs=200,
    churn_rate=1200.0,
    smoke=True,
    prespawn=True,
    log_level="WARNING",
)
