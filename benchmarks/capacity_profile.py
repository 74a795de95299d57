"""Where the capacity API's time goes: its steps timed one by one against a deployment's database.

Runs inside the deployment's environment (``LocalAirflow.run_python``), with the same code the API
runs (:mod:`airflow_provider_sm_prefs.plugin.query` and ``.stats``), for every DAG (what an admin reads):

- ``sql_text_s``: the records query with the value cast to text (PostgreSQL's work and the transfer,
  no JSON decoding in Python);
- ``fetch_s``: the same query as the API runs it (the driver decodes each JSON value);
- ``records_s``: reading the values back (``XComModel.deserialize_value``, ``CapacityRecord.from_dict``);
- ``summarize_s`` and ``links_s``: the aggregation and the job links of one page;
- ``total_s``: ``load_entries`` + ``summarize`` + ``with_links``, as one request does (median), with
  nothing cached (every value read and checked), and ``cached_s`` the same once the api-server's
  :class:`~airflow_provider_sm_prefs.plugin.query.RecordCache` holds every record;
- ``insights_s``: :func:`~airflow_provider_sm_prefs.plugin.insights.insights` of the same records, and
  ``insights_cached_s`` one ``/api/insights`` request (``load_entries`` + ``insights``) with every
  record cached;
- ``explain``: PostgreSQL's plan and execution time of the records query;
- ``profile``: cProfile's top functions by cumulative time for one such request;
- for comparison: ``keys_only_s``, the same rows without their values (what a request reads when every
  record is cached), and ``projection_s``, the scalar fields the aggregation uses extracted in SQL
  (``value ->> 'field'``) instead of every value decoded in Python.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from airflow.models.dag import DagModel
from airflow.models.dagrun import DagRun
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
from sqlalchemy import Text, cast, select, text
from sqlalchemy.orm import Session

from airflow_provider_sm_prefs.domain.record import CapacityRecord
from airflow_provider_sm_prefs.plugin import query
from airflow_provider_sm_prefs.plugin.insights import insights
from airflow_provider_sm_prefs.plugin.stats import Entry, Filters, summarize

T = TypeVar("T")
#: The record fields the aggregation reads (everything but the list, ARN, reason and job timestamps).
TEXT_FIELDS: tuple[str, ...] = ("dag_id", "task_id", "run_id", "job_kind", "job_name", "job_status")
TEXT_FIELDS += ("selected_instance_type", "failure_kind", "recorded_at")
NUMBER_FIELDS: tuple[str, ...] = ("map_index", "try_number", "selected_instance_count", "preference_rank")
NUMBER_FIELDS += ("pending_seconds", "training_seconds", "billable_seconds")


def _timed(repeats: int, call: Callable[[], T]) -> tuple[float, T]:
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    assert result is not None
    return statistics.median(times), result


def _request(
    session: Session, dag_ids: set[str], filters: Filters, cache: query.RecordCache | None
) -> dict[str, Any]:
    entries, skipped = query.load_entries(session, dag_ids, filters, cache)
    result = summarize(entries, filters, skipped=skipped)
    query.with_links(session, result["jobs"]["rows"], "")
    return result


def _explain(session: Session, dag_ids: set[str], filters: Filters) -> list[str]:
    if session.get_bind().dialect.name != "postgresql":
        return []
    stmt = query.records_statement(dag_ids, filters)
    compiled = stmt.compile(session.get_bind(), compile_kwargs={"literal_binds": True})
    return [row[0] for row in session.execute(text(f"EXPLAIN (ANALYZE, BUFFERS) {compiled}"))]


def _profile(session: Session, dag_ids: set[str], filters: Filters, top: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    _request(session, dag_ids, filters, None)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def breakdown(since: datetime, repeats: int = 3, top: int = 25) -> dict[str, Any]:
    filters = Filters(since=since, until=datetime.now(timezone.utc))
    with create_session() as session:
        dag_ids = set(session.scalars(select(DagModel.dag_id)))
        stmt = query.records_statement(dag_ids, filters)
        as_text = stmt.with_only_columns(cast(stmt.selected_columns[0], Text), stmt.selected_columns[1])
        sql_text_s, _ = _timed(repeats, lambda: session.execute(as_text).all())
        fetch_s, rows = _timed(repeats, lambda: session.execute(stmt).all())

        def read() -> list[Entry]:
            records = ((CapacityRecord.from_dict(query._value(v)), after) for v, after in rows)
            return [Entry(record=r, run_after=after) for r, after in records if r is not None]

        records_s, entries = _timed(repeats, read)
        summarize_s, result = _timed(repeats, lambda: summarize(entries, filters))

        def links() -> bool:
            query.with_links(session, result["jobs"]["rows"], "")
            return True

        links_s, _ = _timed(repeats, links)
        total_s, _ = _timed(repeats, lambda: _request(session, dag_ids, filters, None))
        cache = query.RecordCache(query.RECORDS.size)
        _request(session, dag_ids, filters, cache)
        cached_s, _ = _timed(repeats, lambda: _request(session, dag_ids, filters, cache))
        insights_s, _ = _timed(repeats, lambda: insights(entries, filters))

        def insights_request() -> dict[str, Any]:
            loaded, skipped = query.load_entries(session, dag_ids, filters, cache)
            return insights(loaded, filters, skipped=skipped)

        insights_cached_s, _ = _timed(repeats, insights_request)
        keys = stmt.with_only_columns(
            XComModel.dag_run_id,
            XComModel.task_id,
            XComModel.map_index,
            XComModel.timestamp,
            DagRun.run_after,
        )
        keys_only_s, _ = _timed(repeats, lambda: session.execute(keys).all())
        projected = stmt.with_only_columns(
            *(XComModel.value[name].as_string() for name in TEXT_FIELDS),
            *(XComModel.value[name].as_float() for name in NUMBER_FIELDS),
            DagRun.run_after,
        )
        projection_s, _ = _timed(repeats, lambda: session.execute(projected).all())
        return {
            "keys_only_s": keys_only_s,
            "projection_s": projection_s,
            "projected_fields": len(TEXT_FIELDS) + len(NUMBER_FIELDS),
            "records": len(rows),
            "sql_text_s": sql_text_s,
            "fetch_s": fetch_s,
            "records_s": records_s,
            "summarize_s": summarize_s,
            "links_s": links_s,
            "total_s": total_s,
            "cached_s": cached_s,
            "insights_s": insights_s,
            "insights_cached_s": insights_cached_s,
            "explain": _explain(session, dag_ids, filters),
            "profile": _profile(session, dag_ids, filters, top),
        }


def main(days: int) -> None:
    print(json.dumps(breakdown(datetime.now(timezone.utc) - timedelta(days=days))))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 90)
