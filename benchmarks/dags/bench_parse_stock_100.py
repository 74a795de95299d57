"""Parse-cost benchmark: the same 100 training tasks with the amazon provider's SageMakerTrainingOperator.

Same DAG as ``bench_parse_preferences_100.py`` with one fixed instance type per job instead of a
preference list; the baseline for the parse-time ratio.
"""

from __future__ import annotations

from datetime import datetime

from airflow.providers.amazon.aws.operators.sagemaker import SageMakerTrainingOperator
from airflow.sdk import DAG

TASKS = 100

with DAG(
    dag_id="bench_parse_stock_100",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["benchmark"],
):
    for i in range(TASKS):
        SageMakerTrainingOperator(
            task_id=f"train_{i:03d}",
            config={
                "TrainingJobName": f"bench-parse-{i:03d}",
                "AlgorithmSpecification": {
                    "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311",
                    "TrainingInputMode": "File",
                },
                "RoleArn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
                "InputDataConfig": [
                    {
                        "ChannelName": "train",
                        "DataSource": {
                            "S3DataSource": {
                                "S3DataType": "S3Prefix",
                                "S3Uri": f"s3://sm-prefs-bench/data/{i:03d}/",
                                "S3DataDistributionType": "FullyReplicated",
                            }
                        },
                    }
                ],
                "OutputDataConfig": {"S3OutputPath": "s3://sm-prefs-bench/models/"},
                "ResourceConfig": {
                    "InstanceType": "ml.g6.48xlarge",
                    "InstanceCount": 2,
                    "VolumeSizeInGB": 200,
                },
                "StoppingCondition": {"MaxRuntimeInSeconds": 6 * 3600},
            },
            deferrable=True,
        )
