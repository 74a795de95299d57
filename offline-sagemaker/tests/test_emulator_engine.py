"""The simulation alone (no HTTP), with an injected clock: capacity, FIFO, deadlines, scale."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from offline_sagemaker.engine import Engine
from offline_sagemaker.exceptions import ApiError
from offline_sagemaker.models import Choice, JobKind, JobSpec
from offline_sagemaker.scenario import load_scenario

START = 1_700_000_000.0


class FakeClock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.value = 0.0

    def __call__(self) -> float:
        return self.value


def make_engine(**scenario: Any) -> tuple[Engine, FakeClock]:
    clock = FakeClock()
    base: dict[str, Any] = {
        "time_scale": 1,
        "start_epoch": START,
        "job_runtime_seconds": 100,
        "phase_seconds": {"starting": 10, "downloading": 10, "uploading": 10, "stopping": 10},
    }
    engine = Engine(load_scenario({**base, **scenario}), real_clock=clock)
    return engine, clock


def spec(name: str, *entries: tuple[str, int], kind: JobKind = JobKind.TRAINING, **kwargs: Any) -> JobSpec:
    choices = tuple(Choice(rank=i + 1, groups=((t, c),)) for i, (t, c) in enumerate(entries))
    return JobSpec(name=name, kind=kind, choices=choices, has_preferences=True, **kwargs)


def submit(engine: Engine, job_spec: JobSpec) -> None:
    engine.submit(job_spec, {}, f"arn:{job_spec.name}", engine.sync())


def test_clock_scales_real_time_and_adds_manual_advances() -> None:
    engine, clock = make_engine(time_scale=60)
    assert engine.now() == START
    clock.value = 2.0
    assert engine.now() == START + 120
    engine.advance(30)
    assert engine.now() == START + 150
    with pytest.raises(ValueError, match="advance"):
        engine.advance(-1)


def test_first_entry_with_capacity_is_selected_in_list_order() -> None:
    engine, _ = make_engine(capacity={"ml.g6.48xlarge": 0, "ml.g5.48xlarge": 4})
    submit(engine, spec("a", ("ml.g6.48xlarge", 1), ("ml.g5.48xlarge", 2), ("ml.p4d.24xlarge", 1)))
    engine.advance(10)
    job = engine.get(JobKind.TRAINING, "a")
    assert job.selected is not None and (job.selected.instance_type, job.selected.rank) == (
        "ml.g5.48xlarge",
        2,
    )
    assert job.secondary_status == "Downloading"


def test_a_release_goes_to_waiting_jobs_in_creation_order() -> None:
    engine, _ = make_engine(capacity={"ml.g5.48xlarge": 2})
    for name in ("first", "second", "third", "fourth"):
        submit(engine, spec(name, ("ml.g5.48xlarge", 1)))
        engine.advance(1)
    engine.advance(10)
    jobs = {j.name: j for j in engine.jobs()}
    assert [n for n, j in jobs.items() if j.selected] == ["first", "second"]
    assert jobs["third"].secondary_status == jobs["fourth"].secondary_status == "Pending"
    engine.advance(116)  # now 130 s: first (created at 0) ends at 10+10+100+10; second a second later
    assert jobs["first"].status.value == "Completed"
    assert jobs["third"].selected is not None and jobs["fourth"].selected is None
    assert jobs["third"].selected_at == jobs["first"].end_time


def test_a_small_later_job_may_use_capacity_a_big_waiting_job_cannot() -> None:
    engine, _ = make_engine(capacity={"ml.g5.48xlarge": 2})
    submit(engine, spec("big", ("ml.g5.48xlarge", 4)))
    submit(engine, spec("small", ("ml.g5.48xlarge", 2)))
    engine.advance(10)
    assert engine.get(JobKind.TRAINING, "big").secondary_status == "Pending"
    assert engine.get(JobKind.TRAINING, "small").secondary_status == "Downloading"


def test_capacity_window_opening_starts_waiting_jobs_at_the_boundary() -> None:
    engine, _ = make_engine(
        capacity={"ml.g6.48xlarge": [{"from": 0, "to": 500, "free": 0}, {"from": 500, "free": 1}]}
    )
    submit(engine, spec("w", ("ml.g6.48xlarge", 1)))
    engine.advance(1000)
    job = engine.get(JobKind.TRAINING, "w")
    assert job.selected_at == START + 500
    assert [t["Status"] for t in job.transitions][:3] == ["Starting", "Pending", "Downloading"]


def test_periodic_capacity_windows_repeat_for_jobs_submitted_in_any_period() -> None:
    engine, clock = make_engine(
        capacity_period=1000,
        capacity={
            "ml.g6.48xlarge": 0,
            "ml.g5.48xlarge": [{"from": 0, "to": 300, "free": 0}, {"from": 300, "free": 1}],
        },
    )
    # Submitted 3.2 periods in (Starting ends at 3210, inside the closed part of the fourth period):
    # the first choice never frees up, the second opens at 3300, 300 s into that period.
    engine.advance(3200)
    submit(engine, spec("late", ("ml.g6.48xlarge", 1), ("ml.g5.48xlarge", 1)))
    engine.advance(200)
    job = engine.get(JobKind.TRAINING, "late")
    assert job.selected is not None and job.selected.rank == 2
    assert job.selected_at == START + 3300
    # The same window in later periods: open 300..1000 s into each, closed again at each period start.
    engine.advance(4950 - 3400)
    submit(engine, spec("open-part", ("ml.g5.48xlarge", 1)))  # evaluated at 4960: open
    engine.advance(50)
    submit(engine, spec("next-period", ("ml.g5.48xlarge", 1)))  # evaluated at 5010: closed until 5300
    engine.advance(1000)
    assert engine.get(JobKind.TRAINING, "open-part").selected_at == START + 4960
    assert engine.get(JobKind.TRAINING, "next-period").selected_at == START + 5300
    assert engine.available(("od", "ml.g6.48xlarge"), at=START + 12_345) == 0


def test_glob_capacity_applies_per_type() -> None:
    engine, _ = make_engine(capacity={"ml.g*": [{"from": 0, "to": 100, "free": 0}, {"from": 100, "free": 1}]})
    submit(engine, spec("a", ("ml.g5.48xlarge", 1)))
    submit(engine, spec("b", ("ml.g6.48xlarge", 1)))
    engine.advance(100)
    # Each type is its own pool of 1, so both start at the boundary.
    assert all(j.selected_at == START + 100 for j in engine.jobs())


@pytest.mark.parametrize(
    ("outcome", "status", "reason"),
    [
        ("stopped", "Stopped", "MaxPendingTimeInSeconds exceeded"),
        ("failed", "Failed", "InsufficientCapacityError"),
    ],
)
def test_pending_deadline_counts_from_pending_start(outcome: str, status: str, reason: str) -> None:
    engine, _ = make_engine(capacity={"ml.p5.48xlarge": 0}, pending_timeout_outcome=outcome)
    submit(engine, spec("p", ("ml.p5.48xlarge", 1), max_pending_seconds=1800))
    engine.advance(10 + 1799)
    job = engine.get(JobKind.TRAINING, "p")
    assert job.secondary_status == "Pending"
    engine.advance(1)
    assert job.status.value == status and job.secondary_status == status
    assert job.failure_reason is not None and reason in job.failure_reason
    assert job.end_time is None  # never ran


def test_cpu_only_list_fails_once_without_waiting() -> None:
    engine, _ = make_engine(capacity={"ml.m5.xlarge": 0, "ml.c5.xlarge": 0})
    submit(engine, spec("cpu", ("ml.m5.xlarge", 1), ("ml.c5.xlarge", 1), max_pending_seconds=1800))
    engine.advance(10)
    job = engine.get(JobKind.TRAINING, "cpu")
    assert job.status.value == "Failed"
    assert job.failure_reason == (
        "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML "
        "instance type."
    )


def test_stop_releases_instances_only_when_stopped() -> None:
    engine, _ = make_engine(capacity={"ml.g5.48xlarge": 1})
    submit(engine, spec("runner", ("ml.g5.48xlarge", 1)))
    submit(engine, spec("waiter", ("ml.g5.48xlarge", 1)))
    engine.advance(30)
    engine.stop(JobKind.TRAINING, "runner", engine.now())
    assert engine.get(JobKind.TRAINING, "runner").status.value == "Stopping"
    engine.advance(9)
    assert engine.get(JobKind.TRAINING, "waiter").selected is None
    engine.advance(1)
    assert engine.get(JobKind.TRAINING, "runner").status.value == "Stopped"
    assert engine.get(JobKind.TRAINING, "waiter").selected is not None
    with pytest.raises(ApiError, match="in status Stopped"):
        engine.stop(JobKind.TRAINING, "runner", engine.now())


def test_plan_pool_is_separate_from_on_demand_and_windowed() -> None:
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/later"
    engine, _ = make_engine(
        capacity={"ml.p5.48xlarge": 0},
        training_plans=[
            {"arn": arn, "instance_type": "ml.p5.48xlarge", "count": 2, "from": 1000, "to": 5000}
        ],
    )
    plan_choice = Choice(rank=1, groups=(("ml.p5.48xlarge", 2),), plan_arn=arn)
    job_spec = JobSpec(name="planned", kind=JobKind.TRAINING, choices=(plan_choice,), has_preferences=True)
    submit(engine, job_spec)
    engine.advance(10)
    job = engine.get(JobKind.TRAINING, "planned")
    assert job.secondary_status == "Pending"  # a lone plan-backed entry waits for the plan window
    engine.advance(990)
    assert job.capacity_kind is not None and job.capacity_kind.value == "training-plan"
    assert engine.available(("plan", arn)) == 0


def test_processing_waits_or_fails_per_scenario() -> None:
    engine, _ = make_engine(capacity={"ml.m5.xlarge": 0}, processing_when_no_capacity="wait")
    submit(engine, spec("pw", ("ml.m5.xlarge", 1), kind=JobKind.PROCESSING))
    engine.advance(100_000)
    job = engine.get(JobKind.PROCESSING, "pw")
    assert job.status.value == "InProgress" and job.selected is None and job.secondary_status is None
    engine, _ = make_engine(capacity={"ml.m5.xlarge": 0}, processing_when_no_capacity="fail")
    submit(engine, spec("pf", ("ml.m5.xlarge", 1), kind=JobKind.PROCESSING))
    engine.advance(10)
    job = engine.get(JobKind.PROCESSING, "pf")
    assert job.status.value == "Failed" and job.failure_reason is not None
    assert job.failure_reason.startswith("CapacityError")


def test_max_runtime_stops_training_with_max_runtime_exceeded() -> None:
    engine, _ = make_engine()
    submit(engine, spec("long", ("ml.g5.48xlarge", 1), max_runtime_seconds=50))
    engine.advance(1000)
    job = engine.get(JobKind.TRAINING, "long")
    assert (job.status.value, job.secondary_status) == ("Stopped", "MaxRuntimeExceeded")
    assert job.end_time is not None and job.start_time is not None and job.end_time - job.start_time == 50


def test_a_thousand_concurrent_jobs_compete_cheaply_and_fairly() -> None:
    engine, _ = make_engine(capacity={"ml.g5.48xlarge": 10, "ml.g6.48xlarge": 5})
    started = time.perf_counter()
    for i in range(1000):
        submit(
            engine,
            spec(f"job-{i:04d}", ("ml.g6.48xlarge", 1), ("ml.g5.48xlarge", 1), max_pending_seconds=2_419_200),
        )
    for _ in range(200):
        engine.advance(100)
        for j in engine.jobs()[:5]:
            engine.get(JobKind.TRAINING, j.name)
    elapsed = time.perf_counter() - started
    jobs = engine.jobs()
    assert all(j.status.value == "Completed" for j in jobs)
    # 15 slots, FIFO: selection times never go backwards in creation order.
    selected = [j.selected_at for j in jobs]
    assert selected == sorted(selected)  # type: ignore[type-var]
    assert elapsed < 5, f"simulating 1,000 jobs took {elapsed:.1f}s"


def test_off_grid_capacity_steps_start_each_waiting_job_exactly_at_its_step() -> None:
    # Step times whose sum with the ~1.7e9 start epoch is not exactly representable (the float step
    # there is 2**-22 s). Each step frees one instance, withdrawn again just before the job that took
    # it ends, so a step not seen at its boundary is lost: jobs start late and the last ones never.
    n_jobs = 300
    steps = [20.1 + k * 2.4 for k in range(n_jobs)]
    windows: list[dict[str, Any]] = [{"from": 0, "to": steps[0], "free": 0}]
    for step, following in zip(steps, [*steps[1:], math.inf], strict=True):
        windows.append({"from": step, "to": step + 0.9, "free": 1})
        windows.append({"from": step + 0.9, "to": following, "free": 0})
    engine, _ = make_engine(
        job_runtime_seconds=1,
        phase_seconds={"starting": 10, "downloading": 0, "uploading": 0, "stopping": 10},
        capacity={"ml.p4d.24xlarge": windows},
    )
    for k in range(n_jobs):
        submit(engine, spec(f"job-{k:03d}", ("ml.p4d.24xlarge", 1), max_pending_seconds=2_419_200))
    engine.advance(steps[-1] + 10)
    jobs = engine.jobs()
    late = [
        (j.name, j.selected_at) for j, step in zip(jobs, steps, strict=True) if j.selected_at != START + step
    ]
    assert late == []
    assert all(j.status.value == "Completed" for j in jobs)


def test_off_grid_plan_window_opens_exactly_at_its_boundary() -> None:
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/off-grid"
    engine, _ = make_engine(
        training_plans=[
            {"arn": arn, "instance_type": "ml.p5.48xlarge", "count": 1, "from": 1000.1, "to": 1000.3}
        ]
    )
    plan_choice = Choice(rank=1, groups=(("ml.p5.48xlarge", 1),), plan_arn=arn)
    submit(
        engine, JobSpec(name="planned", kind=JobKind.TRAINING, choices=(plan_choice,), has_preferences=True)
    )
    engine.advance(2000)
    job = engine.get(JobKind.TRAINING, "planned")
    assert job.selected_at == START + 1000.1
    assert job.capacity_kind is not None and job.capacity_kind.value == "training-plan"
