"""The preference list parsed once per phase, its rank computed once: counted in real dag.test() runs
against the offline SageMaker, and at DAG parse time.

A parse is a read of the list from the DAG author's value (``check_request``'s parse), a construction of
an :class:`InstancePreferenceList`, or a read of its JSON form (``from_response``). The triggers' own
read of their keyword arguments (what a triggerer process must do) is counted apart.
"""

from __future__ import annotations

import collections
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_provider_sm_prefs.domain import requests
from airflow_provider_sm_prefs.domain.guardrails import GuardrailReport
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome
from airflow_provider_sm_prefs.domain.preference_list import InstancePreferenceList
from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator
from tests.operators.test_dag_runs import G5, G6, P4D, clock_from_first_look, scenario, training_config

#: A list no other test DAG holds, so its parses are told apart from the other DAGs' parse-time checks.
PREFS = [
    {"instance_type": G6, "instance_count": 3},
    {"instance_type": G5, "instance_count": 5},
    {"instance_type": P4D, "instance_count": 1},
]


def _ours(raw: Any) -> bool:
    """Whether ``raw`` is this test's list (as written, or in its JSON form)."""
    try:
        return [(e["instance_type"], e["instance_count"]) for e in raw] == [(G6, 3), (G5, 5), (P4D, 1)]
    except (TypeError, KeyError, IndexError):
        return False


def _phase() -> str:
    """Who parses: a trigger rebuilding its arguments, or the operator (its __init__, execute, resume)."""
    files = [frame.filename for frame in traceback.extract_stack()]
    return "trigger" if any("/triggers/" in f for f in files) else "operator"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """Counts the parses of :data:`PREFS` by phase, and every rank look-up by the module that asks."""
    counts: collections.Counter[str] = collections.Counter()
    parse_literal = requests._parse_literal

    def counted_parse(raw: Any, kind: Any) -> Any:
        if _ours(raw):
            counts[_phase()] += 1
        return parse_literal(raw, kind)

    init = InstancePreferenceList.__init__

    def counted_init(self: InstancePreferenceList, entries: Any, kind: Any = "training") -> None:
        if _ours(entries):
            counts[_phase()] += 1
        init(self, entries, kind)

    from_response: Callable[..., InstancePreferenceList] = InstancePreferenceList.from_response.__func__  # type: ignore[attr-defined]

    def counted_from_response(cls: type, raw: Any, kind: Any) -> InstancePreferenceList:
        if _ours(raw):
            counts[_phase()] += 1
        return from_response(cls, raw, kind)

    rank_of = InstancePreferenceList.rank_of

    def counted_rank_of(self: InstancePreferenceList, instance_type: str) -> int:
        asker = traceback.extract_stack()[-2].filename.rsplit("/", 2)
        counts["rank_of " + "/".join(asker[-2:])] += 1
        return rank_of(self, instance_type)

    monkeypatch.setattr(requests, "_parse_literal", counted_parse)
    monkeypatch.setattr(InstancePreferenceList, "__init__", counted_init)
    monkeypatch.setattr(InstancePreferenceList, "from_response", classmethod(counted_from_response))
    monkeypatch.setattr(InstancePreferenceList, "rank_of", counted_rank_of)
    return counts


def test_a_literal_list_is_parsed_once_at_parse_time_and_kept(parses: collections.Counter[str]) -> None:
    with DAG("parse_once_literal", schedule=None, start_date=datetime(2026, 1, 1)):
        train = SageMakerPreferenceTrainingOperator(
            task_id="train",
            config=training_config(),
            instance_preferences=PREFS,
            max_pending=timedelta(hours=1),
        )
    assert parses == {"operator": 1}
    # The parsed list stays with the operator (execute parses the rendered list once more).
    assert train._preferences == InstancePreferenceList(PREFS, "training")


@pytest.mark.usefixtures("airflow_db")
def test_one_run_parses_the_rendered_list_once_and_ranks_the_selection_once(
    sm: Any, run_test_dag: Any, parses: collections.Counter[str]
) -> None:
    # Capacity on the second entry 570 s after the job is created: execute, the capacity trigger and the
    # resume with its outcome, all in this process. The clock stands still until execute has seen the job
    # Pending (so the capacity trigger runs however slow the host), then moves a minute at a time: the job
    # runs from 570 to 590, so every look sees it Pending (≤ 540 s) or ended (≥ 600 s), never between,
    # and the trigger's outcome is the job's end (no second wait, no second look).
    sm.load_scenario(
        scenario(
            time_scale=0,
            job_runtime_seconds=5,
            phase_seconds={"starting": 5, "downloading": 5, "uploading": 5, "stopping": 5},
            capacity={
                G6: [{"from": 0, "free": 0}],
                G5: [{"from": 0, "to": 570, "free": 0}, {"from": 570, "free": 8}],
                P4D: [{"from": 0, "free": 0}],
            },
        )
    )
    with clock_from_first_look(sm, "nightly"):
        states, xcom = run_test_dag(
            "t_train_complete", config=training_config(), prefs=PREFS, max_pending=3600
        )
    assert states == {"job": "success", "consume": "success"}
    assert xcom is not None and (xcom["selected_instance_type"], xcom["preference_rank"]) == (G5, 2)
    # The templated list: no parse when the DAG is parsed, one after templating (execute); the resume
    # reads what execute parsed. The capacity trigger reads its arguments once.
    assert parses["operator"] == 1
    assert parses["trigger"] == 1
    # The rank: once, for the one outcome built from SageMaker's answer (the capacity trigger's Describe),
    # never again for the outcome's entry, the guardrails, the record or the resume.
    ranks = {k: v for k, v in parses.items() if k.startswith("rank_of")}
    assert ranks == {"rank_of domain/outcome.py": 1}
    assert xcom["job_status"] == "Completed"


def test_the_guardrails_map_the_events_rank_without_looking_the_type_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The submitted list held ranks 2 and 3 of the list as written; the event says rank 1 of it."""

    def no_lookup(self: InstancePreferenceList, instance_type: str) -> int:
        raise AssertionError(f"rank of {instance_type} looked up again; the event carries it")

    monkeypatch.setattr(InstancePreferenceList, "rank_of", no_lookup)
    report = GuardrailReport(
        authored=InstancePreferenceList(PREFS).as_list(), kept=[2, 3], counts={G5: 5, P4D: 1}
    )
    outcome = CapacityOutcome(
        job_name="j",
        job_kind="training",
        job_arn=None,
        selected_instance_type=G5,
        selected_instance_count=5,
        preference_rank=1,
        fell_back=False,
        pending_seconds=0.0,
        capacity="on-demand",
        accelerators=None,
        job_status="InProgress",
    )
    applied = report.apply(outcome)
    assert (applied.preference_rank, applied.fell_back) == (2, True)
    assert applied.preferences == report.authored
