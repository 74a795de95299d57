"""The deployment's Celery topology: its components, their directories and command lines, its settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import redis
from harness.config import EVENT_QUEUE, EVENTS_CONN_ID, DeploymentConfig


def celery(tmp_path: Path, **kwargs: object) -> DeploymentConfig:
    return DeploymentConfig(
        root=tmp_path, api_port=8999, executor="celery", schedulers=2, triggerers=2, **kwargs
    )  # type: ignore[arg-type]


def test_the_celery_topology_runs_two_of_each_and_two_workers(tmp_path: Path) -> None:
    config = celery(tmp_path)
    assert config.components == (
        "api-server",
        "scheduler",
        "scheduler-2",
        "dag-processor",
        "triggerer",
        "triggerer-2",
        "worker",
        "worker-2",
    )
    assert config.needs_postgres == "the CeleryExecutor"
    assert config.command("scheduler-2") == config.command("scheduler")


def test_each_worker_has_its_own_directory_node_name_and_pid_file(tmp_path: Path) -> None:
    config = celery(tmp_path, worker_concurrency=3)
    first, second = config.command("worker"), config.command("worker-2")
    assert first[1:3] == ["celery", "worker"] and "--skip-serve-logs" in first
    assert first[first.index("--celery-hostname") + 1] == "worker@%h"
    assert second[second.index("--celery-hostname") + 1] == "worker-2@%h"
    assert first[first.index("--concurrency") + 1] == "3"
    assert config.workdir("worker") == tmp_path.resolve() / "worker"
    assert config.workdir("worker-2") == tmp_path.resolve() / "worker-2"
    assert first[first.index("--pid") + 1] == str(config.workdir("worker") / "worker.pid")
    assert config.workdir("scheduler") == config.home


def test_the_environment_names_the_executor_and_its_broker(tmp_path: Path) -> None:
    config = celery(tmp_path)
    env = config.airflow_env(emulator_url="http://127.0.0.1:1", region="us-east-1", database_env={})
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__CELERY__BROKER_URL"] == redis.url(config.broker_port) != redis.url(0)
    assert int(env["AIRFLOW__WORKERS__EXECUTION_API_RETRIES"]) > 5
    events = json.loads(env[f"AIRFLOW_CONN_{EVENTS_CONN_ID.upper()}"])
    assert events["extra"]["sm_prefs_event_queue_url"].endswith("/" + EVENT_QUEUE)
    assert events["extra"]["endpoint_url"] == "http://127.0.0.1:1"


def test_the_local_executor_has_no_worker_and_one_scheduler(tmp_path: Path) -> None:
    config = DeploymentConfig(root=tmp_path, api_port=8999)
    assert config.worker_names == () and config.needs_postgres is None
    env = config.airflow_env(emulator_url="http://127.0.0.1:1", region="us-east-1", database_env={})
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor" and "AIRFLOW__CELERY__BROKER_URL" not in env


def test_two_schedulers_need_postgres_and_a_bad_executor_is_refused(tmp_path: Path) -> None:
    assert (
        DeploymentConfig(root=tmp_path, api_port=8999, schedulers=2).needs_postgres
        == "more than one scheduler"
    )
    with pytest.raises(ValueError, match="executor: 'kubernetes' is not one of local, celery"):
        DeploymentConfig(root=tmp_path, api_port=8999, executor="kubernetes")
    with pytest.raises(ValueError, match="workers"):
        DeploymentConfig(root=tmp_path, api_port=8999, executor="celery", workers=0)


def test_the_broker_keeps_an_append_only_file_on_loopback(tmp_path: Path) -> None:
    command = redis.command(6399, tmp_path / "broker", server="/usr/bin/redis-server")
    assert command[command.index("--bind") + 1] == "127.0.0.1"
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--appendfsync") + 1] == "always"
    assert (tmp_path / "broker").is_dir()
