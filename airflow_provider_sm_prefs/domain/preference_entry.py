"""One entry of an instance preference list: its value type, how a raw entry is read, and its own rules.

Pure Python: no Airflow, no boto. An entry arrives as an :class:`InstancePreference`, a snake_case dict,
an API-cased dict (``InstanceType``...) or a bare instance type string, often rendered by Jinja (counts
as strings). Reading it collects every problem at once; the rules that need only the entry and the job
kind (a known type, a count in range, one well-formed training plan, a valid window) sit here, each
message naming the entry's field path and the fix. The list's rules are in
:mod:`~airflow_provider_sm_prefs.domain.preference_list`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_provider_sm_prefs.domain import service_model
from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.kinds import JobKind

__all__ = [
    "ACCEPT_AFTER",
    "FIELD",
    "PROCESSING_MAX_COUNT",
    "TRAINING_PLAN_ARN",
    "InstancePreference",
    "entry_problems",
    "exact_duration",
    "parse_entry",
    "to_int",
    "type_of",
]

PROCESSING_MAX_COUNT = JobKind.PROCESSING.spec.max_instance_count
FIELD = "instance_preferences"

TRAINING_PLAN_ARN = re.compile(r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.+$")

# Settings that apply to whichever entry is selected (R12): they belong to the job, never to an entry.
_JOB_LEVEL_SETTINGS = ("VolumeSizeInGB", "VolumeKmsKeyId", "KeepAlivePeriodInSeconds")
_SNAKE_KEYS = {"instance_type", "instance_count", "training_plan_arn", "training_plan_arns"}
_API_KEYS = {"InstanceType", "InstanceCount", "TrainingPlanArns"}
#: Ours, never sent to AWS: how long the task must have waited before the entry becomes acceptable.
#: Allowed next to either key style (a list in config's API form may carry it too).
ACCEPT_AFTER = "accept_after"


def _is_int_like(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def to_int(value: Any) -> int | None:
    """Cast a count given as int or numeric string (Jinja renders strings); None if not an integer."""
    if _is_int_like(value):
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


@dataclass(frozen=True)
class InstancePreference:
    """One acceptable instance type, optionally with its own count and a reserved training plan.

    :param instance_type: e.g. ``ml.g6e.48xlarge``.
    :param instance_count: instances for this entry; leave None for a uniform, job-level count.
    :param training_plan_arn: a SageMaker training plan whose reserved capacity backs this entry
        (training only). The plan's instance type must equal ``instance_type``.
    :param accept_after: the entry becomes acceptable only once the task has waited this long in total
        (timedelta or seconds; see :mod:`airflow_provider_sm_prefs.domain.windows`). Never sent to AWS.
    """

    instance_type: str
    instance_count: int | None = None
    training_plan_arn: str | None = None
    accept_after: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.accept_after, timedelta):
            object.__setattr__(self, "accept_after", self.accept_after.total_seconds())

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe snake_case form; round-trips through :meth:`from_value`."""
        out: dict[str, Any] = {
            "instance_type": self.instance_type,
            "instance_count": self.instance_count,
            "training_plan_arn": self.training_plan_arn,
        }
        if self.accept_after is not None:
            out[ACCEPT_AFTER] = self.accept_after
        return out

    def as_api(self) -> dict[str, Any]:
        """The entry exactly as SageMaker's API expects it."""
        entry: dict[str, Any] = {"InstanceType": self.instance_type}
        if self.instance_count is not None:
            entry["InstanceCount"] = self.instance_count
        if self.training_plan_arn is not None:
            entry["TrainingPlanArns"] = [self.training_plan_arn]
        return entry

    def label(self, default_count: int | None = None) -> str:
        """Short human form, e.g. ``ml.g6e.48xlarge×2``."""
        count = self.instance_count if self.instance_count is not None else default_count
        text = self.instance_type if count is None else f"{self.instance_type}×{count}"
        text += " (plan)" if self.training_plan_arn else ""
        return text + (f" (after {exact_duration(self.accept_after)})" if self.accept_after else "")

    @classmethod
    def from_value(cls, value: Any, where: str = FIELD) -> InstancePreference:
        """Build one entry from an object, a snake_case dict, an API dict or a bare type string.

        :raises InvalidInstancePreferencesError: naming ``where`` and every problem of the entry.
        """
        entry, problems = parse_entry(value, where)
        if problems or entry is None:
            raise InvalidInstancePreferencesError(problems)
        return entry


