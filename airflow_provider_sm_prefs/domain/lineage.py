"""What a job reads and writes in S3, and its capacity outcome as lineage facet fields (pure).

The operators report these through Airflow's OpenLineage provider
(:mod:`airflow_provider_sm_prefs.operators.openlineage`); this module only reads the Create* request and
the :class:`~airflow_provider_sm_prefs.domain.outcome.CapacityOutcome`, so it is tested without Airflow,
boto or OpenLineage.

Datasets follow OpenLineage's naming for S3, as the amazon provider does: namespace ``s3://<bucket>``,
name the object key or prefix (``/`` for a whole bucket). Only S3 locations are reported; local-mode
``file://`` paths, EFS/FSx channels and dataset definitions (Athena, Redshift) are left out.

The facet carries the preference list and what SageMaker chose, never anything from the request that
could hold a secret (environment, hyperparameters, role, image, network settings).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from airflow_provider_sm_prefs.domain import schema
from airflow_provider_sm_prefs.domain.guardrails import ExclusionKind
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.windows import StageEnd

__all__ = [
    "FACET_NAME",
    "FACET_REQUIRED",
    "SCHEMA_RESOURCE",
    "S3Location",
    "capacity_facet_fields",
    "facet_properties",
    "facet_schema",
    "facet_schema_text",
    "job_inputs",
    "job_outputs",
    "s3_location",
]

#: The run facet's key in an OpenLineage event (custom facets carry a prefix of their producer).
FACET_NAME = "smPrefs_capacity"
#: The facet's JSON Schema, shipped in the wheel next to the hardware catalog; written from
#: :func:`facet_schema` (``tests/test_schema.py`` checks the file is what it writes).
SCHEMA_RESOURCE = "data/SageMakerCapacityRunFacet.json"


@dataclass(frozen=True)
class S3Location:
    """One S3 object or prefix, named as OpenLineage names S3 datasets.

    :param bucket: the bucket.
    :param key: the object key or prefix, without a leading slash ("" for the whole bucket).
    """

    bucket: str
    key: str

    @property
    def namespace(self) -> str:
        return f"s3://{self.bucket}"

    @property
    def name(self) -> str:
        return self.key or "/"


def s3_location(uri: Any) -> S3Location | None:
    """The location of an ``s3://bucket/key`` URI; None for anything else (other schemes, templates, junk)."""
    if not isinstance(uri, str):
        return None
    parts = urlsplit(uri.strip())
    if parts.scheme != "s3" or not parts.netloc:
        return None
    return S3Location(bucket=parts.netloc, key=parts.path.lstrip("/"))


def _get(node: Any, *path: str) -> Any:
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def _items(node: Any) -> list[Any]:
    return list(node) if isinstance(node, list | tuple) else []


def _unique(uris: Iterable[Any]) -> list[S3Location]:
    found: list[S3Location] = []
    for uri in uris:
        location = s3_location(uri)
        if location is not None and location not in found:
            found.append(location)
    return found


def job_inputs(kind: JobKind, request: Mapping[str, Any]) -> list[S3Location]:
    """The S3 inputs of a Create* request, in request order, each once.

    Training: ``InputDataConfig[].DataSource.S3DataSource.S3Uri``; processing:
    ``ProcessingInputs[].S3Input.S3Uri``.
    """
    if kind is JobKind.TRAINING:
        return _unique(
            _get(channel, "DataSource", "S3DataSource", "S3Uri")
            for channel in _items(request.get("InputDataConfig"))
        )
    return _unique(_get(item, "S3Input", "S3Uri") for item in _items(request.get("ProcessingInputs")))


