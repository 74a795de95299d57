"""Reading capacity records back from Airflow's metadata database, for the DAGs a user may read.

One query lists the records (XCom rows under :data:`~airflow_provider_sm_prefs.domain.record.RECORD_KEY`)
of the permitted DAGs whose DAG run falls in the range, joined to the run for its ``run_after``, without
their values; a second one reads the values of the rows not read before (:class:`RecordCache`: decoding
every JSON value and checking it is most of a request's time); a third one, for the page of jobs shown
only, reads each job's link. Rows that are not a readable record (an older version of the record,
anything hand-pushed under the key) are counted, never raised.

A record's value is written by its task, so it is only as trustworthy as the task: the DAG, run, task and
map index a record stands for, and everything the page derives from them (which DAG it is counted under,
its task instance and job links), are the XCom row's own columns, whatever the value claims. A task of a
DAG the user may read cannot make the page show or link another DAG's run or job.
"""

from __future__ import annotations

import dataclasses
import threading
import urllib.parse
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from airflow.models.dagrun import DagRun
from airflow.models.xcom import XComModel
from cachetools import LRUCache
from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql import Select  # SQLAlchemy 1.4 (Airflow 3.0) has it here only

from airflow_provider_sm_prefs.domain.record import RECORD_KEY, CapacityRecord
from airflow_provider_sm_prefs.links import SageMakerPreferenceJobLink, job_urls
from airflow_provider_sm_prefs.plugin.stats import Entry, Filters

__all__ = [
    "RECORDS",
    "RecordCache",
    "dags_with_records",
    "load_entries",
    "records_statement",
    "task_instance_url",
    "with_links",
]

#: An XCom row of a record: ``(dag_run_id, task_id, map_index, timestamp)``.
RowKey = tuple[int, str, int, datetime]
#: Up to this many missing values are read by their runs' ids; more, with the range's query.
_BY_RUN_IDS = 1000


class RecordCache:
    """Records already read, by XCom row and the time the row was written; the least recently used go first.

    An XCom value is never changed in place: a push under the same key replaces the row, with a new
    timestamp, so a row's key in the cache always stands for what the database holds. A record takes
    a few KB. Thread-safe (the api-server runs the routes in a thread pool).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._records: LRUCache[RowKey, CapacityRecord | None] = LRUCache(maxsize=size)
        self._lock = threading.Lock()  # LRUCache is not thread-safe: a read reorders it

    def __len__(self) -> int:
        return len(self._records)

    def get_many(self, keys: Iterable[RowKey]) -> dict[RowKey, CapacityRecord | None]:
        """The cached ones of ``keys`` (None for a row that held no readable record)."""
        found: dict[RowKey, CapacityRecord | None] = {}
        with self._lock:
            for key in keys:
                if key in self._records:
                    found[key] = self._records[key]  # and it becomes the most recently used
        return found

    def put_many(self, records: Mapping[RowKey, CapacityRecord | None]) -> None:
        with self._lock:
            self._records.update(records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()


#: The api-server process's cache: at most 20,000 records, a few KB each.
RECORDS = RecordCache(20_000)


def records_statement(dag_ids: Collection[str], filters: Filters) -> Select[tuple[Any, datetime]]:
    """``(value, run_after)`` of every record of ``dag_ids`` whose DAG run falls in the filters' range."""
    stmt = (
        select(XComModel.value, DagRun.run_after)
        .join(DagRun, DagRun.id == XComModel.dag_run_id)
        .where(
            XComModel.key == RECORD_KEY,
            XComModel.dag_id.in_(sorted(dag_ids)),
            DagRun.run_after >= filters.since,
            DagRun.run_after < filters.until,
        )
    )
    if filters.task_id:
        stmt = stmt.where(XComModel.task_id == filters.task_id)
    return stmt


def load_entries(
    session: Session, dag_ids: Collection[str], filters: Filters, cache: RecordCache | None = RECORDS
) -> tuple[list[Entry], int]:
    """The records of ``dag_ids`` (already limited to what the user may read) in range; and how many were skipped.

    Values are read and checked only for rows ``cache`` does not hold (all of them without a cache).
    """
    if not dag_ids:
        return [], 0
    stmt = records_statement(dag_ids, filters)
    listed = [
        ((run_pk, task_id, map_index, written), run_after)
        for run_pk, task_id, map_index, written, run_after in session.execute(
            stmt.with_only_columns(*_ROW_KEY, DagRun.run_after)
        )
    ]
    records = cache.get_many(key for key, _ in listed) if cache is not None else {}
    missing = {key for key, _ in listed if key not in records}
    if missing:
        read = _read_records(session, stmt, missing)
        records.update(read)
        if cache is not None:
            cache.put_many(read)
    entries: list[Entry] = []
    skipped = 0
    for key, run_after in listed:
        if key not in records:  # replaced between the two reads; the next request reads the new row
            continue
        record = records[key]
        if record is None:
            skipped += 1
            continue
        entries.append(Entry(record=record, run_after=run_after))
    return entries, skipped


