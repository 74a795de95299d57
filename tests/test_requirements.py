"""Workload requirements against the hardware catalog (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList, WorkloadRequirements
from airflow_provider_sm_prefs.domain.requirements import mixed_runtimes

P4D, G5, TRN1, M5 = "ml.p4d.24xlarge", "ml.g5.48xlarge", "ml.trn1.32xlarge", "ml.m5.xlarge"


def prefs(*entries: Any) -> InstancePreferenceList:
    return InstancePreferenceList(list(entries), kind="training")


def test_an_entry_below_the_memory_per_device_is_named_with_its_actual_figure() -> None:
    problems = WorkloadRequirements(min_accelerator_memory_gib=40).problems(prefs(P4D, G5), default_count=1)
    assert problems == [
        f"instance_preferences[1]: {G5} does not meet requirements.min_accelerator_memory_gib=40: "
        "it has 24 GiB per device (A10G)"
    ]


def test_totals_count_the_entrys_whole_cluster() -> None:
    needs = WorkloadRequirements(min_total_accelerators=16, min_total_accelerator_memory_gib=600)
    listed = prefs({"instance_type": P4D, "instance_count": 2}, {"instance_type": G5, "instance_count": 1})
    problems = needs.problems(listed)
    assert len(problems) == 2 and all(p.startswith(f"instance_preferences[1]: {G5}") for p in problems)
    assert "requirements.min_total_accelerators=16: it has 8 (8 per instance × 1)" in problems[0]
    assert "requirements.min_total_accelerator_memory_gib=600: it has 192 GiB in all" in problems[1]


def test_accelerator_runtime_and_efa_come_from_the_catalog() -> None:
    problems = WorkloadRequirements(accelerator="cuda", efa=True).problems(prefs(P4D, TRN1, M5), 1)
    assert (
        f"instance_preferences[1]: {TRN1} does not meet requirements.accelerator=cuda: it is a neuron type (Trainium)"
        in problems
    )
    assert (
        f"instance_preferences[2]: {M5} does not meet requirements.accelerator=cuda: it is a cpu type"
        in problems
    )
    assert (
        f"instance_preferences[2]: {M5} does not meet requirements.efa=True: the type has no Elastic Fabric Adapter"
        in problems
    )
    assert not [p for p in problems if p.startswith("instance_preferences[0]")]


def test_efa_the_catalog_cannot_confirm_is_reported_as_unverifiable_not_as_a_violation() -> None:
    needs = WorkloadRequirements(efa=True)
    listed = prefs("ml.g7e.48xlarge", P4D)
    assert needs.problems(listed, 1) == []
    assert needs.unverifiable(listed) == [
        "instance_preferences[0]: the catalog does not know whether ml.g7e.48xlarge has EFA"
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"accelerator": "rocm"}, "requirements.accelerator: 'rocm' is not one of cuda, neuron, cpu"),
        ({"min_accelerator_memory_gib": -1}, "requirements.min_accelerator_memory_gib: -1 must be positive"),
        ({"min_total_accelerators": "8"}, "requirements.min_total_accelerators: expected a number, got '8'"),
        ({"efa": "yes"}, "requirements.efa: expected True or False, got 'yes'"),
        ({"gpus": 8}, "requirements: unknown key 'gpus'"),
        ("cuda", "requirements: expected WorkloadRequirements or a dict, got str"),
    ],
)
def test_invalid_requirements_name_the_field(value: Any, message: str) -> None:
    with pytest.raises(InvalidInstancePreferencesError) as info:
        WorkloadRequirements.from_value(value)
    assert message in str(info.value)


def test_a_list_mixing_runtimes_is_named_and_a_uniform_one_is_not() -> None:
    warning = mixed_runtimes(prefs(P4D, TRN1, M5))
    assert warning is not None
    assert f"cuda: {P4D}; neuron: {TRN1}; cpu: {M5}" in warning
    assert mixed_runtimes(prefs(P4D, G5)) is None