def job_outputs(
    kind: JobKind, request: Mapping[str, Any], outcome: CapacityOutcome | None = None
) -> list[S3Location]:
    """The S3 outputs of a job.

    Training: the model artifact SageMaker reports once the job completed
    (``ModelArtifacts.S3ModelArtifacts``, kept in ``outcome.model_artifacts``), else the configured
    ``OutputDataConfig.S3OutputPath``. Processing: ``ProcessingOutputConfig.Outputs[].S3Output.S3Uri``.
    """
    if kind is JobKind.TRAINING:
        artifacts = outcome.model_artifacts if outcome is not None else None
        return _unique([artifacts or _get(request, "OutputDataConfig", "S3OutputPath")])
    return _unique(
        _get(item, "S3Output", "S3Uri") for item in _items(_get(request, "ProcessingOutputConfig", "Outputs"))
    )


def _preference_fields(preferences: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "instanceType": entry.get("instance_type"),
            "instanceCount": entry.get("instance_count"),
            "trainingPlanArn": entry.get("training_plan_arn"),
            "acceptAfterSeconds": entry.get("accept_after"),
        }
        for entry in preferences
    ]


#: The facet's properties known before SageMaker selects anything, listed first (JSON Schema of each).
_KNOWN_BEFORE_SELECTION: dict[str, dict[str, Any]] = {
    "jobKind": {"type": "string", "enum": [kind.value for kind in JobKind]},
    "jobName": {"type": ["string", "null"], "description": "The SageMaker job."},
    "preferences": {
        "type": "array",
        "maxItems": 5,
        "description": "The list as written, in priority order.",
        "items": {
            "type": "object",
            "properties": {
                "instanceType": {"type": "string"},
                "instanceCount": {"type": ["integer", "null"], "minimum": 1},
                "trainingPlanArn": {"type": ["string", "null"]},
                "acceptAfterSeconds": {
                    "type": ["number", "null"],
                    "minimum": 0,
                    "description": "Acceptance window: the entry was offered only after the task had waited "
                    "this long.",
                },
            },
            "required": ["instanceType"],
            "additionalProperties": False,
        },
    },
}
#: Facet properties read off ``outcome.accelerators``: its key, and the property's JSON Schema.
_ACCELERATOR_FIELDS: dict[str, tuple[str, dict[str, Any]]] = {
    "acceleratorModel": ("model", {"type": ["string", "null"]}),
    "acceleratorsTotal": ("total", {"type": ["integer", "null"], "minimum": 0}),
    "acceleratorMemoryGibPerDevice": ("memory_gib_per_device", {"type": ["number", "null"], "minimum": 0}),
}
#: Facet properties built from an outcome field rather than copied as it is, by that field (listed at its
#: place among the outcome's fields). Every other facet property is copied: ``facet(...)`` on the field.
_BUILT_FROM: dict[str, dict[str, dict[str, Any]]] = {
    "accelerators": {name: prop for name, (_, prop) in _ACCELERATOR_FIELDS.items()},
    "excluded": {
        "excluded": {
            "type": "array",
            "description": "Entries left out before submit by the guardrails.",
            "items": {
                "type": "object",
                "properties": {
                    "instanceType": {"type": "string"},
                    "rank": {"type": ["integer", "null"]},
                    "kind": {"type": "string", "enum": [kind.value for kind in ExclusionKind]},
                },
                "additionalProperties": False,
            },
        }
    },
    "stages": {
        "stages": {
            "type": "array",
            "description": "Submission stages of a list with acceptance windows (empty otherwise): the entries "
            "each stage offered, its job, how long it waited and how it ended.",
            "items": {
                "type": "object",
                "properties": {
                    "stage": {"type": "integer"},
                    "entries": {"type": "array", "items": {"type": "string"}},
                    "jobName": {"type": "string"},
                    "pendingSeconds": {"type": "number"},
                    "ended": {"type": "string", "enum": [end.value for end in StageEnd]},
                },
                "additionalProperties": False,
            },
        }
    },
}
#: The properties every facet has.
FACET_REQUIRED = ("jobKind", "preferences")
_FACET_DESCRIPTION = (
    "The instance preference list of an Amazon SageMaker Training or Processing job and the entry SageMaker "
    "selected (airflow-provider-sm-prefs). Every field but jobKind and preferences is null until an entry "
    "is selected."
)


