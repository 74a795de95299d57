"""Regions after the home one: what a job needs to be submitted elsewhere, checked before any call (pure).

An instance preference list is ordered within one region. When every entry is scarce there, the next
stage of the escalation is another region, and a job does not move by changing a flag: its input bucket
must be in its own region ("Your input bucket must be in the same Amazon region as your training job",
S3DataSource), and so must its ECR image, KMS keys, subnets and security groups, file systems, algorithm
and training plans. A :class:`FailoverRegion` names the region, when it is entered (``after``: seconds
of the whole wait, as acceptance windows count them), the request fields that change there
(``overrides``: merged into the Create request, dicts key by key, anything else replaced whole),
optionally its own preference list and connection.

:func:`read_regions` parses what a DAG author writes; :func:`region_problems` checks a region against
the home request: every region-bound field the home request sets is overridden (or the error names the
field, the region and the fix), every override names a field of the Create request, and what carries
its region in its name (an ECR image URI, a KMS key ARN, a training plan or algorithm ARN) names that
region. :func:`region_request` is the request sent there. No Airflow, no boto.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList

__all__ = [
    "REGION_BOUND",
    "FailoverRegion",
    "location_region",
    "read_regions",
    "region_of",
    "region_problems",
    "region_request",
    "s3_buckets",
]

#: An AWS region name: ``us-west-2``, ``ap-southeast-1``, ``us-gov-west-1``, ``cn-north-1``.
_REGION = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$")
_ECR_IMAGE = re.compile(r"^\d{12}\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/")
_ARN_REGION = re.compile(r"^arn:aws[a-z-]*:[a-z0-9-]+:([a-z0-9-]*):")
_KEYS = ("region", "after", "overrides", "instance_preferences", "aws_conn_id")

#: What a region-bound field holds, and how a DAG author gets one in another region.
_WHAT = {
    "s3": ("an S3 location", "a bucket is in one region; S3 replication copies the data to a bucket there"),
    "image": ("an Amazon ECR image", "ECR replication copies the image to a repository there"),
    "kms": ("a KMS key", "keys are regional; use a key, or a multi-Region replica key, of that region"),
    "vpc": ("VPC networking", "subnets and security groups belong to one region's VPC"),
    "arn": ("a regional resource", "its ARN names the region"),
    "fs": ("a file system", "EFS and FSx file systems are regional"),
}

#: The fields of each kind's Create request that name a regional resource: a path (``*`` for every item
#: of a list) and what it holds. IAM roles are global; everything here is not.
REGION_BOUND: Mapping[JobKind, tuple[tuple[tuple[str, ...], str], ...]] = {
    JobKind.TRAINING: (
        (("AlgorithmSpecification", "TrainingImage"), "image"),
        (("AlgorithmSpecification", "AlgorithmName"), "arn"),
        (("InputDataConfig", "*", "DataSource", "S3DataSource", "S3Uri"), "s3"),
        (("InputDataConfig", "*", "DataSource", "FileSystemDataSource", "FileSystemId"), "fs"),
        (("OutputDataConfig", "S3OutputPath"), "s3"),
        (("OutputDataConfig", "KmsKeyId"), "kms"),
        (("ResourceConfig", "VolumeKmsKeyId"), "kms"),
        (("ResourceConfig", "TrainingPlanArn"), "arn"),
        (("VpcConfig", "Subnets"), "vpc"),
        (("VpcConfig", "SecurityGroupIds"), "vpc"),
        (("CheckpointConfig", "S3Uri"), "s3"),
        (("DebugHookConfig", "S3OutputPath"), "s3"),
        (("TensorBoardOutputConfig", "S3OutputPath"), "s3"),
        (("ProfilerConfig", "S3OutputPath"), "s3"),
        (("DebugRuleConfigurations", "*", "RuleEvaluatorImage"), "image"),
        (("ProfilerRuleConfigurations", "*", "RuleEvaluatorImage"), "image"),
    ),
    JobKind.PROCESSING: (
        (("AppSpecification", "ImageUri"), "image"),
        (("ProcessingInputs", "*", "S3Input", "S3Uri"), "s3"),
        (("ProcessingOutputConfig", "Outputs", "*", "S3Output", "S3Uri"), "s3"),
        (("ProcessingOutputConfig", "KmsKeyId"), "kms"),
        (("ProcessingResources", "ClusterConfig", "VolumeKmsKeyId"), "kms"),
        (("NetworkConfig", "VpcConfig", "Subnets"), "vpc"),
        (("NetworkConfig", "VpcConfig", "SecurityGroupIds"), "vpc"),
    ),
}

#: What overrides may not change: the job's name is the provider's, its list is ``instance_preferences``.
_NOT_OVERRIDDEN: Mapping[JobKind, tuple[tuple[str, ...], ...]] = {
    JobKind.TRAINING: (("TrainingJobName",), ("ResourceConfig", "InstancePreferences")),
    JobKind.PROCESSING: (
        ("ProcessingJobName",),
        ("ProcessingResources", "ClusterConfig", "InstancePreferences"),
    ),
}


@dataclass(frozen=True)
class FailoverRegion:
    """One region the job moves to when the regions before it had no capacity.

    :param region: the AWS region, e.g. ``us-west-2``.
    :param after: seconds of the whole wait (from the first job's creation) after which the job moves
        here, if it is still Pending.
    :param overrides: merged into the Create request for this region: dicts key by key, lists and
        values replaced whole (``{"InputDataConfig": [...], "OutputDataConfig": {"S3OutputPath": ...}}``).
    :param instance_preferences: this region's own list (None: the home list, as submitted).
    :param aws_conn_id: this region's Airflow connection (None: the task's own, with ``region_name`` set
        to ``region``).
    """

    region: str
    after: float
    overrides: Mapping[str, Any] = field(default_factory=dict)
    instance_preferences: InstancePreferenceList | None = None
    aws_conn_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form (kept in the task's state); round-trips through :meth:`from_dict`."""
        prefs = self.instance_preferences
        return {
            "region": self.region,
            "after": self.after,
            "overrides": copy.deepcopy(dict(self.overrides)),
            "instance_preferences": prefs.as_list() if prefs is not None else None,
            "aws_conn_id": self.aws_conn_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], kind: JobKind) -> FailoverRegion:
        prefs = data.get("instance_preferences")
        return cls(
            region=str(data["region"]),
            after=float(data["after"]),
            overrides=dict(data.get("overrides") or {}),
            instance_preferences=InstancePreferenceList.from_response(prefs, kind) if prefs else None,
            aws_conn_id=data.get("aws_conn_id"),
        )


