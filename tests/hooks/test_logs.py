"""The logs hook's listing of a job's streams."""

from __future__ import annotations

from typing import Any

from botocore.stub import Stubber

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.hooks.logs import MAX_STREAMS_PER_CALL, SageMakerJobLogsHook


def test_every_page_of_a_jobs_streams_is_listed_at_the_documented_page_size(sm: Any) -> None:
    hook = SageMakerJobLogsHook(aws_conn_id="aws_default", region_name="us-east-1")
    asked = {
        "logGroupName": "/aws/sagemaker/TrainingJobs",
        "logStreamNamePrefix": "nightly/",
        "orderBy": "LogStreamName",
        "limit": MAX_STREAMS_PER_CALL,
    }
    with Stubber(hook.conn) as stub:
        stub.add_response(
            "describe_log_streams",
            {"logStreams": [{"logStreamName": "nightly/algo-1-1700000000"}], "nextToken": "p2"},
            expected_params=asked,
        )
        stub.add_response(
            "describe_log_streams",
            {"logStreams": [{"logStreamName": "nightly/algo-2-1700000000"}]},
            expected_params={**asked, "nextToken": "p2"},
        )
        names = hook.stream_names(JobKind.TRAINING, "nightly")
        stub.assert_no_pending_responses()
    assert names == ["nightly/algo-1-1700000000", "nightly/algo-2-1700000000"]
