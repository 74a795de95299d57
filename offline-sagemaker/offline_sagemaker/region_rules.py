"""What a job may use from its own region only: the create-time checks of the regional resources a
CreateTrainingJob or CreateProcessingJob names.

AWS documents that a training job's input bucket must be in the job's own region (S3DataSource: "Your
input bucket must be in the same Amazon region as your training job"); images in Amazon ECR, KMS keys
and VPC subnets are regional resources too. The emulator refuses, with a ``ValidationException`` naming
the field, the resource's region and the job's:

- an S3 input whose bucket exists (in moto's S3, served by this endpoint) in another region;
- an ECR image URI (``<account>.dkr.ecr.<region>.amazonaws.com/...``) of another region;
- a KMS key given as an ARN of another region (a key id or alias is read in the job's region);
- a subnet that exists (in moto's EC2) in another region and not in the job's.

A bucket or subnet nobody created is not checked: the emulator does not pretend to know where it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from offline_sagemaker.exceptions import ValidationError
from offline_sagemaker.models import JobKind

__all__ = ["check_regions"]

_ECR_IMAGE = re.compile(r"^\d{12}\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/")
_KMS_ARN = re.compile(r"^arn:aws[a-z-]*:kms:([a-z0-9-]+):")


def _path(config: Mapping[str, Any], *keys: str) -> Any:
    value: Any = config
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _inputs(kind: JobKind, params: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(field, S3 URI)`` of every S3 input of the request."""
    if kind is JobKind.TRAINING:
        for i, channel in enumerate(_items(params.get("InputDataConfig"))):
            yield (
                f"InputDataConfig[{i}].DataSource.S3DataSource.S3Uri",
                _path(channel, "DataSource", "S3DataSource", "S3Uri"),
            )
    else:
        for i, item in enumerate(_items(params.get("ProcessingInputs"))):
            yield f"ProcessingInputs[{i}].S3Input.S3Uri", _path(item, "S3Input", "S3Uri")


def _image(kind: JobKind, params: Mapping[str, Any]) -> tuple[str, Any]:
    if kind is JobKind.TRAINING:
        return "AlgorithmSpecification.TrainingImage", _path(
            params, "AlgorithmSpecification", "TrainingImage"
        )
    return "AppSpecification.ImageUri", _path(params, "AppSpecification", "ImageUri")


def _keys(kind: JobKind, params: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    if kind is JobKind.TRAINING:
        yield "OutputDataConfig.KmsKeyId", _path(params, "OutputDataConfig", "KmsKeyId")
        yield "ResourceConfig.VolumeKmsKeyId", _path(params, "ResourceConfig", "VolumeKmsKeyId")
    else:
        yield "ProcessingOutputConfig.KmsKeyId", _path(params, "ProcessingOutputConfig", "KmsKeyId")
        yield (
            "ProcessingResources.ClusterConfig.VolumeKmsKeyId",
            _path(params, "ProcessingResources", "ClusterConfig", "VolumeKmsKeyId"),
        )


def _subnets(kind: JobKind, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
    if kind is JobKind.TRAINING:
        return "VpcConfig.Subnets", _items(_path(params, "VpcConfig", "Subnets"))
    return "NetworkConfig.VpcConfig.Subnets", _items(_path(params, "NetworkConfig", "VpcConfig", "Subnets"))


def bucket_region(account_id: str, bucket: str) -> str | None:
    """The region of a bucket created in this endpoint's S3 (moto), None if there is no such bucket."""
    try:
        from moto.s3.models import s3_backends
    except ImportError:  # pragma: no cover - moto is a dependency of the server
        return None
    found = dict.get(s3_backends[account_id], "aws")
    made = found.buckets.get(bucket) if found is not None else None
    return None if made is None else str(made.region_name)


def subnet_regions(account_id: str, subnet_id: str) -> set[str]:
    """The regions of this endpoint's EC2 (moto) that have a subnet ``subnet_id``."""
    try:
        from moto.ec2.models import ec2_backends
    except ImportError:  # pragma: no cover - moto is a dependency of the server
        return set()
    regions = set()
    for region, backend in dict.items(ec2_backends[account_id]):
        if any(subnet_id in by_id for by_id in backend.subnets.values()):
            regions.add(region)
    return regions


def check_regions(kind: JobKind, params: Mapping[str, Any], region: str, account_id: str) -> None:
    """Refuse a job in ``region`` that names another region's input bucket, image, KMS key or subnet.

    :raises ValidationError: naming the first such field, the resource's region and the job's.
    """
    label = kind.label.lower()
    for field, uri in _inputs(kind, params):
        if not isinstance(uri, str) or not uri.startswith("s3://"):
            continue
        bucket = uri[len("s3://") :].split("/", 1)[0]
        where = bucket_region(account_id, bucket)
        if where is not None and where != region:
            raise ValidationError(
                f"{field}: the S3 bucket {bucket} is in {where}, not in {region}. Your input bucket must be "
                f"in the same AWS Region as your {label} job."
            )
    field, image = _image(kind, params)
    found = _ECR_IMAGE.match(image) if isinstance(image, str) else None
    if found is not None and found.group(1) != region:
        raise ValidationError(
            f"{field}: the image {image} is in an Amazon ECR repository in {found.group(1)}, not in {region}. "
            f"Use an image of a repository in {region} (ECR replication copies one there)."
        )
    for field, key in _keys(kind, params):
        found = _KMS_ARN.match(key) if isinstance(key, str) else None
        if found is not None and found.group(1) != region:
            raise ValidationError(
                f"{field}: the KMS key {key} is in {found.group(1)}, not in {region}. Use a key of {region}."
            )
    field, subnets = _subnets(kind, params)
    for index, subnet in enumerate(subnets):
        if not isinstance(subnet, str):
            continue
        regions = subnet_regions(account_id, subnet)
        if regions and region not in regions:
            raise ValidationError(
                f"{field}[{index}]: the subnet {subnet} is in {', '.join(sorted(regions))}, not in "
                f"{region}. Use a subnet of a VPC in {region}."
            )
