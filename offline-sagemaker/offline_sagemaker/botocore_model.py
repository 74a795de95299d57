"""botocore's SageMaker service model as the emulator reads it: shapes, operations and instance types.

A leaf: the single source of truth for request shapes and the instance-type enums, used by the scenario
validation (which types a scenario may name) and by the service-side rules. botocore is imported on the
first call, not at import, so that loading a scenario without instance types, or importing the package,
costs nothing.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from botocore.model import OperationModel, ServiceModel

__all__ = [
    "INSTANCE_TYPE_SHAPES",
    "all_instance_types",
    "instance_types",
    "operation_model",
    "service_model",
]

#: Shape names of the instance-type enums per job kind, and of HyperPod cluster nodes.
INSTANCE_TYPE_SHAPES = {
    "training": "TrainingInstanceType",
    "processing": "ProcessingInstanceType",
    "cluster": "ClusterInstanceType",
}


@cache
def service_model() -> ServiceModel:
    """botocore's SageMaker service model: the single source of truth for shapes and enums."""
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker")


@cache
def operation_model(operation: str, service: str = "sagemaker") -> OperationModel:
    """The botocore operation model for ``operation`` of ``service`` (``pricing``, ``service-quotas`` too)."""
    if service == "sagemaker":
        return service_model().operation_model(operation)
    import botocore.session

    return botocore.session.get_session().get_service_model(service).operation_model(operation)


@cache
def instance_types(kind: str) -> frozenset[str]:
    """The instance types a ``kind`` job (``training`` or ``processing``) or a ``cluster`` node accepts."""
    return frozenset(service_model().shape_for(INSTANCE_TYPE_SHAPES[kind]).enum)


@cache
def all_instance_types() -> frozenset[str]:
    """Every instance type of either job kind or of cluster nodes."""
    return instance_types("training") | instance_types("processing") | instance_types("cluster")
