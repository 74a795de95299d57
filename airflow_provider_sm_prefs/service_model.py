"""Facts read from botocore's SageMaker service model, without importing botocore.

botocore's JSON model is the source of truth for which instance types a Training or Processing job
accepts, so new types arrive with a botocore upgrade. The file is read straight from botocore's
installed data directory: DAG files that build preference lists import this module at parse time,
and importing botocore itself there would cost far more than reading one JSON file once.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

_SERVICE = "sagemaker"

#: Shape names of the instance-type enums per job kind.
INSTANCE_TYPE_SHAPES = {
    "training": "TrainingInstanceType",
    "processing": "ProcessingInstanceType",
}


class ServiceModelUnavailable(RuntimeError):
    """botocore's SageMaker model could not be found or is too old to know instance preferences."""


def _botocore_data_dir() -> Path:
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        raise ServiceModelUnavailable("botocore is not installed; install botocore>=1.43.90")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / _SERVICE


@cache
def _service_model() -> dict[str, Any]:
    data_dir = _botocore_data_dir()
    versions = sorted(p for p in data_dir.iterdir() if p.is_dir()) if data_dir.is_dir() else []
    if not versions:
        raise ServiceModelUnavailable(f"no SageMaker service model under {data_dir}")
    latest = versions[-1]
    for name, opener in (("service-2.json.gz", gzip.open), ("service-2.json", open)):
        path = latest / name
        if path.exists():
            with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
                model: dict[str, Any] = json.load(fh)
            break
    else:
        raise ServiceModelUnavailable(f"no service-2.json in {latest}")
    if "InstancePreference" not in model.get("shapes", {}):
        raise ServiceModelUnavailable(
            "the installed botocore does not know SageMaker InstancePreferences; upgrade to botocore>=1.43.90"
        )
    return model


@cache
def instance_types(kind: str) -> frozenset[str]:
    """Instance types the service model accepts for ``kind`` ("training" or "processing")."""
    try:
        shape_name = INSTANCE_TYPE_SHAPES[kind]
    except KeyError:
        raise ValueError(f"job kind must be one of {sorted(INSTANCE_TYPE_SHAPES)}, not {kind!r}") from None
    return frozenset(_service_model()["shapes"][shape_name]["enum"])


def shape_limits(shape_name: str) -> tuple[int | None, int | None]:
    """``(min, max)`` of a shape in the model (None where the model sets no bound)."""
    shape = _service_model()["shapes"][shape_name]
    return shape.get("min"), shape.get("max")
