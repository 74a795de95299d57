"""The benchmark's account with others' jobs and its command line, without running it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from benchmarks import run
from benchmarks.background import (
    BACKGROUND_TYPE,
    CHURN_RUNTIME,
    ChurnStream,
    JobCreator,
    history_requests,
)
from benchmarks.variants import ALL_VARIANTS, EVENT_DETAIL_ENV, EVENT_MODES, EVENTS, EVENTS_HINT, VARIANTS

#: first_step and sha256 (16 hex) of the scenario of each size before others' jobs existed: with
#: ``--no-churn`` the benchmark must run exactly that workload, so the published tables stay reproducible.
NO_CHURN_WORKLOADS = {
    (100, False): (3624, "d6b323aa582a8045"),
    (1000, False): (6540, "377be632b000f7c1"),
    (3000, False): (13020, "20de985adf830050"),
    (1000, True): (4440, "613738fbd2152fa3"),
}


def _digest(scenario: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(scenario, sort_keys=True).encode()).hexdigest()[:16]


def test_no_churn_is_the_workload_of_the_published_tables() -> None:
    plan, _ = run._parse_args(["--no-churn"])
    assert plan.history_jobs == 0 and plan.churn_rate == 0
    for (n, throttled), (first_step, digest) in NO_CHURN_WORKLOADS.items():
        workload = plan.workload(n, throttled)
        assert (workload.first_step, _digest(workload.scenario())) == (first_step, digest), (n, throttled)


def test_defaults_put_others_jobs_in_the_account() -> None:
    plan, _ = run._parse_args([])
    assert (plan.history_jobs, plan.churn_rate) == (3000, 300.0)
    assert (
        plan.variants == (*ALL_VARIANTS, *EVENT_MODES) == ("ours", "stock", "naive", "events", "events-hint")
    )
    assert plan.throttled_variants == ALL_VARIANTS
    workload = plan.workload(1000, False)
    assert (workload.history_jobs, workload.churn_rate) == (3000, 300.0)
    # The first step moves past the history's age, so the waiting window keeps its length.
    assert workload.first_step > NO_CHURN_WORKLOADS[(1000, False)][0] + 3600
    assert BACKGROUND_TYPE not in workload.scenario()["capacity"]
    plan, _ = run._parse_args(["--history-jobs", "10", "--churn-rate", "60", "--variants", "events"])
    assert (plan.history_jobs, plan.churn_rate, plan.variants) == (10, 60.0, ("events",))
    plan, _ = run._parse_args(["--history-jobs", "10", "--no-churn"])
    assert (plan.history_jobs, plan.churn_rate) == (0, 0.0)


def test_events_is_ours_in_event_mode_and_the_smoke_runs_it_unthrottled() -> None:
    events, ours = VARIANTS[EVENTS], VARIANTS["ours"]
    assert events.event_mode and not ours.event_mode
    assert events.classpath == ours.classpath and events.kwargs is ours.kwargs
    assert (12, EVENTS, False) in run.SMOKE.runs() and (12, EVENTS, True) not in run.SMOKE.runs()


def test_events_hint_is_events_with_the_earlier_use_of_event_details() -> None:
    events, hint = VARIANTS[EVENTS], VARIANTS[EVENTS_HINT]
    assert hint.event_mode and hint.classpath == events.classpath and hint.kwargs is events.kwargs
    assert (events.env[EVENT_DETAIL_ENV], hint.env[EVENT_DETAIL_ENV]) == ("data", "hint")


def test_warm_up_cap_stops_growing_past_3000_jobs() -> None:
    plan = run.Plan()
    assert plan.warm_cap(3000) == 165.0 and plan.warm_cap(10_000) == 165.0
    assert plan.warm_cap(1000) == 65.0 and plan.warm_cap(10_000, throttled=True) == 30.0


def test_history_is_seeded_short_and_one_in_ten_fails() -> None:
    workload = run.Plan(history_jobs=1000).workload(100, False)
    requests = history_requests(workload)
    assert requests == history_requests(workload)
    assert len(requests) == 1000 and len({r["TrainingJobName"] for r in requests}) == 1000
    assert all(r["ResourceConfig"]["InstanceType"] == BACKGROUND_TYPE for r in requests)
    failed = sum(1 for r in requests if {"Key": "emulator:outcome", "Value": "Failed"} in r["Tags"])
    assert 60 <= failed <= 140


class _Recorder(JobCreator):
    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:1")
        self.created: list[dict[str, Any]] = []

    def create_one(self, request: dict[str, Any]) -> None:
        self.created.append(request)


def test_churn_creates_what_is_due_by_the_emulated_clock() -> None:
    workload = run.Plan(churn_rate=360.0).workload(100, False)  # one job per 10 emulated seconds
    creator = _Recorder()
    now = [1000.0]
    churn = ChurnStream(workload, creator, lambda: now[0])
    churn.started_at = now[0]
    churn._next_due = now[0]  # start without the thread
    assert churn.catch_up(now[0] + 36_000) == churn.created == len(creator.created)
    assert 3000 <= churn.created <= 4200
    names = [r["TrainingJobName"] for r in creator.created]
    assert names[0] == f"{workload.name}-churn-00000" and len(set(names)) == len(names)
    runtimes = [int(r["Tags"][0]["Value"]) for r in creator.created]
    assert CHURN_RUNTIME[0] <= min(runtimes) and max(runtimes) <= CHURN_RUNTIME[1]
    assert 0.05 <= churn.failed_tagged / churn.created <= 0.15
    assert churn.catch_up(now[0] + 36_000) == 0
    assert churn.record()["jobs_created"] == churn.created


def test_no_churn_stream_creates_nothing() -> None:
    churn = ChurnStream(run.Plan(churn_rate=0).workload(100, False), _Recorder(), lambda: 0.0)
    churn.start()
    assert churn.catch_up(1e9) == 0 and not churn.enabled
    churn.stop()
