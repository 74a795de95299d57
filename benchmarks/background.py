"""Other people's jobs in the benchmark account: a history of ended jobs and a stream of new short ones.

SageMaker cuts each ``ListTrainingJobs`` page from every job created in the requested window, whatever its
status, and filters by ``StatusEquals`` afterwards, so a shared List loop pays one call per 100 jobs
created since its oldest waiter's job (less 5 minutes) — the waiters' own and everybody else's. An
account where only the benchmark's jobs exist hides that second part. Two kinds of background job:

* **history**: ``history_jobs`` jobs created right after the scenario is loaded, before ours; the
  emulated clock then jumps :data:`HISTORY_AGE_SECONDS` forward, so by the time ours are created they
  have all ended (Completed, ~10 % Failed) and were created long before the List window opens;
* **churn**: a Poisson stream of ``churn_rate`` jobs per emulated hour, created by a harness thread
  from the moment ours exist until the run ends, each running a few emulated minutes (~10 % fail).
  Their CreationTime falls inside the List window, which is the point.

Background jobs run on :data:`BACKGROUND_TYPE`, which the benchmark scenario leaves unlimited, so they
start at once and never take the scarce type from ours. The harness creates them over plain keep-alive
HTTP (about three times as fast as boto3 here), signed with :data:`HARNESS_KEY`, so the emulator's
per-access-key counts keep them apart from the trigger process's calls.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from benchmarks.workload import CONFIG, HARNESS_KEY, Workload

#: A CPU type the benchmark scenario does not list: unlimited capacity, so background jobs never wait.
BACKGROUND_TYPE = "ml.m5.xlarge"
#: Share of background jobs that fail at the end of their run (tag ``emulator:outcome=Failed``).
FAILED_SHARE = 0.1
#: Run time (emulated seconds, tag ``emulator:runtime-seconds``) of history jobs ...
HISTORY_RUNTIME = (60, 1800)
#: ... and of churn jobs: a few emulated minutes.
CHURN_RUNTIME = (120, 600)
#: The emulated clock jumps this far after the history is created: every history job has ended
#: (starting phase + at most 30 min of run time) and was created an hour before ours.
HISTORY_AGE_SECONDS = 3600.0
#: Real seconds between two looks of the churn thread at the emulated clock.
CHURN_TICK = 0.25
_TARGET = "SageMaker.CreateTrainingJob"


def background_request(name: str, runtime_seconds: int, failed: bool) -> dict[str, Any]:
    """CreateTrainingJob request of one background job: one instance of :data:`BACKGROUND_TYPE`."""
    tags = [{"Key": "emulator:runtime-seconds", "Value": str(runtime_seconds)}]
    if failed:
        tags.append({"Key": "emulator:outcome", "Value": "Failed"})
    return {
        **CONFIG,
        "TrainingJobName": name,
        "ResourceConfig": {"InstanceType": BACKGROUND_TYPE, "InstanceCount": 1, "VolumeSizeInGB": 50},
        "Tags": tags,
    }


def _draw(rng: random.Random, runtime: tuple[int, int]) -> tuple[int, bool]:
    return rng.randint(*runtime), rng.random() < FAILED_SHARE


def history_requests(workload: Workload) -> list[dict[str, Any]]:
    """The history's CreateTrainingJob requests (the same for every variant at a size)."""
    rng = random.Random(f"{workload.seed}-history")
    return [
        background_request(f"{workload.name}-hist-{k:05d}", *_draw(rng, HISTORY_RUNTIME))
        for k in range(workload.history_jobs)
    ]


class JobCreator:
    """CreateTrainingJob over plain HTTP, one keep-alive connection per thread, signed with
    :data:`HARNESS_KEY` (the emulator reads only the access key id of the ``Authorization`` header).

    :param endpoint_url: the emulator's ``http://host:port``.
    :param region: the scenario's region (only named in the credential scope).
    """

    def __init__(self, endpoint_url: str, region: str = "us-east-1") -> None:
        parts = urlsplit(endpoint_url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._auth = (
            f"AWS4-HMAC-SHA256 Credential={HARNESS_KEY}/20260101/{region}/sagemaker/aws4_request, "
            "SignedHeaders=host;x-amz-target, Signature=0"
        )
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = http.client.HTTPConnection(
                self._host, self._port, timeout=30
            )
        return connection

    def create_one(self, request: dict[str, Any]) -> None:
        """Create one job; raises RuntimeError if the emulator refuses it."""
        body = json.dumps(request).encode()
        headers = {
            "X-Amz-Target": _TARGET,
            "Content-Type": "application/x-amz-json-1.1",
            "Authorization": self._auth,
        }
        for attempt in (1, 2):
            connection = self._connection()
            try:
                connection.request("POST", "/", body, headers)
                response = connection.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException):
                connection.close()
                self._local.connection = None
                if attempt == 2:
                    raise
                continue
            if response.status != 200:
                raise RuntimeError(
                    f"CreateTrainingJob {request['TrainingJobName']}: {response.status} {data[:300]!r}"
                )
            return

    def create(self, requests: Sequence[dict[str, Any]], threads: int = 4) -> int:
        """Create every job (``threads`` connections at once); returns how many."""
        if len(requests) <= 1 or threads <= 1:
            for request in requests:
                self.create_one(request)
            return len(requests)
        with ThreadPoolExecutor(max_workers=threads) as pool:
            return sum(1 for _ in pool.map(self.create_one, requests))


