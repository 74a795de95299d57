"""The eight SageMaker operations the emulator answers itself (everything else goes to moto). A leaf.

Requests name their operation in the ``X-Amz-Target`` header (``SageMaker.<Operation>``, AWS's JSON
protocol); :func:`emulated_operation` reads it for both the WSGI app and the request handler's fast path.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["JOB_NAME_PARAM", "OPERATIONS", "TARGET_PREFIX", "emulated_operation"]

OPERATIONS: frozenset[str] = frozenset(
    {
        "CreateTrainingJob",
        "DescribeTrainingJob",
        "StopTrainingJob",
        "ListTrainingJobs",
        "CreateProcessingJob",
        "DescribeProcessingJob",
        "StopProcessingJob",
        "ListProcessingJobs",
    }
)

#: The request parameter that names the job, per operation (for per-job call counts).
JOB_NAME_PARAM: Mapping[str, str] = {
    "CreateTrainingJob": "TrainingJobName",
    "DescribeTrainingJob": "TrainingJobName",
    "StopTrainingJob": "TrainingJobName",
    "CreateProcessingJob": "ProcessingJobName",
    "DescribeProcessingJob": "ProcessingJobName",
    "StopProcessingJob": "ProcessingJobName",
}

#: ``X-Amz-Target`` values of SageMaker operations start with this.
TARGET_PREFIX = "SageMaker."


def emulated_operation(target: str | None) -> str | None:
    """The emulated operation an ``X-Amz-Target`` header names, or None (not SageMaker, or not emulated)."""
    if not target or not target.startswith(TARGET_PREFIX):
        return None
    operation = target[len(TARGET_PREFIX) :]
    return operation if operation in OPERATIONS else None
