"""The hardware catalog: coverage of botocore's enums, internal consistency, known facts, totals."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from importlib import resources

import pytest

from airflow_provider_sm_prefs.domain import catalog
from airflow_provider_sm_prefs.domain.catalog import (
    AcceleratorTotals,
    InstanceSpec,
    UnknownInstanceTypeError,
    is_accelerated_type,
    known_types,
    lookup,
    totals,
)
from airflow_provider_sm_prefs.domain.exceptions import SageMakerPreferencesError

ALL_SPECS = [lookup(t) for t in sorted(known_types())]
X = "\N{MULTIPLICATION SIGN}"  # the sign describe() writes between count and type


def _ids(spec: InstanceSpec) -> str:
    return spec.instance_type


def _botocore_enum(shape: str) -> frozenset[str]:
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.shape_for(shape).enum)


# --- coverage -------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["TrainingInstanceType", "ProcessingInstanceType"])
def test_catalog_covers_every_type_botocore_accepts(shape: str) -> None:
    missing = sorted(_botocore_enum(shape) - known_types())
    assert not missing, (
        f"botocore's {shape} has {len(missing)} type(s) the hardware catalog lacks; add them to "
        f"airflow_provider_sm_prefs/{catalog.DATA_RESOURCE}: {', '.join(missing)}"
    )


def test_catalog_holds_nothing_botocore_does_not_accept() -> None:
    accepted = _botocore_enum("TrainingInstanceType") | _botocore_enum("ProcessingInstanceType")
    assert sorted(known_types() - accepted) == []


def test_data_file_names_its_sources_and_uncertain_values() -> None:
    text = resources.files("airflow_provider_sm_prefs").joinpath(catalog.DATA_RESOURCE).read_text("utf-8")
    data = json.loads(text)
    urls = [source["url"] for source in data["_sources"]]
    assert "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html" in urls
    assert all(url.startswith("https://") for url in urls)
    assert "ml.g6.*" in data["_notes"]  # AWS's guide calls g6.48xlarge "L40S"; EC2 says L4
    assert len(data["instance_types"]) == len(known_types())


# --- consistency of every entry -------------------------------------------------------------------


@pytest.mark.parametrize("spec", ALL_SPECS, ids=_ids)
def test_accelerated_flag_follows_aws_prefix_rule(spec: InstanceSpec) -> None:
    assert spec.accelerated is is_accelerated_type(spec.instance_type)


@pytest.mark.parametrize("spec", ALL_SPECS, ids=_ids)
def test_accelerator_fields_agree_with_accelerated_flag(spec: InstanceSpec) -> None:
    if spec.accelerated:
        assert spec.accelerators > 0
        assert spec.accelerator_memory_gib > 0
        assert spec.accelerator_model
        expected_kind = "trainium" if spec.instance_type.startswith("ml.trn") else "gpu"
        assert spec.accelerator_kind == expected_kind
    else:
        assert spec.accelerators == 0
        assert spec.accelerator_memory_gib == 0
        assert spec.accelerator_model is None
        assert spec.accelerator_kind is None


@pytest.mark.parametrize("spec", ALL_SPECS, ids=_ids)
def test_vcpus_and_memory_are_sane(spec: InstanceSpec) -> None:
    assert isinstance(spec.vcpus, int) and not isinstance(spec.vcpus, bool)
    assert isinstance(spec.accelerators, int) and not isinstance(spec.accelerators, bool)
    assert 2 <= spec.vcpus <= 448
    # Host memory per vCPU ranges from 1.67 GiB (c4.8xlarge) to 21.3 GiB (p6-b300); outside is a typo.
    assert 1.6 <= spec.memory_gib / spec.vcpus <= 24


def test_sizes_grow_within_a_family() -> None:
    """Bigger sizes of one family never have fewer vCPUs, less memory or fewer accelerators."""
    by_family: dict[str, list[InstanceSpec]] = {}
    for spec in ALL_SPECS:
        by_family.setdefault(spec.instance_type.split(".")[1], []).append(spec)
    for family, specs in by_family.items():
        specs.sort(key=lambda s: (s.vcpus, s.memory_gib))
        for smaller, bigger in itertools.pairwise(specs):
            assert bigger.memory_gib >= smaller.memory_gib, family
        assert len({s.accelerator_model for s in specs}) == 1, family
        assert len({s.accelerator_memory_gib for s in specs}) == 1, family


# --- known facts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_type", "model", "devices", "device_gib", "vcpus", "memory_gib"),
    [
        ("ml.g5.48xlarge", "A10G", 8, 24, 192, 768),
        ("ml.g5.xlarge", "A10G", 1, 24, 4, 16),
        ("ml.g6.48xlarge", "L4", 8, 24, 192, 768),
        ("ml.g6e.48xlarge", "L40S", 8, 48, 192, 1536),
        ("ml.g4dn.12xlarge", "T4", 4, 16, 48, 192),
        ("ml.p3.16xlarge", "V100", 8, 16, 64, 488),
        ("ml.p3dn.24xlarge", "V100", 8, 32, 96, 768),
        ("ml.p4d.24xlarge", "A100", 8, 40, 96, 1152),
        ("ml.p4de.24xlarge", "A100", 8, 80, 96, 1152),
        ("ml.p5.48xlarge", "H100", 8, 80, 192, 2048),
        ("ml.p5.4xlarge", "H100", 1, 80, 16, 256),
        ("ml.p5en.48xlarge", "H200", 8, 141, 192, 2048),
        ("ml.trn1.32xlarge", "Trainium", 16, 32, 128, 512),
        ("ml.trn2.48xlarge", "Trainium2", 16, 96, 192, 2048),
    ],
)
def test_known_accelerated_facts(
    instance_type: str, model: str, devices: int, device_gib: int, vcpus: int, memory_gib: int
) -> None:
    spec = lookup(instance_type)
    assert (spec.accelerator_model, spec.accelerators, spec.accelerator_memory_gib) == (
        model,
        devices,
        device_gib,
    )
    assert (spec.vcpus, spec.memory_gib) == (vcpus, memory_gib)
    assert spec.accelerated


@pytest.mark.parametrize(
    ("instance_type", "vcpus", "memory_gib"),
    [
        ("ml.m5.xlarge", 4, 16),
        ("ml.c5.18xlarge", 72, 144),
        ("ml.r5.24xlarge", 96, 768),
        ("ml.c4.xlarge", 4, 7.5),
    ],
)
def test_known_cpu_facts(instance_type: str, vcpus: int, memory_gib: float) -> None:
    spec = lookup(instance_type)
    assert (spec.vcpus, spec.memory_gib) == (vcpus, memory_gib)
    assert (spec.accelerated, spec.accelerators, spec.accelerator_model) == (False, 0, None)


def test_trainium_is_its_own_accelerator_kind() -> None:
    assert lookup("ml.trn1.32xlarge").accelerator_kind == "trainium"
    assert lookup("ml.p5.48xlarge").accelerator_kind == "gpu"


def test_instance_spec_as_dict_round_trips() -> None:
    spec = lookup("ml.g5.48xlarge")
    data = spec.as_dict()
    assert json.loads(json.dumps(data)) == data
    assert InstanceSpec(**data) == spec
    assert data["instance_type"] == "ml.g5.48xlarge"


# --- the prefix rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_type", "expected"),
    [
        ("ml.p5.48xlarge", True),
        ("ml.g6e.xlarge", True),
        ("ml.trn2.48xlarge", True),
        ("ml.g9.96xlarge", True),  # not in the catalog: the rule is by name
        ("ml.trn3.48xlarge", True),
        ("ml.m5.xlarge", False),
        ("ml.t3.medium", False),  # "ml.t" is not "ml.trn"
        ("ml.c7i.48xlarge", False),
        ("ml.inf2.xlarge", False),  # Inferentia is not in AWS's waiting rule
        ("p5.48xlarge", False),  # EC2 name, not a SageMaker type
    ],
)
def test_is_accelerated_type_uses_aws_prefixes(instance_type: str, expected: bool) -> None:
    assert is_accelerated_type(instance_type) is expected


# --- totals ---------------------------------------------------------------------------------------


def test_totals_multiply_per_instance_facts() -> None:
    result = totals("ml.g6e.48xlarge", 2)
    assert result == AcceleratorTotals(
        instance_type="ml.g6e.48xlarge",
        instance_count=2,
        accelerator_model="L40S",
        accelerators_per_instance=8,
        accelerators_total=16,
        accelerator_memory_gib_per_device=48,
        accelerator_memory_gib_total=768,
        vcpus_total=384,
        memory_gib_total=3072,
    )


def test_describe_gpu_totals() -> None:
    assert (
        totals("ml.g6e.48xlarge", 2).describe()
        == f"2 {X} ml.g6e.48xlarge = 16 {X} L40S, 768 GiB accelerator memory"
    )
    assert (
        totals("ml.g6.48xlarge", 2).describe()
        == f"2 {X} ml.g6.48xlarge = 16 {X} L4, 384 GiB accelerator memory"
    )
    assert (
        totals("ml.g5.48xlarge", 4).describe()
        == f"4 {X} ml.g5.48xlarge = 32 {X} A10G, 768 GiB accelerator memory"
    )


def test_describe_trainium_totals() -> None:
    assert totals("ml.trn1.32xlarge", 1).describe() == (
        f"1 {X} ml.trn1.32xlarge = 16 {X} Trainium, 512 GiB accelerator memory"
    )


def test_describe_cpu_totals_keeps_fractional_memory() -> None:
    assert (
        totals("ml.c4.xlarge", 3).describe()
        == f"3 {X} ml.c4.xlarge = 12 vCPUs, 22.5 GiB memory, no accelerators"
    )
    assert (
        totals("ml.m5.xlarge", 2).describe()
        == f"2 {X} ml.m5.xlarge = 8 vCPUs, 32 GiB memory, no accelerators"
    )


def test_totals_as_dict_is_json_safe_and_complete() -> None:
    result = totals("ml.p4d.24xlarge", 3)
    data = result.as_dict()
    assert json.loads(json.dumps(data)) == data
    assert AcceleratorTotals(**data) == result
    assert data["accelerators_total"] == 24
    assert data["accelerator_memory_gib_total"] == 960


def test_cpu_totals_have_no_accelerators() -> None:
    result = totals("ml.m5.xlarge", 5)
    assert (result.accelerator_model, result.accelerators_total, result.accelerator_memory_gib_total) == (
        None,
        0,
        0,
    )
    assert (result.vcpus_total, result.memory_gib_total) == (20, 80)


@pytest.mark.parametrize("count", [0, -1, 1.5, True, "2", None])
def test_totals_rejects_a_count_that_is_not_a_positive_integer(count: object) -> None:
    with pytest.raises(ValueError, match=r"ml\.g5\.xlarge must be a positive integer"):
        totals("ml.g5.xlarge", count)  # type: ignore[arg-type]


# --- unknown types --------------------------------------------------------------------------------


def test_unknown_type_is_a_key_error_that_suggests_close_types() -> None:
    with pytest.raises(KeyError) as excinfo:
        lookup("ml.g6e.96xlarge")
    error = excinfo.value
    assert isinstance(error, UnknownInstanceTypeError)
    assert isinstance(error, SageMakerPreferencesError)
    message = str(error)
    assert message.startswith("'ml.g6e.96xlarge' is not in the hardware catalog")
    assert "Did you mean" in message and "ml.g6e." in message
    assert catalog.DATA_RESOURCE in message
    assert error.instance_type == "ml.g6e.96xlarge"
    assert error.suggestions and all(s in known_types() for s in error.suggestions)


def test_ec2_name_without_ml_prefix_suggests_the_sagemaker_name() -> None:
    with pytest.raises(UnknownInstanceTypeError) as excinfo:
        lookup("g5.48xlarge")
    assert "ml.g5.48xlarge" in excinfo.value.suggestions


def test_unknown_type_without_lookalike_has_no_suggestion() -> None:
    with pytest.raises(UnknownInstanceTypeError) as excinfo:
        lookup("definitely-not-an-instance")
    assert excinfo.value.suggestions == ()
    assert "Did you mean" not in str(excinfo.value)
    assert "look like 'ml.g5.48xlarge'" in str(excinfo.value)


def test_totals_of_unknown_type_raises_unknown_instance_type() -> None:
    with pytest.raises(UnknownInstanceTypeError):
        totals("ml.x99.xlarge", 1)


@pytest.mark.parametrize("bad", [None, ["ml.g5.xlarge"]])
def test_lookup_of_a_non_string_raises_unknown_instance_type(bad: object) -> None:
    with pytest.raises(UnknownInstanceTypeError):
        lookup(bad)  # type: ignore[arg-type]


# --- purity ---------------------------------------------------------------------------------------


def test_module_imports_neither_airflow_nor_boto() -> None:
    code = (
        "import sys\n"
        "from airflow_provider_sm_prefs.domain import catalog\n"
        "catalog.totals('ml.g5.48xlarge', 2)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'airflow', 'boto3', 'botocore', 'aiobotocore'})\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_catalog_is_loaded_once() -> None:
    assert catalog.lookup("ml.g5.48xlarge") is catalog.lookup("ml.g5.48xlarge")
