"""The operators' guardrails before submit: workload requirements, preflight, price caps (orchestration).

The decisions are pure (:mod:`airflow_provider_sm_prefs.domain.guardrails`, :mod:`airflow_provider_sm_prefs.domain.requirements`);
the look-ups are the hook's (:mod:`airflow_provider_sm_prefs.hooks.preflight`). :class:`GuardrailCheck` validates
the arguments (literal ones at DAG parse time), runs the checks in ``execute`` before Create*, submits
what remains as a request re-validated by the preference model, and maps the outcome back to the list as
the DAG author wrote it.
"""

from __future__ import annotations

import ast
import json
import warnings
from collections.abc import Mapping
from typing import Any

from airflow_provider_sm_prefs.compat import AirflowFailException
from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError, PreflightError
from airflow_provider_sm_prefs.domain.guardrails import (
    GuardrailReport,
    Guardrails,
    Preflight,
    evaluate,
)
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.preferences import (
    InstancePreferenceList,
    build_request,
    job_level_count,
    to_seconds,
    without_list,
)
from airflow_provider_sm_prefs.domain.requirements import (
    MixedAcceleratorRuntimesWarning,
    WorkloadRequirements,
    mixed_runtimes,
)
from airflow_provider_sm_prefs.recording import TryProgress

__all__ = ["GUARDRAIL_FIELDS", "GuardrailCheck", "with_guardrails"]

#: The operators' guardrail arguments (all templated).
GUARDRAIL_FIELDS = ("requirements", "max_hourly_cost", "max_cost_increase", "preflight", "prices")
_DEFAULTS = (None, None, None, "prune", None)


