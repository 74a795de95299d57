"""The benchmark's call accounting: calls by access key id and service, List passes from the call log."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import metrics


def _call(
    start: float,
    op: str,
    name: str | None = None,
    *,
    service: str = "sagemaker",
    paged: bool = False,
    error: str | None = None,
) -> list[Any]:
    return [start, start + 0.01, op, name, error, service, paged]


def test_call_model_counts_pages_per_pass_from_next_tokens() -> None:
    calls = [
        _call(0.0, "ListTrainingJobs"),
        _call(0.1, "ListTrainingJobs", paged=True),
        _call(0.2, "ListTrainingJobs", paged=True),
        # a first page throttled, then retried: one pass
        _call(10.0, "ListTrainingJobs", error="ThrottlingException"),
        _call(10.6, "ListTrainingJobs"),
        _call(10.7, "ListTrainingJobs", paged=True),
        _call(10.8, "ListTrainingJobs", paged=True),
        _call(10.9, "ListTrainingJobs", paged=True),
        _call(20.0, "ListTrainingJobs"),
    ]
    model = metrics.call_model(calls, {}, {}, n_jobs=2, end=30.0, go=0.0, window=(5.0, 25.0))
    assert model["list_pass_pages"] == [3, 5, 1]
    assert model["list_pages_per_pass"] == 3.0 and model["list_pages_per_pass_max"] == 5
    assert model["list_pages_per_pass_waiting"] == 3.0
    assert model["list_pages"] == 9


def test_call_model_of_event_mode_has_no_per_job_polling_and_counts_sqs_apart() -> None:
    calls = [_call(t, "ReceiveMessage", service="sqs") for t in (0.0, 20.0, 40.0)]
    calls += [_call(40.1, "DeleteMessageBatch", service="sqs")]
    calls += [_call(40.2, "DescribeTrainingJob", "job-a"), _call(41.0, "DescribeTrainingJob", "job-b")]
    calls += [_call(0.5, "ListTrainingJobs")]
    selected = {"job-a": 40.0, "job-b": 40.5}
    model = metrics.call_model(calls, selected, {"job-a": 40.3, "job-b": 41.1}, n_jobs=2, end=50.0, go=0.0)
    assert model["describe_per_job_hour"] == 0.0
    assert model["fixed_per_job"] == 1.0
    assert model["logical_calls"] == 3
    assert metrics.service_calls(calls) == {
        "sqs": {"ReceiveMessage": 3, "DeleteMessageBatch": 1},
        "sagemaker": {"DescribeTrainingJob": 2, "ListTrainingJobs": 1},
    }


def test_old_call_logs_are_grouped_by_time() -> None:
    calls = [[t, t + 0.01, "ListTrainingJobs", None, None] for t in (0.0, 0.1, 5.0)]
    assert metrics.call_model(calls, {}, {}, n_jobs=1, end=10.0)["list_pass_pages"] == [2, 1]


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        (
            {
                "operations": {"CreateTrainingJob": 9, "ListTrainingJobs": 4},
                "access_keys": {
                    "bench-harness": {"CreateTrainingJob": 9},
                    "testing": {"ListTrainingJobs": 4},
                },
            },
            {"ListTrainingJobs": 4},
        ),
        ({"operations": {"CreateTrainingJob": 9, "ListTrainingJobs": 4}}, {"ListTrainingJobs": 4}),
    ],
)
def test_variant_calls_are_the_trigger_process_access_key(
    stats: dict[str, Any], expected: dict[str, int]
) -> None:
    assert metrics.variant_operations(stats) == expected
    assert metrics.variant_calls(stats) == sum(expected.values())


def test_the_benchmark_percentiles_are_the_capacity_pages_figure_for_figure() -> None:
    import random

    from airflow_provider_sm_prefs.plugin import stats

    generator = random.Random(7)
    samples = [[], [3.0], [1.0, 2.0, 3.0, 4.0]] + [
        [generator.uniform(0, 600) for _ in range(generator.randint(2, 200))] for _ in range(200)
    ]
    for values in samples:
        for q in (50, 95, 99):
            assert metrics.percentile(values, q) == stats.percentile(values, q), (values, q)
