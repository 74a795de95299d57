"""The measured process: N triggers in one asyncio event loop, run the way Airflow's triggerer runs them.

    python -m benchmarks.trigger_process SPEC.json

Airflow's own ``TriggerRunner`` needs its supervisor process, the metadata database and the comms
channel, so this process reproduces what ``TriggerRunner.run_trigger`` does for each trigger instead:
rebuild the trigger from its serialized kwargs, open the greenback portal, iterate ``trigger.run()`` in
its own task until the generator ends, then ``cleanup()``. Alongside run a sampler of event-loop lag
(the triggerer's ``block_watchdog`` idea, every 50 ms) and a once-a-second sampler of CPU time, RSS,
threads and open file descriptors.

Protocol with the harness, one line each: the process imports everything and prints ``READY``; the
harness sends ``GO`` and the triggers start; the process ends when every trigger has finished, on
``STOP``, or at the spec's hard limit, writes its measurements to the spec's ``output`` path and prints
``DONE``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil

LAG_INTERVAL = 0.05
#: Garbage collections at least this long (seconds) are recorded with the run.
GC_REPORT_SECONDS = 0.02
SAMPLE_INTERVAL = 1.0
_SELF = psutil.Process()


def _rss_bytes() -> int:
    return int(_SELF.memory_info().rss)


def _open_fds() -> int:
    try:
        return int(_SELF.num_fds())
    except psutil.Error:
        return -1


def _rusage() -> dict[str, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": usage.ru_utime + usage.ru_stime, "maxrss_bytes": usage.ru_maxrss * 1024}


class _Control:
    """Reads GO/STOP lines from stdin in a thread and hands them to the event loop."""

    def __init__(self) -> None:
        self.go = threading.Event()
        #: ``GO <file>``: a JSON map job name -> CreationTime (ISO) of the jobs just created.
        self.go_argument: str | None = None
        self.stop_requested = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        threading.Thread(target=self._read, name="bench-control", daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            word, _, argument = line.strip().partition(" ")
            word = word.upper()
            if word == "GO":
                self.go_argument = argument or None
                self.go.set()
            elif word == "STOP":
                self.stop_requested.set()
                self._wake()
        self.stop_requested.set()  # the harness went away
        self.go.set()
        self._wake()

    def bind(self, loop: asyncio.AbstractEventLoop, stop_event: asyncio.Event) -> None:
        self._loop, self._stop_event = loop, stop_event
        if self.stop_requested.is_set():
            self._wake()

    def _wake(self) -> None:
        if self._loop is not None and self._stop_event is not None:
            with suppress(RuntimeError):  # the loop has already closed
                self._loop.call_soon_threadsafe(self._stop_event.set)


#: One logged call: start, end, operation, job name, error code, service, whether it carried a NextToken.
CallEntry = tuple[float, float, str, str | None, str | None, str, bool]


def _record_calls(log: list[CallEntry]) -> None:
    """Log every AWS call the process makes (start, end, operation, job name, error code, service
    (``sagemaker``, ``sqs``, ...), and whether it carried a ``NextToken``: a List page after the first).

    Wraps ``AioBaseClient._make_api_call``, which every aiobotocore client class inherits, so the
    triggers are observed without being changed. These are logical calls: retries inside botocore
    are one entry here and several requests at the emulator.
    """
    from aiobotocore.client import AioBaseClient

    original = AioBaseClient._make_api_call

    async def recorded(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        start = time.monotonic()
        params = api_params if isinstance(api_params, dict) else {}
        name = params.get("TrainingJobName") or params.get("ProcessingJobName")
        service = str(getattr(getattr(self.meta, "service_model", None), "service_name", "?"))
        paged = bool(params.get("NextToken"))
        try:
            response = await original(self, operation_name, api_params)
        except Exception as err:
            code = getattr(err, "response", {}).get("Error", {}).get("Code") or type(err).__name__
            log.append((start, time.monotonic(), operation_name, name, str(code), service, paged))
            raise
        log.append((start, time.monotonic(), operation_name, name, None, service, paged))
        return response

    AioBaseClient._make_api_call = recorded  # type: ignore[method-assign]


async def _run_trigger(trigger_id: int, trigger: Any, record: dict[str, Any]) -> None:
    """What ``TriggerRunner.run_trigger`` does, minus the database and the span."""
    if os.environ.get("AIRFLOW_DISABLE_GREENBACK_PORTAL", "").lower() != "true":
        try:
            import greenback
        except ImportError:  # pragma: no cover - greenback ships with Airflow 3
            pass
        else:
            await greenback.ensure_portal()
    trigger.trigger_id = trigger_id
    trigger.task_instance = None
    try:
        async for event in trigger.run():
            now = time.monotonic()
            record["events"] += 1
            if record["event_t"] is None:
                payload = dict(event.payload) if isinstance(event.payload, dict) else {"value": event.payload}
                record["event_t"] = now
                record["status"] = str(payload.get("status"))
                record["error_type"] = payload.get("error_type")
                record["reason"] = payload.get("reason") or payload.get("message")
    except asyncio.CancelledError:
        record["cancelled"] = True
        raise
    except Exception as err:
        record["exception"] = f"{type(err).__name__}: {err}"[:500]
    finally:
        record["finished_t"] = time.monotonic()
        with suppress(Exception):
            await trigger.cleanup()


class _Collections:
    """Python's garbage collections that took longer than :data:`GC_REPORT_SECONDS` (a cause of lag)."""

    def __init__(self) -> None:
        self.slow: list[tuple[float, int, float, int]] = []  # (monotonic end, generation, seconds, collected)
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        now = time.monotonic()
        if phase == "start":
            self._started = now
        elif now - self._started >= GC_REPORT_SECONDS:
            self.slow.append(
                (now, int(info.get("generation", -1)), now - self._started, int(info.get("collected", 0)))
            )


