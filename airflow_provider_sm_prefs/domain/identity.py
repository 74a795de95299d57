"""Airflow identity tags: which DAG, task, run, map index, try and deployment submitted a job. Pure.

Every job (and HyperPod cluster) the provider creates carries them under one key prefix,
:data:`TAG_PREFIX`, so that spend can be read per DAG and task once they are activated as cost
allocation tags, and a reconciler can find the provider's jobs with ``Search``. They are set at Create
only: a retry that reattaches to a running job leaves its tags as they were, and each stage of
acceptance windows (its own job) carries the try that created it.

AWS's tag rules are checked here before any Create (:func:`with_identity`): at most :data:`MAX_TAGS`
tags in all, keys of at most :data:`MAX_KEY_LENGTH` characters, values of at most
:data:`MAX_VALUE_LENGTH`, only letters, spaces, digits and ``_ . : / = + - @``, and no ``aws:`` keys.
A value that breaks a rule (a long or unusual run id) is shortened deterministically by
:func:`tag_value`: a readable head, ``..`` and a hash of the whole value.

The same tags are the proof of ownership: before the provider stops, adopts or rewrites a resource it
reads the resource's tags again and :func:`check_owner` compares them with what the acting task claims
(:class:`OwnerClaim`). Only :attr:`Ownership.OURS` permits the act; a resource whose tags name another
owner, or that cannot be proved ours, is left alone and reported (:class:`NotOursError`).
"""

from __future__ import annotations

import hashlib
import secrets
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError, NotOursError

__all__ = [
    "HAND_OFF_KEY",
    "IDENTITY_XCOM_KEY",
    "MAX_KEY_LENGTH",
    "MAX_TAGS",
    "MAX_VALUE_LENGTH",
    "TAG_PREFIX",
    "AirflowIdentity",
    "IdentityKey",
    "NotOursError",
    "OwnerCheck",
    "OwnerClaim",
    "Ownership",
    "check_owner",
    "default_deployment_id",
    "new_deployment_id",
    "tag_problems",
    "tag_value",
    "with_identity",
]

#: The prefix of every identity tag key (AWS reserves ``aws:``).
TAG_PREFIX = "sm-prefs:"
#: The XCom key under which the operators push the identity tags a job was created with.
IDENTITY_XCOM_KEY = "identity_tags"
#: AWS's limits on a SageMaker resource's tags.
MAX_TAGS = 50
MAX_KEY_LENGTH = 128
MAX_VALUE_LENGTH = 256
#: Characters AWS allows besides letters (``\p{L}``), separators (``\p{Z}``) and digits (``\p{N}``).
_ALLOWED_PUNCTUATION = frozenset("_.:/=+-@")
#: A shortened value ends with ``..`` and this many hex digits of the whole value's SHA-256.
_DIGEST_LENGTH = 10
_RESERVED_PREFIX = "aws:"


class IdentityKey(str, Enum):
    """The identity tag keys, one per fact about the submitting task."""

    DAG_ID = f"{TAG_PREFIX}dag-id"
    TASK_ID = f"{TAG_PREFIX}task-id"
    RUN_ID = f"{TAG_PREFIX}run-id"
    MAP_INDEX = f"{TAG_PREFIX}map-index"
    TRY_NUMBER = f"{TAG_PREFIX}try-number"
    DEPLOYMENT = f"{TAG_PREFIX}deployment"


#: The keys that name the owning task instance: what an ownership check compares (a later try of the same
#: task instance owns its earlier try's job, so the try number is not among them).
OWNER_KEYS = (
    IdentityKey.DEPLOYMENT,
    IdentityKey.DAG_ID,
    IdentityKey.TASK_ID,
    IdentityKey.RUN_ID,
    IdentityKey.MAP_INDEX,
)
#: Set at Create when the task hands the running job off (``wait_for_completion=False``): the job itself
#: records that its task meant to leave it running, whatever became of the task's XComs.
HAND_OFF_KEY = f"{TAG_PREFIX}hand-off"


def allowed_character(char: str) -> bool:
    """Whether AWS allows ``char`` in a tag key or value (``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]``)."""
    return unicodedata.category(char)[0] in "LZN" or char in _ALLOWED_PUNCTUATION


