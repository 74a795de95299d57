"""Shared fixtures for the offline SageMaker's own tests.

Rule and lifecycle tests share one server per module (``emulator``), and each test loads the scenario it
needs (which resets jobs, counters and the clock). Most scenarios here freeze the clock
(``time_scale: 0``) so that only ``advance()`` moves time and every assertion is deterministic
(:mod:`emulator_support`). Tests that need no world of their own share one emulator per test session
(``sm``; with pytest-xdist, one per worker process).
"""

from __future__ import annotations

import os

# Fake credentials only, whatever the developer's environment holds: no test reaches AWS.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.pop("AWS_PROFILE", None)

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.config import Config
from emulator_support import (
    FROZEN,
    PLAN_G5,
    PLAN_P5,
    PLAN_P5_LATER,
    frozen,
    processing_request,
    training_request,
)

from offline_sagemaker import OfflineSageMaker

# The plugin's fixtures, also where the distribution's pytest11 entry point is not installed (the tests
# run from a checkout on the path).
from offline_sagemaker.pytest_plugin import (  # noqa: F401
    offline_sagemaker,
    offline_sagemaker_factory,
)


def _share_botocore_models() -> None:
    """Every botocore session of a test process reads the service models through one loader.

    Each test client opens its own session, and each new session parses the JSON models again
    (SageMaker's alone is megabytes). With one loader they are parsed once per process.
    """
    import botocore.loaders
    import botocore.session

    botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)


_share_botocore_models()


@pytest.fixture(scope="session")
def offline_sm_server() -> Iterator[OfflineSageMaker]:
    """One offline SageMaker for the session; each test loads its own scenario (which resets it)."""
    with OfflineSageMaker(scenario="default") as server:
        yield server


@pytest.fixture
def sm(offline_sm_server: OfflineSageMaker) -> OfflineSageMaker:
    """The session's offline SageMaker, reset to the default scenario."""
    offline_sm_server.load_scenario("default")
    return offline_sm_server


@pytest.fixture(scope="module")
def emulator() -> Iterator[OfflineSageMaker]:
    """One running emulator per test module."""
    with OfflineSageMaker(scenario=FROZEN) as server:
        yield server


@pytest.fixture
def world(emulator: OfflineSageMaker) -> OfflineSageMaker:
    """The module's emulator reset to the frozen scenario."""
    emulator.load_scenario(FROZEN)
    return emulator


@pytest.fixture(scope="module")
def client(emulator: OfflineSageMaker) -> Any:
    """A boto3 SageMaker client for the module's emulator (no retries: every call is one request)."""
    return emulator.boto3_client(
        "sagemaker", config=Config(retries={"total_max_attempts": 1, "mode": "standard"})
    )


@pytest.fixture(scope="module")
def raw_client(emulator: OfflineSageMaker) -> Any:
    """A boto3 client without client-side parameter validation, to reach the service's own checks."""
    return emulator.boto3_client(
        "sagemaker",
        config=Config(parameter_validation=False, retries={"total_max_attempts": 1, "mode": "standard"}),
    )


@pytest.fixture
def make_training() -> Callable[..., dict[str, Any]]:
    """The :func:`training_request` builder."""
    return training_request


@pytest.fixture
def make_processing() -> Callable[..., dict[str, Any]]:
    """The :func:`processing_request` builder."""
    return processing_request


@pytest.fixture
def load_frozen(emulator: OfflineSageMaker) -> Callable[..., OfflineSageMaker]:
    """Load the frozen scenario with top-level keys replaced: ``load_frozen(pending_timeout_outcome="failed")``."""

    def load(**overrides: Any) -> OfflineSageMaker:
        emulator.load_scenario(frozen(**overrides))
        return emulator

    return load


@pytest.fixture
def plans() -> dict[str, str]:
    """Training plan ARNs of the frozen scenario: ``p5`` (2, active), ``p5_later`` (from 7200 s), ``g5`` (1)."""
    return {"p5": PLAN_P5, "p5_later": PLAN_P5_LATER, "g5": PLAN_G5}
