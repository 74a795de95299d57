"""CloudWatch Logs of the offline SageMaker's jobs, read over real HTTP with boto3 (frozen clock).

World of the frozen scenario: Create at 1_800_000_000; selection (TrainingStartTime) at +60; the
container runs from +120 (after Downloading) for 600 s; the default 6 training lines are 100 s apart.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError
from emulator_support import frozen

from offline_sagemaker import OfflineSageMaker, ScenarioError, load_scenario

START = 1_800_000_000
TRAINING, PROCESSING = "/aws/sagemaker/TrainingJobs", "/aws/sagemaker/ProcessingJobs"
G5 = "ml.g5.48xlarge"


@pytest.fixture
def logs(world: OfflineSageMaker) -> Any:
    return world.boto3_client("logs")


def all_events(logs: Any, group: str, prefix: str, **kwargs: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    token = None
    while True:
        page = logs.filter_log_events(
            logGroupName=group,
            logStreamNamePrefix=prefix,
            **kwargs,
            **({"nextToken": token} if token else {}),
        )
        events += page["events"]
        token = page.get("nextToken")
        if not token:
            return events


def test_the_log_group_appears_when_the_first_instance_starts(
    world: OfflineSageMaker, client: Any, logs: Any, make_training: Any
) -> None:
    client.create_training_job(**make_training("two", [{"InstanceType": G5, "InstanceCount": 2}]))
    with pytest.raises(ClientError) as err:
        logs.describe_log_streams(logGroupName=TRAINING)
    assert err.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert logs.describe_log_groups(logGroupNamePrefix="/aws/sagemaker/")["logGroups"] == []
    world.advance(60)  # selected: one stream per instance from TrainingStartTime on
    groups = logs.describe_log_groups(logGroupNamePrefix="/aws/sagemaker/")["logGroups"]
    assert [g["logGroupName"] for g in groups] == [TRAINING]
    streams = logs.describe_log_streams(logGroupName=TRAINING, logStreamNamePrefix="two/")["logStreams"]
    assert [s["logStreamName"] for s in streams] == [f"two/algo-1-{START + 60}", f"two/algo-2-{START + 60}"]
    assert streams[0]["creationTime"] == (START + 60) * 1000


def test_lines_appear_as_the_emulated_clock_runs_interleaved_across_instances(
    world: OfflineSageMaker, client: Any, logs: Any, make_training: Any
) -> None:
    client.create_training_job(**make_training("two", [{"InstanceType": G5, "InstanceCount": 2}]))
    world.advance(60 + 60 + 150)  # 150 s into the run: the lines at +0 and +100 s are written
    midway = all_events(logs, TRAINING, "two/")
    assert [e["message"] for e in midway] == [
        f"Container started on {G5} (algo-1 of 2 instances)",
        f"Container started on {G5} (algo-2 of 2 instances)",
        "Reading training data from /opt/ml/input/data",
        "Reading training data from /opt/ml/input/data",
    ]
    assert [e["timestamp"] for e in midway] == [
        (START + 120) * 1000,
        (START + 120) * 1000 + 1,
        (START + 220) * 1000,
        (START + 220) * 1000 + 1,
    ]
    world.advance(1000)
    done = all_events(logs, TRAINING, "two/")
    assert len(done) == 12 and done[-1]["message"] == "Saving the model to /opt/ml/model"
    describe = client.describe_training_job(TrainingJobName="two")
    assert describe["TrainingStartTime"].timestamp() * 1000 <= done[0]["timestamp"]
    assert done[-1]["timestamp"] <= describe["TrainingEndTime"].timestamp() * 1000


def test_get_log_events_pages_both_ways_and_repeats_the_token_at_either_end(
    world: OfflineSageMaker, client: Any, logs: Any, make_training: Any
) -> None:
    client.create_training_job(**make_training("one", [{"InstanceType": G5, "InstanceCount": 1}]))
    world.advance(2000)
    stream = f"one/algo-1-{START + 60}"
    forward, token = [], None
    while True:
        page = logs.get_log_events(
            logGroupName=TRAINING,
            logStreamName=stream,
            startFromHead=True,
            limit=4,
            **({"nextToken": token} if token else {}),
        )
        forward += [e["message"] for e in page["events"]]
        if page["nextForwardToken"] == token:
            break
        token = page["nextForwardToken"]
    assert len(forward) == 6 and forward[0].startswith("Container started")
    tail = logs.get_log_events(logGroupName=TRAINING, logStreamName=stream, limit=2)
    assert [e["message"] for e in tail["events"]] == forward[-2:]
    before = logs.get_log_events(
        logGroupName=TRAINING, logStreamName=stream, limit=10, nextToken=tail["nextBackwardToken"]
    )
    assert [e["message"] for e in before["events"]] == forward[:-2]
    with pytest.raises(ClientError) as err:
        logs.get_log_events(logGroupName=TRAINING, logStreamName="one/algo-9-1")
    assert err.value.response["Error"]["Message"] == "The specified log stream does not exist."


def test_filter_log_events_pages_and_filters(
    world: OfflineSageMaker, client: Any, logs: Any, make_training: Any
) -> None:
    client.create_training_job(**make_training("two", [{"InstanceType": G5, "InstanceCount": 2}]))
    world.advance(2000)
    first = logs.filter_log_events(logGroupName=TRAINING, logStreamNamePrefix="two/", limit=5)
    assert len(first["events"]) == 5 and first["nextToken"]
    assert len(all_events(logs, TRAINING, "two/")) == 12
    epochs = all_events(logs, TRAINING, "two/", filterPattern='"Epoch 2/3"')
    assert [e["logStreamName"].split("/")[1][:6] for e in epochs] == ["algo-1", "algo-2"]


def test_a_failed_job_ends_its_first_stream_with_the_failure(
    world: OfflineSageMaker, client: Any, logs: Any, make_training: Any
) -> None:
    request = make_training(
        "crash", [{"InstanceType": G5, "InstanceCount": 2}], tags={"emulator:outcome": "Failed"}
    )
    client.create_training_job(**request)
    world.advance(2000)
    reason = client.describe_training_job(TrainingJobName="crash")["FailureReason"]
    first = logs.get_log_events(logGroupName=TRAINING, logStreamName=f"crash/algo-1-{START + 60}", limit=3)
    assert [e["message"] for e in first["events"]] == [
        '  File "/opt/ml/code/entrypoint.py", line 42, in <module>',
        "RuntimeError: emulated failure in crash on algo-1",
        reason,
    ]
    second = logs.get_log_events(logGroupName=TRAINING, logStreamName=f"crash/algo-2-{START + 60}")
    assert "RuntimeError" not in " ".join(e["message"] for e in second["events"])


def test_processing_jobs_log_to_their_group_and_a_plain_job_defaults_to_one_instance(
    world: OfflineSageMaker, logs: Any, make_processing: Any
) -> None:
    sagemaker = world.boto3_client("sagemaker")
    sagemaker.create_processing_job(**make_processing("prep", instance_type="ml.m5.4xlarge"))
    world.advance(2000)
    assert world.job("prep")["selected_instance_count"] == 1
    streams = logs.describe_log_streams(logGroupName=PROCESSING, logStreamNamePrefix="prep/")["logStreams"]
    assert [s["logStreamName"] for s in streams] == [f"prep/algo-1-{START + 60}"]
    assert (
        all_events(logs, PROCESSING, "prep/")[-1]["message"] == "Writing outputs to /opt/ml/processing/output"
    )


def test_the_scenario_sets_the_lines_and_logs_access_can_be_denied(
    load_frozen: Any, client: Any, make_training: Any
) -> None:
    world = load_frozen(
        job_logs={"training": ["step on {host} of {job_name}"]}, access_denied=["GetLogEvents"]
    )
    logs = world.boto3_client("logs")
    client.create_training_job(**make_training("custom", [{"InstanceType": G5, "InstanceCount": 1}]))
    world.advance(2000)
    assert [e["message"] for e in all_events(logs, TRAINING, "custom/")] == ["step on algo-1 of custom"]
    with pytest.raises(ClientError) as err:
        logs.get_log_events(logGroupName=TRAINING, logStreamName=f"custom/algo-1-{START + 60}")
    assert err.value.response["Error"]["Code"] == "AccessDeniedException"
    assert "logs:GetLogEvents" in err.value.response["Error"]["Message"]
    # A policy is not about one group: a group the caller created is denied too.
    logs.create_log_group(logGroupName="/my-team/denied")
    logs.create_log_stream(logGroupName="/my-team/denied", logStreamName="s")
    with pytest.raises(ClientError) as err:
        logs.get_log_events(logGroupName="/my-team/denied", logStreamName="s")
    assert err.value.response["Error"]["Code"] == "AccessDeniedException"


def test_scenario_log_lines_are_validated() -> None:
    with pytest.raises(ScenarioError, match=r"job_logs.training\[0\]: unknown placeholder \{secret\}"):
        load_scenario(frozen(job_logs={"training": ["{secret}"]}))
    with pytest.raises(ScenarioError, match="job_logs.train: unknown key"):
        load_scenario(frozen(job_logs={"train": ["x"]}))


@pytest.mark.parametrize(("setting", "expected"), [("omitted", None), ("selected", 4)])
def test_describe_instance_count_with_per_entry_counts_is_a_scenario_switch(
    load_frozen: Any, client: Any, make_training: Any, setting: str, expected: int | None
) -> None:
    world = load_frozen(describe_instance_count=setting)
    client.create_training_job(**make_training("counted", [{"InstanceType": G5, "InstanceCount": 4}]))
    before = client.describe_training_job(TrainingJobName="counted")["ResourceConfig"]
    assert "InstanceCount" not in before  # nothing selected yet: no count at all
    world.advance(60)
    resource = client.describe_training_job(TrainingJobName="counted")["ResourceConfig"]
    assert resource["SelectedInstanceCount"] == 4
    assert resource.get("InstanceCount") == expected


def test_groups_a_caller_created_are_listed_with_sagemakers_and_read_from_moto(
    world: OfflineSageMaker, client: Any, logs: Any, make_training: Any
) -> None:
    own = f"/my-team/{uuid.uuid4().hex[:8]}"
    logs.create_log_group(logGroupName=own)
    logs.create_log_stream(logGroupName=own, logStreamName="night-1")
    now_ms = int(time.time() * 1000)  # moto checks event times against the host's clock
    logs.put_log_events(
        logGroupName=own,
        logStreamName="night-1",
        logEvents=[{"timestamp": now_ms, "message": "retrain started"}],
    )

    def listed(**kwargs: Any) -> list[str]:
        return [g["logGroupName"] for g in logs.describe_log_groups(**kwargs)["logGroups"]]

    # Before any job started an instance, only the caller's group exists.
    assert TRAINING not in listed() and own in listed()
    client.create_training_job(**make_training("mixed", [{"InstanceType": G5, "InstanceCount": 1}]))
    world.advance(60)
    everything = listed()
    assert everything == sorted(everything) and {TRAINING, own} <= set(everything)  # name order, as AWS
    assert listed(logGroupNamePrefix=own) == [own]
    assert listed(logGroupNamePrefix="/aws/sagemaker/") == [TRAINING]
    pages, token = [], None
    while True:
        page = logs.describe_log_groups(limit=1, **({"nextToken": token} if token else {}))
        pages.append(page["logGroups"])
        token = page.get("nextToken")
        if not token:
            break
    assert [g["logGroupName"] for p in pages for g in p] == everything and all(len(p) == 1 for p in pages)
    # Reads of the caller's group are moto's; SageMaker's stay the emulator's.
    assert [s["logStreamName"] for s in logs.describe_log_streams(logGroupName=own)["logStreams"]] == [
        "night-1"
    ]
    events = logs.get_log_events(logGroupName=own, logStreamName="night-1")["events"]
    assert [e["message"] for e in events] == ["retrain started"]
    assert [e["message"] for e in logs.filter_log_events(logGroupName=own)["events"]] == ["retrain started"]
    assert logs.describe_log_streams(logGroupName=TRAINING)["logStreams"]
    with pytest.raises(ClientError) as err:
        logs.get_log_events(logGroupName="/nobody/created/this", logStreamName="s")
    assert err.value.response["Error"]["Code"] == "ResourceNotFoundException"
