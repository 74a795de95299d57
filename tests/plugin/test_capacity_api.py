"""The capacity page's API inside Airflow's own api-server app: real records from dag.test() runs against
the offline SageMaker, real authentication and DAG authorization by the SimpleAuthManager."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.record import RECORD_KEY
from offline_sagemaker.jobs import training_config
from tests.airflow_versions import AIRFLOW_V_3_3_PLUS

G6, G5, P4D = "ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"
NIGHTLY = [
    {"instance_type": G6, "instance_count": 2},
    {"instance_type": G5, "instance_count": 4},
    {"instance_type": P4D, "instance_count": 2},
]
FAST = {"time_scale": 600, "job_runtime_seconds": 600, "phase_seconds": {"starting": 60}}
WIDE = "since=2026-01-01&until=2027-12-01"
PROCESSING = {
    "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
    "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1}},
}


def _dags() -> Any:
    path = Path(__file__).resolve().parents[1] / "dags" / "sm_prefs_test_dags.py"
    spec = importlib.util.spec_from_file_location("sm_prefs_test_dags_page", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def history(airflow_db: None, offline_sm_server: Any) -> Iterator[dict[str, Any]]:
    """Four runs of the page's test DAGs (a fallback, a first choice, a quota rejection, a processing job)
    and two junk values under the record's key; the run ids by what they did."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    dags = _dags()
    runs: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as env:
        for key, value in offline_sm_server.airflow_env(conn_id="aws_default").items():
            env.setenv(key, value)
        plays = [
            ("fallback", dags.t_page_train, {**FAST, "capacity": {G6: 0}}, training_config("page-fb")),
            ("first", dags.t_page_train, FAST, training_config("page-first")),
            (
                "quota",
                dags.t_page_train,
                {**FAST, "quotas": {"training": {G5: 2}}},
                training_config("page-q"),
            ),
            ("processing", dags.t_page_process, FAST, {**PROCESSING, "ProcessingJobName": "page-prep"}),
        ]
        for name, dag, scenario, config in plays:
            offline_sm_server.load_scenario(scenario)
            prefs = NIGHTLY if "TrainingJobName" in config else ["ml.c5.xlarge", "ml.m5.xlarge"]
            run = dag.test(run_conf={"config": config, "prefs": prefs, "max_pending": 3600, "out": ""})
            runs[name] = run.run_id
    with create_session() as session:
        for run_name, junk in (("first", {"version": 0, "dag_id": "old"}), ("quota", "not a record")):
            XComModel.set(
                key=RECORD_KEY,
                value=junk,
                dag_id="t_page_train",
                task_id="consume",
                run_id=runs[run_name],
                session=session,
            )
    yield runs


@pytest.fixture(scope="module")
def client(airflow_db: None) -> Iterator[Any]:
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    with pytest.MonkeyPatch.context() as env:
        env.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "admin:admin,viewer:viewer")
        env.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
        env.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "capacity-page-tests-" + "x" * 64)
        # Airflow 3.0 signs iss=[] when no issuer is set, which PyJWT 2.10 and later refuse to read.
        env.setenv("AIRFLOW__API_AUTH__JWT_ISSUER", "capacity-page-tests")
        with TestClient(create_app()) as test_client:
            yield test_client


def token(username: str, role: str, teams: list[str] | None = None) -> dict[str, str]:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    # Teams are a field of the user from Airflow 3.2 on; only the multi-team test (3.3) passes them.
    user = SimpleAuthManagerUser(username=username, role=role, **({"teams": teams} if teams else {}))
    jwt = get_auth_manager().generate_jwt(user)
    return {"Authorization": f"Bearer {jwt}"}


def get(client: Any, path: str, headers: dict[str, str] | None = None) -> Any:
    return client.get("/sm-prefs" + path, headers=headers, follow_redirects=False)


@pytest.mark.parametrize("path", ["/api/capacity", "/api/filters", "/static/capacity.js"])
def test_nothing_without_a_login(client: Any, path: str) -> None:
    assert get(client, path).status_code == 401
    assert get(client, path, {"Authorization": "Bearer not-a-jwt"}).status_code == 403


