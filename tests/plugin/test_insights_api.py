"""``/api/insights`` inside Airflow's own api-server app: records in Airflow's tables, real authentication,
and the same query, scope and answers to bad input as ``/api/capacity``.

The records are written straight into the metadata database (two DAGs of their own, in bundles of their
own, with DAG runs on chosen dates), so the figures can be worked out by hand and the DAGs the capacity
API's tests read keep exactly their own records.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.record import RECORD_KEY, CapacityRecord
from tests.airflow_versions import AIRFLOW_V_3_3_PLUS
from tests.plugin import test_capacity_api
from tests.plugin.test_capacity_api import get, token

#: The api-server app as the capacity API's tests start it (a module fixture: one app for this module).
client = test_capacity_api.client

G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"
PREFS: list[dict[str, Any]] = [
    {"instance_type": G6, "instance_count": 2},
    {"instance_type": G5, "instance_count": 4},
    {"instance_type": P4D, "instance_count": 2},
]
OPEN, HIDDEN = "insights_nightly", "insights_hidden"
# 2025: no other test of the package records capacity then, so "every readable DAG" holds these only.
WIDE = "since=2025-01-01&until=2025-12-31"
NOVEMBER = "since=2025-11-01&until=2025-12-01"
#: ``(dag_id, task_id, run day, rank)``: every job of ``train`` is priced at USD 40/h on G5×4 and 30/h
#: on G6×2 against a first choice of 30/h, billed one hour; ``prep`` has no prices; the hidden DAG's
#: jobs ran on P4D×2 at 60/h.
JOBS = [
    (OPEN, "train", datetime(2025, 10, 20, 2, tzinfo=timezone.utc), 2),
    (OPEN, "train", datetime(2025, 11, 5, 2, tzinfo=timezone.utc), 1),
    *[(OPEN, "train", datetime(2025, 11, day, 2, tzinfo=timezone.utc), 2) for day in (6, 7, 8, 9)],
    (OPEN, "prep", datetime(2025, 11, 5, 2, tzinfo=timezone.utc), 2),
    *[(HIDDEN, "train", datetime(2025, 11, day, 2, tzinfo=timezone.utc), 3) for day in (5, 6)],
]
PRICES = {G6: 30.0, G5: 40.0, P4D: 60.0}


def _record(dag_id: str, task_id: str, run_id: str, created: datetime, rank: int) -> dict[str, Any]:
    chosen = PREFS[rank - 1]
    priced = task_id == "train"
    return CapacityRecord(
        dag_id=dag_id,
        task_id=task_id,
        run_id=run_id,
        map_index=-1,
        try_number=1,
        job_kind="training",
        job_name=f"{dag_id}-{task_id}-{run_id}",
        job_arn=None,
        region="us-east-1",
        preferences=PREFS,
        selected_instance_type=chosen["instance_type"],
        selected_instance_count=chosen["instance_count"],
        preference_rank=rank,
        fell_back=rank > 1,
        pending_seconds=120.0,
        billable_seconds=3600,
        job_status="Completed",
        created_at=created.isoformat(),
        recorded_at=created.isoformat(),
        hourly_cost=PRICES[str(chosen["instance_type"])] if priced else None,
        first_choice_hourly_cost=30.0 if priced else None,
    ).as_dict()


@pytest.fixture(scope="module")
def records(airflow_db: None) -> Iterator[None]:
    """The two DAGs (each in its own bundle), one DAG run per day of :data:`JOBS`, their task instances and
    records."""
    from airflow.models.dag import DagModel
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import delete, insert

    with create_session() as session:
        for dag_id in (OPEN, HIDDEN):
            session.add(DagBundleModel(name=f"{dag_id}-bundle"))
            session.flush()
            session.add(
                DagModel(  # type: ignore[no-untyped-call]
                    dag_id=dag_id,
                    bundle_name=f"{dag_id}-bundle",
                    max_active_tasks=16,
                    max_consecutive_failed_dag_runs=0,
                    has_task_concurrency_limits=False,
                )
            )
        session.flush()
        for dag_id, run_after in sorted({(dag_id, when) for dag_id, _, when, _ in JOBS}):
            session.execute(
                insert(DagRun.__table__).values(
                    dag_id=dag_id,
                    run_id=f"manual__{run_after.isoformat()}",
                    run_type="manual",
                    run_after=run_after,
                    clear_number=0,
                    span_status="ended",
                )
            )
        for dag_id, task_id, run_after, rank in JOBS:
            run_id = f"manual__{run_after.isoformat()}"
            session.execute(
                insert(TaskInstance.__table__).values(
                    dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=-1, pool="default_pool"
                )
            )
            XComModel.set(
                key=RECORD_KEY,
                value=_record(dag_id, task_id, run_id, run_after, rank),
                dag_id=dag_id,
                task_id=task_id,
                run_id=run_id,
                session=session,
            )
    yield
    with create_session() as session:
        for table in (XComModel, TaskInstance, DagRun, DagModel):
            session.execute(delete(table.__table__).where(table.dag_id.in_([OPEN, HIDDEN])))
        session.execute(delete(DagBundleModel.__table__).where(DagBundleModel.name.like("insights_%")))


def insights(client: Any, query: str, headers: dict[str, str] | None = None) -> Any:
    response = get(client, f"/api/insights?{query}", headers or token("viewer", "viewer"))
    assert response.status_code == 200, response.text
    return response.json()


def test_the_figures_of_every_readable_dag(client: Any, records: None) -> None:
    data = insights(client, f"{WIDE}")
    assert data["filters"]["since"] == "2025-01-01T00:00:00+00:00" and data["min_records"] == 5
    premium = data["fallback_premium_usd"]
    # train: five fallbacks at (40 - 30) × 1 h; hidden: two at (60 - 30) × 1 h; prep is unpriced.
    assert (premium["total"]["premium"]["usd"], premium["total"]["premium"]["records"]) == (110.0, 7)
    assert premium["total"]["premium"]["unpriced_jobs"] == 1
    assert premium["total"]["spend"]["usd"] == 5 * 40.0 + 30.0 + 2 * 60.0
    tasks = {(r["dag_id"], r["task_id"]): r["premium"]["usd"] for r in premium["by_task"]}
    assert tasks == {(HIDDEN, "train"): 60.0, (OPEN, "prep"): None, (OPEN, "train"): 50.0}
    assert [m["month"] for m in premium["by_month"]] == ["2025-10", "2025-11"]
    p4d = next(
        r for r in data["entries"] if r["dag_id"] == OPEN and r["task_id"] == "train" and r["position"] == 3
    )
    assert (p4d["instance_type"], p4d["offered"], p4d["never_selected"], p4d["runs"]) == (P4D, 6, True, 6)
    g5 = {r["instance_type"]: r for r in data["hour_of_day"]["utc"]["rows"]}[G5]
    assert g5["hours"][2]["selections"] == 6 and g5["hours"][2]["median_wait"] == 120.0
    assert data["acceptance_windows"] == []


def test_a_range_dag_and_task_narrow_the_figures(client: Any, records: None) -> None:
    november = insights(client, f"{NOVEMBER}&dag_id={OPEN}&task_id=train")["fallback_premium_usd"]
    assert [m["month"] for m in november["by_month"]] == ["2025-11"]
    assert [(r["dag_id"], r["task_id"]) for r in november["by_task"]] == [(OPEN, "train")]
    premium = november["total"]["premium"]
    assert (premium["usd"], premium["records"], premium["enough"]) == (40.0, 4, False)
    assert premium["note"] == "4 records; at least 5 are needed to draw a conclusion"
    dag = insights(client, f"{WIDE}&dag_id={OPEN}")["fallback_premium_usd"]
    assert {r["task_id"] for r in dag["by_task"]} == {"prep", "train"}
    assert dag["total"]["premium"]["usd"] == 50.0
    prep = insights(client, f"{WIDE}&task_id=prep")
    assert [(r["dag_id"], r["task_id"]) for r in prep["fallback_premium_usd"]["by_task"]] == [(OPEN, "prep")]
    empty = insights(client, f"since=2025-01-01&until=2025-02-01&dag_id={OPEN}")
    assert empty["summary"]["jobs"] == 0 and empty["entries"] == []


def test_hours_in_the_deployment_time_zone(
    client: Any, records: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert insights(client, f"{WIDE}&dag_id={OPEN}")["hour_of_day"]["local"] is None
    monkeypatch.setenv("AIRFLOW__CORE__DEFAULT_TIMEZONE", "Asia/Kolkata")
    local = insights(client, f"{WIDE}&dag_id={OPEN}")["hour_of_day"]["local"]
    assert local["timezone"] == "Asia/Kolkata"
    g5 = {r["instance_type"]: r for r in local["rows"]}[G5]["hours"]
    assert g5[7]["selections"] == 6 and g5[2]["selections"] == 0  # 02:00Z is 07:30 in Kolkata


@pytest.mark.parametrize("headers", [None, {"Authorization": "Bearer not-a-jwt"}])
def test_without_a_login_the_same_answer_as_capacity(client: Any, headers: dict[str, str] | None) -> None:
    answer = get(client, "/api/insights", headers)
    expected = get(client, "/api/capacity", headers)
    assert answer.status_code == expected.status_code and answer.status_code in (401, 403)
    assert answer.json() == expected.json()


@pytest.mark.parametrize(
    "query",
    [
        "since=yesterday",
        "until=2025-13-01",
        "since=2025-11-02&until=2025-11-01",
        "since=2020-01-01&until=2025-01-01",
        "page=0",
        "page=two",
        "page_size=1000",
        "task_id=a/b",
        "dag=x",
        "tz=UTC",
    ],
)
def test_bad_input_gets_the_same_400_as_capacity(client: Any, query: str) -> None:
    viewer = token("viewer", "viewer")
    answer = get(client, f"/api/insights?{query}", viewer)
    expected = get(client, f"/api/capacity?{query}", viewer)
    assert answer.status_code == expected.status_code == 400
    assert answer.json() == expected.json()
    assert answer.json()["detail"].startswith(query.split("=")[0] + ": ")


def test_a_dag_the_user_may_not_read_is_left_out(client: Any, records: None) -> None:
    """The auth manager's answer (here: only the open DAG) is all the route reads."""
    from airflow_provider_sm_prefs.plugin import api

    api.app.dependency_overrides[api._readable_dag_ids] = lambda: {OPEN}
    try:
        data = insights(client, WIDE)
        assert {r["dag_id"] for r in data["fallback_premium_usd"]["by_task"]} == {OPEN}
        assert data["fallback_premium_usd"]["total"]["premium"]["usd"] == 50.0
        assert {r["dag_id"] for r in data["entries"]} == {OPEN}
        viewer = token("viewer", "viewer")
        denied = get(client, f"/api/insights?{WIDE}&dag_id={HIDDEN}", viewer)
        unknown = get(client, f"/api/insights?{WIDE}&dag_id=no_such_dag", viewer)
        # Not readable and not there answer alike: the page tells no one which DAG ids exist.
        assert denied.status_code == unknown.status_code == 404
        assert denied.json() == get(client, f"/api/capacity?{WIDE}&dag_id={HIDDEN}", viewer).json()
        assert denied.text.replace(HIDDEN, "no_such_dag") == unknown.text
    finally:
        api.app.dependency_overrides.clear()


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="multi-team deployments arrive with Airflow 3.3")
def test_a_user_sees_only_the_figures_of_dags_their_team_may_read(
    client: Any, records: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Multi-team: the hidden DAG's bundle belongs to team "finance"; a viewer of team "ml" never sees it."""
    from airflow.models.team import Team, dag_bundle_team_association_table
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    with create_session() as session:
        session.add(Team(name="finance"))
        session.flush()
        session.execute(
            dag_bundle_team_association_table.insert().values(
                dag_bundle_name=f"{HIDDEN}-bundle", team_name="finance"
            )
        )
    try:
        ml, finance = token("ml-viewer", "viewer", ["ml"]), token("finance-viewer", "viewer", ["finance"])
        seen = insights(client, WIDE, ml)
        assert HIDDEN not in {r["dag_id"] for r in seen["fallback_premium_usd"]["by_task"]}
        assert seen["fallback_premium_usd"]["total"]["premium"]["usd"] == 50.0
        denied = get(client, f"/api/insights?{WIDE}&dag_id={HIDDEN}", ml)
        assert (
            denied.status_code == 404 and "DAG 'insights_hidden' is not found or not readable" in denied.text
        )
        assert denied.json() == get(client, f"/api/capacity?{WIDE}&dag_id={HIDDEN}", ml).json()
        theirs = insights(client, f"{WIDE}&dag_id={HIDDEN}", finance)["fallback_premium_usd"]["total"]
        assert theirs["premium"]["usd"] == 60.0
    finally:
        with create_session() as session:
            session.execute(
                delete(dag_bundle_team_association_table).where(
                    dag_bundle_team_association_table.c.team_name == "finance"
                )
            )
            session.execute(delete(Team).where(Team.name == "finance"))