def parse_entry(value: Any, where: str) -> tuple[InstancePreference | None, list[str]]:
    """Parse one raw entry; return it (or None) with every problem found."""
    if isinstance(value, InstancePreference):
        value = value.as_dict()
    if isinstance(value, str):
        return InstancePreference(value.strip()), []
    if not isinstance(value, Mapping):
        return None, [
            f"{where}: expected a dict like {{'instance_type': 'ml.g5.48xlarge', 'instance_count': 2}}, "
            f"an InstancePreference or an instance type string, got {type(value).__name__} {value!r}"
        ]
    keys = set(value) - {ACCEPT_AFTER}
    # Keys all of one style (the usual case) leave nothing for _key_problems to report.
    problems = [] if keys <= _SNAKE_KEYS or keys <= _API_KEYS else _key_problems(keys, where)

    instance_type = value.get("instance_type", value.get("InstanceType"))
    if not isinstance(instance_type, str) or not instance_type.strip():
        problems.append(f"{where}: instance_type is required, e.g. 'ml.g5.48xlarge' (got {instance_type!r})")
        instance_type = None
    else:
        instance_type = instance_type.strip()

    count = _count_of(value, where, problems)
    plan = _plan_of(value, where, problems)
    window = _window_of(value, where, problems)

    if instance_type is None:
        return None, problems
    return InstancePreference(instance_type, count, plan, window), problems


def _window_of(value: Mapping[str, Any], where: str, problems: list[str]) -> float | None:
    """The entry's ``accept_after`` in seconds (None if it gives none): a timedelta or a number >= 0."""
    raw = value.get(ACCEPT_AFTER)
    if raw is None or raw == "":
        return None
    if isinstance(raw, timedelta):
        seconds: float | None = raw.total_seconds()
    elif isinstance(raw, bool):
        seconds = None
    elif isinstance(raw, (int, float)):
        seconds = float(raw)
    elif isinstance(raw, str):
        try:
            seconds = float(raw.strip())
        except ValueError:
            seconds = None
    else:
        seconds = None
    if seconds is None or seconds != seconds or seconds in (float("inf"), float("-inf")):
        problems.append(
            f"{where}.{ACCEPT_AFTER}: {raw!r} is not a duration; give a timedelta or a number of seconds, "
            f"e.g. timedelta(hours=2) or 7200"
        )
        return None
    if seconds < 0:
        problems.append(f"{where}.{ACCEPT_AFTER}: {raw!r} is negative; give 0 or more seconds")
        return None
    return seconds


