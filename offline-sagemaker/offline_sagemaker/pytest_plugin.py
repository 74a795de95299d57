"""pytest fixtures for the offline SageMaker.

Registered as a ``pytest11`` plugin, so any project that installs the ``offline-sagemaker`` distribution
(directly, or through ``airflow-provider-sm-prefs[testing]``) gets:

- ``offline_sagemaker``: a started :class:`OfflineSageMaker` on a free loopback port with the builtin
  ``default`` scenario, stopped after the test;
- ``offline_sagemaker_factory``: ``factory(scenario, **kwargs)`` starting one per call, all stopped after
  the test.

The emulator is imported only when a fixture is used: pytest loads every installed plugin at start-up,
and a project that never asks for these fixtures should not pay for (or need) moto and PyYAML.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from offline_sagemaker.server import OfflineSageMaker


@pytest.fixture
def offline_sagemaker_factory() -> Iterator[Callable[..., OfflineSageMaker]]:
    """Start offline SageMakers with any scenario: ``offline_sagemaker_factory("first-choice-scarce")``.

    The factory takes the :class:`OfflineSageMaker` arguments (``scenario``, ``port``, ``host``, ...);
    ``scenario_dirs=[tmp_path]`` lets ``POST /_emulator/scenario`` (and a remote ``load_scenario`` with a
    path string) load the scenario files under ``tmp_path``, which it refuses otherwise.
    """
    from offline_sagemaker.server import OfflineSageMaker

    started: list[OfflineSageMaker] = []

    def factory(scenario: Any = "default", **kwargs: Any) -> OfflineSageMaker:
        emulator = OfflineSageMaker(scenario=scenario, **kwargs).start()
        started.append(emulator)
        return emulator

    yield factory
    for emulator in reversed(started):
        emulator.stop()


@pytest.fixture
def offline_sagemaker(
    offline_sagemaker_factory: Callable[..., OfflineSageMaker],
) -> OfflineSageMaker:
    """A running offline SageMaker with the builtin ``default`` scenario."""
    return offline_sagemaker_factory("default")
