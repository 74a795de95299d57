"""The ``smPrefs_capacity`` OpenLineage run facet: the preference list and what SageMaker chose.

Imports OpenLineage's client at module level: only :mod:`airflow_provider_sm_prefs.operators.lineage`
imports this module, inside the methods Airflow's OpenLineage provider calls, so the operators work
without that provider installed. The fields are built by the pure
:func:`airflow_provider_sm_prefs.lineage.capacity_facet_fields`; the JSON Schema ships in the wheel
(:data:`airflow_provider_sm_prefs.lineage.SCHEMA_RESOURCE`).
"""

from __future__ import annotations

from typing import Any

from attrs import define, field
from openlineage.client.facet_v2 import RunFacet

from airflow_provider_sm_prefs import PACKAGE_NAME, __version__

__all__ = ["PRODUCER", "SCHEMA_URL", "SageMakerCapacityRunFacet"]

#: Who produced the facet: this provider, at this version.
PRODUCER = f"https://pypi.org/project/{PACKAGE_NAME}/{__version__}/"
#: The facet's schema: the file ``airflow_provider_sm_prefs/data/SageMakerCapacityRunFacet.json`` of this
#: release, with a JSON Pointer to the definition (the form OpenLineage's own facets use).
SCHEMA_URL = (
    f"https://pypi.org/project/{PACKAGE_NAME}/{__version__}/"
    "airflow_provider_sm_prefs/data/SageMakerCapacityRunFacet.json#/$defs/SageMakerCapacityRunFacet"
)


@define
class SageMakerCapacityRunFacet(RunFacet):
    """The instance preference list of a SageMaker job and the entry SageMaker selected.

    Field meanings are those of :class:`~airflow_provider_sm_prefs.outcome.CapacityOutcome` (camelCase
    here, as OpenLineage writes facets); every field but ``jobKind`` and ``preferences`` is None until
    SageMaker selected an entry. No field comes from the request's environment, hyperparameters or
    credentials.

    :param jobKind: ``training`` or ``processing``.
    :param jobName: the SageMaker job.
    :param preferences: the list as written: ``{instanceType, instanceCount, trainingPlanArn,
        acceptAfterSeconds}`` per entry.
    :param selectedInstanceType: the entry SageMaker selected.
    :param selectedInstanceCount: its instance count.
    :param preferenceRank: its place in the list (1 = first choice).
    :param fellBack: whether the rank is above 1.
    :param pendingSeconds: how long the job waited for capacity, from AWS's timestamps.
    :param capacity: ``on-demand`` or ``training-plan``.
    :param acceleratorModel: the selected type's accelerator (``A10G``), None for CPU types.
    :param acceleratorsTotal: accelerators over the selected cluster.
    :param acceleratorMemoryGibPerDevice: memory per accelerator in GiB.
    :param jobStatus: the job's status when the event was made.
    :param billableSeconds: SageMaker's billable time, once the job ended.
    :param hourlyCost: USD per hour of the selected cluster, when priced.
    :param firstChoiceHourlyCost: the same for the first entry of the list.
    :param costIncrease: ``hourlyCost`` against ``firstChoiceHourlyCost``, as a fraction.
    :param estimatedCost: ``hourlyCost`` × billable time, once known.
    :param excluded: entries the guardrails left out before submit: ``{instanceType, rank, kind}``.
    :param stages: submission stages of a list with acceptance windows: ``{stage, entries, jobName,
        pendingSeconds, ended}``; empty otherwise.
    """

    jobKind: str
    preferences: list[dict[str, Any]]
    jobName: str | None = field(default=None)
    selectedInstanceType: str | None = field(default=None)
    selectedInstanceCount: int | None = field(default=None)
    preferenceRank: int | None = field(default=None)
    fellBack: bool | None = field(default=None)
    pendingSeconds: float | None = field(default=None)
    capacity: str | None = field(default=None)
    acceleratorModel: str | None = field(default=None)
    acceleratorsTotal: int | None = field(default=None)
    acceleratorMemoryGibPerDevice: float | None = field(default=None)
    jobStatus: str | None = field(default=None)
    billableSeconds: int | None = field(default=None)
    hourlyCost: float | None = field(default=None)
    firstChoiceHourlyCost: float | None = field(default=None)
    costIncrease: float | None = field(default=None)
    estimatedCost: float | None = field(default=None)
    excluded: list[dict[str, Any]] = field(factory=list)
    stages: list[dict[str, Any]] = field(factory=list)

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
