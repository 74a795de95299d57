"""Tags of the resources the emulator owns (training and processing jobs, HyperPod clusters), and Search.

AddTags, ListTags (``MaxResults``/``NextToken`` paging) and DeleteTags on a job's or a cluster's ARN, the
``Tags`` of a Create checked the same way (:func:`tag_map`), and ``Search`` of training jobs with
``SearchExpression.Filters`` (the way a reconciler finds jobs by tag). AWS's rules, as its API reference
states them: at most :data:`MAX_TAGS` tags per resource, keys of 1 to 128 characters, values of at most
256, both of ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*``, and no key with the ``aws:`` prefix (reserved for AWS);
a breach is a ``ValidationException`` and changes nothing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from offline_sagemaker.engine import Engine
from offline_sagemaker.exceptions import NotFound, ValidationError
from offline_sagemaker.models import Job, JobKind
from offline_sagemaker.responses import page
from offline_sagemaker.rules import validate_shape

__all__ = ["MAX_TAGS", "TagApi", "tag_map"]

Handler = Callable[[dict[str, Any], float], dict[str, Any]]

MAX_TAGS = 50
MAX_KEY_LENGTH = 128
MAX_VALUE_LENGTH = 256
#: ListTags' MaxResults: botocore's model sets 50 as the minimum and states no default.
LIST_TAGS_PAGE = 50
SEARCH_PAGE = 10
_PUNCTUATION = frozenset("_.:/=+-@")
_PATTERN = r"^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$"


def _allowed(text: str) -> bool:
    return all(unicodedata.category(c)[0] in "LZN" or c in _PUNCTUATION for c in text)


def _check_tag(key: Any, value: Any, where: str) -> None:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValidationError(
            f"1 validation error detected: Value '{key}' at '{where}.key' failed to satisfy constraint: "
            f"Member must have length between 1 and {MAX_KEY_LENGTH}"
        )
    if not isinstance(value, str) or len(value) > MAX_VALUE_LENGTH:
        raise ValidationError(
            f"1 validation error detected: Value at '{where}.value' failed to satisfy constraint: "
            f"Member must have length less than or equal to {MAX_VALUE_LENGTH}"
        )
    for part, text in (("key", key), ("value", value)):
        if not _allowed(text):
            raise ValidationError(
                f"1 validation error detected: Value '{text}' at '{where}.{part}' failed to satisfy "
                f"constraint: Member must satisfy regular expression pattern: {_PATTERN}"
            )
    if key.lower().startswith("aws:"):
        raise ValidationError(f"Tag keys beginning with 'aws:' are reserved for AWS use: {key!r}")


def tag_map(tags: Any, current: Mapping[str, str] | None = None) -> dict[str, str]:
    """``current`` with ``tags`` (a ``Tags`` list) added, a key given again taking the new value.

    :raises ValidationError: a tag AWS refuses, or more than :data:`MAX_TAGS` tags on the resource.
    """
    merged = dict(current or {})
    for index, tag in enumerate(tags or []):
        if not isinstance(tag, Mapping):
            raise ValidationError(f"Tags[{index}]: expected a structure with Key and Value")
        key, value = tag.get("Key"), tag.get("Value", "")
        _check_tag(key, value, f"tags.{index + 1}.member")
        merged[str(key)] = str(value)
    if len(merged) > MAX_TAGS:
        raise ValidationError(
            f"Tags: a resource has at most {MAX_TAGS} tags; this request would make {len(merged)}"
        )
    return merged


def _tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


class TagApi:
    """AddTags, ListTags, DeleteTags on the emulator's resources, and Search of its training jobs.

    :param engine: the simulation (its jobs and clusters).
    :param describe_training: a training job's DescribeTrainingJob (what a Search record holds).
    """

    def __init__(self, engine: Engine, describe_training: Callable[[Job], dict[str, Any]]) -> None:
        self.engine = engine
        self.describe_training = describe_training

    def handlers(self) -> dict[str, Handler]:
        return {
            "AddTags": self._add,
            "ListTags": self._list,
            "DeleteTags": self._delete,
            "Search": self._search,
        }

    def _resource(self, params: Mapping[str, Any], operation: str) -> Any:
        """The job or cluster ``ResourceArn`` names (each has ``tags``)."""
        validate_shape(operation, params)
        arn = params["ResourceArn"]
        for job in self.engine.jobs():
            if job.arn == arn:
                return job
        for cluster in self.engine.clusters.clusters():
            if cluster.arn == arn:
                return cluster
        raise NotFound("ResourceNotFound", f"Resource {arn} not found.")

    def _add(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        resource = self._resource(params, "AddTags")
        resource.tags = tag_map(params.get("Tags"), resource.tags)
        return {"Tags": params.get("Tags") or []}

    def _list(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        resource = self._resource(params, "ListTags")
        items, token = page(
            _tag_list(resource.tags), params.get("NextToken"), params.get("MaxResults") or LIST_TAGS_PAGE
        )
        return {"Tags": items, **({"NextToken": token} if token else {})}

    def _delete(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        resource = self._resource(params, "DeleteTags")
        for key in params["TagKeys"]:
            resource.tags.pop(key, None)
        return {}

    # ---------------------------------------------------------------------------------------- Search
    def _search(self, params: dict[str, Any], now: float) -> dict[str, Any]:
        """Search of training jobs: every filter of ``SearchExpression.Filters`` must hold (AND).

        Filters on ``Tags.<key>``, ``TrainingJobName`` and ``TrainingJobStatus`` with Equals, NotEquals,
        Contains, Exists and NotExists; newest first unless ``SortOrder`` is Ascending. Other resources,
        names, operators and nested expressions are refused by name rather than answered wrongly.
        """
        validate_shape("Search", params)
        if params["Resource"] != "TrainingJob":
            raise ValidationError(
                f"Resource: the offline SageMaker searches TrainingJob only, not {params['Resource']}"
            )
        expression = params.get("SearchExpression") or {}
        unsupported = sorted(set(expression) - {"Filters"})
        if unsupported:
            raise ValidationError(
                f"SearchExpression: the offline SageMaker supports Filters only, not {unsupported}"
            )
        checks = [_filter(f) for f in expression.get("Filters") or []]
        jobs = [j for j in self.engine.jobs(JobKind.TRAINING) if all(check(j) for check in checks)]
        jobs.sort(key=lambda j: (j.created_at, j.seq), reverse=params.get("SortOrder") != "Ascending")
        found, token = page(jobs, params.get("NextToken"), params.get("MaxResults") or SEARCH_PAGE)
        results = [{"TrainingJob": {**self.describe_training(j), "Tags": _tag_list(j.tags)}} for j in found]
        return {"Results": results, **({"NextToken": token} if token else {})}


_FIELDS: Mapping[str, Callable[[Job], str]] = {
    "TrainingJobName": lambda j: j.name,
    "TrainingJobStatus": lambda j: j.status.value,
}


def _filter(spec: Mapping[str, Any]) -> Callable[[Job], bool]:
    """One ``Filter`` (Name, Operator, Value) as a test of a job."""
    name, operator, value = spec.get("Name", ""), spec.get("Operator") or "Equals", spec.get("Value")
    read: Callable[[Job], str | None]
    if name.startswith("Tags."):
        key = name[len("Tags.") :]
        read = lambda j: j.tags.get(key)  # noqa: E731
    elif name in _FIELDS:
        read = _FIELDS[name]
    else:
        raise ValidationError(
            f"Filters.Name: the offline SageMaker filters on Tags.<key> and {sorted(_FIELDS)}, not {name!r}"
        )
    if operator == "Exists":
        return lambda j: read(j) is not None
    if operator == "NotExists":
        return lambda j: read(j) is None
    if not isinstance(value, str):
        raise ValidationError(f"Filters.Value: required with operator {operator}")
    if operator == "Equals":
        return lambda j: read(j) == value
    if operator == "NotEquals":
        return lambda j: read(j) != value
    if operator == "Contains":
        return lambda j: value in (read(j) or "")
    raise ValidationError(
        f"Filters.Operator: the offline SageMaker supports Equals, NotEquals, Contains, Exists and NotExists, "
        f"not {operator}"
    )
