"""Requests per logical call and recovery after a throttling storm: the retry policy before and after.

    .venv/bin/python -m benchmarks.retry_budget [--calls 8] [--storm 8] [--seed 1]
    .venv/bin/python -m benchmarks.retry_budget --render   # the table again from docs/data/retry-budget.json

One offline SageMaker, one Describe per logical call (a job name of its own, so the emulator's per-job
statistics count that call's requests), two policies side by side:

- **before**: the retry module as it was at :data:`BEFORE_REVISION` (read with ``git show`` into a
  module of its own: twelve tries with backoff), over a client with botocore's default config (legacy
  mode, five requests per call), as the hook built it then;
- **after**: :meth:`SageMakerPreferenceHook.describe_job` as it is (botocore's standard mode, one budget).

Two measurements:

- **persistent throttling** (``throttle_rate=1``): every request is throttled and every backoff,
  botocore's and ours, is made instant, so the count is what the policy allows, whatever the host's speed;
  the worst-case time beside it is the sum of the policy's longest backoffs (computed, not waited);
- **storm**: every request throttled for ``--storm`` seconds, then none; ``--calls`` logical calls of
  each policy start with the storm, concurrently, with real backoffs. Recovery is the time from the
  storm's end to each call's answer.

Prints a table and writes docs/data/retry-budget.json. Under a minute; not part of ``make test``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "data" / "retry-budget.json"
#: The last revision with the earlier policy (a retry loop of our own over botocore's legacy mode).
BEFORE_REVISION = "b25a3aefc52840901afdae32606d1942d0db48ea"
BEFORE_PATH = "airflow_provider_sm_prefs/hooks/retry.py"
OPERATION = "DescribeTrainingJob"


def before_module() -> types.ModuleType:
    """The earlier retry module, imported from git under a name of its own."""
    source = subprocess.run(
        ["git", "show", f"{BEFORE_REVISION}:{BEFORE_PATH}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spec = importlib.util.spec_from_loader("sm_prefs_retry_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    exec(compile(source, f"{BEFORE_REVISION[:7]}:{BEFORE_PATH}", "exec"), module.__dict__)
    return module


def before_call(old: types.ModuleType) -> Callable[[str], Any]:
    """A task of the earlier release: botocore's default config, the earlier loop around Describe."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    client = AwsBaseHook(aws_conn_id="aws_default", client_type="sagemaker").conn

    def call(name: str) -> Any:
        try:
            return old.retry_sync(
                lambda: client.describe_training_job(TrainingJobName=name), f"Describe {name}"
            )
        except Exception as err:
            if old.is_not_found(err):  # as the hook did: an unknown job is an answer, None
                return None
            raise

    return call


def after_call() -> Callable[[str], Any]:
    from airflow_provider_sm_prefs.domain.kinds import JobKind
    from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook

    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    hook.conn  # noqa: B018 - built before the storm, as a task builds it before its first call
    return lambda name: hook.describe_job(JobKind.TRAINING, name)


@contextmanager
def instant_backoff(old: types.ModuleType) -> Iterator[None]:
    """Every backoff of both policies takes no time (botocore's legacy and standard modes, both loops)."""
    import botocore.retryhandler
    from botocore.retries.standard import ExponentialBackoff

    saved = (botocore.retryhandler.delay_exponential, ExponentialBackoff.delay_amount, old.time)
    botocore.retryhandler.delay_exponential = lambda **_: 0.0  # type: ignore[assignment]
    ExponentialBackoff.delay_amount = lambda self, context: 0.0  # type: ignore[method-assign]
    old.time = types.SimpleNamespace(sleep=lambda _s: None)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        botocore.retryhandler.delay_exponential, ExponentialBackoff.delay_amount, old.time = saved


def worst_case_seconds(old: types.ModuleType) -> dict[str, float]:
    """The longest backoffs each policy can draw under persistent throttling (full jitter's upper bounds)."""
    from airflow_provider_sm_prefs.hooks.retry import CALL, DEFAULT_MAX_ATTEMPTS

    legacy = sum(2 ** (n - 1) for n in range(1, 5))  # legacy mode: 5 requests, rand * 2 ** (n - 1)
    ours_before = sum(min(old.CALL.cap, old.CALL.base * 2 ** min(n, 16)) for n in range(1, old.CALL.attempts))
    standard = sum(min(2 ** (n - 1), 20) for n in range(1, DEFAULT_MAX_ATTEMPTS))
    assert (
        CALL.attempts == DEFAULT_MAX_ATTEMPTS
    )  # our layer adds no request (and no wait) to a throttled call
    return {"before": old.CALL.attempts * legacy + ours_before, "after": float(standard)}