def test_the_page_sends_a_visitor_without_a_login_to_airflows_login(client: Any) -> None:
    from airflow_provider_sm_prefs.compat import AIRFLOW_V_3_1_PLUS
    from airflow_provider_sm_prefs.compat.page import PAGE_TOKEN_COOKIE

    response = get(client, "/?dag_id=t_page_train")
    if AIRFLOW_V_3_1_PLUS:
        assert response.status_code == 307
        login = response.headers["location"]
    else:
        # Airflow 3.0's UI keeps its token in local storage: a sign-in page (no data) copies it into the
        # page's cookie and reloads, or goes to the login page when there is none.
        assert response.status_code == 200 and "data-testid" not in response.text
        assert f'document.cookie = "{PAGE_TOKEN_COOKIE}="' in response.text
        login = json.loads(re.search(r"location\.replace\((\"[^\"]*\")\)", response.text)[1])
        with_cookie = client.get(
            "/sm-prefs/", cookies={PAGE_TOKEN_COOKIE: token("viewer", "viewer")["Authorization"][7:]}
        )
        assert with_cookie.status_code == 200 and "static/vendor/chart.umd.min.js" in with_cookie.text
        client.cookies.clear()
    assert login.startswith("/auth/login?next=") and "sm-prefs" in login
    page = get(client, "/", token("viewer", "viewer"))
    assert page.status_code == 200 and '<base href="/sm-prefs/">' in page.text
    assert "static/vendor/chart.umd.min.js" in page.text


def test_the_bundled_chart_library_is_served_with_the_page(client: Any) -> None:
    response = get(client, "/static/vendor/chart.umd.min.js", token("viewer", "viewer"))
    assert response.status_code == 200 and response.content.startswith(b"/*!\n * Chart.js v4")
    assert get(client, "/static/../api.py", token("viewer", "viewer")).status_code == 404


def test_a_viewer_sees_the_records_of_a_dag(client: Any, history: dict[str, str]) -> None:
    response = get(client, f"/api/capacity?{WIDE}&dag_id=t_page_train", token("viewer", "viewer"))
    assert response.status_code == 200, response.text
    data = response.json()
    summary = data["summary"]
    assert (summary["jobs"], summary["decisions"], summary["fell_back"]) == (3, 2, 1)
    assert summary["fallback_rate"] == 0.5
    assert summary["failures"]["quota"] == 1
    assert summary["skipped_records"] == 2
    rows = {row["run_id"]: row for row in data["jobs"]["rows"]}
    fallback = rows[history["fallback"]]
    assert (fallback["selected_instance_type"], fallback["preference_rank"], fallback["entries"]) == (
        G5,
        2,
        3,
    )
    assert (
        fallback["ti_url"]
        == f"/dags/t_page_train/runs/{history['fallback'].replace('+', '%2B').replace(':', '%3A')}/tasks/job"
    )
    assert fallback["job_url"].endswith("/_emulator/view/jobs/page-fb")
    # The identity tags the job was created with (a quota failure created none).
    assert fallback["identity_tags"]["sm-prefs:dag-id"] == "t_page_train"
    assert fallback["identity_tags"]["sm-prefs:run-id"] == history["fallback"]
    assert rows[history["quota"]]["identity_tags"] == {}
    assert rows[history["quota"]]["failure_kind"] == "quota" and rows[history["quota"]]["job_url"] == ""
    by_type = {e["instance_type"]: e for e in data["time_to_capacity"]["entries"]}
    assert set(by_type) == {G6, G5} and by_type[G5]["ranks"] == [2]
    configs = {(c["instance_type"], c["instance_count"]) for c in data["configurations"]}
    assert configs == {(G6, 2), (G5, 4)}