async def _lag_sampler(lags: list[tuple[float, float]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        before = time.monotonic()
        await asyncio.sleep(LAG_INTERVAL)
        after = time.monotonic()
        lags.append((after, max(0.0, after - before - LAG_INTERVAL)))


async def _resource_sampler(samples: list[tuple[float, float, int, int, int]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(
            (time.monotonic(), _rusage()["cpu"], _rss_bytes(), threading.active_count(), _open_fds())
        )
        with suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_INTERVAL)


async def _drive(
    classpath: str, serialized: list[dict[str, Any]], names: Sequence[str], limit: float, control: _Control
) -> dict[str, Any]:
    from benchmarks.variants import load_class

    stop_samplers = asyncio.Event()
    stop_run = asyncio.Event()
    control.bind(asyncio.get_running_loop(), stop_run)
    lags: list[tuple[float, float]] = []
    samples: list[tuple[float, float, int, int, int]] = []
    collections = _Collections()
    gc.callbacks.append(collections)
    go = time.monotonic()
    usage_go = _rusage()
    rss_go = _rss_bytes()
    samplers = [
        asyncio.create_task(_lag_sampler(lags, stop_samplers)),
        asyncio.create_task(_resource_sampler(samples, stop_samplers)),
    ]
    cls = load_class(classpath)
    records: dict[str, dict[str, Any]] = {}
    tasks: list[asyncio.Task[None]] = []
    shared_poll: Any = None
    for trigger_id, (name, kwargs) in enumerate(zip(names, serialized, strict=True), start=1):
        # As TriggerRunner.create_triggers (Airflow 3.3) does: yield to the loop before each trigger
        # is built, so the triggers already created start while the next ones are being created.
        await asyncio.sleep(0)
        trigger = cls(**kwargs)
        shared_poll = getattr(trigger, "shared_poll", None)
        record: dict[str, Any] = {
            "event_t": None,
            "status": None,
            "error_type": None,
            "reason": None,
            "exception": None,
            "cancelled": False,
            "events": 0,
            "finished_t": None,
        }
        records[name] = record
        tasks.append(asyncio.create_task(_run_trigger(trigger_id, trigger, record), name=f"trigger-{name}"))
    all_done = asyncio.ensure_future(asyncio.wait(tasks))
    stopper = asyncio.ensure_future(stop_run.wait())
    await asyncio.wait({all_done, stopper}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
    if all(task.done() for task in tasks):
        ended_by = "all-finished"
    elif stop_run.is_set():
        ended_by = "stop"
    else:
        ended_by = "limit"
    end = time.monotonic()
    usage_end = _rusage()
    for task in tasks:
        task.cancel()
    with suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
    stopper.cancel()
    all_done.cancel()
    stop_samplers.set()
    await asyncio.gather(*samplers, return_exceptions=True)
    return {
        "t_go": go,
        "t_end": end,
        "ended_by": ended_by,
        "shared_poll": shared_poll,
        "cpu_go": usage_go["cpu"],
        "cpu_end": usage_end["cpu"],
        "rss_go_bytes": rss_go,
        "peak_rss_go_bytes": usage_go["maxrss_bytes"],
        "peak_rss_bytes": usage_end["maxrss_bytes"],
        "lags": [[round(t, 4), round(lag, 5)] for t, lag in lags],
        "slow_collections": [[round(t, 4), g, round(d, 4), n] for t, g, d, n in collections.slow],
        "samples": [[round(t, 3), round(cpu, 4), rss, threads, fds] for t, cpu, rss, threads, fds in samples],
        "jobs": records,
    }


def _source_digest() -> dict[str, str]:
    """sha256 (12 hex) of the provider's trigger and hook sources, so a result names the code it measured."""
    import hashlib

    root = Path(__file__).resolve().parent.parent / "airflow_provider_sm_prefs"
    files = sorted((root / "triggers").glob("*.py")) + [root / "hooks" / "sagemaker.py"]
    return {
        str(path.relative_to(root.parent)): hashlib.sha256(path.read_bytes()).hexdigest()[:12]
        for path in files
        if path.exists()
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; ``argv`` is ``[SPEC.json]``. Returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m benchmarks.trigger_process SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    # Airflow's logging writes to stdout; keep stdout for the protocol and send everything else to
    # stderr (the run's log file).
    protocol = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    control = _Control()
    started = time.monotonic()

    from benchmarks.variants import VARIANTS, accepts

    variant = VARIANTS[spec["variant"]]
    names: list[str] = list(spec["jobs"])
    calls: list[CallEntry] = []
    _record_calls(calls)
    # What the scheduler stores when each task defers; built before GO, like the deferrals themselves.
    serialized = [
        variant.serialized(name, spec["preferences"], float(spec["poll_interval"])) for name in names
    ]
    ready = time.monotonic()
    print("READY", file=protocol, flush=True)
    control.go.wait()
    if control.stop_requested.is_set():
        return 1
    if control.go_argument and accepts(variant.classpath, "creation_time"):
        # What the operator's look right before deferring puts into the trigger's kwargs.
        created = json.loads(Path(control.go_argument).read_text(encoding="utf-8"))
        for name, kwargs in zip(names, serialized, strict=True):
            kwargs["creation_time"] = created.get(name)
    profiler = None
    if spec.get("profile"):
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    result = asyncio.run(_drive(variant.classpath, serialized, names, float(spec["limit_seconds"]), control))
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        profiler.dump_stats(spec["profile"])
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(60)
        Path(spec["profile"]).with_suffix(".txt").write_text(text.getvalue(), encoding="utf-8")
    result.update(
        {
            "variant": variant.key,
            "classpath": variant.classpath,
            "kwargs_example": serialized[0] if serialized else None,
            "import_seconds": ready - started,
            "source_digest": _source_digest(),
            "calls": [
                [round(a, 4), round(b, 4), op, name, code, service, paged]
                for a, b, op, name, code, service, paged in calls
            ],
            "event_queue_url": os.environ.get("AIRFLOW__SM_PREFS__EVENT_QUEUE_URL"),
            "pid": os.getpid(),
        }
    )
    Path(spec["output"]).write_text(json.dumps(result), encoding="utf-8")
    print("DONE", file=protocol, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
