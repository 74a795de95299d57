"""Operators."""

from __future__ import annotations

from airflow_provider_sm_prefs.operators.sagemaker import (
    SageMakerPreferenceBaseOperator,
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)

__all__ = [
    "SageMakerPreferenceBaseOperator",
    "SageMakerPreferenceProcessingOperator",
    "SageMakerPreferenceTrainingOperator",
]