def region_of(value: Any) -> str | None:
    """The region an ECR image URI or an ARN names; None for anything else (a key id, a public image)."""
    if not isinstance(value, str):
        return None
    found = _ECR_IMAGE.match(value) or _ARN_REGION.match(value)
    if found is None:
        return None
    return found.group(1) or None  # a global ARN (IAM) has no region


def _seconds(value: Any) -> float | None:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def read_regions(raw: Any, kind: JobKind) -> tuple[tuple[FailoverRegion, ...], list[str]]:
    """The regions a DAG author wrote (a list of mappings or :class:`FailoverRegion`) and the problems
    found reading them, each naming ``regions[i]`` and its key."""
    if raw is None:
        return (), []
    if isinstance(raw, Mapping | str) or not isinstance(raw, Sequence):
        return (), [
            "regions: give a list of regions, e.g. [{'region': 'us-west-2', 'after': timedelta(hours=1), "
            "'overrides': {...}}]"
        ]
    regions: list[FailoverRegion] = []
    problems: list[str] = []
    for index, item in enumerate(raw):
        region, found = _read_one(item, f"regions[{index}]", kind)
        problems.extend(found)
        if region is not None:
            regions.append(region)
    return tuple(regions), problems


def _read_one(item: Any, where: str, kind: JobKind) -> tuple[FailoverRegion | None, list[str]]:
    if isinstance(item, FailoverRegion):
        return item, []
    if not isinstance(item, Mapping):
        return None, [f"{where}: must be a mapping with region, after and overrides, got {item!r}"]
    problems = []
    for key in item:
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), _KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{where}.{key}: unknown key{hint}; allowed: {', '.join(_KEYS)}")
    region = item.get("region")
    if not isinstance(region, str) or not _REGION.match(region):
        return None, [
            *problems,
            f"{where}.region: must be an AWS region name such as us-west-2, got {region!r}",
        ]
    after = _seconds(item.get("after"))
    if after is None or after <= 0:
        return None, [
            *problems,
            f"{where}.after: give how long the job waits before it moves to {region} (a timedelta or "
            f"seconds above 0), got {item.get('after')!r}",
        ]
    overrides = item.get("overrides") or {}
    if not isinstance(overrides, Mapping):
        return None, [
            *problems,
            f"{where}.overrides: must be a mapping of Create request fields, got {overrides!r}",
        ]
    prefs = None
    if item.get("instance_preferences") is not None:
        prefs, found = InstancePreferenceList.read(item["instance_preferences"], kind)
        problems.extend(
            f"{where}.{p}" if p.startswith("instance_preferences") else f"{where}.instance_preferences: {p}"
            for p in found
        )
    conn = item.get("aws_conn_id")
    if conn is not None and not (isinstance(conn, str) and conn):
        problems.append(f"{where}.aws_conn_id: must be a connection id, got {conn!r}")
    return FailoverRegion(region, after, dict(overrides), prefs, conn), problems