class GuardrailCheck:
    """The guardrails of one task: its rendered guardrail arguments, and what they leave of the list.

    ``preflight`` decides what happens to entries that cannot run now — too little quota for their
    count, a training plan that is not Active, lacks instances or has ended, a type not offered in the
    region: ``prune`` drops them and submits the rest, ``fail`` fails the task, ``warn`` only logs,
    ``off`` skips these checks. Price caps exclude entries whatever ``preflight`` says. When nothing
    remains the task fails with one line per entry, before any Create*.

    :param job_kind: the kind of job the list is for.
    :param values: the arguments named in :data:`GUARDRAIL_FIELDS`, in that order (rendered, or literal
        at DAG parse time).
    :param max_pending: the operator's ``max_pending``, in seconds or as given (a pruned list is rebuilt
        with it).
    :param log: the task's logger.
    """

    def __init__(self, job_kind: JobKind, values: tuple[Any, ...], max_pending: Any, log: Any) -> None:
        self.job_kind = job_kind
        self.values = values
        self.max_pending = max_pending
        self.log = log

    def settings(self) -> tuple[Guardrails, WorkloadRequirements | None]:
        """The guardrail arguments, validated (every problem at once)."""
        problems: list[str] = []
        guardrails = requirements = None
        values = dict(zip(GUARDRAIL_FIELDS, self.values, strict=True))
        names = ("max_hourly_cost", "max_cost_increase", "preflight", "prices")
        try:
            guardrails = Guardrails.of(*(_literal(values[name]) for name in names))
        except InvalidInstancePreferencesError as err:
            problems.extend(err.problems)
        try:
            requirements = WorkloadRequirements.from_value(_literal(values["requirements"]))
        except InvalidInstancePreferencesError as err:
            problems.extend(err.problems)
        if problems or guardrails is None:
            raise InvalidInstancePreferencesError(problems)
        return guardrails, requirements

    def _check_workload(
        self,
        prefs: InstancePreferenceList,
        default_count: int | None,
        requirements: WorkloadRequirements | None,
    ) -> str | None:
        """Entries that do not meet ``requirements`` are an error; returns a warning to give, if any."""
        if requirements is None:
            return mixed_runtimes(prefs)
        problems = requirements.problems(prefs, default_count)
        if problems:
            raise InvalidInstancePreferencesError(problems)
        unknown = requirements.unverifiable(prefs)
        return "; ".join(unknown) if unknown else None

    def check_at_parse_time(self, prefs: InstancePreferenceList | None, config: Any) -> None:
        """Literal guardrail arguments fail the DAG import; a mixed list gets a warning."""
        requirements = None
        if self.values != _DEFAULTS:  # the defaults are valid
            _, requirements = self.settings()
        if prefs is None:
            return
        warning = self._check_workload(prefs, job_level_count(self.job_kind, config), requirements)
        if warning:
            # Points at the DAG file: here, check_literal_arguments, the operator's __init__, Airflow's wrapper.
            warnings.warn(warning, MixedAcceleratorRuntimesWarning, stacklevel=5)

    def guard(
        self,
        hook: Any,
        config: Mapping[str, Any],
        request: dict[str, Any],
        prefs: InstancePreferenceList,
        progress: TryProgress,
    ) -> tuple[dict[str, Any], InstancePreferenceList, GuardrailReport]:
        """Run the guardrails before Create*; returns the request to send, its list and the report.

        ``progress.guardrails`` gets what they decided, also when they fail the task.

        :raises AirflowFailException: when nothing remains or ``preflight="fail"`` found a problem.
        """
        guardrails, requirements = self.settings()
        default_count = job_level_count(self.job_kind, request)
        warning = self._check_workload(prefs, default_count, requirements)
        if warning:
            self.log.warning("%s", warning)
        checks = guardrails.preflight is not Preflight.OFF
        facts = hook.preflight_facts(
            self.job_kind,
            [(e.instance_type, e.training_plan_arn) for e in prefs],
            checks=checks,
            prices=guardrails.needs_prices(),
            known_prices=guardrails.prices,
        )
        for line in facts.unchecked:
            self.log.warning("Guardrail unchecked (never blocks the job): %s", line)
        try:
            report = evaluate(prefs, default_count, guardrails, facts)
        except PreflightError as err:
            progress.guardrails = {
                "excluded": [x.as_dict() for x in err.excluded],  # type: ignore[attr-defined]
                "unchecked": list(facts.unchecked),
            }
            for line in err.lines:
                self.log.error("Guardrail: %s", line)
            raise AirflowFailException(str(err)) from err
        progress.guardrails = report.record_fields()
        for line in report.warnings:
            self.log.warning("Preflight (warn only, entry kept): %s", line)
        for item in report.excluded:
            self.log.warning(
                "Excluded instance_preferences[%d] %s (%s): %s",
                item["rank"] - 1,
                item["instance_type"],
                item["kind"],
                item["reason"],
            )
        if len(report.kept) == len(prefs):
            return request, prefs, report
        # Windows as written stay with their entries (an excluded entry never reappears in a later stage).
        # The kept entries as parsed (not re-read from their JSON form); the request is checked again.
        kept = prefs.keep(report.kept)
        request, submitted = build_request(
            self.job_kind, without_list(self.job_kind, config), kept, self._max_pending_seconds()
        )
        self.log.info(
            "Submitting %d of %d entries (ranks %s of the list as written): %s",
            len(submitted),
            len(prefs),
            ", ".join(str(r) for r in report.kept),
            submitted.describe(default_count),
        )
        return request, submitted, report

    def _max_pending_seconds(self) -> int | None:
        """``max_pending`` in seconds: the operator converts it once and passes the seconds."""
        given = self.max_pending
        return given if given is None or type(given) is int else to_seconds(given)


def with_guardrails(
    outcome: CapacityOutcome, guardrails: Mapping[str, Any] | None, log: Any = None
) -> CapacityOutcome:
    """The outcome in terms of the list as written, with its cost: the one way an outcome gets its
    guardrails, whatever the step.

    :param guardrails: the report the job was submitted with (``GuardrailReport.as_dict()``), if any.
    :param log: where to say what the selection costs (the step that reports the selection); None: say
        nothing (the job's end, after the selection was reported).
    """
    report = GuardrailReport.from_dict(guardrails)
    if report is None:
        return outcome
    outcome = report.apply(outcome)
    note = report.selection_note(outcome) if log is not None else None
    if note:
        log.info("%s", note)
    return outcome


def _literal(value: Any) -> Any:
    """A rendered template's value: Jinja renders text unless the DAG renders native objects, so
    ``"None"`` is None and ``"{'accelerator': 'cuda'}"`` a dict."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text in ("", "None", "null"):
        return None
    if text.startswith("{"):
        for loader in (json.loads, ast.literal_eval):
            try:
                return loader(text)
            except (ValueError, SyntaxError):
                continue
    return value
