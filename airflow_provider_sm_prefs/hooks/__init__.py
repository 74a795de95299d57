"""Hooks."""

from __future__ import annotations

from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook

__all__ = ["SageMakerPreferenceHook"]
