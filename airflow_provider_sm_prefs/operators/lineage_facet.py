"""The ``smPrefs_capacity`` OpenLineage run facet: the preference list and what SageMaker chose.

Imports OpenLineage's client at module level: only :mod:`airflow_provider_sm_prefs.operators.openlineage`
imports this module, inside the methods Airflow's OpenLineage provider calls, so the operators work
without that provider installed. The class's attributes, the JSON Schema shipped in the wheel
(:data:`airflow_provider_sm_prefs.domain.lineage.SCHEMA_RESOURCE`) and the values
(:func:`airflow_provider_sm_prefs.domain.lineage.capacity_facet_fields`) all follow the properties of the pure
:func:`airflow_provider_sm_prefs.domain.lineage.facet_properties`, read off the outcome's declaration.
"""

from __future__ import annotations

from typing import Any

from attrs import define, field, make_class
from openlineage.client.facet_v2 import RunFacet

from airflow_provider_sm_prefs import PACKAGE_NAME, __version__
from airflow_provider_sm_prefs.domain import lineage
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome

__all__ = ["PRODUCER", "SCHEMA_URL", "SageMakerCapacityRunFacet", "capacity_facet_class"]

#: Who produced the facet: this provider, at this version.
PRODUCER = f"https://pypi.org/project/{PACKAGE_NAME}/{__version__}/"
#: The facet's schema: the file ``airflow_provider_sm_prefs/data/SageMakerCapacityRunFacet.json`` of this
#: release, with a JSON Pointer to the definition (the form OpenLineage's own facets use).
SCHEMA_URL = (
    f"https://pypi.org/project/{PACKAGE_NAME}/{__version__}/"
    "airflow_provider_sm_prefs/data/SageMakerCapacityRunFacet.json#/$defs/SageMakerCapacityRunFacet"
)


@define
class _CapacityRunFacet(RunFacet):
    """What the facet class does besides carrying its fields (:func:`capacity_facet_class` adds those)."""

    #: Instance types, plan ARNs and statuses are not secrets: keep OpenLineage's redaction off them.
    _additional_skip_redact = [
        "jobKind",
        "jobName",
        "preferences",
        "selectedInstanceType",
        "excluded",
        "stages",
    ]

    def __attrs_post_init__(self) -> None:
        if not self._producer:
            self._producer = PRODUCER
        super().__attrs_post_init__()

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL


def capacity_facet_class(outcome: type[CapacityOutcome] = CapacityOutcome) -> type[RunFacet]:
    """The facet class: one attribute per property of the facet's JSON Schema, in its order.

    The properties are :func:`airflow_provider_sm_prefs.domain.lineage.facet_properties` of ``outcome``'s
    declaration: a field of the outcome marked ``facet(...)`` becomes an attribute here with nothing else
    to edit. The required ones come first; a list defaults to empty, anything else to None.
    """
    properties = lineage.facet_properties(outcome)
    attributes: dict[str, Any] = {}
    for name in sorted(properties, key=lambda name: name not in lineage.FACET_REQUIRED):
        if name in lineage.FACET_REQUIRED:
            attributes[name] = field()
        elif properties[name]["type"] == "array":
            attributes[name] = field(factory=list)
        else:
            attributes[name] = field(default=None)
    made: type[RunFacet] = make_class(
        "SageMakerCapacityRunFacet", attributes, bases=(_CapacityRunFacet,), slots=True
    )
    made.__module__ = __name__
    made.__doc__ = _DOC
    return made


_DOC = """The instance preference list of a SageMaker job and the entry SageMaker selected.

Field meanings are those of :class:`~airflow_provider_sm_prefs.domain.outcome.CapacityOutcome` (camelCase here, as
OpenLineage writes facets; ``preferences``, ``excluded`` and ``stages`` hold camelCase entries too, and the
accelerator fields come from ``accelerators``). Every field but ``jobKind`` and ``preferences`` is None
until SageMaker selected an entry. No field comes from the request's environment, hyperparameters or
credentials. The fields and their JSON Schema: :func:`airflow_provider_sm_prefs.domain.lineage.facet_properties`.
"""

#: The ``smPrefs_capacity`` facet (built once, from the outcome's declaration).
SageMakerCapacityRunFacet = capacity_facet_class()