def requests_of(server: Any, name: str) -> int:
    return int(server.stats()["jobs"].get(name, {}).get(OPERATION, 0))


def persistent(server: Any, old: types.ModuleType) -> dict[str, int]:
    server.clear_faults()
    with instant_backoff(old):
        calls = {"before": before_call(old), "after": after_call()}
        server.set_faults(throttle_rate=1.0)
        counts = {}
        for policy, call in calls.items():
            name = f"persistent-{policy}"
            try:
                call(name)
            except Exception as err:
                assert "Throttling" in str(err), err
            counts[policy] = requests_of(server, name)
    server.clear_faults()
    return counts


def storm(server: Any, old: types.ModuleType, calls: int, seconds: float) -> dict[str, Any]:
    """``calls`` logical calls per policy, started with a storm of ``seconds``; each call's outcome."""
    server.clear_faults()
    policies = {
        "before": [before_call(old) for _ in range(calls)],
        "after": [after_call() for _ in range(calls)],
    }
    results: dict[str, list[dict[str, Any]]] = {p: [] for p in policies}
    lock = threading.Lock()
    server.set_faults(throttle_rate=1.0)
    start = time.monotonic()
    ended = start + seconds

    def run(policy: str, index: int, call: Callable[[str], Any]) -> None:
        name = f"storm-{policy}-{index}"
        try:
            call(name)
            ok = True
        except Exception:
            ok = False
        done = time.monotonic()
        with lock:
            results[policy].append({"ok": ok, "done_after_storm": done - ended, "requests": name})

    threads = [
        threading.Thread(target=run, args=(policy, i, call), daemon=True)
        for policy, fleet in policies.items()
        for i, call in enumerate(fleet)
    ]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, ended - time.monotonic()))
    server.clear_faults()
    for thread in threads:
        thread.join()
    for fleet in results.values():
        for r in fleet:
            r["requests"] = requests_of(server, r["requests"])
    return {policy: summary(fleet) for policy, fleet in results.items()}


def summary(fleet: list[dict[str, Any]]) -> dict[str, Any]:
    lags = sorted(max(0.0, r["done_after_storm"]) for r in fleet if r["ok"])
    requests = [r["requests"] for r in fleet]
    return {
        "calls": len(fleet),
        "failed": sum(not r["ok"] for r in fleet),
        "requests_mean": round(statistics.fmean(requests), 2),
        "requests_max": max(requests),
        "recovery_median_s": round(statistics.median(lags), 2) if lags else None,
        "recovery_max_s": round(lags[-1], 2) if lags else None,
    }


def table(result: dict[str, Any]) -> str:
    s, p, w = result["storm"], result["persistent"], result["worst_case_seconds"]
    lines = [
        f"| policy | requests per call, persistent throttling | worst-case backoff per call (s) | "
        f"{result['storm_seconds']:g} s storm: requests per call mean / max | recovery after it, median / max (s) "
        "| calls failed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    labels = {
        "before": "before: 12 tries of our own over legacy mode (5)",
        "after": "after: standard mode (10), our layer within it",
    }
    for policy, label in labels.items():
        st = s[policy]
        lines.append(
            f"| {label} | {p[policy]} | {w[policy]:.0f} | {st['requests_mean']:.1f} / {st['requests_max']} | "
            f"{_s(st['recovery_median_s'])} / {_s(st['recovery_max_s'])} | {st['failed']} of {st['calls']} |"
        )
    return "\n".join(lines)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=8, help="logical calls per policy in the storm")
    parser.add_argument("--storm", type=float, default=8.0, help="seconds every request is throttled")
    parser.add_argument("--seed", type=int, default=1, help="seeds the jitter of both policies")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--render", action="store_true", help="print the table from --output only")
    args = parser.parse_args(argv)
    if args.render:
        print(table(json.loads(args.output.read_text())))
        return 0
    for key in ("AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS"):
        os.environ.pop(key, None)
    random.seed(args.seed)
    from offline_sagemaker import OfflineSageMaker

    old = before_module()
    started = time.monotonic()
    with OfflineSageMaker(scenario="default") as server:
        os.environ.update(server.airflow_env(conn_id="aws_default"))
        counts = persistent(server, old)
        storms = storm(server, old, args.calls, args.storm)
    result = {
        "before_revision": BEFORE_REVISION,
        "seed": args.seed,
        "storm_seconds": args.storm,
        "persistent": counts,
        "worst_case_seconds": worst_case_seconds(old),
        "storm": storms,
        "runtime_s": round(time.monotonic() - started, 1),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(table(result))
    print(
        f"\n{args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output} written "
        f"({result['runtime_s']} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
