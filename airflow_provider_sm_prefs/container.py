"""Inside the training container: which hardware SageMaker started this job on, and how to use it.

A job submitted with an instance preference list runs on whichever entry had capacity, so the training
script learns its hardware at start-up. SageMaker writes ``/opt/ml/input/config/resourceconfig.json``
in every training container::

    {"current_host": "algo-1", "current_instance_type": "ml.g5.48xlarge",
     "current_group_name": "homogeneousCluster", "hosts": ["algo-1", "algo-2"],
     "instance_groups": [{"instance_group_name": "homogeneousCluster",
                          "instance_type": "ml.g5.48xlarge", "hosts": ["algo-2", "algo-1"]}],
     "network_interface_name": "eth0"}

and images with the SageMaker training toolkit (the AWS Deep Learning Containers) also set ``SM_HOSTS``,
``SM_CURRENT_HOST``, ``SM_CURRENT_INSTANCE_TYPE``, ``SM_NUM_GPUS`` and ``SM_NUM_NEURONS``.
:func:`read_hardware` reads them and looks the instance type up in this provider's hardware catalog::

    from airflow_provider_sm_prefs.container import read_hardware

    hw = read_hardware()
    hw.instance_type, hw.host_rank, hw.processes_per_host    # 'ml.g5.48xlarge', 0, 8
    hw.launcher_args()        # ['--nnodes=4', '--nproc_per_node=8', '--node_rank=0', ...] for torchrun
    hw.batch_plan(reference_per_device_batch=64, reference_memory_gib=40).per_device   # 38

Pure: the standard library and the catalog only, no Airflow, no boto. A training image can install the
wheel without its dependencies (``pip install --no-deps airflow-provider-sm-prefs``) or vendor
:data:`VENDORED_FILES`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_sm_prefs.domain import catalog
from airflow_provider_sm_prefs.domain.catalog import AcceleratorRuntime
from airflow_provider_sm_prefs.domain.exceptions import SageMakerPreferencesError

__all__ = [
    "DEFAULT_MASTER_PORT",
    "RESOURCE_CONFIG_PATH",
    "VENDORED_FILES",
    "BatchPlan",
    "ContainerHardware",
    "ResourceConfigError",
    "read_hardware",
]

#: Where SageMaker writes the cluster layout in a training container.
RESOURCE_CONFIG_PATH = "/opt/ml/input/config/resourceconfig.json"
#: The rendezvous port SageMaker's own launchers use (the training toolkit's ``SM_MASTER_PORT``).
DEFAULT_MASTER_PORT = 7777
#: What a training image needs of this package for this module, relative to the package directory.
VENDORED_FILES = (
    "__init__.py",
    "container.py",
    "domain/__init__.py",
    "domain/catalog.py",
    "domain/exceptions.py",
    catalog.DATA_RESOURCE,
)

#: One process per logical NeuronCore. Trainium: 2 NeuronCores per device. Trainium2: 8 physical
#: NeuronCores per device, grouped by NEURON_LOGICAL_NC_CONFIG (default 2) into 4 logical ones
#: (AWS Neuron documentation, "Logical NeuronCore configuration" and the PyTorch NeuronX guide).
_NEURON_CORES_PER_DEVICE = {"Trainium": 2}
_TRAINIUM2_PHYSICAL_CORES = 8
_TRAINIUM2_DEFAULT_LNC = 2


class ResourceConfigError(SageMakerPreferencesError, ValueError):
    """The container's resource configuration is missing or does not say what it must.

    :param source: the file (or environment variable) that was read.
    :param field: the field that is missing or wrong, or None when the whole source is.
    :param problem: what is wrong.
    """

    def __init__(self, source: str, field: str | None, problem: str) -> None:
        self.source = source
        self.field = field
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class BatchPlan:
    """A batch size for this hardware, scaled from one that worked elsewhere.

    :param per_device: samples per process and step.
    :param world_size: processes over all hosts.
    :param global_batch: ``per_device × world_size``, per optimizer step before accumulation.
    :param gradient_accumulation_steps: steps to accumulate to reach the reference global batch
        (1 when no reference global batch was given).
    """

    per_device: int
    world_size: int
    global_batch: int
    gradient_accumulation_steps: int


@dataclass(frozen=True)
class ContainerHardware:
    """The hardware of this training container and of the cluster it belongs to.

    :param instance_type: the instance type SageMaker started the job on (the selected entry).
    :param current_host: this container's host name (``algo-1``...).
    :param hosts: the hosts of this host's instance group, sorted as SageMaker's launchers sort them;
        the distributed job runs over these (for a job with a preference list: every host).
    :param host_rank: this host's index in :attr:`hosts` (the torchrun ``node_rank``).
    :param all_hosts: every host of the job, sorted (differs from :attr:`hosts` in a heterogeneous
        cluster only).
    :param instance_group: this host's instance group (``homogeneousCluster`` for a single-group job).
    :param runtime: ``cuda``, ``neuron`` or ``cpu``.
    :param accelerator_model: ``A10G``, ``Trainium2``... or None on CPU types.
    :param accelerators_per_host: devices per host (GPUs, Trainium chips; 0 on CPU types).
    :param accelerator_memory_gib: memory per device in GiB (0 on CPU types).
    :param processes_per_host: worker processes to launch per host: one per GPU, one per logical
        NeuronCore, one on CPU types.
    :param memory_gib_per_process: device memory one worker has: a GPU's, a logical NeuronCore's share
        of its chip; host memory on CPU types.
    :param network_interface: the interface for collective communication (``eth0``), when given.
    :param source: where the layout was read (the file, or ``environment``).
    """

    instance_type: str
    current_host: str
    hosts: tuple[str, ...]
    host_rank: int
    all_hosts: tuple[str, ...]
    instance_group: str | None
    runtime: AcceleratorRuntime
    accelerator_model: str | None
    accelerators_per_host: int
    accelerator_memory_gib: float
    processes_per_host: int
    memory_gib_per_process: float
    network_interface: str | None
    source: str

    @property
    def num_hosts(self) -> int:
        return len(self.hosts)

    @property
    def world_size(self) -> int:
        """Worker processes over the whole (group's) cluster."""
        return self.processes_per_host * self.num_hosts

    @property
    def master_addr(self) -> str:
        """The rendezvous host: the first of :attr:`hosts`, as SageMaker's own launchers choose it."""
        return self.hosts[0]

    def launcher_args(self, master_port: int = DEFAULT_MASTER_PORT) -> list[str]:
        """Arguments for ``torchrun`` (``torch.distributed.run``), also what Neuron's PyTorch launches with.

        :param master_port: the rendezvous port on :attr:`master_addr`.
        """
        return [
            f"--nnodes={self.num_hosts}",
            f"--nproc_per_node={self.processes_per_host}",
            f"--node_rank={self.host_rank}",
            f"--master_addr={self.master_addr}",
            f"--master_port={master_port}",
        ]

    def launcher_env(self, master_port: int = DEFAULT_MASTER_PORT) -> dict[str, str]:
        """The same as environment variables (``MASTER_ADDR``, ``WORLD_SIZE``...), for launchers that
        read them instead of flags."""
        env = {
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(master_port),
            "NNODES": str(self.num_hosts),
            "NODE_RANK": str(self.host_rank),
            "NPROC_PER_NODE": str(self.processes_per_host),
            "WORLD_SIZE": str(self.world_size),
        }
        if self.network_interface and self.runtime == "cuda":
            env["NCCL_SOCKET_IFNAME"] = self.network_interface
        return env

    def batch_plan(
        self,
        reference_per_device_batch: int,
        reference_memory_gib: float,
        reference_global_batch: int | None = None,
        multiple_of: int = 1,
    ) -> BatchPlan:
        """Scale a per-device batch that fit ``reference_memory_gib`` to this hardware.

        The per-device batch grows or shrinks with the memory one worker has (rounded down to
        ``multiple_of``, at least ``multiple_of``). With ``reference_global_batch``, gradient
        accumulation makes up the difference so the optimizer sees (at least) the same global batch
        on any entry of the preference list.

        :param reference_per_device_batch: the per-device batch of the reference configuration.
        :param reference_memory_gib: memory per device of the reference configuration.
        :param reference_global_batch: the global batch to keep, if any.
        :param multiple_of: round the per-device batch down to a multiple of this (e.g. 8 for tensor cores).
        :raises ValueError: for a non-positive reference.
        """
        if reference_per_device_batch < 1 or reference_memory_gib <= 0 or multiple_of < 1:
            raise ValueError(
                "reference_per_device_batch and multiple_of must be at least 1 and reference_memory_gib "
                f"above 0, got {reference_per_device_batch}, {multiple_of} and {reference_memory_gib}"
            )
        scaled = reference_per_device_batch * self.memory_gib_per_process / reference_memory_gib
        per_device = max(multiple_of, int(scaled) // multiple_of * multiple_of)
        world = self.world_size
        global_batch = per_device * world
        steps = 1
        if reference_global_batch:
            steps = max(1, math.ceil(reference_global_batch / global_batch))
        return BatchPlan(
            per_device=per_device,
            world_size=world,
            global_batch=global_batch,
            gradient_accumulation_steps=steps,
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe, with the derived figures (for logs and metrics)."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data.update(
            hosts=list(self.hosts),
            all_hosts=list(self.all_hosts),
            num_hosts=self.num_hosts,
            world_size=self.world_size,
            master_addr=self.master_addr,
        )
        return data


def read_hardware(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> ContainerHardware:
    """The hardware of this training container.

    Reads ``path`` (default :data:`RESOURCE_CONFIG_PATH`). When the default file does not exist (a
    local run of the script), the training toolkit's variables ``SM_CURRENT_HOST``, ``SM_HOSTS`` and
    ``SM_CURRENT_INSTANCE_TYPE`` stand in for it; a ``path`` given explicitly must exist. A file
    without ``current_instance_type`` (older SageMaker containers) takes it from
    ``SM_CURRENT_INSTANCE_TYPE``. ``SM_NUM_GPUS`` / ``SM_NUM_NEURONS``, when set, say how many
    devices / NeuronCores this container sees; the catalog says what each one is.

    :param path: the resource configuration file.
    :param environ: the environment to read (default ``os.environ``).
    :raises ResourceConfigError: naming the file (or variable) and the field that is missing or wrong.
    """
    env = os.environ if environ is None else environ
    file = Path(path) if path is not None else Path(RESOURCE_CONFIG_PATH)
    if file.is_file():
        source = str(file)
        config = _load(file)
    elif path is None and env.get("SM_CURRENT_HOST") and env.get("SM_HOSTS"):
        source = "environment"
        config = {
            "current_host": env["SM_CURRENT_HOST"],
            "hosts": _json_env(env, "SM_HOSTS"),
            "current_instance_type": env.get("SM_CURRENT_INSTANCE_TYPE"),
            "network_interface_name": env.get("SM_NETWORK_INTERFACE_NAME"),
        }
    else:
        hint = "" if path is not None else " and SM_CURRENT_HOST/SM_HOSTS are not set"
        raise ResourceConfigError(
            str(file), None, f"not found{hint}; is this running in a SageMaker training container?"
        )
    return _hardware(config, source, env)


def _load(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise ResourceConfigError(str(file), None, f"cannot be read ({err})") from None
    except ValueError as err:
        raise ResourceConfigError(str(file), None, f"is not JSON ({err})") from None
    if not isinstance(data, dict):
        raise ResourceConfigError(str(file), None, f"expected a JSON object, got {type(data).__name__}")
    return data


def _json_env(env: Mapping[str, str], name: str) -> Any:
    try:
        return json.loads(env[name])
    except ValueError:
        raise ResourceConfigError(
            name, None, f"expected a JSON list of host names, got {env[name]!r}"
        ) from None


def _string(config: Mapping[str, Any], key: str, source: str, field: str | None = None) -> str:
    value = config.get(key)
    if not isinstance(value, str) or not value:
        raise ResourceConfigError(source, field or key, f"expected a non-empty string, got {value!r}")
    return value


def _host_list(value: Any, field: str, source: str) -> tuple[str, ...]:
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        raise ResourceConfigError(source, field, f"expected a non-empty list of host names, got {value!r}")
    if not all(isinstance(h, str) and h for h in value):
        raise ResourceConfigError(source, field, f"every host must be a non-empty string, got {value!r}")
    return tuple(sorted(value))


def _group_of(
    config: Mapping[str, Any], current_host: str, source: str
) -> tuple[str | None, tuple[str, ...] | None, str | None]:
    """This host's instance group: name, hosts, instance type (Nones without ``instance_groups``)."""
    groups = config.get("instance_groups")
    if groups is None:
        return config.get("current_group_name"), None, None
    if not isinstance(groups, list):
        raise ResourceConfigError(source, "instance_groups", f"expected a list, got {groups!r}")
    for index, group in enumerate(groups):
        field = f"instance_groups[{index}]"
        if not isinstance(group, Mapping):
            raise ResourceConfigError(source, field, f"expected an object, got {group!r}")
        hosts = _host_list(group.get("hosts"), f"{field}.hosts", source)
        if current_host in hosts:
            name = group.get("instance_group_name")
            return (
                str(name) if name else None,
                hosts,
                _string(group, "instance_type", source, f"{field}.instance_type")
                if "instance_type" in group
                else None,
            )
    raise ResourceConfigError(source, "instance_groups", f"no group lists the current host {current_host!r}")


def _hardware(config: Mapping[str, Any], source: str, env: Mapping[str, str]) -> ContainerHardware:
    current_host = _string(config, "current_host", source)
    all_hosts = _host_list(config.get("hosts"), "hosts", source)
    if current_host not in all_hosts:
        raise ResourceConfigError(
            source, "hosts", f"does not list current_host {current_host!r}: {list(all_hosts)}"
        )
    group_name, group_hosts, group_type = _group_of(config, current_host, source)
    instance_type = config.get("current_instance_type") or group_type or env.get("SM_CURRENT_INSTANCE_TYPE")
    if not instance_type:
        raise ResourceConfigError(
            source, "current_instance_type", "missing, and SM_CURRENT_INSTANCE_TYPE is not set either"
        )
    try:
        spec = catalog.lookup(str(instance_type))
    except catalog.UnknownInstanceTypeError as err:
        raise ResourceConfigError(source, "current_instance_type", err.message) from None
    hosts = group_hosts or all_hosts
    devices = spec.accelerators
    if spec.runtime == "cuda" and env.get("SM_NUM_GPUS"):
        devices = _count_env(env, "SM_NUM_GPUS")
    processes, per_process = _processes(spec, devices, env)
    network = config.get("network_interface_name") or env.get("SM_NETWORK_INTERFACE_NAME")
    return ContainerHardware(
        instance_type=spec.instance_type,
        current_host=current_host,
        hosts=hosts,
        host_rank=hosts.index(current_host),
        all_hosts=all_hosts,
        instance_group=group_name,
        runtime=spec.runtime,
        accelerator_model=spec.accelerator_model,
        accelerators_per_host=devices,
        accelerator_memory_gib=float(spec.accelerator_memory_gib),
        processes_per_host=processes,
        memory_gib_per_process=per_process,
        network_interface=str(network) if network else None,
        source=source,
    )


def _processes(spec: catalog.InstanceSpec, devices: int, env: Mapping[str, str]) -> tuple[int, float]:
    """Workers per host and the device memory each one has."""
    if spec.runtime == "cuda":
        return max(devices, 1), float(spec.accelerator_memory_gib)
    if spec.runtime == "neuron":
        if env.get("SM_NUM_NEURONS"):
            cores = _count_env(env, "SM_NUM_NEURONS")
        elif spec.accelerator_model == "Trainium2":
            lnc = int(env.get("NEURON_LOGICAL_NC_CONFIG") or _TRAINIUM2_DEFAULT_LNC)
            cores = devices * (_TRAINIUM2_PHYSICAL_CORES // max(lnc, 1))
        else:
            cores = devices * _NEURON_CORES_PER_DEVICE.get(spec.accelerator_model or "", 1)
        cores = max(cores, 1)
        return cores, float(spec.accelerator_memory_gib) * devices / cores
    return 1, float(spec.memory_gib)


def _count_env(env: Mapping[str, str], name: str) -> int:
    try:
        value = int(env[name])
    except ValueError:
        raise ResourceConfigError(name, None, f"expected a whole number, got {env[name]!r}") from None
    if value < 0:
        raise ResourceConfigError(name, None, f"expected 0 or more, got {value}")
    return value
