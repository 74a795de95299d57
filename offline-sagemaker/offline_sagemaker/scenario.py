"""Scenarios for the offline SageMaker: how much capacity exists, when, and how the service misbehaves.

A scenario is written by users as YAML or JSON (or passed as a dict) and validated here into an immutable
:class:`Scenario`. Every error names the offending key with its full path, e.g.
``capacity.ml.g6.48xlarge[1].free: must be an integer >= 0, got -1``, because a scenario that silently
means something else than its author thought makes every test built on it worthless.

This module is the public entry point: it finds the source (builtin name, file, mapping), reads YAML/JSON
and runs the per-section validators of :mod:`.scenario_fields`. The types themselves live in
:mod:`.scenario_types` and are re-exported here.

:class:`ScenarioFiles` is what the admin route ``POST /_emulator/scenario`` may read: a builtin, the file
the server started from, or a file under a directory its command line allowed (``--scenario-dir``).
Anyone who can reach the port can call that route, so it reads nothing else and its errors never quote
a file's content.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import os
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from offline_sagemaker.exceptions import ScenarioError, ScenarioRefused
from offline_sagemaker.scenario_fields import SECTIONS, TOP_LEVEL_KEYS, unknown_key
from offline_sagemaker.scenario_regions import regions_section
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
    "ScenarioFiles",
    "ScenarioRefused",
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


#: The file kinds a scenario file may have.
SCENARIO_SUFFIXES = (".yaml", ".yml", ".json")
_LEADING_KEY = re.compile(r"[a-z_]+")


@dataclasses.dataclass(frozen=True)
class ScenarioFiles:
    """The scenario files the admin route may read, and how it reads them.

    A path is admitted when its real path (symbolic links and ``..`` resolved) is one of :attr:`files` or
    lies under one of :attr:`directories`, and it ends in ``.yaml``, ``.yml`` or ``.json``; the check comes
    before the file is opened, so a refusal tells nothing about the file, not even whether it exists.

    :param directories: real paths of the directories whose files may be loaded.
    :param files: real paths of single files that may be loaded (the one the server started from).
    """

    directories: tuple[Path, ...] = ()
    files: tuple[Path, ...] = ()

    @classmethod
    def allowing(
        cls, directories: Iterable[str | os.PathLike[str]] = (), start: ScenarioSource | None = None
    ) -> ScenarioFiles:
        """The files under ``directories``, plus ``start`` when it is a file (the server's own scenario).

        :raises ScenarioError: when a directory does not exist.
        """
        resolved = []
        for directory in directories:
            real = Path(os.path.realpath(directory))
            if not real.is_dir():
                raise ScenarioError(f"scenario directory {str(directory)!r}: not an existing directory")
            resolved.append(real)
        files: tuple[Path, ...] = ()
        if isinstance(start, str | os.PathLike) and str(start) not in BUILTIN_SCENARIOS:
            files = (Path(os.path.realpath(start)),)
        return cls(tuple(resolved), files)

    def load(self, source: str) -> Scenario:
        """The builtin named ``source``, or the admitted file at ``source`` (relative to the server's
        working directory), validated.

        :raises ScenarioRefused: when ``source`` is neither a builtin nor an admitted file.
        :raises ScenarioError: when the file is missing, unreadable or not a valid scenario; the message
            names the file and the kind of problem (and the top-level key at fault), never its content.
        """
        if source in BUILTIN_SCENARIOS:
            return load_scenario(source)
        path = self._admit(source)
        if not path.is_file():
            raise ScenarioError(f"scenario file {source!r}: no such file")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ScenarioError(f"scenario file {source!r}: cannot be read ({type(exc).__name__})") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise ScenarioError(f"scenario file {source!r}: not valid YAML/JSON{where}") from None
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ScenarioError(
                f"scenario file {source!r}: a scenario must be a mapping of keys, got a {type(data).__name__}"
            )
        try:
            return parse_scenario(data, default_name=path.stem)
        except ScenarioError as exc:
            raise ScenarioError(f"scenario file {source!r}: {_problem_kind(str(exc))}") from None
        except (TypeError, ValueError, AttributeError, KeyError):
            # A value of a type no validator expected (a key that is a number, say).
            raise ScenarioError(f"scenario file {source!r}: {_problem_kind('')}") from None

    def _admit(self, source: str) -> Path:
        """The real path of ``source`` if the server allows it; raises :class:`ScenarioRefused` otherwise."""
        candidate = Path(source)
        if "\x00" in source or ".." in candidate.parts:
            raise ScenarioRefused(f"scenario {source!r}: a scenario path may not contain '..' or NUL")
        real = Path(os.path.realpath(candidate))
        if real not in self.files and not any(real.is_relative_to(d) for d in self.directories):
            raise ScenarioRefused(
                f"scenario {source!r}: neither a builtin scenario ({', '.join(BUILTIN_SCENARIOS)}) nor a "
                "file under a scenario directory this server allows; start it with "
                "--scenario-dir DIR (scenario_dirs=[DIR] in Python) to load the files under DIR, or send "
                "the scenario itself as a JSON object"
            )
        if real.suffix.lower() not in SCENARIO_SUFFIXES:
            raise ScenarioRefused(
                f"scenario {source!r}: a scenario file ends in {', '.join(SCENARIO_SUFFIXES)}"
            )
        return real


def _problem_kind(message: str) -> str:
    """What is wrong with a file's scenario, in the emulator's words only: the validation message itself
    quotes the file's keys and values, which are not the caller's to read."""
    found = _LEADING_KEY.match(message)
    hint = (
        "; load it with `offline-sagemaker --scenario FILE` or load_scenario(FILE) to see the key and value"
    )
    if found and found.group() in TOP_LEVEL_KEYS:
        return f"invalid value under the scenario key {found.group()!r}{hint}"
    return f"a top-level key is not a scenario key (scenario keys: {', '.join(sorted(TOP_LEVEL_KEYS))}){hint}"


def parse_scenario(data: Mapping[str, Any], default_name: str) -> Scenario:
    """Validate a scenario mapping, section by section in file order; ``default_name`` if it has no name."""
    data = copy.deepcopy(dict(data))
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise unknown_key("", key, TOP_LEVEL_KEYS)
    kwargs: dict[str, Any] = {"name": str(data.get("name", default_name))}
    for section in (*SECTIONS, regions_section):
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
