"""The job's own log lines in the task log: real dag.test() runs against the offline SageMaker.

The emulator writes one CloudWatch stream per instance (default lines: "Container started on ...",
"Epoch 1/3: ...", ...); the operators read them over real botocore HTTP once the job has ended.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_provider_sm_prefs.operators import (
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)
from tests.operators.test_dag_runs import training_config as dag_runs_config

pytestmark = pytest.mark.usefixtures("airflow_db")

G6, G5 = "ml.g6.48xlarge", "ml.g5.48xlarge"
ONE_G5 = [{"instance_type": G5, "instance_count": 1}]
TWO_G6 = [{"instance_type": G6, "instance_count": 2}, {"instance_type": G5, "instance_count": 4}]
FAST = {"time_scale": 600, "job_runtime_seconds": 600}
HP_SECRET, ENV_SECRET = "hp-value-7f3a9c", "env-value-91c2e4"
LINE = re.compile(r"\[(algo-\d+)\] \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (.*)")
#: What Airflow's console renderer appends to a task log record: the logger's name and the source line.
RECORD_SUFFIX = re.compile(r"\s+\[airflow\.task\.[^\]]*\]\s+loc=\S+$")
LOG_OPS = ("DescribeLogStreams", "GetLogEvents", "FilterLogEvents")


def training_config(name: str, **extra: Any) -> dict[str, Any]:
    """The suite's training config, with hyperparameters and environment values that must stay private."""
    return {
        **dag_runs_config(name),
        "HyperParameters": {"epochs": "3", "api_token": HP_SECRET},
        "Environment": {"DB_PASSWORD": ENV_SECRET},
        **extra,
    }


def task_log(capfd: pytest.CaptureFixture[str]) -> str:
    captured = capfd.readouterr()
    return captured.out + captured.err


def job_lines(log: str) -> list[tuple[str, str]]:
    """``(instance, message)`` of every job line the task log shows, in order."""
    return [(m.group(1), RECORD_SUFFIX.sub("", m.group(2)).strip()) for m in LINE.finditer(log)]


def log_calls(sm: Any) -> int:
    ops = sm.stats()["operations"]
    return sum(int(ops.get(op, 0)) for op in LOG_OPS)


