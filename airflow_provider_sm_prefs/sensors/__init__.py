"""Sensors."""

from __future__ import annotations

from airflow_provider_sm_prefs.sensors.capacity import SageMakerCapacitySensor

__all__ = ["SageMakerCapacitySensor"]
