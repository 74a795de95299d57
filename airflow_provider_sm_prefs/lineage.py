"""What a job reads and writes in S3, and its capacity outcome as lineage facet fields (pure).

The operators report these through Airflow's OpenLineage provider
(:mod:`airflow_provider_sm_prefs.operators.lineage`); this module only reads the Create* request and
the :class:`~airflow_provider_sm_prefs.outcome.CapacityOutcome`, so it is tested without Airflow,
boto or OpenLineage.

Datasets follow OpenLineage's naming for S3, as the amazon provider does: namespace ``s3://<bucket>``,
name the object key or prefix (``/`` for a whole bucket). Only S3 locations are reported; local-mode
``file://`` paths, EFS/FSx channels and dataset definitions (Athena, Redshift) are left out.

The facet carries the preference list and what SageMaker chose, never anything from the request that
could hold a secret (environment, hyperparameters, role, image, network settings).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from airflow_provider_sm_prefs.kinds import JobKind
from airflow_provider_sm_prefs.outcome import CapacityOutcome

__all__ = [
    "FACET_NAME",
    "SCHEMA_RESOURCE",
    "S3Location",
    "capacity_facet_fields",
    "job_inputs",
    "job_outputs",
    "s3_location",
]

#: The run facet's key in an OpenLineage event (custom facets carry a prefix of their producer).
FACET_NAME = "smPrefs_capacity"
#: The facet's JSON Schema, shipped in the wheel next to the hardware catalog.
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


#: Facet fields read off the outcome, by the outcome's attribute (None until an entry is selected).
_OUTCOME_FIELDS = {
    "selectedInstanceType": "selected_instance_type",
    "selectedInstanceCount": "selected_instance_count",
    "preferenceRank": "preference_rank",
    "fellBack": "fell_back",
    "pendingSeconds": "pending_seconds",
    "capacity": "capacity",
    "jobStatus": "job_status",
    "billableSeconds": "billable_seconds",
    "hourlyCost": "hourly_cost",
    "firstChoiceHourlyCost": "first_choice_hourly_cost",
    "costIncrease": "cost_increase",
    "estimatedCost": "estimated_cost",
}
#: Facet fields read off ``outcome.accelerators``, by its key.
_ACCELERATOR_FIELDS = {
    "acceleratorModel": "model",
    "acceleratorsTotal": "total",
    "acceleratorMemoryGibPerDevice": "memory_gib_per_device",
}


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
    fields: dict[str, Any] = {
        "jobKind": kind.value,
        "jobName": outcome.job_name if outcome else job_name,
        "preferences": _preference_fields((outcome.preferences if outcome else None) or preferences),
        **{name: getattr(outcome, attr) if outcome else None for name, attr in _OUTCOME_FIELDS.items()},
        **{name: accelerators.get(key) for name, key in _ACCELERATOR_FIELDS.items()},
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