def _values(node: Any, path: Sequence[str], at: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted field, value)`` of every value at ``path`` in ``node`` (``*``: each item of a list)."""
    if not path:
        yield at, node
        return
    head, rest = path[0], path[1:]
    if head == "*":
        if isinstance(node, list):
            for index, item in enumerate(node):
                yield from _values(item, rest, f"{at}[{index}]")
        return
    if isinstance(node, Mapping) and node.get(head) is not None:
        yield from _values(node[head], rest, f"{at}.{head}" if at else head)


def _overridden(overrides: Mapping[str, Any], path: Sequence[str]) -> bool:
    """Whether ``overrides`` sets what is at ``path`` (a list or value it gives replaces all below it)."""
    node: Any = overrides
    for key in path:
        if key == "*" or not isinstance(node, Mapping):
            return True
        if key not in node:
            return False
        node = node[key]
    return True


def _merge(base: Any, changes: Any) -> Any:
    if isinstance(base, Mapping) and isinstance(changes, Mapping):
        merged = dict(base)
        for key, value in changes.items():
            merged[key] = _merge(base.get(key), value)
        return merged
    return copy.deepcopy(changes)


def region_request(request: Mapping[str, Any], region: FailoverRegion) -> dict[str, Any]:
    """The Create request for ``region``: ``request`` with its overrides merged in."""
    merged: dict[str, Any] = _merge(copy.deepcopy(dict(request)), region.overrides)
    return merged


def _members(shape_name: str) -> Mapping[str, Any] | None:
    from airflow_provider_sm_prefs.domain.service_model import ServiceModelUnavailable, shape

    try:
        return shape(shape_name).get("members")
    except (KeyError, ServiceModelUnavailable):
        return None


def _unknown_fields(node: Mapping[str, Any], shape_name: str, at: str) -> Iterator[str]:
    """The keys of ``node`` that the request shape ``shape_name`` has no member for, with a suggestion."""
    members = _members(shape_name)
    if members is None:
        return
    for key, value in node.items():
        member = members.get(key)
        where = f"{at}.{key}"
        if member is None:
            close = difflib.get_close_matches(str(key), list(members), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            yield f"{where}: not a field of {shape_name}{hint}"
        elif isinstance(value, Mapping):
            yield from _unknown_fields(value, member["shape"], where)


def region_problems(
    kind: JobKind,
    request: Mapping[str, Any],
    regions: Sequence[FailoverRegion],
    home: InstancePreferenceList,
    home_region: str | None = None,
) -> list[str]:
    """Why the job could not move to these regions as written, each naming the region, field and fix.

    :param request: the home Create request (its instance list included or not).
    :param home: the home list, as submitted: a region without its own list offers it again.
    :param home_region: the task's own region, when known (parse time may not know it).
    """
    problems: list[str] = []
    seen: set[str | None] = {home_region}
    opened = max(home.windows, default=0.0)
    for index, region in enumerate(regions):
        where = f"regions[{index}] ({region.region})"
        if region.region in seen:
            problems.append(
                f"{where}: {region.region} is already a stage of this task; name each region once"
            )
        seen.add(region.region)
        if region.after <= opened:
            problems.append(
                f"{where}.after: {region.after:g} s is not after the stage before it opens ({opened:g} s); "
                "each region opens later than the windows and regions before it"
            )
        opened = max(opened, region.after)
        problems.extend(_override_problems(kind, region, where))
        problems.extend(_bound_problems(kind, request, region, where))
        problems.extend(_plan_problems(where, region, home))
    return problems


def _override_problems(kind: JobKind, region: FailoverRegion, where: str) -> list[str]:
    """Overrides that name no field of the Create request, or a field the provider sets."""
    problems = list(
        _unknown_fields(region.overrides, f"Create{kind.spec.label}JobRequest", f"{where}.overrides")
    )
    for path in _NOT_OVERRIDDEN[kind]:
        if any(True for _ in _values(region.overrides, path)):
            problems.append(
                f"{where}.overrides.{'.'.join(path)}: set by the provider; give the region's list as "
                "instance_preferences"
            )
    return problems


def _bound_problems(
    kind: JobKind, request: Mapping[str, Any], region: FailoverRegion, where: str
) -> list[str]:
    """Region-bound fields of the home request the overrides leave as they are, and values of the region's
    request that name another region."""
    problems = []
    merged = region_request(request, region)
    for path, what in REGION_BOUND[kind]:
        for name, value in _values(request, path):
            if what == "image" and region_of(value) is None:
                continue  # not in ECR (a public registry): the same image serves every region
            if not _overridden(region.overrides, path):
                held, how = _WHAT[what]
                problems.append(
                    f"{where}: {name} is {held} of the home region and the overrides do not replace it; "
                    f"give {path[0]} in the overrides with one of {region.region} ({how})"
                )
        if not _overridden(region.overrides, path):
            continue  # named above, if the home request sets it
        for name, value in _values(merged, path):
            for item in value if isinstance(value, list) else [value]:
                named = region_of(item)
                if named is not None and named != region.region:
                    problems.append(
                        f"{where}.overrides: {name} is {item}, a resource of {named}; use one of {region.region}"
                    )
    return problems


def _plan_problems(where: str, region: FailoverRegion, home: InstancePreferenceList) -> list[str]:
    prefs = region.instance_preferences
    if prefs is None:
        if any(entry.training_plan_arn for entry in home):
            return [
                f"{where}: the home list has training plans, which are regional; give this region its own "
                "instance_preferences (with plans of its own, or none)"
            ]
        return []
    return [
        f"{where}.instance_preferences[{rank - 1}].training_plan_arn: {entry.training_plan_arn} is a plan of "
        f"{region_of(entry.training_plan_arn)}; use a plan of {region.region}"
        for rank, entry in enumerate(prefs, start=1)
        if entry.training_plan_arn and region_of(entry.training_plan_arn) not in (None, region.region)
    ]


def s3_buckets(kind: JobKind, request: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, bucket)`` of every S3 location of a Create request, in field order."""
    found = []
    for path, what in REGION_BOUND[kind]:
        if what != "s3":
            continue
        for name, value in _values(request, path):
            if isinstance(value, str) and value.startswith("s3://"):
                bucket = value[len("s3://") :].split("/", 1)[0]
                if bucket:
                    found.append((name, bucket))
    return found


def location_region(constraint: Any) -> str:
    """The region of S3's ``GetBucketLocation`` answer: none (or empty) is us-east-1, ``EU`` eu-west-1."""
    if not constraint:
        return "us-east-1"
    return "eu-west-1" if constraint == "EU" else str(constraint)