def test_the_task_log_shows_every_instances_lines_interleaved_by_time_and_prefixed(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(FAST)
    states, _ = run_test_dag("t_train_complete", config=training_config("two-hosts"), prefs=TWO_G6)
    assert states == {"job": "success", "consume": "success"}
    lines = job_lines(task_log(capfd))
    # 2 instances × the default 6 lines, each instance's lines one millisecond after the other's.
    assert len(lines) == 12
    assert lines[:4] == [
        ("algo-1", f"Container started on {G6} (algo-1 of 2 instances)"),
        ("algo-2", f"Container started on {G6} (algo-2 of 2 instances)"),
        ("algo-1", "Reading training data from /opt/ml/input/data"),
        ("algo-2", "Reading training data from /opt/ml/input/data"),
    ]
    assert [host for host, _ in lines] == ["algo-1", "algo-2"] * 6
    assert lines[-1] == ("algo-2", "Saving the model to /opt/ml/model")


def test_no_hyperparameter_or_environment_value_reaches_the_task_log(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(FAST)
    states, _ = run_test_dag("t_train_complete", config=training_config("secretive"), prefs=TWO_G6)
    log = task_log(capfd)
    assert states["job"] == "success"
    assert job_lines(log), "the job's lines were printed"
    # Airflow 3.0's dag.test() prints its supervisor's debug trace, which carries the rendered template
    # fields (what the UI's Rendered Template view shows anyway); a deployment's task log has no such line.
    log = "\n".join(line for line in log.splitlines() if "msg=SetRenderedFields(" not in line)
    assert HP_SECRET not in log and ENV_SECRET not in log


def test_the_non_deferrable_wait_prints_the_logs_too(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(FAST)
    states, _ = run_test_dag("t_train_sync", config=training_config("sync"), prefs=ONE_G5)
    assert states["job"] == "success"
    assert ("algo-1", f"Container started on {G5} (algo-1 of 1 instances)") in job_lines(task_log(capfd))


def test_a_processing_job_logs_from_its_own_group(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(FAST)
    config = {
        "ProcessingJobName": "prep",
        "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1}},
    }
    states, _ = run_test_dag("t_process_complete", config=config, prefs=["ml.m5.xlarge"])
    log = task_log(capfd)
    assert states["job"] == "success"
    assert "in /aws/sagemaker/ProcessingJobs" in log
    assert ("algo-1", "Writing outputs to /opt/ml/processing/output") in job_lines(log)


def test_the_cap_keeps_the_last_lines_and_says_what_was_cut_with_a_link(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario(FAST)
    states, _ = run_test_dag("t_train_logs_cut", config=training_config("capped"), prefs=TWO_G6)
    log = task_log(capfd)
    assert states["job"] == "success"
    lines = job_lines(log)
    assert len(lines) == 5
    assert lines[-1] == ("algo-2", "Saving the model to /opt/ml/model")
    # 12 lines in all: each stream's last 5 were read, 5 of those 10 dropped, and the streams hold
    # more further back (not read): at least 6 earlier lines (7 in fact).
    assert "max_log_lines=5: showing the last 5 lines; at least 6 earlier lines of job capped" in log
    assert f"All lines: {sm.endpoint_url}/_emulator/view/jobs/capped#logs" in log


def test_a_failed_jobs_exception_carries_the_failure_reason_and_the_last_lines(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Airflow 3.0's dag.test() prints the exception through rich, which wraps it at the console's width.
    monkeypatch.setenv("COLUMNS", "1000")
    sm.load_scenario(FAST)
    config = training_config("crashing", Tags=[{"Key": "emulator:outcome", "Value": "Failed"}])
    states, _ = run_test_dag("t_train_complete", config=config, prefs=ONE_G5)
    log = task_log(capfd)
    assert states["job"] == "failed"
    message = re.search(
        r"JobFailedError: SageMaker job failed: job 'crashing' status=Failed: AlgorithmError: emulated failure\n"
        r"Last lines of the job's logs:\n((?:\[algo-1\].*\n)+)",
        log,
    )
    assert message, log[-3000:]
    tail = message.group(1).splitlines()
    assert tail[-2].endswith("RuntimeError: emulated failure in crashing on algo-1")
    assert tail[-1].endswith("AlgorithmError: emulated failure")


def test_access_denied_on_logs_warns_with_the_fix_and_the_task_succeeds(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    sm.load_scenario({**FAST, "access_denied": ["DescribeLogStreams"]})
    states, _ = run_test_dag("t_train_complete", config=training_config("denied"), prefs=ONE_G5)
    log = task_log(capfd)
    assert states == {"job": "success", "consume": "success"}
    assert "Cannot read the logs of job denied" in log
    assert "not authorized to perform: logs:DescribeLogStreams" in log
    assert (
        "Grant logs:DescribeLogStreams and logs:GetLogEvents on "
        "arn:aws:logs:<region>:<account>:log-group:/aws/sagemaker/TrainingJobs:*" in log
    )
    assert not job_lines(log)


def test_a_missing_log_group_warns_and_raises_nothing(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    # A training job ran, so its group exists; no processing job ever started: that group does not.
    sm.load_scenario(FAST)
    run_test_dag("t_train_complete", config=training_config("only-training"), prefs=ONE_G5)
    operator = SageMakerPreferenceProcessingOperator(
        task_id="p",
        config={"ProcessingResources": {"ClusterConfig": {"InstanceCount": 1}}},
        instance_preferences=["ml.m5.xlarge"],
        preflight="off",
    )
    task_log(capfd)
    assert operator.job_logs.print_job_logs("never-ran") == []
    assert "log group /aws/sagemaker/ProcessingJobs does not exist" in task_log(capfd)
    assert sm.stats()["operations"]["DescribeLogStreams"] >= 1


def test_print_log_false_reads_no_logs(sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]) -> None:
    sm.load_scenario(FAST)
    states, _ = run_test_dag("t_train_quiet", config=training_config("quiet"), prefs=TWO_G6)
    log = task_log(capfd)
    assert states["job"] == "success"
    assert log_calls(sm) == 0
    assert not job_lines(log) and "Logs of job" not in log


def test_the_operators_take_print_log_and_max_log_lines() -> None:
    op = SageMakerPreferenceTrainingOperator(
        task_id="t",
        config=training_config("x"),
        instance_preferences=ONE_G5,
        print_log=False,
        max_log_lines=50,
        preflight="off",
    )
    assert (op.print_log, op.max_log_lines) == (False, 50)
    default = SageMakerPreferenceTrainingOperator(
        task_id="d", config=training_config("y"), instance_preferences=ONE_G5, preflight="off"
    )
    assert (default.print_log, default.max_log_lines) == (True, 2000)
