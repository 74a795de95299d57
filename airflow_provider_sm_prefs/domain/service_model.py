"""Facts read from botocore's SageMaker service model, without importing botocore.

botocore's JSON model is the source of truth for which instance types a Training or Processing job
accepts, so new types arrive with a botocore upgrade. The file is read straight from botocore's
installed data directory: DAG files that build preference lists import this module at parse time,
and importing botocore itself there would cost far more than reading one JSON file once.

Even reading that file (the whole service model, gzip'd) is too much for the first DAG parse in a
process, so :func:`accepts_instance_type` answers from :data:`INSTANCE_TYPES_SNAPSHOT`, a copy of the
two enums kept equal to the installed botocore by ``tests/test_preferences.py``, and reads the model
only for a type the copy does not hold (one that a newer botocore added, or an invalid one).
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


#: botocore's ``TrainingInstanceType`` and ``ProcessingInstanceType`` enums, as a botocore release had them
#: (``instance_types_snapshot.json`` beside this module: ``training``, and ``training_only``, the training
#: types processing does not accept). ``tests/test_preferences.py`` fails, printing the file's new text,
#: when the installed botocore differs.
_SNAPSHOT = json.loads((Path(__file__).with_name("instance_types_snapshot.json")).read_text())
INSTANCE_TYPES_SNAPSHOT: dict[str, frozenset[str]] = {
    "training": frozenset(_SNAPSHOT["training"]),
    "processing": frozenset(_SNAPSHOT["training"]) - frozenset(_SNAPSHOT["training_only"]),
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
            with opener(path, "rt", encoding="utf-8") as fh:
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


def accepts_instance_type(kind: str, instance_type: str) -> bool:
    """Whether ``instance_type`` is valid for ``kind``: ``instance_type in instance_types(kind)``, cheaply.

    Types in :data:`INSTANCE_TYPES_SNAPSHOT` are accepted without reading the service model, so checking
    a valid list costs microseconds; any other type is looked up in the installed model. The answer is
    the model's for the botocore the snapshot was taken from and any newer one (botocore adds enum
    values, it does not remove them).

    :raises ValueError: if ``kind`` is not a job kind.
    """
    if instance_type in INSTANCE_TYPES_SNAPSHOT.get(kind, ()):
        return True
    return instance_type in instance_types(kind)


@cache
def cluster_instance_types() -> frozenset[str]:
    """Instance types a HyperPod instance group accepts (botocore's ``ClusterInstanceType``).

    Read from the model on first use: a HyperPod task checks its list at run time, never at DAG parse.
    """
    return frozenset(_service_model()["shapes"]["ClusterInstanceType"]["enum"])


@cache
def shape(name: str) -> dict[str, Any]:
    """One shape of botocore's SageMaker model, as its JSON gives it (``type``, ``members``, ``member``...).

    Read from the model on first use, like :func:`cluster_instance_types`: HyperPod tasks ask at run time.

    :raises KeyError: if the installed model has no shape of that name.
    """
    found: dict[str, Any] = _service_model()["shapes"][name]
    return found
