"""What every entry of a preference list must offer the workload, checked against the hardware catalog.

SageMaker selects an entry by capacity alone (rule R11): it never compares GPU architecture, GPU memory
or EFA, so a job can land on a type its container or model cannot use and fail after launch, billed.
:class:`WorkloadRequirements` states what the workload needs; :meth:`WorkloadRequirements.problems`
names every entry that falls short, with the entry's actual figure, from static facts only (no AWS
call), so a literal list is rejected when the DAG is parsed. Pure: no Airflow, no boto::

    >>> WorkloadRequirements(accelerator="cuda", min_accelerator_memory_gib=40).problems(
    ...     InstancePreferenceList(["ml.p4d.24xlarge", "ml.g5.48xlarge"]), default_count=1)
    ['instance_preferences[1]: ml.g5.48xlarge does not meet requirements.min_accelerator_memory_gib=40: it has 24 GiB per device (A10G)']
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from airflow_provider_sm_prefs.domain import catalog
from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError

__all__ = ["RUNTIMES", "WorkloadRequirements", "mixed_runtimes"]

#: Accepted values of ``accelerator``.
RUNTIMES: tuple[str, ...] = ("cuda", "neuron", "cpu")
_FIELD = "requirements"
_ENTRIES = "instance_preferences"


class MixedAcceleratorRuntimesWarning(UserWarning):
    """A preference list mixes CUDA GPUs, Neuron devices and CPU-only types without ``requirements``."""


@dataclass(frozen=True)
class WorkloadRequirements:
    """What the workload needs from whichever entry SageMaker selects.

    :param accelerator: ``"cuda"`` (NVIDIA GPUs), ``"neuron"`` (Trainium) or ``"cpu"`` (no accelerator).
    :param min_accelerator_memory_gib: memory per device, GiB.
    :param min_total_accelerators: devices over the entry's whole cluster (per instance × count).
    :param min_total_accelerator_memory_gib: device memory over the entry's whole cluster, GiB.
    :param efa: True when the workload needs Elastic Fabric Adapter.
    """

    accelerator: str | None = None
    min_accelerator_memory_gib: float | None = None
    min_total_accelerators: int | None = None
    min_total_accelerator_memory_gib: float | None = None
    efa: bool | None = None

    def __post_init__(self) -> None:
        problems = self._value_problems()
        if problems:
            raise InvalidInstancePreferencesError(problems)

    def _value_problems(self) -> list[str]:
        problems: list[str] = []
        if self.accelerator is not None and self.accelerator not in RUNTIMES:
            problems.append(f"{_FIELD}.accelerator: {self.accelerator!r} is not one of {', '.join(RUNTIMES)}")
        for name in (
            "min_accelerator_memory_gib",
            "min_total_accelerators",
            "min_total_accelerator_memory_gib",
        ):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                problems.append(f"{_FIELD}.{name}: expected a number, got {value!r}")
            elif value <= 0:
                problems.append(f"{_FIELD}.{name}: {value!r} must be positive; leave it out for no minimum")
        if self.efa is not None and not isinstance(self.efa, bool):
            problems.append(f"{_FIELD}.efa: expected True or False, got {self.efa!r}")
        return problems

    @classmethod
    def from_value(cls, value: Any) -> WorkloadRequirements | None:
        """From a :class:`WorkloadRequirements`, a dict of its fields, or None (no requirements)."""
        if value is None or isinstance(value, WorkloadRequirements):
            return value
        if not isinstance(value, Mapping):
            raise InvalidInstancePreferencesError(
                [f"{_FIELD}: expected WorkloadRequirements or a dict, got {type(value).__name__}"]
            )
        names = [f.name for f in fields(cls)]
        unknown = sorted(str(k) for k in value if k not in names)
        if unknown:
            raise InvalidInstancePreferencesError(
                [f"{_FIELD}: unknown key {k!r}; allowed: {', '.join(names)}" for k in unknown]
            )
        return cls(**dict(value))

    def as_dict(self) -> dict[str, Any]:
        """The requirements that are set, JSON-safe."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def problems(self, entries: Sequence[Any], default_count: int | None = None) -> list[str]:
        """Every entry that falls short, one line per entry and requirement, with the entry's figure.

        :param entries: the parsed list (``InstancePreference`` objects, in order).
        :param default_count: the job-level count, for lists without per-entry counts.
        """
        problems: list[str] = []
        for index, entry in enumerate(entries):
            try:
                spec = catalog.lookup(entry.instance_type)
            except KeyError:
                continue  # the type itself is reported by the list's own rules
            count = entry.instance_count if entry.instance_count is not None else (default_count or 1)
            where = f"{_ENTRIES}[{index}]: {entry.instance_type}" + (f"×{count}" if count != 1 else "")
            problems.extend(f"{where} does not meet {gap}" for gap in self._gaps(spec, count))
        return problems

    def _gaps(self, spec: catalog.InstanceSpec, count: int) -> list[str]:
        device = f" ({spec.accelerator_model})" if spec.accelerator_model else ""
        gaps: list[str] = []
        if self.accelerator is not None and spec.runtime != self.accelerator:
            gaps.append(f"{_FIELD}.accelerator={self.accelerator}: it is a {spec.runtime} type{device}")
        memory = float(spec.accelerator_memory_gib)
        if self.min_accelerator_memory_gib is not None and memory < self.min_accelerator_memory_gib:
            gaps.append(
                f"{_FIELD}.min_accelerator_memory_gib={self.min_accelerator_memory_gib:g}: "
                f"it has {memory:g} GiB per device{device}"
            )
        total = spec.accelerators * count
        if self.min_total_accelerators is not None and total < self.min_total_accelerators:
            gaps.append(
                f"{_FIELD}.min_total_accelerators={self.min_total_accelerators}: "
                f"it has {total} ({spec.accelerators} per instance × {count})"
            )
        total_memory = memory * total
        wanted = self.min_total_accelerator_memory_gib
        if wanted is not None and total_memory < wanted:
            gaps.append(
                f"{_FIELD}.min_total_accelerator_memory_gib={wanted:g}: it has {total_memory:g} GiB in all"
            )
        if self.efa and spec.efa is False:
            gaps.append(f"{_FIELD}.efa=True: the type has no Elastic Fabric Adapter")
        return gaps

    def unverifiable(self, entries: Sequence[Any]) -> list[str]:
        """Entries whose EFA support the catalog does not know (a warning, not an error)."""
        if not self.efa:
            return []
        out = []
        for index, entry in enumerate(entries):
            try:
                spec = catalog.lookup(entry.instance_type)
            except KeyError:
                continue
            if spec.efa is None:
                out.append(
                    f"{_ENTRIES}[{index}]: the catalog does not know whether {entry.instance_type} has EFA"
                )
        return out


def mixed_runtimes(entries: Sequence[Any]) -> str | None:
    """A warning naming the entries when a list mixes CUDA, Neuron and CPU-only types; None otherwise.

    A container is built for one of them; a list that mixes them runs the job on whichever has capacity.
    """
    return _mixed_runtimes(tuple(entry.instance_type for entry in entries))


@functools.lru_cache(maxsize=256)
def _mixed_runtimes(types: tuple[str, ...]) -> str | None:
    by_runtime: dict[str, list[str]] = {}
    for instance_type in types:
        try:
            runtime = catalog.lookup(instance_type).runtime
        except KeyError:
            continue
        by_runtime.setdefault(runtime, []).append(instance_type)
    if len(by_runtime) < 2:
        return None
    groups = "; ".join(f"{runtime}: {', '.join(types)}" for runtime, types in by_runtime.items())
    return (
        f"{_ENTRIES} mixes accelerator runtimes ({groups}); SageMaker picks by capacity alone, so the job may "
        f"start on a type its container cannot use — pass requirements=WorkloadRequirements(accelerator=...) "
        f"or keep one runtime in the list"
    )