def exact_duration(seconds: float | None) -> str:
    """A window or bound in a validation message, exact to the second ("1h0m5s", "2h").

    Not :func:`~airflow_provider_sm_prefs.domain.outcome.format_duration`: that one rounds past an hour for
    logs, and a message comparing 3605 s with 3610 s must not read "1h00m is earlier than 1h00m".
    """
    seconds = int(seconds or 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


def _count_of(value: Mapping[str, Any], where: str, problems: list[str]) -> int | None:
    """The entry's count (None if it gives none); a count that is not a whole number is a problem."""
    raw_count = value.get("instance_count", value.get("InstanceCount"))
    if raw_count is None:
        return None
    count = to_int(raw_count)
    if count is None:
        problems.append(
            f"{where}.instance_count: {raw_count!r} is not a whole number; give an integer such as 2"
        )
    return count


def _plan_of(value: Mapping[str, Any], where: str, problems: list[str]) -> str | None:
    """The entry's one training plan ARN, from ``training_plan_arn`` or ``training_plan_arns``."""
    plan: Any = None
    arns = value.get("training_plan_arns", value.get("TrainingPlanArns"))
    if arns is not None:  # None: no plan, as for the other optional members of an entry
        if isinstance(arns, str):
            arns = [arns]
        if not isinstance(arns, (list, tuple)) or len(arns) != 1:
            n = len(arns) if isinstance(arns, (list, tuple)) else "a non-list"
            problems.append(
                f"{where}.training_plan_arn: an entry takes exactly one training plan ARN, got {n}; "
                f"list the other plan's instance type as its own entry"
            )
        else:
            plan = arns[0]
    if "training_plan_arn" in value and value["training_plan_arn"] is not None:
        if plan is not None:
            problems.append(f"{where}: give training_plan_arn or training_plan_arns, not both")
        plan = value["training_plan_arn"]
    if plan is not None and not isinstance(plan, str):
        problems.append(f"{where}.training_plan_arn: expected an ARN string, got {type(plan).__name__}")
        return None
    return plan


def entry_problems(entry: InstancePreference, where: str, kind: JobKind) -> list[str]:
    """One parsed entry against the rules for ``kind``: a valid type, a count in range, a valid plan."""
    problems: list[str] = []
    itype = entry.instance_type
    if not service_model.accepts_instance_type(kind.value, itype):
        problems.append(f"{where}: {_unknown_type_message(itype, kind)}")
    if entry.instance_count is not None:
        low, high = 1, kind.spec.max_instance_count
        if entry.instance_count < low or (high is not None and entry.instance_count > high):
            bound = f"{low}..{high}" if high else f"at least {low}"
            problems.append(f"{where}.instance_count: {entry.instance_count} is out of range; use {bound}")
    plan = entry.training_plan_arn
    if plan is not None:
        if not kind.spec.training_plans:
            problems.append(
                f"{where}.training_plan_arn: {kind.value} jobs use On-Demand capacity only; remove the plan"
            )
        elif not TRAINING_PLAN_ARN.match(plan) or not (50 <= len(plan) <= 2048):
            problems.append(
                f"{where}.training_plan_arn: {plan!r} is not a training plan ARN "
                f"(arn:aws:sagemaker:REGION:ACCOUNT:training-plan/NAME)"
            )
    return problems


def _key_problems(keys: set[Any], where: str) -> list[str]:
    """Problems with the keys of one entry: job-level settings, unknown keys, mixed styles."""
    problems: list[str] = []
    for key in sorted(keys & set(_JOB_LEVEL_SETTINGS), key=str):
        problems.append(
            f"{where}.{key}: {key} applies to whichever entry is selected; set it once on the job "
            f"(ResourceConfig / ClusterConfig), not per entry"
        )
    unknown = keys - _SNAKE_KEYS - _API_KEYS - set(_JOB_LEVEL_SETTINGS)
    for key in sorted(unknown, key=str):
        close = difflib.get_close_matches(str(key), sorted(_SNAKE_KEYS | _API_KEYS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        problems.append(
            f"{where}: unknown key {key!r}{hint} (an entry takes instance_type, instance_count, training_plan_arn)"
        )
    if (keys & _SNAKE_KEYS) and (keys & _API_KEYS):
        problems.append(
            f"{where}: mixes snake_case and API-cased keys ({sorted(keys & (_SNAKE_KEYS | _API_KEYS))}); use one style"
        )
    return problems


def type_of(item: Any) -> str:
    if isinstance(item, InstancePreference):
        return item.instance_type
    if isinstance(item, Mapping):
        return str(item.get("instance_type", item.get("InstanceType", "?")))
    return str(item)


def _unknown_type_message(instance_type: str, kind: JobKind) -> str:
    other = JobKind.TRAINING if kind is JobKind.PROCESSING else JobKind.PROCESSING
    if service_model.accepts_instance_type(other.value, instance_type):
        if kind is JobKind.PROCESSING:
            return (
                f"{instance_type} is a training-only type; processing accepts fewer types "
                f"(no ml.trn*, ml.p4d/p4de, ml.p5*, ml.p6*, ml.c5n*, ml.p3dn) — pick another type"
            )
        return f"{instance_type} is not a training instance type — pick another type"
    close = difflib.get_close_matches(instance_type, sorted(service_model.instance_types(kind.value)), n=2)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"{instance_type} is not a SageMaker {kind.value} instance type{hint}"
