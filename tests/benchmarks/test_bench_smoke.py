"""The benchmark harness runs end to end (``--smoke``) and reports every figure for every variant.

Only the shape of the result is checked, never a timing: the smoke configuration is far too small
and too fast for its numbers to mean anything. The smoke account holds others' jobs too (a history
and a stream of new ones), and the event-mode variants (``events``, ``events-hint``) run once each,
unthrottled.

Nor does the test fail for a slow host: the benchmark's time budget is lifted (a run it skips would have
no figures), and a run slower than the smoke plan's nominal budget is reported as a warning. The only
deadline is :data:`HANG`, for a benchmark that no longer ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from numbers import Real
from pathlib import Path
from typing import Any

import pytest

from benchmarks.metrics import TARGET_NAMES
from benchmarks.run import SMOKE

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = {"ours", "stock", "naive"}
SMOKE_RUNS = {(v, False) for v in (*VARIANTS, "events", "events-hint")} | {(v, True) for v in VARIANTS}
SMOKE_HISTORY_JOBS = 200
#: Real seconds after which the benchmark is taken for hung, whatever the host (the smoke run takes
#: about a minute on an idle one).
HANG = 1800
RUN_FIGURES = (
    ("calls", "total"),
    ("calls", "per_job_hour_real"),
    ("calls", "per_job_hour_emulated"),
    ("calls", "throttled_total"),
    ("calls", "model", "waiting_per_job_hour"),
    ("calls", "model", "fixed_per_job"),
    ("calls", "model", "per_job_hour_at_1h_waits"),
    ("latency_seconds", "p50"),
    ("latency_seconds", "p95"),
    ("latency_seconds", "max"),
    ("cpu", "seconds"),
    ("cpu", "seconds_per_1000_jobs"),
    ("cpu", "percent_of_one_core"),
    ("cpu", "waiting_percent_of_one_core"),
    ("memory", "peak_rss_mb"),
    ("memory", "peak_rss_growth_per_1000_jobs_mb"),
    ("loop_lag_seconds", "max"),
    ("loop_lag_seconds", "max_while_waiting"),
    ("tasks", "failed"),
    ("tasks", "undetected_at_end"),
)
PARSE_FIGURES = ("import_seconds_median", "first_parse_seconds_median", "parse_seconds_median", "tasks")


def _dig(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


def _check_background(key: tuple[str, bool], run: dict[str, Any]) -> None:
    """Others' jobs were in the account: the history had ended, the churn kept creating jobs."""
    background = run["background"]
    assert background["history_jobs"] == SMOKE_HISTORY_JOBS, key
    history = background["history_status"]
    assert sum(history.values()) == SMOKE_HISTORY_JOBS and set(history) == {"Completed", "Failed"}, (
        key,
        history,
    )
    churn = background["churn"]
    assert churn["error"] is None, (key, churn["error"])
    assert churn["rate_per_emulated_hour"] > 0, key
    assert 0 < churn["created_by"]["waiting_window"] <= churn["jobs_created"], (key, churn)
    assert sum(churn["status_at_end"].values()) == churn["jobs_created"], (key, churn)
    # The harness's own calls are signed with another access key id and never counted.
    assert "CreateTrainingJob" not in run["figures"]["calls"]["by_operation"], key
    assert run["workload"]["history_jobs"] == SMOKE_HISTORY_JOBS, key


def _check_list_pages(run: dict[str, Any]) -> None:
    """Others' jobs created after ours are outside the List loop's creation-time windows: hundreds of
    them, and still one page per pass for 12 waiting jobs (one open-ended window would take several)."""
    model = run["figures"]["calls"]["model"]
    assert model["list_pass_pages"], model
    assert sum(model["list_pass_pages"]) == run["figures"]["calls"]["by_operation"]["ListTrainingJobs"]
    assert run["background"]["churn"]["jobs_created"] > 100, run["background"]["churn"]
    assert model["list_pages_per_pass_max"] == 1, model["list_pass_pages"]
    assert isinstance(model["list_pages_per_pass"], Real)


def _check_event_route(run: dict[str, Any]) -> None:
    """The events run had its queue and rule, and the trigger process was told the queue's URL."""
    route = run["event_route"]
    assert route["queue_url"] and route["queue_url"] == run["event_queue_url"], route
    assert route["pattern"]["source"] == ["aws.sagemaker"], route
    sqs = run["figures"]["calls"]["sqs"]
    assert isinstance(sqs["total"], int) and isinstance(sqs["by_operation"], dict), sqs


@pytest.mark.timeout(HANG + 60)
def test_smoke_run_reports_every_figure_for_every_variant(tmp_path: Path) -> None:
    output = tmp_path / "bench.json"
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--smoke", "--budget", str(HANG), "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    took = time.monotonic() - started
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    if took > SMOKE.budget:
        warnings.warn(
            f"the smoke benchmark took {took:.0f} s, over the smoke plan's {SMOKE.budget:.0f} s budget "
            "(a slow or busy host: its figures are not checked)",
            stacklevel=1,
        )
    result = json.loads(output.read_text(encoding="utf-8"))

    runs = {(run["variant"], run["throttled"]): run for run in result["runs"]}
    assert set(runs) == SMOKE_RUNS, sorted(runs)
    for key, run in runs.items():
        assert "figures" in run, f"{key}: {run.get('error') or run.get('skipped')}"
        for path in RUN_FIGURES:
            value = _dig(run["figures"], path)
            # The tasks' figures say why a latency is missing (every task failed, or none saw its event).
            assert isinstance(value, Real), (
                f"{key} {'.'.join(path)} = {value!r}; tasks: {run['figures'].get('tasks')}"
            )
        assert run["figures"]["tasks"]["failed"] == 0, f"{key}: {run['figures']['tasks']['failed_examples']}"
        _check_background(key, run)
    _check_list_pages(runs[("ours", False)])
    _check_event_route(runs[("events", False)])
    _check_event_route(runs[("events-hint", False)])

    parse = result["parse"]
    assert set(parse["files"]) == {"preferences", "stock"}
    for name, item in parse["files"].items():
        for figure in PARSE_FIGURES:
            assert isinstance(item[figure], Real), f"{name} {figure} = {item[figure]!r}"
        assert item["tasks"] == 100
        assert item["import_errors"] == []
        assert item["network_attempts"] == 0, item["network_attempt_examples"]
    assert isinstance(parse["warm_parse_ratio"], Real)

    targets = {t["target"] for t in result["targets"]}
    assert len(targets) == len(result["targets"]) == len(TARGET_NAMES) == 18
    machine = result["machine"]
    assert machine["nproc"] and machine["cpu_model"] and machine["ram_gib"]
