"""Nightly retrain on whichever acceptable GPU has capacity, then size the evaluation from the outcome.

Runs unchanged against real AWS or the offline SageMaker: point the ``aws_default`` connection's
extra at ``{"endpoint_url": "http://127.0.0.1:PORT"}`` for the latter (``make demo`` does that).
Set the DAG params (bucket, role, image) for your account.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator
from airflow_provider_sm_prefs.preferences import InstancePreference, WorkloadRequirements

# Parse-time settings come from the environment only: no Variable, connection or network lookups here.
POLL_INTERVAL = float(os.environ.get("SM_PREFS_POLL_INTERVAL", "30"))
MAX_POLL_INTERVAL = float(os.environ.get("SM_PREFS_MAX_POLL_INTERVAL", str(max(POLL_INTERVAL, 120))))

#: The training job's entry point (train.py adapts to the selected hardware; see its docstring).
ENTRY_POINT_DIR = Path(__file__).resolve().parent / "train_entry"

PREFERENCES = [
    InstancePreference("ml.g6.48xlarge", 2),  # first choice: 16 × L4
    InstancePreference("ml.g5.48xlarge", 4),  # 32 × A10G make up for slower cards
    InstancePreference("ml.p4d.24xlarge", 2),  # 16 × A100 when nothing else is free
]


def entry_point_archive() -> bytes:
    """``sourcedir.tar.gz`` for SageMaker's framework containers: train.py, and the provider's
    container-side modules vendored next to it (standard library only: no Airflow or boto in the image)."""
    import io
    import tarfile

    import airflow_provider_sm_prefs
    from airflow_provider_sm_prefs.container import VENDORED_FILES

    package = Path(airflow_provider_sm_prefs.__file__).resolve().parent
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(ENTRY_POINT_DIR / "train.py", arcname="train.py")
        for name in VENDORED_FILES:
            archive.add(package / name, arcname=f"{package.name}/{name}")
    return buffer.getvalue()


with DAG(
    dag_id="sm_prefs_nightly_retrain",
    description="Retrain nightly on the first acceptable GPU type with capacity",
    schedule="0 2 * * *",
    start_date=datetime(2026, 9, 15),
    catchup=False,
    max_active_runs=1,
    tags=["sagemaker", "instance-preferences", "example"],
    params={
        "bucket": Param("sm-prefs-demo", type="string"),
        "role_arn": Param("arn:aws:iam::123456789012:role/SageMakerTrainingRole", type="string"),
        "training_image": Param(
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311", type="string"
        ),
    },
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
) as dag:

    @task
    def stage_dataset(params: dict[str, Any] | None = None, dag_run: Any = None, ti: Any = None) -> str:
        """Put a small training set and the training entry point in S3 (creating the bucket if this
        account has none). Returns the data prefix; the entry point's URI is XCom ``entry_point``."""
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        s3 = S3Hook(aws_conn_id="aws_default")
        bucket = params["bucket"] if params else "sm-prefs-demo"
        if not s3.check_for_bucket(bucket):
            s3.create_bucket(bucket_name=bucket)
        # run_after exists for every run, scheduled or triggered by hand (logical_date may be None).
        prefix = f"nightly/{dag_run.run_after:%Y%m%dT%H%M%S}/"
        rows = "\n".join(f"{i},{i % 7},{(i * 13) % 11}" for i in range(1000))
        s3.load_string(rows, key=prefix + "train.csv", bucket_name=bucket, replace=True)
        # Beside the data prefix, not under it: the training channel must not carry the code.
        code_key = f"nightly/{dag_run.run_after:%Y%m%dT%H%M%S}-code/sourcedir.tar.gz"
        s3.load_bytes(entry_point_archive(), key=code_key, bucket_name=bucket, replace=True)
        ti.xcom_push(key="entry_point", value=f"s3://{bucket}/{code_key}")
        return f"s3://{bucket}/{prefix}"

    staged = stage_dataset()

    train = SageMakerPreferenceTrainingOperator(
        task_id="train",
        # No TrainingJobName: the operator derives one per run (sm-prefs-nightly-retrain-train-<hash>),
        # valid for scheduled and hand-triggered runs alike, and the same on every retry.
        config={
            "AlgorithmSpecification": {
                "TrainingImage": "{{ params.training_image }}",
                "TrainingInputMode": "File",
            },
            "RoleArn": "{{ params.role_arn }}",
            # The framework container runs train.py from the archive; hyperparameters are JSON values,
            # as the SageMaker Python SDK writes them. The reference configuration the batch was tuned
            # on: 64 per device on 40 GiB A100s, 4,096 per step (train.py scales it to the entry chosen).
            "HyperParameters": {
                "sagemaker_program": json.dumps("train.py"),
                "sagemaker_submit_directory": '"{{ ti.xcom_pull(task_ids="stage_dataset", key="entry_point") }}"',
                "reference_per_device_batch": "64",
                "reference_memory_gib": "40",
                "reference_global_batch": "4096",
            },
            "InputDataConfig": [
                {
                    "ChannelName": "train",
                    "DataSource": {
                        "S3DataSource": {
                            "S3DataType": "S3Prefix",
                            "S3Uri": "{{ ti.xcom_pull(task_ids='stage_dataset') }}",
                            "S3DataDistributionType": "FullyReplicated",
                        }
                    },
                }
            ],
            "OutputDataConfig": {"S3OutputPath": "s3://{{ params.bucket }}/models/"},
            "ResourceConfig": {"VolumeSizeInGB": 200},
            "StoppingCondition": {"MaxRuntimeInSeconds": 6 * 3600},
        },
        instance_preferences=PREFERENCES,
        max_pending=timedelta(hours=2),
        # Every entry must be an NVIDIA cluster with room for the model: checked when the DAG is parsed.
        # Before submit, entries without quota for their count are dropped (preflight="prune").
        requirements=WorkloadRequirements(accelerator="cuda", min_total_accelerator_memory_gib=320),
        poll_interval=POLL_INTERVAL,
        max_poll_interval=MAX_POLL_INTERVAL,
    )

    @task
    def evaluate(outcome: dict[str, Any]) -> dict[str, Any]:
        """Size the evaluation from the hardware SageMaker actually chose."""
        accel = outcome["accelerators"] or {}
        devices = int(accel.get("total") or 0)
        memory_gib = float(accel.get("memory_gib_per_device") or 0)
        # ~2 samples per GiB of device memory for this model; at least 1 process per instance.
        per_device_batch = max(1, int(memory_gib * 2))
        plan = {
            "instance_type": outcome["selected_instance_type"],
            "instances": outcome["selected_instance_count"],
            "processes": max(devices, outcome["selected_instance_count"]),
            "per_device_batch_size": per_device_batch,
            "global_batch_size": per_device_batch * max(devices, 1),
        }
        print(f"evaluation plan: {plan}")
        return plan

    @task
    def report(outcome: dict[str, Any], plan: dict[str, Any]) -> str:
        from airflow_provider_sm_prefs.outcome import CapacityOutcome

        record = CapacityOutcome.from_dict(outcome)
        line = record.summary()
        accel = (record.accelerators or {}).get("description", "")
        print(f"{line}\n{accel}\nfell back: {record.fell_back}; evaluation: {plan}")
        return line

    plan = evaluate(train.output)
    staged >> train
    report(train.output, plan)
