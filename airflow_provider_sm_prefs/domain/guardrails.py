"""Guardrails before submit: which entries of a preference list may be submitted now, and at what price.

Pure: the facts (quotas, training plans, prices) come from the hook (:mod:`.hooks.preflight`); this
module decides. Checks, in order, for every entry of the list as the DAG author wrote it:

1. **preflight** (``prune``/``fail``/``warn``/``off``): entries that cannot run now — too little Service
   Quota for their count (SageMaker would reject the whole request, rule R9), a per-entry training plan
   that is not ``Active``, has too few available instances or whose window has ended, a type without a
   price in the job's region (not offered there);
2. **max_hourly_cost**: entries whose cluster (instance price × count) costs more per hour;
3. **max_cost_increase**: entries whose cluster costs more than this fraction above the first entry still
   in the list. Training-plan entries are prepaid and never excluded for cost.

A check that could not run (denied, unreachable, throttled past retries) is *unchecked* and never blocks
the job — except that an entry without a price is excluded when a price cap is set: a cap that cannot be
checked must not pass silently. Ranks always refer to the list as written.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError, PreflightError
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.preferences import InstancePreference, InstancePreferenceList

__all__ = [
    "Exclusion",
    "ExclusionKind",
    "Facts",
    "GuardrailReport",
    "Guardrails",
    "PlanFacts",
    "Preflight",
    "evaluate",
    "quota_name",
]


class Preflight(str, Enum):
    """What to do with entries that cannot run now."""

    PRUNE = "prune"
    FAIL = "fail"
    WARN = "warn"
    OFF = "off"


class ExclusionKind(str, Enum):
    QUOTA = "quota"
    PLAN = "plan"
    REGION = "region"
    COST = "cost"


def quota_name(kind: JobKind, instance_type: str) -> str:
    """The Service Quotas name of the account limit SageMaker checks for ``instance_type`` (rule R9)."""
    return f"{instance_type} for {kind.value} job usage"


@dataclass(frozen=True)
class Exclusion:
    """One entry left out of the request, and why. ``rank`` is 1-based in the list as written."""

    instance_type: str
    rank: int
    kind: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def line(self) -> str:
        return f"instance_preferences[{self.rank - 1}] {self.instance_type} ({self.kind}): {self.reason}"


@dataclass(frozen=True)
class PlanFacts:
    """What DescribeTrainingPlan said, with the service clock at the time it said it."""

    name: str
    status: str
    total: int
    available: int
    start: datetime | None
    end: datetime | None
    now: datetime

    def window(self) -> str:
        def stamp(moment: datetime | None) -> str:
            return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if moment else "?"

        return f"window {stamp(self.start)} – {stamp(self.end)}"


@dataclass
class Facts:
    """What the look-ups found. A type or plan absent from a mapping was not (or could not be) looked up.

    :param prices: USD per instance-hour by type; None = the price list has no price in the region.
    :param quotas: the account quota (instances) by type; None = no quota of that name exists.
    :param plans: by plan ARN.
    :param unchecked: one line per check that could not run.
    """

    region: str | None = None
    prices: dict[str, float | None] = field(default_factory=dict)
    quotas: dict[str, float | None] = field(default_factory=dict)
    plans: dict[str, PlanFacts] = field(default_factory=dict)
    unchecked: list[str] = field(default_factory=list)


def _non_negative(value: Any, name: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInstancePreferencesError([f"{name}: {value!r} is not a number"]) from None
    if isinstance(value, bool) or not math.isfinite(number) or number < 0:
        raise InvalidInstancePreferencesError([f"{name}: {value!r} must be a number >= 0"])
    return number


@dataclass(frozen=True)
class Guardrails:
    """The operator's guardrail arguments, validated (literal ones at DAG parse time).

    :param max_hourly_cost: USD per hour for an entry's whole cluster.
    :param max_cost_increase: fraction above the first remaining entry (0.25 = +25 %).
    :param preflight: see :class:`Preflight`.
    :param prices: ``{instance_type: USD per instance-hour}``, used instead of the Price List API.
    """

    max_hourly_cost: float | None = None
    max_cost_increase: float | None = None
    preflight: Preflight = Preflight.PRUNE
    prices: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        max_hourly_cost: Any = None,
        max_cost_increase: Any = None,
        preflight: Any = None,
        prices: Any = None,
    ) -> Guardrails:
        """Validate the arguments; every problem is reported at once."""
        problems: list[str] = []
        values: dict[str, Any] = {}
        for name, raw in (("max_hourly_cost", max_hourly_cost), ("max_cost_increase", max_cost_increase)):
            try:
                values[name] = _non_negative(raw, name)
            except InvalidInstancePreferencesError as err:
                problems.extend(err.problems)
        mode = Preflight.PRUNE if preflight in (None, "") else None
        if mode is None:
            try:
                mode = Preflight(str(preflight).lower())
            except ValueError:
                problems.append(f"preflight: {preflight!r} is not one of prune, fail, warn, off")
        table = _prices(prices, problems)
        if problems:
            raise InvalidInstancePreferencesError(problems)
        assert mode is not None
        return cls(values["max_hourly_cost"], values["max_cost_increase"], mode, table)

    @property
    def caps(self) -> bool:
        return self.max_hourly_cost is not None or self.max_cost_increase is not None

    def needs_prices(self) -> bool:
        """Whether the Price List API is asked (region check, caps); ``prices`` answers what it covers."""
        return self.preflight is not Preflight.OFF or self.caps


def _prices(raw: Any, problems: list[str]) -> dict[str, float]:
    if raw in (None, ""):
        return {}
    if not isinstance(raw, Mapping):
        problems.append(
            f"prices: expected {{instance_type: USD per instance-hour}}, got {type(raw).__name__}"
        )
        return {}
    table: dict[str, float] = {}
    for instance_type, price in raw.items():
        try:
            value = _non_negative(price, f"prices[{instance_type!r}]")
        except InvalidInstancePreferencesError as err:
            problems.extend(err.problems)
            continue
        if value is not None:
            table[str(instance_type)] = value
    return table


@dataclass
class GuardrailReport:
    """What the guardrails decided for one submission; travels through XCom, defer kwargs and state.

    :param authored: the list as the DAG author wrote it (``InstancePreferenceList.as_list()``).
    :param kept: 1-based ranks (in ``authored``) of the entries submitted.
    :param unit_prices: USD per instance-hour by type, where known.
    :param counts: instances per type (per-entry or the job-level count).
    """

    authored: list[dict[str, Any]]
    kept: list[int]
    counts: dict[str, int]
    unit_prices: dict[str, float] = field(default_factory=dict)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> GuardrailReport | None:
        if not data:
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def cluster_cost(self, instance_type: str, count: int | None = None) -> float | None:
        price = self.unit_prices.get(instance_type)
        instances = count if count is not None else self.counts.get(instance_type)
        return None if price is None or instances is None else round(price * instances, 4)

    def first_choice_cost(self) -> float | None:
        first = self.authored[0]["instance_type"] if self.authored else None
        return self.cluster_cost(first) if first else None

    def record_fields(self) -> dict[str, Any]:
        """The fields a failure record carries (nothing was selected)."""
        return {
            "first_choice_hourly_cost": self.first_choice_cost(),
            "excluded": list(self.excluded),
            "unchecked": list(self.unchecked),
        }

    def apply(self, outcome: CapacityOutcome) -> CapacityOutcome:
        """The outcome with ranks and ``preferences`` of the list as written, and the cost fields."""
        rank = self.authored_rank(outcome)
        hourly = self.cluster_cost(outcome.selected_instance_type, outcome.selected_instance_count)
        first = self.first_choice_cost()
        increase = round(hourly / first - 1, 4) if hourly is not None and first else None
        billable = outcome.billable_seconds
        estimated = (
            round(hourly * billable / 3600, 2) if hourly is not None and billable is not None else None
        )
        return dataclasses.replace(
            outcome,
            preference_rank=rank,
            fell_back=bool(rank and rank > 1),
            preferences=list(self.authored),
            hourly_cost=hourly,
            first_choice_hourly_cost=first,
            cost_increase=increase,
            estimated_cost=estimated,
            excluded=list(self.excluded),
            unchecked=list(self.unchecked),
        )

    def authored_rank(self, outcome: CapacityOutcome) -> int | None:
        """The outcome's rank in the list as written: its carried rank (in the submitted list, which holds
        the entries at ranks :attr:`kept` of ``authored``) mapped through :attr:`kept`.

        The rank was computed where the selection was first known (the trigger's event or the Describe);
        it is not looked up again. Only an outcome whose carried rank does not name its selected type in
        the list as written (an outcome not of the submitted list) is looked up by its type.
        """
        carried = outcome.preference_rank
        if carried is not None and 0 < carried <= len(self.kept):
            rank = self.kept[carried - 1]
            if (
                0 < rank <= len(self.authored)
                and _type_at(self.authored, rank) == outcome.selected_instance_type
            ):
                return rank
        authored = InstancePreferenceList.from_response(self.authored, outcome.job_kind)
        try:
            return authored.rank_of(outcome.selected_instance_type)
        except KeyError:
            return carried

    def selection_note(self, outcome: CapacityOutcome) -> str | None:
        """One plain line on what the selection costs, and a fall from a training plan to On-Demand."""
        if outcome.hourly_cost is None:
            return None
        cost = f"${outcome.hourly_cost:,.2f}/h"
        plan_first = bool(self.authored and self.authored[0].get("training_plan_arn"))
        if plan_first and outcome.capacity == "on-demand":
            first = self.authored[0]
            return (
                f"Fell back from training plan {first['training_plan_arn']} ({first['instance_type']}) to On-Demand "
                f"{outcome.selected_instance_type}×{outcome.selected_instance_count}: {cost} at On-Demand rates"
            )
        if outcome.cost_increase is not None and outcome.fell_back:
            return f"Selected cluster costs {cost} ({outcome.cost_increase:+.0%} vs the first choice)"
        return f"Selected cluster costs {cost}"


def _preflight_findings(
    entry: InstancePreference, rank: int, count: int, kind: JobKind, facts: Facts, region_checked: bool
) -> list[Exclusion]:
    itype = entry.instance_type
    found: list[Exclusion] = []
    quota = facts.quotas.get(itype)
    if quota is not None and quota < count:
        found.append(
            Exclusion(
                itype,
                rank,
                ExclusionKind.QUOTA.value,
                f"service quota '{quota_name(kind, itype)}' is {quota:g} instances; the entry needs {count} "
                f"(SageMaker would reject the whole request)",
            )
        )
    plan = facts.plans.get(entry.training_plan_arn or "")
    if plan is not None:
        reason = _plan_problem(plan, count)
        if reason:
            found.append(Exclusion(itype, rank, ExclusionKind.PLAN.value, reason))
    if region_checked and itype in facts.prices and facts.prices[itype] is None:
        found.append(
            Exclusion(
                itype,
                rank,
                ExclusionKind.REGION.value,
                f"no {kind.value} price for {itype} in {facts.region}: not offered in that region",
            )
        )
    return found


def _plan_problem(plan: PlanFacts, count: int) -> str | None:
    where = f"training plan {plan.name} ({plan.window()})"
    if plan.status != "Active":
        return f"{where} is {plan.status}, not Active"
    if plan.end is not None and plan.end <= plan.now:
        return f"{where} has ended"
    if plan.available < count:
        return f"{where} has {plan.available} of {plan.total} instances available; the entry needs {count}"
    return None


def _cost_exclusions(
    entries: Sequence[tuple[int, InstancePreference, int]],
    guardrails: Guardrails,
    prices: Mapping[str, float],
) -> list[Exclusion]:
    out: list[Exclusion] = []
    remaining: list[tuple[int, InstancePreference, int, float | None]] = []
    for rank, entry, count in entries:
        price = prices.get(entry.instance_type)
        cost = None if price is None else price * count
        if entry.training_plan_arn:  # prepaid: never excluded for cost
            remaining.append((rank, entry, count, cost))
        elif cost is None:
            out.append(_cost(entry, rank, "no price available, so the price cap cannot be checked"))
        elif guardrails.max_hourly_cost is not None and cost > guardrails.max_hourly_cost:
            out.append(
                _cost(
                    entry,
                    rank,
                    f"cluster costs ${cost:,.2f}/h ({count} × ${price:,.4g}/h), above max_hourly_cost="
                    f"${guardrails.max_hourly_cost:,.2f}",
                )
            )
        else:
            remaining.append((rank, entry, count, cost))
    if guardrails.max_cost_increase is None:
        return out
    priced = [item for item in remaining if item[3] is not None]
    if not priced:
        return out
    ref_rank, ref_entry, ref_count, ref_cost = priced[0]
    assert ref_cost is not None
    for rank, entry, _count, cost in priced[1:]:
        assert cost is not None
        if (
            not entry.training_plan_arn
            and ref_cost > 0
            and cost > ref_cost * (1 + guardrails.max_cost_increase)
        ):
            out.append(
                _cost(
                    entry,
                    rank,
                    f"cluster costs ${cost:,.2f}/h, {cost / ref_cost - 1:+.0%} over {ref_entry.instance_type}×"
                    f"{ref_count} (${ref_cost:,.2f}/h), above max_cost_increase={guardrails.max_cost_increase:.0%}",
                )
            )
    return out


def _cost(entry: InstancePreference, rank: int, reason: str) -> Exclusion:
    return Exclusion(entry.instance_type, rank, ExclusionKind.COST.value, reason)


def _unit_prices(facts: Facts, guardrails: Guardrails) -> dict[str, float]:
    prices = {t: p for t, p in facts.prices.items() if p is not None}
    prices.update(guardrails.prices)
    return prices


def evaluate(
    prefs: InstancePreferenceList, default_count: int | None, guardrails: Guardrails, facts: Facts
) -> GuardrailReport:
    """Decide which entries to submit.

    :raises PreflightError: when ``preflight="fail"`` finds an entry that cannot run now, or when no
        entry remains; the message has one line per entry.
    """
    counts = {e.instance_type: int(e.instance_count or default_count or 1) for e in prefs}
    ranked = [(rank, entry, counts[entry.instance_type]) for rank, entry in enumerate(prefs, start=1)]
    unchecked = list(facts.unchecked)
    # A price list that prices none of the entries says more about the look-up than about the region.
    region_checked = any(facts.prices.get(e.instance_type) is not None for e in prefs)
    if facts.prices and not region_checked:
        unchecked.append(
            f"region: the price list has no {prefs.kind.value} price in {facts.region} for any entry; "
            f"region availability not checked"
        )
    findings: list[Exclusion] = []
    if guardrails.preflight is not Preflight.OFF:
        for rank, entry, count in ranked:
            findings.extend(_preflight_findings(entry, rank, count, prefs.kind, facts, region_checked))
    if findings and guardrails.preflight is Preflight.FAIL:
        raise PreflightError(
            "preflight='fail' found entries that cannot run now",
            [f.line() for f in findings],
            excluded=findings,
        )
    excluded = findings if guardrails.preflight is Preflight.PRUNE else []
    warnings = [f.line() for f in findings] if guardrails.preflight is Preflight.WARN else []
    prices = _unit_prices(facts, guardrails)
    if guardrails.caps:
        dropped = {x.rank for x in excluded}
        excluded = excluded + _cost_exclusions([r for r in ranked if r[0] not in dropped], guardrails, prices)
    excluded.sort(key=lambda x: x.rank)
    dropped = {x.rank for x in excluded}
    kept = [rank for rank, _, _ in ranked if rank not in dropped]
    if not kept:
        raise PreflightError(
            "no entry of the preference list remains after the guardrails",
            [x.line() for x in excluded],
            excluded=excluded,
        )
    return GuardrailReport(
        authored=prefs.as_list(),
        kept=kept,
        counts=counts,
        unit_prices=prices,
        excluded=[x.as_dict() for x in excluded],
        unchecked=unchecked,
        warnings=warnings,
    )


def _type_at(entries: list[dict[str, Any]], rank: int) -> str | None:
    """The instance type at 1-based ``rank`` of a list in ``as_list()`` form (API-cased entries too)."""
    entry = entries[rank - 1]
    if isinstance(entry, Mapping):
        return entry.get("instance_type") or entry.get("InstanceType")
    return str(entry)