def tag_value(raw: str, limit: int = MAX_VALUE_LENGTH) -> str:
    """``raw`` as a valid tag value: unchanged when AWS allows it, else readable and unique.

    Characters AWS refuses become ``_``; when anything was replaced or the value is longer than
    ``limit``, the value becomes ``<head>..<hash>``, the hash taken of ``raw`` itself, so two run ids
    that differ only in what was cut or replaced still get different values.
    """
    if len(raw) <= limit and all(allowed_character(c) for c in raw):
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:_DIGEST_LENGTH]
    cleaned = "".join(c if allowed_character(c) else "_" for c in raw)
    head = cleaned[: limit - len(digest) - 2]
    return f"{head}..{digest}"


def new_deployment_id() -> str:
    """A fresh deployment id, ``af-<16 random hex digits>``: generated once per deployment and kept in its
    metadata database, so two deployments never share one by accident (``operators.identity``)."""
    return f"af-{secrets.token_hex(8)}"


def default_deployment_id(source: str | None) -> str:
    """The deployment id earlier releases derived when ``[sm_prefs] deployment_id`` was not set:
    ``airflow-<hash>`` of a URL.

    Two deployments started from the same compose file share the URL and so the id: this is no longer
    any deployment's id. It is kept to *recognise* jobs those releases tagged (a reconciler reports them
    and stops none unless told to adopt them).

    ``source`` is the Airflow API server's URL (the base URL, or the execution API URL workers call) or,
    without one, the metadata database's URL. Only its scheme, host, port and, for a database, its name
    are hashed (never credentials), so every component of one deployment derives the same id and the
    id does not change across restarts, upgrades or a new password.
    """
    if not source:
        return "airflow"
    parts = urlsplit(source)
    host = (parts.hostname or "").lower()
    port = f":{parts.port}" if parts.port else ""
    path = parts.path.rstrip("/")
    if path.endswith("/execution"):  # the execution API lives under the API server's base URL
        path = path[: -len("/execution")]
    stable = f"{parts.scheme}://{host}{port}{path}" if parts.scheme else source
    return f"airflow-{hashlib.sha256(stable.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class AirflowIdentity:
    """Who submitted a job: the task instance's try, and the deployment it runs in.

    :param dag_id: the DAG.
    :param task_id: the task (with its group prefix).
    :param run_id: the DAG run.
    :param map_index: the mapped task's index; -1 for a task that is not mapped.
    :param try_number: the try that creates the job (None when unknown).
    :param deployment_id: ``[sm_prefs] deployment_id``, else the id generated for the deployment.
    :param hand_off: the task leaves the job running when it succeeds (``wait_for_completion=False``):
        tagged :data:`HAND_OFF_KEY` at Create.
    """

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    try_number: int | None
    deployment_id: str
    hand_off: bool = False

    def as_dict(self) -> dict[str, str]:
        """The identity tags as ``{key: value}``, values fitted to AWS's rules (:func:`tag_value`)."""
        raw = {
            IdentityKey.DAG_ID: self.dag_id,
            IdentityKey.TASK_ID: self.task_id,
            IdentityKey.RUN_ID: self.run_id,
            IdentityKey.MAP_INDEX: str(self.map_index),
            IdentityKey.TRY_NUMBER: "" if self.try_number is None else str(self.try_number),
            IdentityKey.DEPLOYMENT: self.deployment_id,
        }
        tags = {key.value: tag_value(value) for key, value in raw.items()}
        if self.hand_off:
            tags[HAND_OFF_KEY] = "true"
        return tags

    def tags(self) -> list[dict[str, str]]:
        """The identity tags in AWS's ``Tags`` form."""
        return [{"Key": key, "Value": value} for key, value in self.as_dict().items()]

    def __repr__(self) -> str:
        return (
            f"AirflowIdentity({self.dag_id}.{self.task_id}, run={self.run_id!r}, map_index={self.map_index}, "
            f"try={self.try_number}, deployment={self.deployment_id!r})"
        )


