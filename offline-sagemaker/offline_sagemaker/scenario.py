"""Scenarios for the offline SageMaker: how much capacity exists, when, and how the service misbehaves.

A scenario is written by users as YAML or JSON (or passed as a dict) and validated here into an immutable
:class:`Scenario`. Every error names the offending key with its full path, e.g.
``capacity.ml.g6.48xlarge[1].free: must be an integer >= 0, got -1``, because a scenario that silently
means something else than its author thought makes every test built on it worthless.

This module is the public entry point: it finds the source (builtin name, file, mapping), reads YAML/JSON
and runs the per-section validators of :mod:`.scenario_fields`. The types themselves live in
:mod:`.scenario_types` and are re-exported here.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from offline_sagemaker.exceptions import ScenarioError
from offline_sagemaker.scenario_fields import SECTIONS, TOP_LEVEL_KEYS, unknown_key
from offline_sagemaker.scenario_types import (
    BUILTIN_SCENARIOS,
    CapacityWindow,
    Faults,
    PhaseSeconds,
    Scenario,
    ScenarioSource,
    TrainingPlan,
)

__all__ = [
    "BUILTIN_SCENARIOS",
    "CapacityWindow",
    "Faults",
    "PhaseSeconds",
    "Scenario",
    "ScenarioError",
    "ScenarioSource",
    "TrainingPlan",
    "load_scenario",
    "parse_scenario",
]


def load_scenario(source: ScenarioSource) -> Scenario:
    """Load and validate a scenario.

    :param source: a :class:`Scenario` (returned as is), a dict, a builtin name (see
        :data:`BUILTIN_SCENARIOS`), or a path to a ``.yaml``/``.yml``/``.json`` file.
    :raises ScenarioError: when the source cannot be found or any key is invalid.
    """
    if isinstance(source, Scenario):
        return source
    if isinstance(source, Mapping):
        return parse_scenario(source, default_name="custom")
    text_source = str(source)
    if isinstance(source, str) and source in BUILTIN_SCENARIOS:
        resource = resources.files("offline_sagemaker").joinpath(f"scenarios/{source}.yaml")
        return parse_scenario(
            _read_mapping(resource.read_text(encoding="utf-8"), f"builtin scenario {source!r}"), source
        )
    path = Path(text_source)
    if not path.is_file():
        close = difflib.get_close_matches(text_source, BUILTIN_SCENARIOS, n=1)
        hint = f" Did you mean the builtin {close[0]!r}?" if close else ""
        raise ScenarioError(
            f"scenario {text_source!r} is neither a builtin scenario ({', '.join(BUILTIN_SCENARIOS)}) "
            f"nor an existing file.{hint}"
        )
    data = _read_mapping(path.read_text(encoding="utf-8"), str(path))
    return parse_scenario(data, default_name=path.stem)


def parse_scenario(data: Mapping[str, Any], default_name: str) -> Scenario:
    """Validate a scenario mapping, section by section in file order; ``default_name`` if it has no name."""
    data = copy.deepcopy(dict(data))
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise unknown_key("", key, TOP_LEVEL_KEYS)
    kwargs: dict[str, Any] = {"name": str(data.get("name", default_name))}
    for section in SECTIONS:
        kwargs.update(section(data))
    return Scenario(**kwargs)


def _read_mapping(text: str, origin: str) -> Mapping[str, Any]:
    try:
        # YAML is a superset of JSON, so one parser serves both file kinds.
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{origin}: not valid YAML/JSON: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{origin}: a scenario must be a mapping of keys, got {type(data).__name__}")
    return data
