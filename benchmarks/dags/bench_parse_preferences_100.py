"""Parse-cost benchmark: 100 training tasks with instance preference lists (literal arguments).

Every task passes a literal ``config`` and a three-entry ``instance_preferences`` list, so the
operator validates each list against every SageMaker rule when this file is parsed. The twin file
``bench_parse_stock_100.py`` builds the same DAG with the amazon provider's SageMakerTrainingOperator.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator

TASKS = 100

with DAG(
    dag_id="bench_parse_preferences_100",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["benchmark"],
):
    for i in range(TASKS):
        SageMakerPreferenceTrainingOperator(
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
                "ResourceConfig": {"VolumeSizeInGB": 200},
                "StoppingCondition": {"MaxRuntimeInSeconds": 6 * 3600},
            },
            instance_preferences=[
                {"instance_type": "ml.g6.48xlarge", "instance_count": 2},
                {"instance_type": "ml.g5.48xlarge", "instance_count": 4},
                {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
            ],
            max_pending=timedelta(hours=2),
            deferrable=True,
        )
