"""The offline SageMaker: a local endpoint that speaks SageMaker's JSON API and simulates scarce capacity.

Built on moto's server, so S3 and every other service answer at the same endpoint; the eight Training and
Processing job operations are answered by an emulator that enforces AWS's documented instance-preference
rules and runs jobs over an emulated clock, and so are the training plans, Service Quotas and Price List
look-ups a client makes before it submits. See the distribution's README.

>>> from offline_sagemaker import OfflineSageMaker
>>> with OfflineSageMaker(scenario="first-choice-scarce") as sm:  # doctest: +SKIP
...     sm.boto3_client("sagemaker").list_training_jobs()

Importing this package loads nothing else: the public names below are imported on first use (PEP 562),
so the pytest plugin and the job helpers do not pay for the server, PyYAML, moto or botocore.

Modules, from the bottom up (a module imports only modules above it in this list):

- leaves: :mod:`.exceptions` (service and scenario errors), :mod:`.operations` (the emulated
  operations), :mod:`.botocore_model` (botocore's SageMaker model), :mod:`.scenario_types` (what a
  scenario is), :mod:`.models` (jobs), :mod:`.stats` (call counters), :mod:`.view` (HTML pages),
  :mod:`.jobs` (request helpers for tests);
- scenarios: :mod:`.scenario_fields` (validation per section), :mod:`.scenario` (loading; public);
- simulation: :mod:`.clock` (emulated time, event heap), :mod:`.capacity` (pools, waiting jobs),
  :mod:`.engine` (job lifecycle);
- the API: :mod:`.algorithms` (R10), :mod:`.rules` (request validation), :mod:`.account_api` (plans,
  quotas, prices), :mod:`.api` (the operations);
- HTTP: :mod:`.responses` (answers, statuses, drops), :mod:`.faults` (fault injection), :mod:`.eventbridge`
  (the jobs' EventBridge events and the pump delivering them), :mod:`.moto_world` (moto's state: what a
  reset clears, the event queues it keeps), :mod:`.admin` (admin route table),
  :mod:`.service` (all of it behind one lock), :mod:`.wsgi` (the app), :mod:`.handler` (fast path),
  :mod:`.moto_speedups` (moto's SQS receive in constant time),
  :mod:`.controls` / :mod:`.remote` / :mod:`.server` (the handles users hold);
- entry points: :mod:`.cli` (``offline-sagemaker``, also ``sm-prefs-emulator``; ``python -m offline_sagemaker``
  runs it too), :mod:`.pytest_plugin` (fixtures).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from offline_sagemaker.scenario import (
        BUILTIN_SCENARIOS,
        Scenario,
        ScenarioError,
        load_scenario,
    )
    from offline_sagemaker.server import OfflineSageMaker, RemoteSageMaker

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_SCENARIOS",
    "OfflineSageMaker",
    "RemoteSageMaker",
    "Scenario",
    "ScenarioError",
    "load_scenario",
]

#: Public name -> the module (under this package) that defines it.
_EXPORTS = {
    "BUILTIN_SCENARIOS": "scenario",
    "Scenario": "scenario",
    "ScenarioError": "scenario",
    "load_scenario": "scenario",
    "OfflineSageMaker": "server",
    "RemoteSageMaker": "server",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
