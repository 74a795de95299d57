"""Hardware facts per SageMaker instance type: accelerators, their memory, vCPUs and host memory.

The facts live in ``data/instance_types.json`` (one entry for every type in botocore's SageMaker
``TrainingInstanceType`` and ``ProcessingInstanceType`` enums, with the public pages they come from and
notes on the values that are uncertain). The file is read once, on first use, so importing this module
costs nothing at DAG parse time. Pure domain code: no Airflow, no boto.

SageMaker picks an entry of a preference list by capacity alone; it never compares GPU models or GPU
memory (two ml.g6e.48xlarge and four ml.g5.48xlarge are only "equivalent" if the DAG author says so).
:func:`totals` puts numbers on such a choice, for logs and for the outcome handed downstream::

    >>> totals("ml.g6e.48xlarge", 2).describe()
    '2 × ml.g6e.48xlarge = 16 × L40S, 768 GiB accelerator memory'
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any, Literal

from airflow_provider_sm_prefs.domain.exceptions import SageMakerPreferencesError

#: Instance-type prefixes SageMaker treats as accelerated computing: a job whose preference list holds
#: one of these waits (Pending) for capacity, bounded by ``StoppingCondition.MaxPendingTimeInSeconds``;
#: a CPU-only list is evaluated once and fails if no entry has capacity.
ACCELERATED_PREFIXES: tuple[str, ...] = ("ml.p", "ml.g", "ml.trn")

#: Where the catalog lives, relative to the package (shipped inside the wheel).
DATA_RESOURCE = "data/instance_types.json"

AcceleratorKind = Literal["gpu", "trainium"]
#: What a training container must be built for: every GPU type SageMaker trains on is NVIDIA's.
AcceleratorRuntime = Literal["cuda", "neuron", "cpu"]

_TIMES = "\N{MULTIPLICATION SIGN}"


class UnknownInstanceTypeError(SageMakerPreferencesError, KeyError):
    """The instance type is not in the hardware catalog.

    A ``KeyError`` (the catalog is a mapping), carrying the type asked for and the closest known types.

    :param instance_type: the type that was looked up.
    :param suggestions: known types that look like it, best first.
    """

    def __init__(self, instance_type: object, suggestions: tuple[str, ...] = ()) -> None:
        self.instance_type = instance_type
        self.suggestions = suggestions
        if suggestions:
            hint = f"Did you mean {', '.join(suggestions)}?"
        else:
            hint = "SageMaker instance types look like 'ml.g5.48xlarge'."
        self.message = (
            f"{instance_type!r} is not in the hardware catalog ({len(known_types())} SageMaker training and "
            f"processing instance types). {hint} If AWS added this type after the catalog was written, add "
            f"an entry to airflow_provider_sm_prefs/{DATA_RESOURCE}."
        )
        super().__init__(self.message)

    def __str__(self) -> str:
        # KeyError.__str__ would print the message in quotes, as if it were a key.
        return self.message


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    """Hardware of one SageMaker instance type.

    :param instance_type: the SageMaker type, e.g. ``ml.g5.48xlarge``.
    :param accelerated: whether SageMaker treats the type as accelerated computing (``ml.p*``, ``ml.g*``,
        ``ml.trn*``), which decides whether a job waits for capacity.
    :param accelerator_kind: ``"gpu"``, ``"trainium"``, or None for CPU types.
    :param accelerator_model: device name, e.g. ``"A10G"``, ``"H100"``, ``"Trainium2"``; None for CPU types.
    :param accelerators: devices per instance (0 for CPU types).
    :param accelerator_memory_gib: memory per device in GiB, as AWS publishes it (0 for CPU types).
    :param vcpus: vCPUs per instance.
    :param memory_gib: host memory per instance in GiB.
    :param efa: whether the type supports Elastic Fabric Adapter; None where the catalog could not
        confirm it.
    """

    instance_type: str
    accelerated: bool
    accelerator_kind: AcceleratorKind | None
    accelerator_model: str | None
    accelerators: int
    accelerator_memory_gib: float
    vcpus: int
    memory_gib: float
    efa: bool | None

    def as_dict(self) -> dict[str, Any]:
        """Every field, JSON-safe."""
        return asdict(self)

    @property
    def runtime(self) -> AcceleratorRuntime:
        """The software stack a container needs on this type: ``cuda`` (NVIDIA GPUs), ``neuron``
        (Trainium) or ``cpu``."""
        if self.accelerator_kind == "gpu":
            return "cuda"
        if self.accelerator_kind == "trainium":
            return "neuron"
        return "cpu"


@dataclass(frozen=True, slots=True)
class AcceleratorTotals:
    """What ``instance_count`` instances of one type add up to.

    :param instance_type: the SageMaker type.
    :param instance_count: number of instances.
    :param accelerator_model: device name, or None for CPU types.
    :param accelerators_per_instance: devices per instance.
    :param accelerators_total: devices over all instances.
    :param accelerator_memory_gib_per_device: memory per device in GiB.
    :param accelerator_memory_gib_total: device memory over all instances in GiB.
    :param vcpus_total: vCPUs over all instances.
    :param memory_gib_total: host memory over all instances in GiB.
    """

    instance_type: str
    instance_count: int
    accelerator_model: str | None
    accelerators_per_instance: int
    accelerators_total: int
    accelerator_memory_gib_per_device: float
    accelerator_memory_gib_total: float
    vcpus_total: int
    memory_gib_total: float

    def as_dict(self) -> dict[str, Any]:
        """Every field, JSON-safe (fit for XCom and trigger payloads)."""
        return asdict(self)

    def describe(self) -> str:
        """One line for logs.

        ``2 × ml.g6e.48xlarge = 16 × L40S, 768 GiB accelerator memory`` for accelerated types,
        ``3 × ml.m5.xlarge = 12 vCPUs, 48 GiB memory, no accelerators`` for CPU types.
        """
        head = f"{self.instance_count} {_TIMES} {self.instance_type}"
        if self.accelerators_total:
            return (
                f"{head} = {self.accelerators_total} {_TIMES} {self.accelerator_model}, "
                f"{_format_gib(self.accelerator_memory_gib_total)} GiB accelerator memory"
            )
        return (
            f"{head} = {self.vcpus_total} vCPUs, {_format_gib(self.memory_gib_total)} GiB memory, "
            "no accelerators"
        )


def is_accelerated_type(instance_type: str) -> bool:
    """Whether SageMaker treats ``instance_type`` as accelerated (``ml.p*``, ``ml.g*``, ``ml.trn*``).

    AWS's rule is by name, so this answers for types the catalog does not know yet.
    """
    return instance_type.startswith(ACCELERATED_PREFIXES)


def lookup(instance_type: str) -> InstanceSpec:
    """The hardware of ``instance_type``.

    :raises UnknownInstanceTypeError: (a ``KeyError``) if the catalog has no such type; the message
        suggests the closest known types.
    """
    try:
        return _catalog()[instance_type]
    except (KeyError, TypeError):
        suggestions: tuple[str, ...] = ()
        if isinstance(instance_type, str):
            suggestions = tuple(
                difflib.get_close_matches(instance_type, sorted(_catalog()), n=3, cutoff=0.75)
            )
        raise UnknownInstanceTypeError(instance_type, suggestions) from None


def known_types() -> frozenset[str]:
    """Every instance type in the catalog."""
    return frozenset(_catalog())


def totals(instance_type: str, count: int) -> AcceleratorTotals:
    """What ``count`` instances of ``instance_type`` add up to.

    :raises UnknownInstanceTypeError: if the catalog has no such type.
    :raises ValueError: if ``count`` is not a positive integer.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"instance count for {instance_type} must be a positive integer, got {count!r}")
    spec = lookup(instance_type)
    return AcceleratorTotals(
        instance_type=spec.instance_type,
        instance_count=count,
        accelerator_model=spec.accelerator_model,
        accelerators_per_instance=spec.accelerators,
        accelerators_total=spec.accelerators * count,
        accelerator_memory_gib_per_device=spec.accelerator_memory_gib,
        accelerator_memory_gib_total=spec.accelerator_memory_gib * spec.accelerators * count,
        vcpus_total=spec.vcpus * count,
        memory_gib_total=spec.memory_gib * count,
    )


_SPEC_FIELDS = frozenset(f.name for f in fields(InstanceSpec)) - {"instance_type"}


@cache
def _catalog() -> Mapping[str, InstanceSpec]:
    text = resources.files("airflow_provider_sm_prefs").joinpath(DATA_RESOURCE).read_text(encoding="utf-8")
    entries: dict[str, dict[str, Any]] = json.loads(text)["instance_types"]
    specs: dict[str, InstanceSpec] = {}
    for name, raw in entries.items():
        if set(raw) != _SPEC_FIELDS:
            raise ValueError(
                f"{DATA_RESOURCE}: entry {name!r} has fields {sorted(raw)}; every entry needs exactly "
                f"{sorted(_SPEC_FIELDS)}"
            )
        specs[name] = InstanceSpec(instance_type=name, **raw)
    return MappingProxyType(specs)


def _format_gib(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
