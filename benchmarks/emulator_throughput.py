"""Throughput of the offline SageMaker: 1,000 concurrent jobs, then DescribeTrainingJob calls per second.

    .venv/bin/python -m benchmarks.emulator_throughput [--jobs 1000] [--duration 5] [--threads 1,2,4]
                                                       [--in-process]

By default the emulator runs as its console script in a separate process, as a deployment would use it,
and boto3 clients in this process make real HTTP calls. ``--in-process`` runs the server in a thread of
this process instead (the server then shares the GIL with the clients). Prints a table and writes JSON to
``benchmarks/results/emulator_throughput-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from botocore.config import Config

from offline_sagemaker import OfflineSageMaker
from offline_sagemaker.server import RemoteSageMaker

RESULTS = Path(__file__).resolve().parent / "results"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"

# Scarce first choice so the world holds running and pending jobs at once, as in a capacity crunch.
SCENARIO: dict[str, Any] = {
    "name": "benchmark",
    "time_scale": 1,
    "job_runtime_seconds": 86_400,
    "capacity": {"ml.g6.48xlarge": 50, "ml.g5.48xlarge": 250},
}


def _request(name: str) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1",
            "TrainingInputMode": "File",
        },
        "RoleArn": ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://bench/out"},
        "ResourceConfig": {
            "InstancePreferences": [{"InstanceType": "ml.g6.48xlarge"}, {"InstanceType": "ml.g5.48xlarge"}],
            "InstanceCount": 1,
            "VolumeSizeInGB": 50,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 86_400, "MaxPendingTimeInSeconds": 2_419_200},
    }


def _client(handle: Any) -> Any:
    return handle.boto3_client(
        "sagemaker", config=Config(retries={"total_max_attempts": 1, "mode": "standard"})
    )


def _create_jobs(handle: Any, count: int, threads: int) -> float:
    names = [f"bench-{i:05d}" for i in range(count)]
    clients = [_client(handle) for _ in range(threads)]
    started = time.perf_counter()

    def create(index: int) -> None:
        clients[index % threads].create_training_job(**_request(names[index]))

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(count)))
    return count / (time.perf_counter() - started)


def _describe_rate(handle: Any, count: int, threads: int, duration: float) -> dict[str, float]:
    clients = [_client(handle) for _ in range(threads)]
    latencies: list[list[float]] = [[] for _ in range(threads)]
    stop_at = time.perf_counter() + duration
    barrier = threading.Barrier(threads)

    def work(index: int) -> None:
        rng = random.Random(index)
        client, mine = clients[index], latencies[index]
        barrier.wait()
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            client.describe_training_job(TrainingJobName=f"bench-{rng.randrange(count):05d}")
            mine.append(time.perf_counter() - started)

    started = time.perf_counter()
    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    flat = sorted(x for per_thread in latencies for x in per_thread)
    return {
        "threads": threads,
        "calls": len(flat),
        "calls_per_second": len(flat) / elapsed,
        "p50_ms": statistics.median(flat) * 1000,
        "p95_ms": flat[int(len(flat) * 0.95) - 1] * 1000,
    }


def _start_external() -> tuple[subprocess.Popen[str], RemoteSageMaker]:
    script = Path(sys.executable).with_name("sm-prefs-emulator")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "offline_sagemaker.cli"]
    process = subprocess.Popen([*command, "--port", "0"], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    return process, OfflineSageMaker.attach(url)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per Describe measurement")
    parser.add_argument("--threads", default="1,2,4", help="client thread counts to measure")
    parser.add_argument("--in-process", action="store_true", help="serve from a thread of this process")
    args = parser.parse_args(argv)
    thread_counts = [int(t) for t in args.threads.split(",")]

    process: subprocess.Popen[str] | None = None
    if args.in_process:
        handle: Any = OfflineSageMaker(scenario=SCENARIO).start()
    else:
        process, handle = _start_external()
        handle.load_scenario(SCENARIO)
    try:
        create_rate = _create_jobs(handle, args.jobs, threads=4)
        handle.advance(300)  # past Starting: 300 jobs run, the rest wait in Pending
        jobs = handle.jobs()
        states = {
            "running": sum(1 for j in jobs if j["selected_instance_type"]),
            "pending": sum(1 for j in jobs if j["secondary_status"] == "Pending"),
        }
        rows = [_describe_rate(handle, args.jobs, threads, args.duration) for threads in thread_counts]
        stats = handle.stats()
    finally:
        if args.in_process:
            handle.stop()
        elif process is not None:
            process.terminate()
            process.wait(timeout=10)

    mode = "in-process" if args.in_process else "separate process"
    print(
        f"offline SageMaker throughput ({mode}; {args.jobs} jobs: {states['running']} running, {states['pending']} pending)"
    )
    print(f"CreateTrainingJob: {create_rate:,.0f} calls/s (4 client threads)")
    print(f"{'client threads':>14} | {'Describe calls/s':>16} | {'p50 ms':>7} | {'p95 ms':>7} | {'calls':>6}")
    print(f"{'-' * 14}-+-{'-' * 16}-+-{'-' * 7}-+-{'-' * 7}-+-{'-' * 6}")
    for row in rows:
        print(
            f"{row['threads']:>14} | {row['calls_per_second']:>16,.0f} | {row['p50_ms']:>7.1f} | {row['p95_ms']:>7.1f} | {row['calls']:>6}"
        )

    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    result = {
        "benchmark": "emulator_throughput",
        "mode": mode,
        "jobs": args.jobs,
        "job_states": states,
        "create_calls_per_second": create_rate,
        "describe": rows,
        "server_operations": stats["operations"],
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
    }
    path = RESULTS / f"emulator_throughput-{stamp}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
