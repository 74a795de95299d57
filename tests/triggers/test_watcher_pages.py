"""The shared List loop against the offline SageMaker when pages come back empty or partial.

SageMaker cuts a ListTrainingJobs page before it filters it by StatusEquals, so a pass over a busy
account meets pages holding fewer than MaxResults InProgress jobs, or none, with a NextToken: here the
jobs waiting for capacity are older than hundreds of finished jobs of the same creation window. The
loop must follow NextToken to the end, and find every waiting job without a Describe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from aiobotocore.session import get_session

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import build_request
from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger
from airflow_provider_sm_prefs.triggers.watcher import PAGE_SIZE, JobListWatcher, listed_change
from offline_sagemaker.jobs import training_config

G6, G5, CPU = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.m5.xlarge"
PREFS = [{"instance_type": G6, "instance_count": 2}, {"instance_type": G5, "instance_count": 4}]
FILLERS = 250  # finished jobs created after each waiting job
WAITING = ["wait-0", "wait-1"]
G5_FREE_AT = 5000  # emulated seconds after the start
PASSES = 2  # List passes the triggers sit through before capacity frees
#: Real seconds a wait may take on a loaded host before the test gives up; never a measure.
DEADLINE = 120.0


async def wait_until(ready: Callable[[], bool], what: str) -> None:
    give_up = asyncio.get_running_loop().time() + DEADLINE
    while not ready():
        assert asyncio.get_running_loop().time() < give_up, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def busy_account(sm: Any) -> dict[str, datetime]:
    """wait-0, 250 finished jobs, wait-1, 250 finished jobs; the waiting jobs' CreationTime by name.

    The List loop's window runs from wait-0 to wait-1 (the finished jobs created after wait-1 are
    outside it). Listed newest first, 100 a page: [wait-1, 99 finished], [100 finished],
    [51 finished, wait-0]. With StatusEquals=InProgress the pages hold 1, 0 and 1 jobs. (A window open
    to the present, as the premise below lists, starts with 2 pages of finished jobs only.)
    """
    sm.load_scenario(
        {
            "time_scale": 0,
            "job_runtime_seconds": 60,
            "phase_seconds": {"starting": 10, "downloading": 10, "uploading": 10, "stopping": 10},
            "capacity": {
                G6: [{"from": 0, "free": 0}],
                G5: [{"from": 0, "to": G5_FREE_AT, "free": 0}, {"from": G5_FREE_AT, "free": 8}],
            },
        }
    )
    client = sm.boto3_client("sagemaker")
    created: dict[str, datetime] = {}
    for batch, name in enumerate(WAITING):
        request, _ = build_request("training", training_config(name), PREFS, 86400)
        client.create_training_job(**request)
        created[name] = client.describe_training_job(TrainingJobName=name)["CreationTime"]
        sm.advance(1)
        for i in range(FILLERS):
            filler = training_config(f"done-{batch}-{i:03d}", InstanceType=CPU, InstanceCount=1)
            client.create_training_job(**filler)
            sm.advance(1)
    sm.advance(600)  # the fillers complete; the waiting jobs stay Pending
    jobs = {j["name"]: j for j in sm.jobs()}
    assert {n: jobs[n]["secondary_status"] for n in WAITING} == dict.fromkeys(WAITING, "Pending")
    assert {j["status"] for n, j in jobs.items() if n not in WAITING} == {"Completed"}
    # The premise: the newest page holds no InProgress job, yet more pages follow.
    first = client.list_training_jobs(
        StatusEquals="InProgress",
        SortBy="CreationTime",
        SortOrder="Descending",
        MaxResults=PAGE_SIZE,
        CreationTimeAfter=created["wait-0"] - timedelta(minutes=5),
    )
    assert first["TrainingJobSummaries"] == [] and first["NextToken"]
    return created


def test_a_pass_follows_next_token_past_empty_and_partial_pages(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = busy_account(sm)
    passes: list[tuple[set[str], int]] = []
    original = JobListWatcher.list_all

    async def recording(self: JobListWatcher, client: Any) -> tuple[dict[str, dict[str, Any]], int]:
        summaries, pages = await original(self, client)
        passes.append((set(summaries), pages))
        return summaries, pages

    monkeypatch.setattr(JobListWatcher, "list_all", recording)

    async def opener() -> Any:
        return get_session().create_client(
            "sagemaker",
            region_name=sm.region,
            endpoint_url=sm.endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    async def main() -> list[Any]:
        watcher = JobListWatcher(("test-pages", "training"), opener, JobKind.TRAINING)
        capacity = listed_change(JobKind.TRAINING, "capacity")

        async def observe(name: str) -> Any:
            # Wait for a pass that listed the job: a loaded machine may need more than one 1.5 s wait.
            deadline = asyncio.get_running_loop().time() + DEADLINE
            while True:
                observation = await watcher.wait_for_change(name, created[name], capacity, 0.2, 1.5)
                if observation.summary is not None or asyncio.get_running_loop().time() > deadline:
                    return observation

        return await asyncio.gather(*(observe(name) for name in WAITING))

    observations = asyncio.run(main())
    # Neither waiting job was taken for ended (that would wake it, with no summary): both were listed.
    assert [o.changed for o in observations] == [False, False]
    assert [o.summary["TrainingJobName"] for o in observations] == WAITING
    assert [o.summary["SecondaryStatus"] for o in observations] == ["Pending", "Pending"]
    assert passes and all(p == (set(WAITING), 3) for p in passes), passes


def test_triggers_wait_in_the_listing_across_empty_pages_and_describe_once(sm: Any) -> None:
    created = busy_account(sm)
    before = dict(sm.stats()["operations"])

    def listed() -> int:
        return int(sm.stats()["operations"].get("ListTrainingJobs", 0) - before.get("ListTrainingJobs", 0))

    async def main() -> list[dict[str, Any]]:
        triggers = [
            SageMakerCapacityTrigger(
                job_name=name,
                preferences=PREFS,
                poll_interval=0.2,
                creation_time=created[name].isoformat(),
            )
            for name in WAITING
        ]

        async def first_event(t: SageMakerCapacityTrigger) -> dict[str, Any]:
            async for event in t.run():
                return dict(event.payload)
            raise AssertionError("no event")

        waits = [asyncio.ensure_future(first_event(t)) for t in triggers]
        # Several passes over the three pages, however slow the host: the clock stands still, so the
        # jobs are still Pending, and nothing may wake their triggers.
        await wait_until(lambda: listed() >= 3 * PASSES, what=f"{PASSES} List passes")
        assert not any(w.done() for w in waits)
        await asyncio.to_thread(sm.advance, G5_FREE_AT)  # g5 frees: both jobs leave Pending
        return list(await asyncio.wait_for(asyncio.gather(*waits), DEADLINE))

    events = asyncio.run(main())
    assert [e["status"] for e in events] == ["success", "success"]
    assert {e["outcome"]["selected_instance_type"] for e in events} == {G5}
    ops = sm.stats()["operations"]
    # One Describe per job, after its change: never one for a job the listing failed to show.
    assert ops["DescribeTrainingJob"] - before["DescribeTrainingJob"] == len(WAITING), ops
    assert ops["ListTrainingJobs"] - before.get("ListTrainingJobs", 0) >= 3 * PASSES
