"""Triggers."""

from __future__ import annotations

from airflow_provider_sm_prefs.triggers.capacity import SageMakerCapacityTrigger, WaitFor

__all__ = ["SageMakerCapacityTrigger", "WaitFor"]