_ROW_KEY = (XComModel.dag_run_id, XComModel.task_id, XComModel.map_index, XComModel.timestamp)


def _read_records(
    session: Session, stmt: Select[tuple[Any, datetime]], keys: set[RowKey]
) -> dict[RowKey, CapacityRecord | None]:
    """The records of the rows ``keys`` (None for a row that holds no readable record)."""
    values = stmt.with_only_columns(*_ROW_KEY, XComModel.dag_id, XComModel.run_id, XComModel.value)
    if len(keys) <= _BY_RUN_IDS:
        values = values.where(XComModel.dag_run_id.in_(sorted({key[0] for key in keys})))
    read: dict[RowKey, CapacityRecord | None] = {}
    for run_pk, task_id, map_index, written, dag_id, run_id, value in session.execute(values):
        key = (run_pk, task_id, map_index, written)
        if key in keys:
            read[key] = _as_row(CapacityRecord.from_dict(_value(value)), dag_id, run_id, task_id, map_index)
    return read


def _as_row(
    record: CapacityRecord | None, dag_id: str, run_id: str, task_id: str, map_index: int
) -> CapacityRecord | None:
    """``record`` as the task instance whose XCom row holds it: the row's identity replaces the value's.

    The value is whatever its task pushed; the row's columns are what Airflow wrote for that task.
    """
    if record is None:
        return None
    if (record.dag_id, record.run_id, record.task_id, record.map_index) == (
        dag_id,
        run_id,
        task_id,
        map_index,
    ):
        return record
    return dataclasses.replace(record, dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index)


def _value(raw: Any) -> Any:
    try:
        return XComModel.deserialize_value(_Row(raw))
    except Exception:  # a value no decoder understands is junk like any other
        return None


class _Row:
    """What :meth:`XComModel.deserialize_value` reads: an object with a ``value``."""

    def __init__(self, value: Any) -> None:
        self.value = value


def dags_with_records(session: Session, dag_ids: Collection[str]) -> dict[str, list[str]]:
    """``{dag_id: [task_id, ...]}`` of the permitted DAGs that have at least one record."""
    if not dag_ids:
        return {}
    stmt = (
        select(XComModel.dag_id, XComModel.task_id)
        .where(XComModel.key == RECORD_KEY, XComModel.dag_id.in_(sorted(dag_ids)))
        .distinct()
    )
    found: dict[str, list[str]] = {}
    for dag_id, task_id in session.execute(stmt):
        found.setdefault(dag_id, []).append(task_id)
    return {dag_id: sorted(tasks) for dag_id, tasks in sorted(found.items())}


def task_instance_url(root: str, row: dict[str, Any]) -> str:
    """The task instance's page in the Airflow UI (``root`` is the UI's base path, "" at the host's root)."""
    quote = urllib.parse.quote
    url = (
        f"{root}/dags/{quote(row['dag_id'], safe='')}/runs/{quote(row['run_id'], safe='')}"
        f"/tasks/{quote(row['task_id'], safe='')}"
    )
    if row["map_index"] >= 0:
        url += f"/mapped/{row['map_index']}"
    return url


def with_links(session: Session, rows: Sequence[dict[str, Any]], root: str) -> None:
    """Fill each job row's ``ti_url`` and ``job_url`` (the job link its task stored, else the console)."""
    stored = _stored_job_links(session, rows)
    for row in rows:
        row["ti_url"] = task_instance_url(root, row)
        if not row["has_job"]:  # rejected before SageMaker created anything: no job page to open
            continue
        key = (row["dag_id"], row["run_id"], row["task_id"], row["map_index"])
        row["job_url"] = stored.get(key) or _console_url(row)


def _stored_job_links(
    session: Session, rows: Sequence[dict[str, Any]]
) -> dict[tuple[str, str, str, int], str]:
    rows = [row for row in rows if row["has_job"]]
    if not rows:
        return {}
    wanted = [
        and_(
            XComModel.dag_id == row["dag_id"],
            XComModel.run_id == row["run_id"],
            XComModel.task_id == row["task_id"],
            XComModel.map_index == row["map_index"],
        )
        for row in rows
    ]
    stmt = select(
        XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.map_index, XComModel.value
    ).where(XComModel.key == SageMakerPreferenceJobLink.key, or_(*wanted))
    links: dict[tuple[str, str, str, int], str] = {}
    for dag_id, run_id, task_id, map_index, value in session.execute(stmt):
        url = _value(value)
        if isinstance(url, str) and url.startswith(("https://", "http://")):
            links[(dag_id, run_id, task_id, map_index)] = url
    return links


def _console_url(row: dict[str, Any]) -> str:
    if (
        not row.get("job_name")
        or not row.get("region")
        or row.get("job_kind") not in ("training", "processing")
    ):
        return ""
    return job_urls(row["job_kind"], row["job_name"], region_name=row["region"])[0]
