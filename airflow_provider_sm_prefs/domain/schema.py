"""One declaration of the outcome's fields, and what the record, its reader and the facet derive from it (pure).

:class:`~airflow_provider_sm_prefs.domain.outcome.CapacityOutcome` declares the outcome's fields, written out
for readers and mypy. The ``metadata`` of a field (made by :func:`facet`, :data:`OUTCOME_ONLY` or
:func:`reads`) says where else it goes; nothing else names the outcome's fields one by one:

- the capacity record (:class:`~airflow_provider_sm_prefs.domain.record.CapacityRecord`) carries every outcome
  field under the same name unless it is :data:`OUTCOME_ONLY`: ``CapacityRecord.from_outcome`` copies
  :func:`recorded`, and ``tests/test_schema.py`` checks the record declares each, with a type that holds
  the outcome's (the record's own line is the one other edit a recorded field needs: mypy reads it);
- the record's tolerant reader checks a value read back against the types of the record field's
  annotation (:func:`reader_types`, :func:`holds`), or of its :func:`reads` when the reader is looser;
- the OpenLineage facet carries the fields marked :func:`facet` as they are, camelCase and nullable
  (:func:`facet_copies`, :func:`facet_property`): its JSON Schema, its class and its values follow
  (:mod:`airflow_provider_sm_prefs.domain.lineage`).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

__all__ = [
    "METADATA_KEY",
    "OUTCOME_ONLY",
    "FieldInfo",
    "camel",
    "facet",
    "facet_copies",
    "facet_property",
    "holds",
    "info",
    "json_type",
    "reader_types",
    "reads",
    "recorded",
    "runtime_types",
]

#: The key of this module's entry in a dataclass field's ``metadata``.
METADATA_KEY = "sm_prefs"


@dataclasses.dataclass(frozen=True)
class FieldInfo:
    """What a field's declaration says beyond its name, annotation and default.

    :param recorded: (outcome) the capacity record carries the field too, under the same name.
    :param facet: (outcome) the OpenLineage facet carries the field as it is, camelCase and nullable.
    :param json: (outcome) JSON Schema keywords of the facet's property besides its type.
    :param reads: (record) the annotation the record's reader checks values against, when not the field's.
    """

    recorded: bool = True
    facet: bool = False
    json: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    reads: Any = None


def facet(description: str | None = None, **keywords: Any) -> dict[str, FieldInfo]:
    """Metadata of an outcome field the facet carries as it is.

    :param description: the property's description in the facet's JSON Schema.
    :param keywords: more JSON Schema keywords (``minimum``, ``enum``: ``null`` is added to an enum).
    """
    if description is not None:
        keywords["description"] = description
    return {METADATA_KEY: FieldInfo(facet=True, json=keywords)}


#: Metadata of an outcome field the capacity record does not carry.
OUTCOME_ONLY: Mapping[str, FieldInfo] = {METADATA_KEY: FieldInfo(recorded=False)}


def reads(annotation: Any) -> dict[str, FieldInfo]:
    """Metadata of a record field whose reader takes what ``annotation`` holds (``Any``: anything)."""
    return {METADATA_KEY: FieldInfo(reads=annotation)}


def info(field: dataclasses.Field[Any]) -> FieldInfo:
    """What ``field``'s declaration says (the defaults when its metadata says nothing)."""
    found = field.metadata.get(METADATA_KEY)
    return found if isinstance(found, FieldInfo) else FieldInfo()


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def recorded(cls: type) -> tuple[str, ...]:
    """The fields of outcome class ``cls`` the record carries, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if info(f).recorded)


def facet_copies(cls: type) -> tuple[str, ...]:
    """The fields of outcome class ``cls`` the facet carries as they are, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if info(f).facet)


def camel(name: str) -> str:
    """A field's name as OpenLineage writes facet fields: ``first_choice_hourly_cost`` → ``firstChoiceHourlyCost``."""
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _union_args(annotation: Any) -> tuple[Any, ...]:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return typing.get_args(annotation)
    return (annotation,)


def runtime_types(annotation: Any) -> tuple[type, ...] | None:
    """The Python types a value of ``annotation`` may be once read back from JSON; None for ``Any``.

    A ``float`` may have been written as an int (``2`` for ``2.0``); containers are checked by their
    origin only (``list[str]`` → ``list``).
    """
    found: list[type] = []
    for arg in _union_args(annotation):
        if arg is Any:
            return None
        origin = typing.get_origin(arg) or arg
        if origin is None:
            origin = type(None)
        if not isinstance(origin, type):
            raise TypeError(f"no JSON reading of {annotation!r}")
        for kind in (int, float) if origin is float else (origin,):
            if kind not in found:
                found.append(kind)
    return tuple(found)


def holds(allowed: tuple[type, ...] | None, value: Any) -> bool:
    """Whether ``value`` is one of ``allowed`` (None: anything); ``True`` is an int to isinstance, not here."""
    if allowed is None:
        return True
    if isinstance(value, bool) and bool not in allowed:
        return False
    return isinstance(value, allowed)


_READER_TYPES: dict[type, Mapping[str, tuple[type, ...] | None]] = {}


def reader_types(cls: type) -> Mapping[str, tuple[type, ...] | None]:
    """What each field of dataclass ``cls`` may hold when read back (None: anything); computed once a class."""
    found = _READER_TYPES.get(cls)
    if found is None:
        hints = _hints(cls)
        found = _READER_TYPES[cls] = types.MappingProxyType(
            {
                f.name: runtime_types(hints[f.name] if info(f).reads is None else info(f).reads)
                for f in dataclasses.fields(cls)
            }
        )
    return found


_JSON_NAMES: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
    type(None): "null",
}


def json_type(annotation: Any, nullable: bool = False) -> str | list[str]:
    """The JSON Schema ``type`` of ``annotation``: one name, or a list of names (``["string", "null"]``)."""
    names: list[str] = []
    for arg in _union_args(annotation):
        origin = typing.get_origin(arg) or (type(None) if arg is None else arg)
        name = _JSON_NAMES[origin]
        if name not in names:
            names.append(name)
    if "number" in names and "integer" in names:
        names.remove("integer")
    if nullable and "null" not in names:
        names.append("null")
    names.sort(key=lambda name: name == "null")
    return names[0] if len(names) == 1 else names


def facet_property(cls: type, name: str) -> dict[str, Any]:
    """The JSON Schema of the facet property copied from field ``name`` of outcome class ``cls``.

    Nullable, whatever the field's type: the facet is sent before SageMaker selected anything too.
    """
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    keywords = dict(info(field).json)
    if "enum" in keywords and None not in keywords["enum"]:
        keywords["enum"] = [*keywords["enum"], None]
    return {"type": json_type(_hints(cls)[name], nullable=True), **keywords}
