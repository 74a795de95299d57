"""The HyperPod group trigger's own paths against the offline SageMaker: its typed event, its rollback
before a failed wait's event, and its kill path (Airflow 3.3's ``on_kill``, and a cancelled ``run``).

The task's state is what the triggerer's supervisor channel would answer (``get_task_states`` given);
every SageMaker call is real HTTP to the offline SageMaker, which counts the updates.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.exceptions import (
    ClusterFailedError,
    GroupCapacityShortfallError,
    GroupRolledBackError,
)
from airflow_provider_sm_prefs.domain.hyperpod import FlexibleGroup, GroupPhase
from airflow_provider_sm_prefs.domain.hyperpod_event import GroupEvent
from airflow_provider_sm_prefs.domain.hyperpod_rollback import RollbackResult
from airflow_provider_sm_prefs.triggers import kill
from airflow_provider_sm_prefs.triggers.hyperpod import HyperPodGroupTrigger

P5 = "ml.p5.48xlarge"
ROLE = "arn:aws:iam::123456789012:role/SageMakerHyperPodNodeRole"
LIFECYCLE = {"SourceS3Uri": "s3://sm-prefs-demo/hyperpod/lifecycle/", "OnCreate": "on_create.sh"}
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"


def cluster_at(sm: Any, count: int, free: int = 16) -> None:
    """Cluster ``c`` with group ``g`` InService at ``count`` nodes (a scale-up from 2 that took effect)."""
    sm.load_scenario(
        {
            "time_scale": 0,
            "capacity": {P5: [{"from": 0, "free": free}]},
            "clusters": {"node_provisioning_seconds": 60, "node_shutdown_seconds": 30},
        }
    )
    sm.boto3_client("sagemaker").create_cluster(
        ClusterName="c",
        InstanceGroups=[
            {
                "InstanceGroupName": "g",
                "InstanceRequirements": {"InstanceTypes": [P5]},
                "InstanceCount": count,
                "ExecutionRole": ROLE,
                "LifeCycleConfig": LIFECYCLE,
                "TrainingPlanArn": PLAN,
            }
        ],
    )
    sm.advance(300)


def group(sm: Any) -> dict[str, Any]:
    (found,) = sm.boto3_client("sagemaker").describe_cluster(ClusterName="c")["InstanceGroups"]
    return dict(found)


def trigger(target: int = 4, **kwargs: Any) -> HyperPodGroupTrigger:
    made = HyperPodGroupTrigger(
        cluster_name="c",
        group=FlexibleGroup("g", (P5,), target, execution_role=ROLE).as_dict(),
        previous_count=2,
        requested_at=datetime(2027, 1, 1, tzinfo=timezone.utc).isoformat(),
        poll_interval=0.05,
        **kwargs,
    )
    made.task_instance = SimpleNamespace(  # type: ignore[assignment]
        dag_id="nightly", task_id="scale", run_id="scheduled__1", map_index=-1, try_number=1
    )
    return made


@pytest.fixture
def task_state(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The task's state the trigger reads (``{"state": ...}``; ``"slow"`` makes the read take 0.5 s)."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    answer: dict[str, Any] = {"state": None, "slow": False}

    def get_task_states(**criteria: Any) -> dict[str, Any]:
        if answer["slow"]:
            time.sleep(0.5)
        return {"scheduled__1": {"scale": answer["state"]}}

    monkeypatch.setattr(RuntimeTaskInstance, "get_task_states", staticmethod(get_task_states))
    return answer


def updates(sm: Any) -> int:
    return int(sm.stats()["operations"].get("UpdateCluster", 0))


@pytest.mark.parametrize(
    ("state", "rolled_back"),
    [("failed", True), ("success", True), (None, True), ("deferred", False)],
    ids=["marked-failed", "marked-success", "cleared", "moved-to-another-triggerer"],
)
def test_on_kill_rolls_the_scale_up_back_unless_the_task_is_still_deferred(
    sm: Any, task_state: dict[str, Any], state: str | None, rolled_back: bool
) -> None:
    cluster_at(sm, 4)
    task_state["state"] = state
    before = updates(sm)
    asyncio.run(trigger().on_kill())
    assert updates(sm) - before == (1 if rolled_back else 0)
    found = group(sm)
    assert found["TargetCount"] == (2 if rolled_back else 4)
    assert found["TrainingPlanArn"] == PLAN  # only the count changed


def test_a_cancelled_run_leaves_the_scale_up_to_a_task_that_goes_on(
    sm: Any, task_state: dict[str, Any]
) -> None:
    # Before Airflow 3.3 a cancelled run is the only kill path; a task queued for its next try reattaches.
    cluster_at(sm, 4)
    task_state["state"] = "up_for_retry"
    before = updates(sm)

    async def main() -> None:
        running = asyncio.ensure_future(trigger(target=8).run().__anext__())
        await asyncio.sleep(0.3)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await asyncio.gather(*kill.KILLS)

    asyncio.run(main())
    assert updates(sm) == before and group(sm)["TargetCount"] == 4


def test_on_kill_cancelled_again_while_at_work_still_rolls_back(sm: Any, task_state: dict[str, Any]) -> None:
    cluster_at(sm, 4)
    task_state.update(state="failed", slow=True)

    async def main() -> None:
        killing = asyncio.ensure_future(trigger().on_kill())
        await asyncio.sleep(0.1)
        killing.cancel()  # Airflow 3.3 cancels again on each sync of the triggerer's loop
        with pytest.raises(asyncio.CancelledError):
            await killing
        await asyncio.gather(*kill.KILLS)

    asyncio.run(main())
    assert group(sm)["TargetCount"] == 2


def test_on_kill_never_undoes_a_change_made_since_the_scale_up(sm: Any, task_state: dict[str, Any]) -> None:
    cluster_at(sm, 6)  # the task asked for 4; someone made it 6 since
    task_state["state"] = "failed"
    before = updates(sm)
    asyncio.run(trigger(target=4).on_kill())
    assert updates(sm) == before and group(sm)["TargetCount"] == 6


def test_a_look_past_max_pending_short_of_the_target_decides_a_shortfall() -> None:
    now = datetime(2027, 1, 1, 1, tzinfo=timezone.utc)
    waiting = GroupEvent(GroupPhase.WAITING, {"CurrentCount": 2, "TargetCount": 4}, "Updating", 3599.0, now)
    assert trigger(max_pending_seconds=3600).decide(waiting) is None
    ended = trigger(max_pending_seconds=3600).decide(replace(waiting, elapsed=3600.0))
    assert ended is not None and ended.phase is GroupPhase.SHORTFALL and not ended.succeeded
    assert ended.reason == "2 of 4 nodes after 3600 s, past max_pending (3600 s)"
    with_rollback = replace(ended, rollback=RollbackResult.DONE)
    payload = with_rollback.as_payload()
    assert (payload["status"], payload["phase"], payload["rollback"]) == ("error", "shortfall", "done")
    assert GroupEvent.from_payload(payload) == with_rollback
    assert isinstance(ended.error("c", "g"), GroupCapacityShortfallError)


def test_every_payload_reads_back_as_a_typed_event() -> None:
    # What earlier releases sent: the same keys, "shortfall" and the rollback results as strings.
    old = {
        "status": "error",
        "phase": "rolled-back",
        "group": {"Status": "InService", "TargetCount": 2},
        "cluster_status": "InService",
        "elapsed": 12.5,
        "now": "2027-01-01T00:00:00+00:00",
        "reason": "HyperPod rolled the group back",
        "rollback": "not-needed",
    }
    read = GroupEvent.from_payload(old)
    assert (read.phase, read.rollback, read.elapsed) == (
        GroupPhase.ROLLED_BACK,
        RollbackResult.NOT_NEEDED,
        12.5,
    )
    assert isinstance(read.error("c", "g"), GroupRolledBackError)
    assert read.as_payload() == old
    # A resume without an event, or an event that says nothing readable, is a failure, never a success.
    for payload in ({}, None, {"status": "error", "phase": "reached-target"}, {"phase": "from-the-future"}):
        event = GroupEvent.from_payload(payload)
        assert not event.succeeded and isinstance(event.error("c", "g"), ClusterFailedError), payload