def test_filters_list_the_dags_and_tasks_with_records(client: Any, history: dict[str, str]) -> None:
    dags = {
        d["dag_id"]: d["tasks"] for d in get(client, "/api/filters", token("viewer", "viewer")).json()["dags"]
    }
    # The junk pushed on "consume" is under the key too: listed, and skipped when read.
    assert dags["t_page_train"] == ["consume", "job"] and dags["t_page_process"] == ["job"]


def test_a_task_filter_narrows_to_that_task(client: Any, history: dict[str, str]) -> None:
    data = get(
        client, f"/api/capacity?{WIDE}&dag_id=t_page_process&task_id=job", token("viewer", "viewer")
    ).json()
    assert data["summary"]["jobs"] == 1 and data["jobs"]["rows"][0]["job_kind"] == "processing"
    assert data["jobs"]["rows"][0]["selected_instance_type"] == "ml.c5.xlarge"


def test_a_range_that_excludes_the_runs_shows_nothing(client: Any, history: dict[str, str]) -> None:
    data = get(
        client,
        "/api/capacity?since=2026-01-01&until=2026-01-02&dag_id=t_page_train",
        token("viewer", "viewer"),
    ).json()
    assert data["summary"]["jobs"] == 0 and data["jobs"]["rows"] == []


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("dag_id=no_such_dag", "dag_id: unknown DAG 'no_such_dag'"),
        ("since=yesterday", "since: 'yesterday' is not an ISO 8601"),
        ("until=2026-13-01", "until: '2026-13-01' is not an ISO 8601"),
        ("since=2026-11-02&until=2026-11-01", "since: 2026-11-02T00:00:00+00:00 is not before until"),
        ("since=2020-01-01&until=2026-01-01", "since: the range is longer than"),
        ("page=0", "page: 0 is out of range"),
        ("page=two", "page: 'two' is not a whole number"),
        ("page_size=1000", "page_size: 1000 is out of range"),
        ("task_id=a/b", "task_id: 'a/b' is not a task id"),
        ("dag=x", "dag: unknown parameter"),
    ],
)
def test_bad_input_gets_a_400_naming_the_parameter(client: Any, query: str, names: str) -> None:
    response = get(client, f"/api/capacity?{query}", token("viewer", "viewer"))
    assert response.status_code == 400
    assert response.json()["detail"].startswith(names)


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="multi-team deployments arrive with Airflow 3.3")
def test_a_user_sees_only_the_dags_their_team_may_read(
    client: Any, history: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Multi-team: the DAGs of a bundle owned by team "research" are hidden from a viewer of team "ml"."""
    from airflow.models.dag import DagModel
    from airflow.models.team import Team, dag_bundle_team_association_table
    from airflow.utils.session import create_session
    from sqlalchemy import delete, select

    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    with create_session() as session:
        bundle = session.scalar(select(DagModel.bundle_name).where(DagModel.dag_id == "t_page_train"))
        session.add(Team(name="research"))
        session.flush()
        session.execute(
            dag_bundle_team_association_table.insert().values(dag_bundle_name=bundle, team_name="research")
        )
    try:
        ml = token("ml-viewer", "viewer", ["ml"])
        research = token("research-viewer", "viewer", ["research"])
        assert "t_page_train" not in {d["dag_id"] for d in get(client, "/api/filters", ml).json()["dags"]}
        assert "t_page_train" in {d["dag_id"] for d in get(client, "/api/filters", research).json()["dags"]}
        denied = get(client, f"/api/capacity?{WIDE}&dag_id=t_page_train", ml)
        assert denied.status_code == 403 and "may not read DAG 't_page_train'" in denied.json()["detail"]
        everything = get(client, f"/api/capacity?{WIDE}", ml).json()
        assert all(row["dag_id"] != "t_page_train" for row in everything["jobs"]["rows"])
        assert (
            get(client, f"/api/capacity?{WIDE}&dag_id=t_page_train", research).json()["summary"]["jobs"] == 3
        )
    finally:
        with create_session() as session:
            session.execute(
                delete(dag_bundle_team_association_table).where(
                    dag_bundle_team_association_table.c.team_name == "research"
                )
            )
            session.execute(delete(Team).where(Team.name == "research"))
