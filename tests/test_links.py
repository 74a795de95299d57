"""Where the operators' extra links point: the AWS console, or the offline SageMaker's own job page."""

from __future__ import annotations

import pytest

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.links import (
    SageMakerPreferenceJobLink,
    SageMakerPreferenceJobLogsLink,
    is_aws_endpoint,
    job_urls,
)


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


@pytest.mark.parametrize("kind", list(JobKind))
def test_the_console_path_and_log_group_are_the_kinds(kind: JobKind) -> None:
    page, logs = job_urls(kind, "job-1", region_name="us-west-2")
    assert (
        page
        == f"https://console.aws.amazon.com/sagemaker/home?region=us-west-2#/{kind.spec.console_path}/job-1"
    )
    group = kind.spec.log_group.replace("/", "$252F")  # the console's escaping of "/" in a fragment
    assert logs == (
        "https://console.aws.amazon.com/cloudwatch/home?region=us-west-2#logsV2:log-groups/log-group/"
        f"{group}$3FlogStreamNameFilter$3Djob-1$252F"
    )


@pytest.mark.parametrize(
    ("console_path", "log_group", "kind"),
    [("jobs", "TrainingJobs", "training"), ("processing-jobs", "ProcessingJobs", "processing")],
)
def test_links_the_first_release_stored_as_parts_still_open(
    console_path: str, log_group: str, kind: str
) -> None:
    common = {"job_name": "old-1", "region_name": "eu-west-1", "aws_domain": "amazonaws.cn"}
    page, logs = job_urls(kind, "old-1", region_name="eu-west-1", aws_partition="aws-cn")
    assert SageMakerPreferenceJobLink()._from_parts({**common, "console_path": console_path}) == page
    assert SageMakerPreferenceJobLogsLink()._from_parts({**common, "log_group": log_group}) == logs
    assert SageMakerPreferenceJobLink()._from_parts({"console_path": console_path}) == ""
