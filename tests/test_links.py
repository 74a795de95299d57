"""Where the operators' extra links point: the AWS console, or the offline SageMaker's own job page."""

from __future__ import annotations

import pytest

from airflow_provider_sm_prefs.links import is_aws_endpoint, job_urls


@pytest.mark.parametrize(
    ("endpoint", "aws"),
    [
        (None, True),
        ("", True),
        ("https://api.sagemaker.us-east-1.amazonaws.com", True),
        ("https://vpce-0abc-1234.api.sagemaker.eu-west-1.vpce.amazonaws.com", True),
        ("https://api.sagemaker.cn-north-1.amazonaws.com.cn", True),
        ("http://127.0.0.1:5005", False),
        ("http://localhost:4566/", False),
        ("http://amazonaws.com.attacker.example", False),
    ],
)
def test_aws_hosts_are_told_from_other_endpoints(endpoint: str | None, aws: bool) -> None:
    assert is_aws_endpoint(endpoint) is aws


def test_against_aws_the_links_open_the_console_and_cloudwatch() -> None:
    page, logs = job_urls("training", "nightly-1", region_name="eu-west-1")
    assert page == "https://console.aws.amazon.com/sagemaker/home?region=eu-west-1#/jobs/nightly-1"
    assert logs.startswith("https://console.aws.amazon.com/cloudwatch/home?region=eu-west-1#logsV2:")
    assert "TrainingJobs$3FlogStreamNameFilter$3Dnightly-1$252F" in logs
    page, logs = job_urls("processing", "prep", region_name="cn-north-1", aws_partition="aws-cn")
    assert page == "https://console.amazonaws.cn/sagemaker/home?region=cn-north-1#/processing-jobs/prep"
    assert "ProcessingJobs" in logs


def test_against_the_offline_sagemaker_both_links_open_its_job_page() -> None:
    page, logs = job_urls(
        "training", "nightly-1", region_name="us-east-1", endpoint_url="http://127.0.0.1:5005/"
    )
    assert page == "http://127.0.0.1:5005/_emulator/view/jobs/nightly-1"
    assert logs == page + "#logs"
