"""Rule R10 of the offline SageMaker: SageMaker's built-in algorithms and the instance types each supports.

A job whose image is a built-in algorithm (recognised by the ECR repository name, the last path part of
``TrainingImage``/``ImageUri``) must list only instance types that algorithm supports.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

from offline_sagemaker.exceptions import ValidationError
from offline_sagemaker.models import is_accelerated
from offline_sagemaker.scenario_types import Scenario

__all__ = ["BUILTIN_ALGORITHMS", "check_algorithm"]

#: Built-in algorithms by ECR repository name (the last path part of ``TrainingImage``/``ImageUri``),
#: with the instance classes each supports: ``cpu`` = any non-accelerated type, ``gpu`` = ``ml.p*`` and
#: ``ml.g*`` (no built-in algorithm ships Neuron kernels for ``ml.trn*``). A scenario can add entries or
#: override one with ``builtin_algorithms``; entries may also be instance type globs.
BUILTIN_ALGORITHMS: Mapping[str, tuple[str, ...]] = {
    "xgboost": ("cpu", "gpu"),
    "sagemaker-xgboost": ("cpu", "gpu"),
    "linear-learner": ("cpu", "gpu"),
    "kmeans": ("cpu", "gpu"),
    "pca": ("cpu", "gpu"),
    "factorization-machines": ("cpu", "gpu"),
    "knn": ("cpu", "gpu"),
    "ntm": ("cpu", "gpu"),
    "object2vec": ("cpu", "gpu"),
    "forecasting-deepar": ("cpu", "gpu"),
    "blazingtext": ("cpu", "gpu"),
    "ipinsights": ("cpu", "gpu"),
    "lda": ("cpu",),
    "randomcutforest": ("cpu",),
    "image-classification": ("gpu",),
    "object-detection": ("gpu",),
    "semantic-segmentation": ("gpu",),
    "seq2seq": ("gpu",),
    "sagemaker-scikit-learn": ("cpu",),
}


def _image_repository(image: Any) -> str | None:
    if not isinstance(image, str) or not image:
        return None
    last = image.rsplit("/", 1)[-1]
    return last.split("@", 1)[0].split(":", 1)[0]


def _supports(patterns: tuple[str, ...], instance_type: str) -> bool:
    for pattern in patterns:
        if pattern == "cpu" and not is_accelerated(instance_type):
            return True
        if pattern == "gpu" and instance_type.startswith(("ml.p", "ml.g")):
            return True
        if fnmatch.fnmatchcase(instance_type, pattern):
            return True
    return False


def check_algorithm(image: Any, choices: Sequence[tuple[str, str]], scenario: Scenario) -> None:
    """R10: with a built-in algorithm every listed type must be supported by it.

    :param image: the job's image URI.
    :param choices: ``(field path, instance type)`` of every listed type.
    """
    repository = _image_repository(image)
    if repository is None:
        return
    patterns = scenario.builtin_algorithms.get(repository) or BUILTIN_ALGORITHMS.get(repository)
    if patterns is None:
        return
    for field, instance_type in choices:
        if not _supports(patterns, instance_type):
            raise ValidationError(
                f"{field}: {instance_type} is not supported by the built-in algorithm {repository} "
                f"(supported: {', '.join(patterns)})"
            )
