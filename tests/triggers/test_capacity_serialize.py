"""The trigger's serialized kwargs rebuild an identical trigger (no argument dropped on deferral)."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from airflow_provider_sm_prefs.triggers.capacity import (
    RENAMED_KWARGS,
    CapacityWaitSpec,
    SageMakerCapacityTrigger,
)
from airflow_provider_sm_prefs.triggers.spec import AWS_FIELDS


def accepted_arguments() -> set[str]:
    """What the trigger accepts: its spec's fields, the connection settings flat, and the earlier names."""
    return ({f.name for f in fields(CapacityWaitSpec)} - {"aws"}) | set(AWS_FIELDS) | set(RENAMED_KWARGS)


def test_serialize_returns_every_constructor_argument_and_round_trips() -> None:
    kwargs = {
        "job_name": "nightly-1",
        "job_kind": "processing",
        "creation_time": "2026-11-29T19:30:00+00:00",
        "wait_for": "completion",
        "preferences": [{"instance_type": "ml.g5.xlarge", "instance_count": 2, "training_plan_arn": None}],
        "poll_interval": 7.5,
        "max_poll_interval": 120.0,
        "deadline_seconds": 1200.0,
        "stop_on_deadline": False,
        "stop_job_on_kill": False,
        "shared_poll": False,
        "aws_conn_id": "aws_prod",
        "region_name": "eu-west-1",
        "verify": "/etc/ssl/ca.pem",
        "botocore_config": {"retries": {"mode": "standard", "max_attempts": 10}},
        "window_closes_after_seconds": 3600.0,
        "deferred_at": "2026-11-29T19:30:05.250000+00:00",
        "min_defer_seconds": 15.0,
        "finish": {
            "ti": {"dag_id": "d", "task_id": "t", "run_id": "r", "map_index": -1, "try_number": 1},
            "region": "eu-west-1",
            "return_value": True,
            "selection": False,
            "failures": True,
            "print_log": True,
            "max_log_lines": 50,
            "guardrails": None,
            "identity_tags": {"sm-prefs:dag-id": "d"},
        },
        "owner": {
            "tags": {"sm-prefs:deployment": "af-0123456789abcdef", "sm-prefs:dag-id": "d"},
            "created": True,
        },
    }
    # The earlier names are read, never written: serialize() returns each argument under its name.
    params = accepted_arguments() - set(RENAMED_KWARGS)
    assert set(kwargs) == params, "test must cover every constructor argument"
    classpath, serialized = SageMakerCapacityTrigger(**kwargs).serialize()
    assert serialized == kwargs
    assert json.loads(json.dumps(serialized)) == serialized
    module, _, name = classpath.rpartition(".")
    cls = getattr(__import__(module, fromlist=[name]), name)
    assert cls(**serialized).serialize() == (classpath, kwargs)


def test_a_renamed_kwarg_is_read_under_its_earlier_name_and_written_under_the_new() -> None:
    params = accepted_arguments()
    assert set(RENAMED_KWARGS) <= params and set(RENAMED_KWARGS.values()) <= params
    old = SageMakerCapacityTrigger(job_name="j", escalate_after_seconds=3600)
    _, kwargs = old.serialize()
    assert kwargs["window_closes_after_seconds"] == 3600.0 and "escalate_after_seconds" not in kwargs
    assert SageMakerCapacityTrigger(**kwargs).serialize()[1] == kwargs


def test_a_kwarg_under_both_names_is_an_error_naming_them() -> None:
    with pytest.raises(TypeError, match="window_closes_after_seconds only"):
        SageMakerCapacityTrigger(job_name="j", window_closes_after_seconds=60, escalate_after_seconds=60)


def test_an_unknown_kwarg_is_an_error_naming_it() -> None:
    with pytest.raises(TypeError, match="unexpected argument.*poll_intervall"):
        SageMakerCapacityTrigger(job_name="j", poll_intervall=5)


def test_a_trigger_built_from_its_spec_serializes_the_spec() -> None:
    spec = CapacityWaitSpec(job_name="j", poll_interval=5, max_poll_interval=0, min_defer_seconds=0)
    trigger = SageMakerCapacityTrigger.of(spec)
    assert trigger.spec == spec
    _, kwargs = trigger.serialize()
    # 0 is "unset" for these durations, as earlier releases read it; the cadence is a float.
    assert (kwargs["poll_interval"], kwargs["max_poll_interval"], kwargs["min_defer_seconds"]) == (
        5.0,
        None,
        None,
    )
    assert SageMakerCapacityTrigger("j", "training", "capacity", [], 5).spec == spec


def test_setting_an_argument_on_the_trigger_is_refused_not_ignored() -> None:
    trigger = SageMakerCapacityTrigger(job_name="j")
    with pytest.raises(AttributeError, match="poll_interval is an argument of its spec"):
        trigger.poll_interval = 30.0  # type: ignore[attr-defined]


def test_the_arguments_read_as_attributes_as_before() -> None:
    trigger = SageMakerCapacityTrigger(job_name="j", job_kind="processing", poll_interval=5)
    assert (trigger.job_name, trigger.poll_interval, trigger.kind.value) == ("j", 5.0, "processing")
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        trigger.no_such_thing  # noqa: B018