def facet_properties(outcome: type[CapacityOutcome] = CapacityOutcome) -> dict[str, dict[str, Any]]:
    """The JSON Schema of each property of the facet, in order.

    First the properties known before selection, then, in the order of the outcome's fields, one per field
    marked ``facet(...)`` (copied as it is: camelCase, nullable) and those built from a field.
    """
    properties = dict(_KNOWN_BEFORE_SELECTION)
    for field in dataclasses.fields(outcome):
        if schema.info(field).facet:
            properties[schema.camel(field.name)] = schema.facet_property(outcome, field.name)
        properties.update(_BUILT_FROM.get(field.name, {}))
    return copy.deepcopy(properties)


def facet_schema(outcome: type[CapacityOutcome] = CapacityOutcome) -> dict[str, Any]:
    """The facet's JSON Schema, as shipped in :data:`SCHEMA_RESOURCE` (:func:`facet_schema_text`)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "SageMakerCapacityRunFacet.json",
        "$defs": {
            "SageMakerCapacityRunFacet": {
                "allOf": [
                    {"$ref": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"},
                    {
                        "type": "object",
                        "description": _FACET_DESCRIPTION,
                        "properties": facet_properties(outcome),
                        "required": list(FACET_REQUIRED),
                    },
                ],
                "type": "object",
            }
        },
        "type": "object",
        "properties": {FACET_NAME: {"$ref": "#/$defs/SageMakerCapacityRunFacet"}},
    }


def facet_schema_text() -> str:
    """The text of :data:`SCHEMA_RESOURCE`. After changing a facet field, write it there (in a checkout)::

    python -c "from airflow_provider_sm_prefs.domain import lineage; print(lineage.facet_schema_text(), end='')" > airflow_provider_sm_prefs/data/SageMakerCapacityRunFacet.json
    """
    return json.dumps(facet_schema(), indent=2) + "\n"


def capacity_facet_fields(
    kind: JobKind,
    preferences: Iterable[Mapping[str, Any]],
    outcome: CapacityOutcome | None = None,
    job_name: str | None = None,
) -> dict[str, Any]:
    """The fields of the ``smPrefs_capacity`` run facet (JSON-safe, camelCase as OpenLineage writes them).

    Before SageMaker selects an entry (a START event, or a try that failed without capacity) only the
    list, the job kind and the job name are known; the other fields are None.

    :param preferences: the list as written (``InstancePreferenceList.as_list()``); the outcome's own list
        is used when the outcome is given.
    :param outcome: what SageMaker chose, once known.
    :param job_name: the job's name when there is no outcome yet.
    """
    accelerators = (outcome.accelerators if outcome else None) or {}
    copied = schema.facet_copies(type(outcome) if outcome else CapacityOutcome)
    fields: dict[str, Any] = {
        "jobKind": kind.value,
        "jobName": outcome.job_name if outcome else job_name,
        "preferences": _preference_fields((outcome.preferences if outcome else None) or preferences),
        **{schema.camel(name): getattr(outcome, name) if outcome else None for name in copied},
        **{name: accelerators.get(key) for name, (key, _) in _ACCELERATOR_FIELDS.items()},
        "excluded": [
            {"instanceType": item.get("instance_type"), "rank": item.get("rank"), "kind": item.get("kind")}
            for item in (outcome.excluded if outcome else [])
        ],
        "stages": [
            {
                "stage": item.get("stage"),
                "entries": list(item.get("entries") or []),
                "jobName": item.get("job_name"),
                "pendingSeconds": item.get("pending_seconds"),
                "ended": item.get("ended"),
            }
            for item in (outcome.stages if outcome else [])
        ],
    }
    return fields
