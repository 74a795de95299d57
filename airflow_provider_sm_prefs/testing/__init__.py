"""The offline SageMaker: a local endpoint that speaks SageMaker's JSON API and simulates scarce capacity.

Built on moto's server, so S3 and every other service answer at the same endpoint; the eight Training and
Processing job operations are answered by an emulator that enforces AWS's documented instance-preference
rules and runs jobs over an emulated clock. See ``docs/emulator.md``.

>>> from airflow_provider_sm_prefs.testing import OfflineSageMaker
>>> with OfflineSageMaker(scenario="first-choice-scarce") as sm:  # doctest: +SKIP
...     sm.boto3_client("sagemaker").list_training_jobs()
"""

from __future__ import annotations

from airflow_provider_sm_prefs.testing.scenario import (
    BUILTIN_SCENARIOS,
    Scenario,
    ScenarioError,
    load_scenario,
)
from airflow_provider_sm_prefs.testing.server import OfflineSageMaker, RemoteSageMaker

__all__ = [
    "BUILTIN_SCENARIOS",
    "OfflineSageMaker",
    "RemoteSageMaker",
    "Scenario",
    "ScenarioError",
    "load_scenario",
]
