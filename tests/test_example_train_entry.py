"""The nightly retrain's training entry point (dags_examples/train_entry/train.py), run as SageMaker's
framework container would run it, against resourceconfig.json files in SageMaker's format."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "dags_examples" / "train_entry" / "train.py"


def resource_config(tmp_path: Path, instance_type: str, hosts: int, current: int = 1) -> Path:
    names = [f"algo-{i}" for i in range(1, hosts + 1)]
    path = tmp_path / "resourceconfig.json"
    path.write_text(
        json.dumps(
            {
                "current_host": names[current - 1],
                "current_instance_type": instance_type,
                "current_group_name": "homogeneousCluster",
                "hosts": names,
                "instance_groups": [
                    {
                        "instance_group_name": "homogeneousCluster",
                        "instance_type": instance_type,
                        "hosts": names,
                    }
                ],
                "network_interface_name": "eth0",
            }
        )
    )
    return path


def run(script: Path, *args: str, env: dict[str, str] | None = None, isolated: bool = False) -> Any:
    """Run the script; ``isolated``: no site-packages and no PYTHONPATH, only what sits next to it."""
    base = {"PATH": os.environ.get("PATH", "")}
    if not isolated:
        base["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, *(["-S"] if isolated else []), str(script), *args]
    result = subprocess.run(
        command, capture_output=True, text=True, env={**base, **(env or {})}, cwd=script.parent, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[0])


def test_dry_run_on_the_fallback_entry_plans_torchrun_and_a_scaled_batch(tmp_path: Path) -> None:
    # The nightly list fell back to ml.g5.48xlarge×4; this is the third host.
    config = resource_config(tmp_path, "ml.g5.48xlarge", hosts=4, current=3)
    plan = run(SCRIPT, "--resource_config", str(config), "--dry_run")
    assert plan["hardware"]["instance_type"] == "ml.g5.48xlarge" and plan["hardware"]["host_rank"] == 2
    assert plan["launch"][:6] == [
        "torchrun",
        "--nnodes=4",
        "--nproc_per_node=8",
        "--node_rank=2",
        "--master_addr=algo-1",
        "--master_port=7777",
    ]
    # 64 per 40 GiB A100 → 38 on a 24 GiB A10G, rounded down to a multiple of 8; 32 workers reach 4,096 in 4 steps.
    assert plan["batch"] == {
        "per_device": 32,
        "world_size": 32,
        "global_batch": 1024,
        "gradient_accumulation_steps": 4,
    }


def test_on_the_first_choice_the_batch_is_the_reference_one(tmp_path: Path) -> None:
    config = resource_config(tmp_path, "ml.p4d.24xlarge", hosts=2)
    plan = run(SCRIPT, "--resource_config", str(config), "--dry_run", "--reference_global_batch", "1024")
    assert plan["batch"]["per_device"] == 64 and plan["batch"]["gradient_accumulation_steps"] == 1


def test_a_worker_trains_on_its_slice_and_rank_0_saves_the_model(tmp_path: Path) -> None:
    config = resource_config(tmp_path, "ml.g5.48xlarge", hosts=1)
    channel = tmp_path / "train"
    channel.mkdir()
    (channel / "train.csv").write_text("\n".join(f"{i},{i % 7}" for i in range(80)))
    model_dir = tmp_path / "model"
    env = {
        "SM_CHANNEL_TRAIN": str(channel),
        "SM_MODEL_DIR": str(model_dir),
        "LOCAL_RANK": "0",  # as torchrun sets it: train instead of launching
        "RANK": "0",
    }
    run(SCRIPT, "--resource_config", str(config), env=env)
    model = json.loads((model_dir / "model.json").read_text())
    assert (model["instance_type"], model["world_size"], model["per_device_batch"]) == (
        "ml.g5.48xlarge",
        8,
        32,
    )
    assert model["rows_seen_by_rank_0"] == 10  # 80 rows over 8 workers
    assert model["column_means"][0] == pytest.approx(sum(range(0, 80, 8)) / 10)


def _example_module() -> Any:
    path = ROOT / "dags_examples" / "example_sm_prefs_nightly_retrain.py"
    spec = importlib.util.spec_from_file_location("nightly_entry_point_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_archive_the_dag_uploads_runs_with_nothing_but_the_standard_library(tmp_path: Path) -> None:
    archive = _example_module().entry_point_archive()
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "code", filter="data")
    assert "train.py" in names and "airflow_provider_sm_prefs/container.py" in names
    assert "airflow_provider_sm_prefs/data/instance_types.json" in names
    config = resource_config(tmp_path, "ml.trn1.32xlarge", hosts=2, current=2)
    plan = run(tmp_path / "code" / "train.py", "--resource_config", str(config), "--dry_run", isolated=True)
    assert plan["hardware"]["runtime"] == "neuron" and plan["hardware"]["processes_per_host"] == 32
    assert "--nproc_per_node=32" in plan["launch"] and "--node_rank=1" in plan["launch"]
