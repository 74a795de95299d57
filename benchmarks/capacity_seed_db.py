"""Writes a :func:`benchmarks.capacity_records.plan_runs` plan into a deployment's metadata database.

Runs inside the deployment's environment (``LocalAirflow.run_python``), through Airflow's own models:
the DagRun and TaskInstance rows of one real run of the template DAG (a run the deployment made) are
cloned for every planned run and task instance — each with its own run id, times, state, DAG and its
DAG's current version — and one XCom row per task instance holds its record under ``capacity_outcome``,
stored the way the real run's task stored its own. Bulk inserts in chunks; ``ANALYZE`` afterwards, as
a database that collected these rows over weeks would have statistics.

    python -m benchmarks.capacity_seed_db PLAN.json TEMPLATE_DAG_ID     # prints counts as JSON
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.models.dag_version import DagVersion
from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
from sqlalchemy import insert, select, text
from sqlalchemy.orm import Session

from airflow_provider_sm_prefs.domain.record import RECORD_KEY

RUNS, TIS, XCOMS = DagRun.__table__, TaskInstance.__table__, XComModel.__table__
CHUNK = 2000


def _chunks(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(rows), CHUNK):
        yield rows[start : start + CHUNK]


def _when(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso) if iso else None


def templates(session: Session, dag_id: str) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """The newest finished run of ``dag_id`` that left a record: its DagRun row, a TI row, the XCom value."""
    found = session.execute(
        select(XCOMS.c.dag_run_id, XCOMS.c.task_id, XCOMS.c.map_index, XCOMS.c.run_id, XCOMS.c.value)
        .where(XCOMS.c.dag_id == dag_id, XCOMS.c.key == RECORD_KEY)
        .order_by(XCOMS.c.dag_run_id.desc())
        .limit(1)
    ).first()
    if found is None:
        raise RuntimeError(f"no run of {dag_id} left a {RECORD_KEY} record to copy")
    run = session.execute(select(RUNS).where(RUNS.c.id == found.dag_run_id)).mappings().one()
    ti = (
        session.execute(
            select(TIS).where(
                TIS.c.dag_id == dag_id,
                TIS.c.run_id == found.run_id,
                TIS.c.task_id == found.task_id,
                TIS.c.map_index == found.map_index,
            )
        )
        .mappings()
        .one()
    )
    return dict(run), dict(ti), found.value


def dag_versions(session: Session, dag_ids: Iterable[str]) -> dict[str, Any]:
    """The current version id of each DAG (the DAG processor must have parsed them all)."""
    wanted = set(dag_ids)
    rows = session.execute(
        select(DagVersion.dag_id, DagVersion.id)
        .where(DagVersion.dag_id.in_(wanted))
        .order_by(DagVersion.version_number)
    )
    versions = {dag_id: version for dag_id, version in rows}
    missing = wanted - set(versions)
    if missing:
        raise RuntimeError(f"DAGs not parsed yet (no dag_version): {sorted(missing)}")
    return versions


def run_rows(
    plan: list[Mapping[str, Any]], template: Mapping[str, Any], versions: Mapping[str, Any]
) -> list[dict[str, Any]]:
    rows = []
    for run in plan:
        after = datetime.fromisoformat(run["run_after"])
        ended = max(_when(t["record"]["recorded_at"]) or after for t in run["tasks"])
        row = {k: v for k, v in template.items() if k != "id"}
        row.update(
            dag_id=run["dag_id"],
            run_id=run["run_id"],
            run_type=run["run_type"],
            state=run["state"],
            run_after=after,
            logical_date=after,
            data_interval_start=after,
            data_interval_end=after,
            queued_at=after,
            start_date=after + timedelta(seconds=1),
            end_date=ended,
            created_at=after,
            updated_at=ended,
            last_scheduling_decision=ended,
            created_dag_version_id=versions[run["dag_id"]],
            conf={},
            bundle_version=None,
        )
        rows.append(row)
    return rows


def _new_id(template_id: Any) -> Any:
    if isinstance(template_id, uuid.UUID):
        return uuid.uuid4()
    return uuid.uuid4().hex if len(str(template_id)) == 32 else str(uuid.uuid4())


def ti_row(
    template: Mapping[str, Any], run: Mapping[str, Any], task: Mapping[str, Any], version: Any
) -> dict[str, Any]:
    after = datetime.fromisoformat(run["run_after"])
    record = task["record"]
    started = _when(record["created_at"]) or after + timedelta(seconds=5)
    ended = _when(record["recorded_at"]) or started
    row = dict(template)
    row.update(
        id=_new_id(template["id"]),
        dag_id=run["dag_id"],
        task_id=run["task_id"],
        run_id=run["run_id"],
        map_index=task["map_index"],
        rendered_map_index=str(task["map_index"]) if task["map_index"] >= 0 else None,
        try_number=task["try_number"],
        state=task["state"],
        operator=run["operator"],
        custom_operator_name=None,
        task_display_name=run["task_id"],
        scheduled_dttm=after,
        queued_dttm=after,
        start_date=started,
        end_date=ended,
        duration=(ended - started).total_seconds(),
        updated_at=ended,
        last_heartbeat_at=ended,
        dag_version_id=version,
        trigger_id=None,
        trigger_timeout=None,
        next_method=None,
        next_kwargs=None,
    )
    return row


def xcom_row(
    run: Mapping[str, Any], task: Mapping[str, Any], dag_run_id: int, as_text: bool
) -> dict[str, Any]:
    record = task["record"]
    return {
        "dag_run_id": dag_run_id,
        "dag_id": run["dag_id"],
        "task_id": run["task_id"],
        "run_id": run["run_id"],
        "map_index": task["map_index"],
        "key": RECORD_KEY,
        "value": json.dumps(record) if as_text else record,
        "timestamp": datetime.fromisoformat(record["recorded_at"]),
    }


def seed(plan: list[Mapping[str, Any]], template_dag: str) -> dict[str, Any]:
    """Insert the plan's runs, task instances and records; returns counts and seconds taken."""
    started = time.monotonic()
    with create_session() as session:
        run_template, ti_template, value = templates(session, template_dag)
        versions = dag_versions(session, {run["dag_id"] for run in plan})
        for chunk in _chunks(run_rows(plan, run_template, versions)):
            session.execute(insert(RUNS), chunk)
        wanted = {(run["dag_id"], run["run_id"]) for run in plan}
        ids = {
            (dag_id, run_id): run_pk
            for run_pk, dag_id, run_id in session.execute(
                select(RUNS.c.id, RUNS.c.dag_id, RUNS.c.run_id).where(
                    RUNS.c.dag_id.in_({d for d, _ in wanted})
                )
            )
            if (dag_id, run_id) in wanted
        }
        tis = [
            ti_row(ti_template, run, task, versions[run["dag_id"]]) for run in plan for task in run["tasks"]
        ]
        for chunk in _chunks(tis):
            session.execute(insert(TIS), chunk)
        as_text = isinstance(value, str)
        xcoms = [
            xcom_row(run, task, ids[(run["dag_id"], run["run_id"])], as_text)
            for run in plan
            for task in run["tasks"]
        ]
        for chunk in _chunks(xcoms):
            session.execute(insert(XCOMS), chunk)
    inserted = time.monotonic() - started
    with create_session() as session:
        if session.get_bind().dialect.name == "postgresql":
            for table in (RUNS, TIS, XCOMS):
                session.execute(text(f"ANALYZE {table.name}"))
    return {
        "runs": len(plan),
        "task_instances": len(tis),
        "xcoms": len(xcoms),
        "value_stored_as": "json text" if as_text else "json",
        "insert_seconds": round(inserted, 2),
        "seconds": round(time.monotonic() - started, 2),
    }


def main(plan_path: str, template_dag: str) -> None:
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    print(json.dumps(seed(plan, template_dag)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
