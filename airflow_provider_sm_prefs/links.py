"""Extra links on the operators: the job's SageMaker console page and its CloudWatch logs.

What the links need (region, partition, job name) is pushed to XCom before the task defers, so the
links work while the task waits for capacity.
"""

from __future__ import annotations

from airflow.providers.amazon.aws.links.base_aws import BASE_AWS_CONSOLE_LINK, BaseAwsLink


class SageMakerPreferenceJobLink(BaseAwsLink):
    """The job's page in the SageMaker console (lists the preferences and marks the selected one)."""

    name = "SageMaker Job"
    key = "sm_prefs_job_link"
    format_str = BASE_AWS_CONSOLE_LINK + "/sagemaker/home?region={region_name}#/{console_path}/{job_name}"


class SageMakerPreferenceJobLogsLink(BaseAwsLink):
    """The job's CloudWatch log streams."""

    name = "SageMaker Job Logs"
    key = "sm_prefs_job_logs_link"
    format_str = (
        BASE_AWS_CONSOLE_LINK
        + "/cloudwatch/home?region={region_name}#logsV2:log-groups/log-group/$252Faws$252Fsagemaker$252F"
        + "{log_group}$3FlogStreamNameFilter$3D{job_name}$252F"
    )
