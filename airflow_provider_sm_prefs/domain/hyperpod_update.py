"""What an UpdateCluster of an existing HyperPod group carries over from the group as it stands.

UpdateCluster takes a whole ``ClusterInstanceGroupSpecification`` per group. AWS does not document what
leaving an optional field out of an existing group's specification does (keep it, reset it, refuse), so a
scale sends every field the group has: the task changes its list and its count, nothing else. The fields
come from the group's ``ClusterInstanceGroupDetails`` in DescribeCluster, projected onto the
specification's shape as botocore's installed service model declares it, so a field a later botocore adds
to both shapes under one name is carried without a change here.

Where the two shapes name a field differently, :data:`DESCRIBE_SOURCES` says where it comes from: an
update under way reports both the settings in force (``Current...``) and the ones it is heading for
(``Desired...``); the desired ones are carried, so a scale never undoes an update someone else started.
The fields the task itself sets (:data:`TASK_FIELDS`) are never carried, and Describe's read-only
fields (status, counts, operations, per-type details) have no place in the specification and are dropped.

Pure domain code: the shapes are botocore's JSON, read by :mod:`.service_model`; no boto, no Airflow.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from airflow_provider_sm_prefs.domain import service_model

#: The shape UpdateCluster takes per group, and the shape DescribeCluster reports per group.
SPECIFICATION_SHAPE = "ClusterInstanceGroupSpecification"
DETAILS_SHAPE = "ClusterInstanceGroupDetails"

#: Specification fields the task sets itself, never carried from the existing group. Their Describe
#: names differ: ``InstanceCount`` is Describe's ``TargetCount``, ``MinInstanceCount`` its ``MinCount``
#: (which only governs a group's first transition to InService: an old minimum above a scale-down's new
#: count would be refused), ``InstanceRequirements.InstanceTypes`` its ``InstanceRequirements
#: .DesiredInstanceTypes``/``CurrentInstanceTypes``. ``InstanceType`` excludes ``InstanceRequirements``;
#: a group that has one is refused before any update (:func:`.hyperpod.check_flexible`).
TASK_FIELDS = frozenset(
    {"InstanceGroupName", "InstanceCount", "MinInstanceCount", "InstanceRequirements", "InstanceType"}
)

#: Specification member (as a path from the group) → the Describe members it is carried from, in order of
#: preference, where the names differ. Every other member is carried from the Describe member of the same
#: name. ``tests/test_hyperpod.py`` walks both shapes of the installed botocore and fails, naming the
#: member, when a specification member has neither a same-name Describe member nor an entry here.
DESCRIBE_SOURCES: Mapping[tuple[str, ...], tuple[str, ...]] = {
    ("ImageId",): ("DesiredImageId", "CurrentImageId"),
    ("ImageReleaseVersion",): ("DesiredImageReleaseVersion", "CurrentImageReleaseVersion"),
    ("KubernetesConfig", "Labels"): ("DesiredLabels", "CurrentLabels"),
    ("KubernetesConfig", "Taints"): ("DesiredTaints", "CurrentTaints"),
    ("AutoPatchConfig", "PatchSchedule"): ("DesiredPatchSchedule", "CurrentPatchSchedule"),
}


def carried_fields(details: Mapping[str, Any]) -> dict[str, Any]:
    """Every specification field of ``details`` (a ``ClusterInstanceGroupDetails``) but the task's own.

    Nested structures are projected member by member onto the specification's shape, so a member only
    Describe has (a status inside a structure) is dropped too.
    """
    members = service_model.shape(SPECIFICATION_SHAPE)["members"]
    carried: dict[str, Any] = {}
    for name, ref in members.items():
        if name in TASK_FIELDS:
            continue
        value = _source(details, (name,))
        if value is not None:
            projected = _project(value, ref["shape"], (name,))
            if projected is not None:
                carried[name] = projected
    return carried


def _source(container: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for name in DESCRIBE_SOURCES.get(path, (path[-1],)):
        if container.get(name) is not None:
            return container[name]
    return None


def _project(value: Any, shape_name: str, path: tuple[str, ...]) -> Any:
    """``value`` as the specification's shape ``shape_name`` takes it (None when nothing is left)."""
    shape = service_model.shape(shape_name)
    kind = shape.get("type")
    if kind == "structure":
        if not isinstance(value, Mapping):
            return None
        out = {}
        for name, ref in shape.get("members", {}).items():
            found = _source(value, (*path, name))
            if found is not None:
                projected = _project(found, ref["shape"], (*path, name))
                if projected is not None:
                    out[name] = projected
        return out
    if kind == "list":
        if not isinstance(value, (list, tuple)):
            return None
        member = shape["member"]["shape"]
        return [p for p in (_project(v, member, path) for v in value) if p is not None]
    if kind == "map":
        if not isinstance(value, Mapping):
            return None
        return {
            k: p for k, v in value.items() if (p := _project(v, shape["value"]["shape"], path)) is not None
        }
    return value


def uncarried_members() -> list[str]:
    """Specification members (dotted paths) that no Describe member feeds: neither a same-name member of
    the details shape nor an entry of :data:`DESCRIBE_SOURCES`. Empty for the botocore this was written
    against; a later botocore that adds such a member makes it non-empty (and its test fail)."""
    spec = service_model.shape(SPECIFICATION_SHAPE)["members"]
    details = service_model.shape(DETAILS_SHAPE)["members"]
    missing: list[str] = []
    for name, ref in spec.items():
        if name in TASK_FIELDS:
            continue
        missing.extend(_unfed((name,), ref["shape"], details))
    return missing


def _unfed(path: tuple[str, ...], spec_shape: str, details_members: Mapping[str, Any]) -> Iterator[str]:
    sources = [s for s in DESCRIBE_SOURCES.get(path, (path[-1],)) if s in details_members]
    if not sources:
        yield ".".join(path)
        return
    spec = _element(service_model.shape(spec_shape))
    if spec.get("type") != "structure":
        return
    for source in sources:
        details = _element(service_model.shape(details_members[source]["shape"]))
        for name, ref in spec.get("members", {}).items():
            yield from _unfed((*path, name), ref["shape"], details.get("members", {}))


def _element(shape: Mapping[str, Any]) -> Mapping[str, Any]:
    """The structure a list (of structures) holds, or the shape itself."""
    while shape.get("type") == "list":
        shape = service_model.shape(shape["member"]["shape"])
    return shape