def tag_problems(tags: Any, field: str = "config.Tags") -> list[str]:
    """Every way ``tags`` (a ``Tags`` list) breaks AWS's rules for a tag, each naming its place and fix."""
    if tags is None:
        return []
    if not isinstance(tags, list):
        return [f"{field}: expected a list of {{'Key': ..., 'Value': ...}}, got {type(tags).__name__}"]
    problems: list[str] = []
    seen: set[str] = set()
    for index, tag in enumerate(tags):
        where = f"{field}[{index}]"
        if not isinstance(tag, Mapping) or not isinstance(tag.get("Key"), str):
            problems.append(f"{where}: expected {{'Key': str, 'Value': str}}, got {tag!r}")
            continue
        problems.extend(_one_tag_problems(where, tag["Key"], tag.get("Value", "")))
        if tag["Key"] in seen:
            problems.append(f"{where}.Key: {tag['Key']!r} appears twice; each key may appear once")
        seen.add(tag["Key"])
    return problems


def _one_tag_problems(where: str, key: str, value: Any) -> list[str]:
    problems: list[str] = []
    if not isinstance(value, str):
        problems.append(f"{where}.Value: expected a string, got {type(value).__name__}")
        value = ""
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        problems.append(f"{where}.Key: {len(key)} characters; AWS allows 1 to {MAX_KEY_LENGTH}")
    if len(value) > MAX_VALUE_LENGTH:
        problems.append(f"{where}.Value: {len(value)} characters; AWS allows at most {MAX_VALUE_LENGTH}")
    for part, text in (("Key", key), ("Value", value)):
        bad = sorted({c for c in text if not allowed_character(c)})
        if bad:
            problems.append(
                f"{where}.{part}: {''.join(bad)!r} not allowed; AWS allows letters, spaces, digits and _.:/=+-@"
            )
    if key.lower().startswith(_RESERVED_PREFIX):
        problems.append(f"{where}.Key: {key!r} starts with aws:, which AWS reserves for itself; rename it")
    return problems


def with_identity(
    tags: Any, identity: AirflowIdentity | None, field: str = "config.Tags"
) -> list[dict[str, str]] | None:
    """The ``Tags`` of a Create request: the user's ``tags`` kept as given, then the identity tags.

    :returns: the tags to send (None when there are none at all).
    :raises InvalidInstancePreferencesError: naming every broken rule (a user's tag that AWS would
        refuse, a user's key that is an identity key, more than :data:`MAX_TAGS` tags in all).
    """
    problems = tag_problems(tags, field)
    user = list(tags) if isinstance(tags, list) else []
    ours = identity.tags() if identity is not None else []
    if identity is not None:
        for index, tag in enumerate(user):
            key = tag.get("Key") if isinstance(tag, Mapping) else None
            if key in IdentityKey._value2member_map_ or key == HAND_OFF_KEY:
                problems.append(
                    f"{field}[{index}].Key: {key!r} is an identity tag the provider sets itself; rename your "
                    f"tag (keys under {TAG_PREFIX!r} are the provider's), or pass identity_tags=False"
                )
    if len(user) + len(ours) > MAX_TAGS:
        excess = len(user) + len(ours) - MAX_TAGS
        identity_part = f" and {len(ours)} identity tags" if ours else ""
        problems.append(
            f"{field}: {len(user)} tags{identity_part} make {len(user) + len(ours)}; AWS allows at most "
            f"{MAX_TAGS} per resource: drop {excess} of yours"
            + (" or pass identity_tags=False" if ours else "")
        )
    if problems:
        raise InvalidInstancePreferencesError(problems)
    merged = [dict(tag) for tag in user] + ours
    return merged or None


class Ownership(str, Enum):
    """Whether a resource is the claimant's to stop, adopt or rewrite."""

    #: Its identity tags name the claimant's deployment, DAG, task, run and map index.
    OURS = "ours"
    #: Its tags name another owner (another deployment, or another task instance of this one).
    FOREIGN = "foreign"
    #: Nothing proves it either way: no identity tags, some missing, unreadable, or no claim to compare.
    UNPROVEN = "unproven"


