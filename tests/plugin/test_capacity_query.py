"""Reading records back: only rows not read before have their values decoded (SQLite, Airflow's tables)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from airflow.models.dagrun import DagRun
from airflow.models.xcom import XComModel
from sqlalchemy import create_engine, delete, insert
from sqlalchemy.orm import Session

from airflow_provider_sm_prefs.domain.record import RECORD_KEY, CapacityRecord
from airflow_provider_sm_prefs.plugin import query
from airflow_provider_sm_prefs.plugin.stats import Filters

NOW = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
FILTERS = Filters(since=NOW - timedelta(days=30), until=NOW)


def record(run_id: str, map_index: int, **fields: Any) -> dict[str, Any]:
    return CapacityRecord(
        dag_id="fleet",
        task_id="job",
        run_id=run_id,
        map_index=map_index,
        try_number=1,
        job_kind="training",
        job_name=f"{run_id}-{map_index}",
        job_arn=None,
        region="us-east-1",
        recorded_at=NOW.isoformat(),
        **fields,
    ).as_dict()


@pytest.fixture
def session() -> Iterator[Session]:
    engine = create_engine("sqlite://")
    DagRun.metadata.create_all(engine, tables=[DagRun.__table__, XComModel.__table__])
    with Session(engine) as session:
        for pk in (1, 2):
            session.execute(
                insert(DagRun.__table__).values(
                    id=pk,
                    dag_id="fleet",
                    run_id=f"run-{pk}",
                    run_type="manual",
                    run_after=NOW - timedelta(days=pk),
                    clear_number=0,
                    span_status="ended",
                    log_template_id=None,
                )
            )
        yield session


def push(session: Session, pk: int, map_index: int, value: Any, written: datetime = NOW) -> None:
    session.execute(
        delete(XComModel.__table__).where(
            XComModel.dag_run_id == pk, XComModel.map_index == map_index, XComModel.key == RECORD_KEY
        )
    )
    session.execute(
        insert(XComModel.__table__).values(
            dag_run_id=pk,
            dag_id="fleet",
            task_id="job",
            run_id=f"run-{pk}",
            map_index=map_index,
            key=RECORD_KEY,
            value=value,
            timestamp=written,
        )
    )


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every value load_entries decodes."""
    seen: list[Any] = []
    original = query._value

    def spy(raw: Any) -> Any:
        seen.append(raw)
        return original(raw)

    monkeypatch.setattr(query, "_value", spy)
    return seen


def test_values_are_read_once_and_again_after_a_new_push(session: Session, decoded: list[Any]) -> None:
    for pk in (1, 2):
        for i in range(3):
            push(session, pk, i, record(f"run-{pk}", i, preference_rank=1))
    push(session, 2, 9, {"not": "a record"})
    cache = query.RecordCache(100)

    entries, skipped = query.load_entries(session, {"fleet"}, FILTERS, cache)
    assert (len(entries), skipped, len(decoded)) == (6, 1, 7)
    assert {e.run_after.date() for e in entries} == {(NOW - timedelta(days=d)).date() for d in (1, 2)}

    again, skipped = query.load_entries(session, {"fleet"}, FILTERS, cache)
    assert (again, skipped, len(decoded)) == (entries, 1, 7)  # nothing decoded again

    push(session, 1, 0, record("run-1", 0, preference_rank=2), written=NOW + timedelta(seconds=1))
    after, _ = query.load_entries(session, {"fleet"}, FILTERS, cache)
    assert len(decoded) == 8
    assert sorted(e.record.preference_rank for e in after) == [1, 1, 1, 1, 1, 2]


def test_without_a_cache_every_value_is_read_each_time(session: Session, decoded: list[Any]) -> None:
    push(session, 1, 0, record("run-1", 0))
    for _ in range(2):
        entries, _ = query.load_entries(session, {"fleet"}, FILTERS, cache=None)
        assert len(entries) == 1
    assert len(decoded) == 2


def test_the_range_and_the_dags_still_filter(session: Session) -> None:
    push(session, 1, 0, record("run-1", 0))
    push(session, 2, 0, record("run-2", 0))
    cache = query.RecordCache(100)
    recent = Filters(since=NOW - timedelta(days=1, hours=1), until=NOW)
    assert [e.record.run_id for e in query.load_entries(session, {"fleet"}, recent, cache)[0]] == ["run-1"]
    assert query.load_entries(session, {"other"}, FILTERS, cache) == ([], 0)


def test_the_cache_drops_the_least_recently_used() -> None:
    cache = query.RecordCache(2)
    keys = [(pk, "job", -1, NOW) for pk in (1, 2, 3)]
    cache.put_many({keys[0]: None, keys[1]: None})
    assert cache.get_many([keys[0]]) == {keys[0]: None}  # 0 is now the most recent
    cache.put_many({keys[2]: None})
    assert set(cache.get_many(keys)) == {keys[0], keys[2]} and len(cache) == 2
