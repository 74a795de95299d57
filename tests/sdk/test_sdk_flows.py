"""The SageMaker Python SDK (3.x) runs its normal flows against the offline SageMaker: logs on, role check on.

The SDK lives in its own venv (``make sdk-venv``; it cannot be installed next to apache-airflow 3.3), so
each flow runs ``tests/sdk/flows.py`` there, in a subprocess whose only link to the emulator is
``AWS_ENDPOINT_URL``, as a user would point the SDK at it. The execution role exists in the emulator's
IAM (moto) with a trust policy for SageMaker, as it does in a real account.

Per-entry counts: AWS does not document whether Describe then fills the job-level ``InstanceCount``
(see docs/emulator.md). The SDK's log followers read that field right after Create, so they break on
such jobs; the same flows without logs complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK_PYTHON = Path(os.environ.get("SM_PREFS_SDK_PYTHON", ROOT / "build" / "sdk-venv" / "bin" / "python"))
FLOWS = Path(__file__).with_name("flows.py")
ROLE_NAME = "SageMakerRole"
FAST = {"time_scale": 600, "job_runtime_seconds": 600}
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}

pytestmark = pytest.mark.skipif(not SDK_PYTHON.exists(), reason="no SDK venv: run `make sdk-venv`")


@pytest.fixture
def sdk(offline_sm_server: Any) -> Any:
    """The session's emulator; returns ``run(flow, counts) -> (summary, output)``, which puts the job role in
    its IAM first (the test's scenario is loaded by then, and loading one resets the emulator's IAM)."""
    sm = offline_sm_server
    iam = sm.boto3_client("iam")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AIRFLOW"))},
        "AWS_ENDPOINT_URL": sm.endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": sm.region,
    }

    def run(flow: str, counts: str, name: str, logs: bool = True) -> tuple[dict[str, Any], str]:
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(TRUST))
        result = subprocess.run(
            [str(SDK_PYTHON), str(FLOWS), flow, name, counts, "logs" if logs else "no-logs"],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-3000:]
        summary = json.loads(result.stdout.strip().splitlines()[-1])
        return summary, "\n".join(summary["log_lines"]) + "\n" + output

    return run


def instance_lines(output: str, first_line: str) -> set[str]:
    """Which instances' first container line the SDK printed (``algo-1``, ...)."""
    return {f"algo-{n}" for n in range(1, 5) if f"{first_line} (algo-{n} of" in output}


@pytest.mark.parametrize(
    ("flow", "instance_type", "first"),
    [
        ("model_trainer", "ml.g6.48xlarge", "Container started on ml.g6.48xlarge"),
        ("core_training_job", "ml.g6.48xlarge", "Container started on ml.g6.48xlarge"),
        ("processor", "ml.m5.xlarge", "Container started on ml.m5.xlarge"),
    ],
)
def test_sdk_flows_with_a_uniform_count_complete_and_print_every_instances_logs(
    offline_sm_server: Any, sdk: Any, flow: str, instance_type: str, first: str
) -> None:
    offline_sm_server.load_scenario(FAST)
    summary, output = sdk(flow, "uniform", f"sdk-{flow.replace('_', '-')}")
    assert "error" not in summary, summary.get("error")
    assert summary["status"] == "Completed"
    assert summary["selected"] == [instance_type, 2]
    assert instance_lines(output, first) == {"algo-1", "algo-2"}


@pytest.mark.parametrize("flow", ["model_trainer", "core_training_job", "processor"])
def test_sdk_log_followers_break_on_per_entry_counts(offline_sm_server: Any, sdk: Any, flow: str) -> None:
    # The followers read the job-level count from a Describe right after Create. (With
    # describe_instance_count: selected they work only if that Describe comes after the selection.)
    offline_sm_server.load_scenario(FAST)
    name = f"sdk-per-entry-{flow.replace('_', '-')}"
    broken, _ = sdk(flow, "per-entry", name)
    assert broken.get("error", "").startswith(("KeyError: 'InstanceCount'", "TypeError: '>=' not supported"))
    assert offline_sm_server.job(name if flow == "core_training_job" else _latest(offline_sm_server))[
        "status"
    ] in (
        "InProgress",
        "Completed",
    )


@pytest.mark.parametrize("flow", ["model_trainer", "processor"])
def test_sdk_flows_with_per_entry_counts_complete_without_logs(
    offline_sm_server: Any, sdk: Any, flow: str
) -> None:
    offline_sm_server.load_scenario(FAST)
    summary, _ = sdk(flow, "per-entry", f"sdk-quiet-{flow.replace('_', '-')}", logs=False)
    assert "error" not in summary, summary.get("error")
    assert summary["status"] == "Completed"
    # The first entry had capacity: its own count, not a job-level one.
    assert summary["selected"] in (["ml.g6.48xlarge", 2], ["ml.m5.xlarge", 2])


def _latest(sm: Any) -> str:
    return str(sm.jobs()[-1]["name"])


def test_model_trainer_role_check_reads_the_emulators_simulate_principal_policy(
    offline_sm_server: Any, sdk: Any
) -> None:
    # Allowed by default (the uniform flows above pass the check); a denied action fails it before Create.
    offline_sm_server.load_scenario({**FAST, "iam_denied_actions": ["ecr:GetAuthorizationToken"]})
    summary, _ = sdk("model_trainer", "uniform", "sdk-role-denied")
    assert summary.get("error", "").startswith(
        "RoleValidationError: IAM role 'arn:aws:iam::123456789012:role/SageMakerRole'"
    )
    assert "Missing permissions: ecr:GetAuthorizationToken" in summary["error"]
    assert offline_sm_server.stats()["operations"].get("CreateTrainingJob", 0) == 0
