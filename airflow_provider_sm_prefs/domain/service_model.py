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


#: botocore's ``TrainingInstanceType`` and ``ProcessingInstanceType`` enums (botocore 1.43.117).
#: ``tests/test_preferences.py`` fails, printing the new text, when the installed botocore differs.
_TRAINING_INSTANCE_TYPES = """
ml.c4.2xlarge ml.c4.4xlarge ml.c4.8xlarge ml.c4.xlarge
ml.c5.18xlarge ml.c5.2xlarge ml.c5.4xlarge ml.c5.9xlarge ml.c5.xlarge
ml.c5n.18xlarge ml.c5n.2xlarge ml.c5n.4xlarge ml.c5n.9xlarge ml.c5n.xlarge
ml.c6i.12xlarge ml.c6i.16xlarge ml.c6i.24xlarge ml.c6i.2xlarge ml.c6i.32xlarge ml.c6i.4xlarge
ml.c6i.8xlarge ml.c6i.xlarge
ml.c7i-flex.12xlarge ml.c7i-flex.16xlarge ml.c7i-flex.2xlarge ml.c7i-flex.4xlarge
ml.c7i-flex.8xlarge ml.c7i-flex.xlarge
ml.c7i.12xlarge ml.c7i.16xlarge ml.c7i.24xlarge ml.c7i.2xlarge ml.c7i.48xlarge ml.c7i.4xlarge
ml.c7i.8xlarge ml.c7i.large ml.c7i.xlarge
ml.c8i-flex.12xlarge ml.c8i-flex.16xlarge ml.c8i-flex.2xlarge ml.c8i-flex.4xlarge
ml.c8i-flex.8xlarge ml.c8i-flex.xlarge
ml.c8i.12xlarge ml.c8i.16xlarge ml.c8i.24xlarge ml.c8i.2xlarge ml.c8i.32xlarge ml.c8i.48xlarge
ml.c8i.4xlarge ml.c8i.8xlarge ml.c8i.96xlarge ml.c8i.xlarge
ml.g4dn.12xlarge ml.g4dn.16xlarge ml.g4dn.2xlarge ml.g4dn.4xlarge ml.g4dn.8xlarge ml.g4dn.xlarge
ml.g5.12xlarge ml.g5.16xlarge ml.g5.24xlarge ml.g5.2xlarge ml.g5.48xlarge ml.g5.4xlarge
ml.g5.8xlarge ml.g5.xlarge
ml.g6.12xlarge ml.g6.16xlarge ml.g6.24xlarge ml.g6.2xlarge ml.g6.48xlarge ml.g6.4xlarge
ml.g6.8xlarge ml.g6.xlarge
ml.g6e.12xlarge ml.g6e.16xlarge ml.g6e.24xlarge ml.g6e.2xlarge ml.g6e.48xlarge ml.g6e.4xlarge
ml.g6e.8xlarge ml.g6e.xlarge
ml.g7.12xlarge ml.g7.24xlarge ml.g7.2xlarge ml.g7.48xlarge ml.g7.4xlarge ml.g7.8xlarge
ml.g7e.12xlarge ml.g7e.24xlarge ml.g7e.2xlarge ml.g7e.48xlarge ml.g7e.4xlarge ml.g7e.8xlarge
ml.m4.10xlarge ml.m4.16xlarge ml.m4.2xlarge ml.m4.4xlarge ml.m4.xlarge
ml.m5.12xlarge ml.m5.24xlarge ml.m5.2xlarge ml.m5.4xlarge ml.m5.large ml.m5.xlarge
ml.m6i.12xlarge ml.m6i.16xlarge ml.m6i.24xlarge ml.m6i.2xlarge ml.m6i.32xlarge ml.m6i.4xlarge
ml.m6i.8xlarge ml.m6i.large ml.m6i.xlarge
ml.m7i-flex.12xlarge ml.m7i-flex.16xlarge ml.m7i-flex.2xlarge ml.m7i-flex.4xlarge
ml.m7i-flex.8xlarge ml.m7i-flex.large ml.m7i-flex.xlarge
ml.m7i.12xlarge ml.m7i.16xlarge ml.m7i.24xlarge ml.m7i.2xlarge ml.m7i.48xlarge ml.m7i.4xlarge
ml.m7i.8xlarge ml.m7i.large ml.m7i.xlarge
ml.m8i-flex.12xlarge ml.m8i-flex.16xlarge ml.m8i-flex.2xlarge ml.m8i-flex.4xlarge
ml.m8i-flex.8xlarge ml.m8i-flex.large ml.m8i-flex.xlarge
ml.m8i.12xlarge ml.m8i.16xlarge ml.m8i.24xlarge ml.m8i.2xlarge ml.m8i.32xlarge ml.m8i.48xlarge
ml.m8i.4xlarge ml.m8i.8xlarge ml.m8i.96xlarge ml.m8i.large ml.m8i.xlarge
ml.p2.16xlarge ml.p2.8xlarge ml.p2.xlarge
ml.p3.16xlarge ml.p3.2xlarge ml.p3.8xlarge
ml.p3dn.24xlarge
ml.p4d.24xlarge
ml.p4de.24xlarge
ml.p5.48xlarge ml.p5.4xlarge
ml.p5e.48xlarge
ml.p5en.48xlarge
ml.p6-b200.48xlarge
ml.p6-b300.48xlarge
ml.p6e-gb200.36xlarge
ml.r5.12xlarge ml.r5.16xlarge ml.r5.24xlarge ml.r5.2xlarge ml.r5.4xlarge ml.r5.8xlarge ml.r5.large
ml.r5.xlarge
ml.r5d.12xlarge ml.r5d.16xlarge ml.r5d.24xlarge ml.r5d.2xlarge ml.r5d.4xlarge ml.r5d.8xlarge
ml.r5d.large ml.r5d.xlarge
ml.r6i.12xlarge ml.r6i.16xlarge ml.r6i.24xlarge ml.r6i.2xlarge ml.r6i.32xlarge ml.r6i.4xlarge
ml.r6i.8xlarge ml.r6i.large ml.r6i.xlarge
ml.r7i.12xlarge ml.r7i.16xlarge ml.r7i.24xlarge ml.r7i.2xlarge ml.r7i.48xlarge ml.r7i.4xlarge
ml.r7i.8xlarge ml.r7i.large ml.r7i.xlarge
ml.r8i-flex.12xlarge ml.r8i-flex.16xlarge ml.r8i-flex.2xlarge ml.r8i-flex.4xlarge
ml.r8i-flex.8xlarge ml.r8i-flex.large ml.r8i-flex.xlarge
ml.r8i.12xlarge ml.r8i.16xlarge ml.r8i.24xlarge ml.r8i.2xlarge ml.r8i.32xlarge ml.r8i.48xlarge
ml.r8i.4xlarge ml.r8i.8xlarge ml.r8i.96xlarge ml.r8i.large ml.r8i.xlarge
ml.t3.2xlarge ml.t3.large ml.t3.medium ml.t3.xlarge
ml.trn1.2xlarge ml.trn1.32xlarge
ml.trn1n.32xlarge
ml.trn2.48xlarge
"""
#: Training types that processing does not accept.
_TRAINING_ONLY_INSTANCE_TYPES = """
ml.c5n.18xlarge ml.c5n.2xlarge ml.c5n.4xlarge ml.c5n.9xlarge ml.c5n.xlarge ml.p3dn.24xlarge
ml.p4d.24xlarge ml.p4de.24xlarge ml.p5.48xlarge ml.p5e.48xlarge ml.p5en.48xlarge ml.p6-b200.48xlarge
ml.p6-b300.48xlarge ml.p6e-gb200.36xlarge ml.trn1.2xlarge ml.trn1.32xlarge ml.trn1n.32xlarge
ml.trn2.48xlarge
"""
INSTANCE_TYPES_SNAPSHOT: dict[str, frozenset[str]] = {
    "training": frozenset(_TRAINING_INSTANCE_TYPES.split()),
    "processing": frozenset(_TRAINING_INSTANCE_TYPES.split())
    - frozenset(_TRAINING_ONLY_INSTANCE_TYPES.split()),
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