def create_history(workload: Workload, creator: JobCreator) -> int:
    """Create the history jobs (none when ``history_jobs`` is 0); returns how many."""
    return creator.create(history_requests(workload)) if workload.history_jobs else 0


class ChurnStream:
    """Creates ``churn_rate`` short jobs per emulated hour (Poisson arrivals, seeded) from a thread.

    Arrivals are due at emulated times; each look creates every job due by the emulated clock.
    :meth:`catch_up_through` lets the harness make a jump of the clock in steps, creating each job due
    in the skipped stretch at its due time.

    :param workload: the run's workload (name, seed, ``churn_rate``).
    :param creator: how jobs are created.
    :param clock: returns the emulated now (``emulator.now``).
    """

    def __init__(self, workload: Workload, creator: JobCreator, clock: Any) -> None:
        self._prefix = f"{workload.name}-churn"
        self._rate = workload.churn_rate / 3600.0
        self._rng = random.Random(f"{workload.seed}-churn")
        self._creator = creator
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_due: float | None = None
        self.created = 0
        self.failed_tagged = 0
        self.error: str | None = None
        self.started_at: float | None = None

    @property
    def enabled(self) -> bool:
        return self._rate > 0

    def start(self) -> None:
        """Start the stream now (emulated clock); no-op for a rate of 0."""
        if not self.enabled:
            return
        self.started_at = float(self._clock())
        self._next_due = self.started_at + self._rng.expovariate(self._rate)
        self._thread = threading.Thread(target=self._run, name="bench-churn", daemon=True)
        self._thread.start()

    def catch_up(self, until: float, threads: int = 4) -> int:
        """Create every job due at or before emulated second ``until``; returns how many."""
        if not self.enabled or self._next_due is None:
            return 0
        with self._lock:
            requests: list[dict[str, Any]] = []
            while self._next_due <= until:
                runtime, failed = _draw(self._rng, CHURN_RUNTIME)
                requests.append(
                    background_request(f"{self._prefix}-{self.created + len(requests):05d}", runtime, failed)
                )
                self.failed_tagged += failed
                self._next_due += self._rng.expovariate(self._rate)
            if requests:
                self._creator.create(requests, threads=threads if len(requests) > 8 else 1)
                self.created += len(requests)
            return len(requests)

    def catch_up_through(self, until: float, advance: Any) -> int:
        """Create the jobs due up to emulated second ``until`` at their due times, moving the clock there.

        For a jump of the emulated clock: each job is created after ``advance(seconds)`` brought the
        clock to its due time, so its CreationTime is where a steady stream would have put it, not
        bunched at the jump's start (which would crowd them into the List window of jobs created just
        before). Returns how many were created.
        """
        if not self.enabled or self._next_due is None:
            return 0
        created = 0
        with self._lock:
            while self._next_due <= until:
                ahead = self._next_due - float(self._clock())
                if ahead > 0:
                    advance(ahead)
                runtime, failed = _draw(self._rng, CHURN_RUNTIME)
                name = f"{self._prefix}-{self.created:05d}"
                self._creator.create([background_request(name, runtime, failed)], threads=1)
                self.failed_tagged += failed
                self.created += 1
                created += 1
                self._next_due += self._rng.expovariate(self._rate)
        return created

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.catch_up(float(self._clock()))
            except Exception as err:  # recorded with the run; the measurement goes on without churn
                self.error = f"{type(err).__name__}: {err}"[:300]
                return
            self._stop.wait(CHURN_TICK)

    def stop(self) -> None:
        """Stop creating jobs (waits for the thread)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def record(self) -> dict[str, Any]:
        """What the stream did, for the run's JSON."""
        return {
            "rate_per_emulated_hour": self._rate * 3600.0,
            "jobs_created": self.created,
            "jobs_tagged_to_fail": self.failed_tagged,
            "error": self.error,
        }


def count_by_status(jobs: Iterable[Mapping[str, Any]], prefix: str) -> dict[str, int]:
    """Statuses of the jobs whose name starts with ``prefix`` (the emulator's admin view)."""
    counts: dict[str, int] = {}
    for job in jobs:
        if str(job.get("name", "")).startswith(prefix):
            status = str(job.get("status"))
            counts[status] = counts.get(status, 0) + 1
    return counts