@dataclass(frozen=True)
class OwnerClaim:
    """What an acting task (or reconciler) says makes a resource its own.

    :param tags: the identity tags the resource must carry: those recorded when the task created it
        (``AirflowIdentity.as_dict()``). Only :data:`OWNER_KEYS` are compared; a missing key here is
        not compared (a sensor's claim names the deployment alone).
    :param created: the claimant's own Create of this name succeeded. SageMaker job names are unique
        in an account and region and jobs are never deleted, so that is proof too; it is the only proof
        of a job created with identity tags off.
    """

    tags: Mapping[str, str] | None = None
    created: bool = False

    @classmethod
    def of_tags(cls, tags: Mapping[str, Any] | None, created: bool = False) -> OwnerClaim:
        """The claim of a task that recorded ``tags`` (None or empty: identity tags were off)."""
        kept = {k.value: str(tags[k.value]) for k in OWNER_KEYS if tags and tags.get(k.value) is not None}
        return cls(kept or None, created)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, for a trigger's ``serialize``; :meth:`from_dict` reads it back."""
        return {"tags": dict(self.tags) if self.tags else None, "created": self.created}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> OwnerClaim:
        data = data or {}
        return cls.of_tags(data.get("tags"), bool(data.get("created")))

    def describe(self) -> str:
        return describe_owner(self.tags) if self.tags else ("its own Create" if self.created else "nothing")


@dataclass(frozen=True)
class OwnerCheck:
    """The result of :func:`check_owner`: the verdict, why, and the owner the resource's tags claim."""

    ownership: Ownership
    resource: str
    reason: str
    claimed_owner: str

    @property
    def ours(self) -> bool:
        return self.ownership is Ownership.OURS

    def error(self, act: str) -> NotOursError:
        """The error that refuses ``act`` (``"stop"``, ``"reattach to"``...) on this resource."""
        return NotOursError(self.resource, act, self.claimed_owner, self.reason)


def describe_owner(tags: Mapping[str, str] | None) -> str:
    """The owner identity tags name, as a person reads it (``deployment d: dag.task[3] run r``)."""
    if not tags or not any(str(k).startswith(TAG_PREFIX) for k in tags):
        return "no owner (no sm-prefs identity tags)"

    def get(key: IdentityKey) -> str:
        return str(tags.get(key.value, "?"))

    mapped = get(IdentityKey.MAP_INDEX)
    index = f"[{mapped}]" if mapped not in ("-1", "?") else ""
    return (
        f"deployment {get(IdentityKey.DEPLOYMENT)!r}: {get(IdentityKey.DAG_ID)}.{get(IdentityKey.TASK_ID)}{index} "
        f"run {get(IdentityKey.RUN_ID)!r}"
    )


def check_owner(resource: str, tags: Mapping[str, str] | None, claim: OwnerClaim) -> OwnerCheck:
    """Whether ``resource``, whose tags now are ``tags`` (None: unreadable), is ``claim``'s.

    OURS only when every owner key of the claim is on the resource with the same value (or, for a claim
    without tags, when the claimant's own Create made it). Tags naming someone else are FOREIGN; missing,
    partial or unreadable tags are UNPROVEN. Neither permits any act.
    """
    claimed = describe_owner(tags) if tags is not None else "unknown (tags unreadable)"
    if claim.tags:
        if tags is None:
            return OwnerCheck(Ownership.UNPROVEN, resource, "its tags could not be read", claimed)
        differing = [k for k, v in claim.tags.items() if k in tags and tags[k] != v]
        missing = [k for k in claim.tags if k not in tags]
        if differing:
            return OwnerCheck(
                Ownership.FOREIGN,
                resource,
                "its tags name another owner ("
                + ", ".join(f"{k}={tags[k]!r}, expected {claim.tags[k]!r}" for k in differing)
                + ")",
                claimed,
            )
        if missing:
            return OwnerCheck(
                Ownership.UNPROVEN, resource, f"identity tags missing: {', '.join(missing)}", claimed
            )
        return OwnerCheck(Ownership.OURS, resource, f"tagged for {claim.describe()}", claimed)
    if claim.created:
        return OwnerCheck(Ownership.OURS, resource, "created by this task (names are unique)", claimed)
    return OwnerCheck(
        Ownership.UNPROVEN,
        resource,
        "nothing proves it ours: it was not created with identity tags by this task",
        claimed,
    )
