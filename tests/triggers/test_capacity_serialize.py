"""The trigger's serialized kwargs rebuild an identical trigger (no argument dropped on deferral)."""

from __future__ import annotations

import inspect
import json

from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger


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
        "escalate_after_seconds": 3600.0,
        "deferred_at": "2026-11-29T19:30:05.250000+00:00",
        "min_defer_seconds": 15.0,
    }
    params = set(inspect.signature(SageMakerCapacityTrigger.__init__).parameters) - {"self"}
    assert set(kwargs) == params, "test must cover every constructor argument"
    classpath, serialized = SageMakerCapacityTrigger(**kwargs).serialize()
    assert serialized == kwargs
    assert json.loads(json.dumps(serialized)) == serialized
    module, _, name = classpath.rpartition(".")
    cls = getattr(__import__(module, fromlist=[name]), name)
    assert cls(**serialized).serialize() == (classpath, kwargs)
