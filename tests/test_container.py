"""The training container's view: SageMaker's resourceconfig.json and toolkit variables, read into the
selected hardware, launcher arguments and a batch size for it (pure)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs import container
from airflow_provider_sm_prefs.container import ResourceConfigError, read_hardware

ROOT = Path(__file__).resolve().parent.parent

#: The three layouts, in the format SageMaker writes to /opt/ml/input/config/resourceconfig.json.
SINGLE_HOST = {
    "current_host": "algo-1",
    "current_instance_type": "ml.g5.48xlarge",
    "current_group_name": "homogeneousCluster",
    "hosts": ["algo-1"],
    "instance_groups": [
        {"instance_group_name": "homogeneousCluster", "instance_type": "ml.g5.48xlarge", "hosts": ["algo-1"]}
    ],
    "network_interface_name": "eth0",
}
MULTI_HOST = {
    "current_host": "algo-2",
    "current_instance_type": "ml.p4d.24xlarge",
    "current_group_name": "homogeneousCluster",
    "hosts": ["algo-2", "algo-1"],
    "instance_groups": [
        {
            "instance_group_name": "homogeneousCluster",
            "instance_type": "ml.p4d.24xlarge",
            "hosts": ["algo-2", "algo-1"],
        }
    ],
    "network_interface_name": "eth0",
}
HETEROGENEOUS = {
    "current_host": "algo-3",
    "current_instance_type": "ml.p4d.24xlarge",
    "current_group_name": "train",
    "hosts": ["algo-1", "algo-2", "algo-3"],
    "instance_groups": [
        {"instance_group_name": "data", "instance_type": "ml.c5.18xlarge", "hosts": ["algo-1"]},
        {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-3", "algo-2"]},
    ],
    "network_interface_name": "eth0",
}


def write(tmp_path: Path, config: Any, name: str = "resourceconfig.json") -> Path:
    path = tmp_path / name
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return path


def test_single_host_reads_the_selected_type_and_its_gpus(tmp_path: Path) -> None:
    hw = read_hardware(write(tmp_path, SINGLE_HOST), environ={})
    assert (hw.instance_type, hw.runtime, hw.accelerator_model) == ("ml.g5.48xlarge", "cuda", "A10G")
    assert (hw.hosts, hw.host_rank, hw.num_hosts) == (("algo-1",), 0, 1)
    assert (hw.accelerators_per_host, hw.accelerator_memory_gib) == (8, 24.0)
    assert (hw.processes_per_host, hw.memory_gib_per_process, hw.world_size) == (8, 24.0, 8)
    assert hw.instance_group == "homogeneousCluster" and hw.network_interface == "eth0"
    assert hw.source == str(tmp_path / "resourceconfig.json")


def test_multi_host_ranks_hosts_in_sorted_order_and_builds_torchrun_arguments(tmp_path: Path) -> None:
    hw = read_hardware(write(tmp_path, MULTI_HOST), environ={})
    assert hw.hosts == ("algo-1", "algo-2") and hw.host_rank == 1
    assert hw.launcher_args() == [
        "--nnodes=2",
        "--nproc_per_node=8",
        "--node_rank=1",
        "--master_addr=algo-1",
        "--master_port=7777",
    ]
    env = hw.launcher_env(master_port=29500)
    assert env["WORLD_SIZE"] == "16" and env["MASTER_PORT"] == "29500" and env["NODE_RANK"] == "1"
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"


def test_heterogeneous_cluster_distributes_over_this_hosts_group_only(tmp_path: Path) -> None:
    hw = read_hardware(write(tmp_path, HETEROGENEOUS), environ={})
    assert (hw.instance_group, hw.hosts, hw.host_rank) == ("train", ("algo-2", "algo-3"), 1)
    assert hw.all_hosts == ("algo-1", "algo-2", "algo-3")
    assert hw.master_addr == "algo-2" and hw.world_size == 16


def test_heterogeneous_cpu_group_gets_one_process_with_host_memory(tmp_path: Path) -> None:
    config = {**HETEROGENEOUS, "current_host": "algo-1", "current_instance_type": "ml.c5.18xlarge"}
    hw = read_hardware(write(tmp_path, config), environ={})
    assert (hw.runtime, hw.hosts, hw.host_rank) == ("cpu", ("algo-1",), 0)
    assert (hw.accelerators_per_host, hw.processes_per_host, hw.memory_gib_per_process) == (0, 1, 144.0)


@pytest.mark.parametrize(
    ("instance_type", "env", "processes", "gib_per_process"),
    [
        ("ml.trn1.32xlarge", {}, 32, 16.0),  # 16 Trainium chips × 2 NeuronCores, 32 GiB per chip
        ("ml.trn1.32xlarge", {"SM_NUM_NEURONS": "16"}, 16, 32.0),  # what the container reports wins
        ("ml.trn2.48xlarge", {}, 64, 24.0),  # 16 Trainium2 × 4 logical cores (LNC=2), 96 GiB per chip
        ("ml.trn2.48xlarge", {"NEURON_LOGICAL_NC_CONFIG": "1"}, 128, 12.0),
    ],
)
def test_neuron_runs_one_process_per_logical_neuroncore(
    tmp_path: Path, instance_type: str, env: dict[str, str], processes: int, gib_per_process: float
) -> None:
    config = {**SINGLE_HOST, "current_instance_type": instance_type, "instance_groups": None}
    config.pop("instance_groups")
    hw = read_hardware(write(tmp_path, config), environ=env)
    assert (hw.runtime, hw.accelerators_per_host) == ("neuron", 16)
    assert (hw.processes_per_host, hw.memory_gib_per_process) == (processes, gib_per_process)


def test_toolkit_variables_stand_in_when_the_default_file_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(container, "RESOURCE_CONFIG_PATH", str(tmp_path / "absent.json"))
    env = {
        "SM_CURRENT_HOST": "algo-2",
        "SM_HOSTS": '["algo-1","algo-2","algo-3"]',
        "SM_CURRENT_INSTANCE_TYPE": "ml.g6e.48xlarge",
        "SM_NUM_GPUS": "4",
        "SM_NETWORK_INTERFACE_NAME": "eth1",
    }
    hw = read_hardware(environ=env)
    assert (hw.source, hw.instance_type, hw.host_rank, hw.num_hosts) == (
        "environment",
        "ml.g6e.48xlarge",
        1,
        3,
    )
    assert (hw.accelerators_per_host, hw.processes_per_host, hw.accelerator_model) == (4, 4, "L40S")
    assert hw.network_interface == "eth1"


def test_an_older_file_without_the_instance_type_takes_it_from_the_toolkit(tmp_path: Path) -> None:
    config = {"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0"}
    path = write(tmp_path, config)
    hw = read_hardware(path, environ={"SM_CURRENT_INSTANCE_TYPE": "ml.p5.48xlarge"})
    assert (hw.instance_type, hw.accelerator_model, hw.processes_per_host) == ("ml.p5.48xlarge", "H100", 8)
    with pytest.raises(ResourceConfigError, match=r"resourceconfig.json: current_instance_type: missing"):
        read_hardware(path, environ={})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"resourceconfig.json: is not JSON"),
        ("[]", r"resourceconfig.json: expected a JSON object, got list"),
        (
            {**SINGLE_HOST, "current_host": ""},
            r"resourceconfig.json: current_host: expected a non-empty string",
        ),
        ({**SINGLE_HOST, "hosts": "algo-1"}, r"resourceconfig.json: hosts: expected a non-empty list"),
        (
            {**SINGLE_HOST, "current_host": "algo-9"},
            r"resourceconfig.json: hosts: does not list current_host 'algo-9'",
        ),
        (
            {**HETEROGENEOUS, "instance_groups": [HETEROGENEOUS["instance_groups"][0], {"hosts": []}]},
            r"resourceconfig.json: instance_groups\[1\].hosts: expected a non-empty list",
        ),
        (
            {**SINGLE_HOST, "current_instance_type": "ml.g5.48xlarg"},
            r"resourceconfig.json: current_instance_type: 'ml.g5.48xlarg' is not in the hardware catalog.*"
            r"Did you mean ml.g5.48xlarge",
        ),
    ],
)
def test_a_bad_file_names_the_file_and_the_field(tmp_path: Path, content: Any, message: str) -> None:
    with pytest.raises(ResourceConfigError, match=message) as raised:
        read_hardware(write(tmp_path, content), environ={})
    assert raised.value.source == str(tmp_path / "resourceconfig.json")


def test_a_missing_file_says_which_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ResourceConfigError, match=r"nowhere.json: not found; is this running"):
        read_hardware(
            tmp_path / "nowhere.json", environ={"SM_CURRENT_HOST": "algo-1", "SM_HOSTS": '["algo-1"]'}
        )
    monkeypatch.setattr(container, "RESOURCE_CONFIG_PATH", str(tmp_path / "default.json"))
    with pytest.raises(
        ResourceConfigError, match=r"default.json: not found and SM_CURRENT_HOST/SM_HOSTS are not set"
    ):
        read_hardware(environ={})


def test_batch_scales_with_memory_per_device_and_accumulates_to_the_reference_global_batch(
    tmp_path: Path,
) -> None:
    # Tuned on ml.p4d.24xlarge×2 (A100 40 GiB): 64 per device, 1,024 global. Fell back to ml.g5.48xlarge×4.
    four_g5 = {
        **SINGLE_HOST,
        "hosts": ["algo-1", "algo-2", "algo-3", "algo-4"],
        "instance_groups": [
            {
                "instance_group_name": "homogeneousCluster",
                "instance_type": "ml.g5.48xlarge",
                "hosts": ["algo-1", "algo-2", "algo-3", "algo-4"],
            }
        ],
    }
    hw = read_hardware(write(tmp_path, four_g5), environ={})
    plan = hw.batch_plan(reference_per_device_batch=64, reference_memory_gib=40)
    assert (plan.per_device, plan.world_size, plan.global_batch, plan.gradient_accumulation_steps) == (
        38,
        32,
        1216,
        1,
    )
    plan = hw.batch_plan(64, 40, reference_global_batch=4096, multiple_of=8)
    assert (plan.per_device, plan.global_batch, plan.gradient_accumulation_steps) == (32, 1024, 4)
    with pytest.raises(ValueError, match="reference_memory_gib"):
        hw.batch_plan(64, 0)


def test_the_module_runs_with_nothing_but_the_standard_library(tmp_path: Path) -> None:
    """Without site-packages (python -S) and with Airflow and boto blocked: what a training image has."""
    path = write(tmp_path, MULTI_HOST)
    code = (
        "import sys\n"
        "for name in ('airflow', 'boto3', 'botocore', 'aiobotocore', 'openlineage'):\n"
        "    sys.modules[name] = None\n"
        "from airflow_provider_sm_prefs.container import read_hardware\n"
        f"hw = read_hardware({str(path)!r}, environ={{}})\n"
        "print(hw.instance_type, hw.host_rank, ' '.join(hw.launcher_args()))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'boto3', 'botocore', 'attrs', 'pendulum') and sys.modules[m] is not None))\n"
    )
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")}
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert (
        lines[0]
        == "ml.p4d.24xlarge 1 --nnodes=2 --nproc_per_node=8 --node_rank=1 --master_addr=algo-1 --master_port=7777"
    )
    assert lines[1] == "[]"
