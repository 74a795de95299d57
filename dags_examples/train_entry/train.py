"""Entry point of the nightly retrain's training job: adapt to whichever entry SageMaker selected.

SageMaker's framework containers (the PyTorch Deep Learning Container of the example DAG) run this file
from the job's ``sagemaker_submit_directory`` archive, which the DAG builds from this folder and the
provider's container-side modules (``airflow_provider_sm_prefs.container.VENDORED_FILES``: standard
library only, no Airflow or boto in the image). Hyperparameters arrive as ``--name value`` arguments.

On start the script reads the hardware (instance type, hosts, this host's rank, devices and their
memory) and scales the batch tuned on the reference configuration to it. With more than one worker per
host it re-launches itself under ``torchrun`` with the cluster's arguments; each worker then trains.
The training here is a stand-in (column means of a CSV); the adaptation around it is the point.

Run it anywhere with a resourceconfig.json in SageMaker's format::

    python train.py --resource_config resourceconfig.json --dry_run
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from airflow_provider_sm_prefs.container import BatchPlan, ContainerHardware, read_hardware


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # The configuration the batch size was tuned on: 64 per device on 40 GiB A100s, 4,096 per step.
    parser.add_argument("--reference_per_device_batch", type=int, default=64)
    parser.add_argument("--reference_memory_gib", type=float, default=40.0)
    parser.add_argument("--reference_global_batch", type=int, default=4096)
    parser.add_argument("--resource_config", default=None, help="default: SageMaker's own file")
    parser.add_argument("--dry_run", action="store_true", help="print the plan and exit")
    return parser.parse_args(argv)


def plan_for(args: argparse.Namespace, hw: ContainerHardware, argv: list[str]) -> dict[str, Any]:
    """What this host will run: the hardware, the batch and (for several workers) the torchrun command."""
    batch: BatchPlan = hw.batch_plan(
        args.reference_per_device_batch,
        args.reference_memory_gib,
        reference_global_batch=args.reference_global_batch,
        multiple_of=8 if hw.runtime == "cuda" else 1,
    )
    launch = None
    if hw.processes_per_host > 1:
        launch = ["torchrun", *hw.launcher_args(), os.path.abspath(__file__), *argv]
    return {"hardware": hw.as_dict(), "batch": asdict(batch), "launch": launch}


def train(hw: ContainerHardware, batch: dict[str, Any]) -> dict[str, Any]:
    """One worker's share: read the training channel, fit the stand-in model, rank 0 saves it."""
    channel = Path(os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    rows: list[list[float]] = []
    for path in sorted(channel.glob("*.csv")):
        with path.open(newline="") as handle:
            rows.extend([float(v) for v in row] for row in csv.reader(handle) if row)
    rank = int(os.environ.get("RANK", "0"))
    mine = rows[rank :: hw.world_size]  # each worker its own slice, as a distributed sampler would
    means = [sum(col) / len(mine) for col in zip(*mine, strict=True)] if mine else []
    model = {
        "instance_type": hw.instance_type,
        "world_size": hw.world_size,
        "per_device_batch": batch["per_device"],
        "gradient_accumulation_steps": batch["gradient_accumulation_steps"],
        "rows_seen_by_rank_0": len(mine),
        "column_means": means,
    }
    if rank == 0:
        model_dir = Path(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / "model.json").write_text(json.dumps(model, indent=2))
    return model


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    hw = read_hardware(args.resource_config)
    plan = plan_for(args, hw, argv)
    print(json.dumps(plan), flush=True)  # the job's log shows what this entry of the list got
    if args.dry_run:
        return 0
    if plan["launch"] and "LOCAL_RANK" not in os.environ:
        os.execvp(plan["launch"][0], plan["launch"])  # every worker comes back here with LOCAL_RANK set
    train(hw, plan["batch"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
