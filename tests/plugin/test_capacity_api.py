"""The capacity page's API inside Airflow's own api-server app: real records from dag.test() runs against
the offline SageMaker, real authentication and DAG authorization by the SimpleAuthManager."""

from __future__ import annotations

import html
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.record import RECORD_KEY
from offline_sagemaker.jobs import training_config
from tests.airflow_versions import AIRFLOW_V_3_1_PLUS, AIRFLOW_V_3_3_PLUS

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
        # Airflow 3.0's UI keeps its token in local storage: a sign-in page (no data) hands it to the
        # page's session route and reloads, or goes to the login page when there is none.
        assert response.status_code == 200 and "data-testid" not in response.text
        assert '<script src="/sm-prefs/sign-in.js" data-session="/sm-prefs/session"' in response.text
        login = html.unescape(re.search(r'data-login="([^"]*)"', response.text)[1])
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


def test_filters_name_the_deployment_id_the_jobs_are_tagged_with(
    client: Any, history: dict[str, str], monkeypatch: Any
) -> None:
    from airflow.models.variable import Variable

    from airflow_provider_sm_prefs.operators.identity import DEPLOYMENT_VARIABLE

    monkeypatch.delenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", raising=False)
    Variable.set(DEPLOYMENT_VARIABLE, "af-00112233445566aa")
    try:
        assert (
            get(client, "/api/filters", token("viewer", "viewer")).json()["deployment_id"]
            == "af-00112233445566aa"
        )
        monkeypatch.setenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", "prod-eu")  # the configured one wins
        assert get(client, "/api/filters", token("viewer", "viewer")).json()["deployment_id"] == "prod-eu"
    finally:
        Variable.delete(DEPLOYMENT_VARIABLE)


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
        assert denied.status_code == 404 and denied.json() == {"detail": not_readable("t_page_train")}
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


def not_readable(dag_id: str) -> str:
    """The one answer for a DAG that does not exist and for one the user may not read."""
    return f"dag_id: DAG {dag_id!r} is not found or not readable; choose one of the DAGs /api/filters lists"


@pytest.fixture
def train_hidden(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A deployment whose auth manager lets user "a-reader" read every DAG but ``t_page_train``; their login.

    The policy is the auth manager's own ``is_authorized_dag``; everything above it (which DAG ids the
    manager lists, how the page answers) runs as it does in service.
    """
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    original = SimpleAuthManager.is_authorized_dag

    def is_authorized_dag(self: Any, *, method: Any, user: Any, **kwargs: Any) -> bool:
        details = kwargs.get("details")
        if user.get_name() == "a-reader" and details is not None and details.id == "t_page_train":
            return False
        return original(self, method=method, user=user, **kwargs)

    monkeypatch.setattr(SimpleAuthManager, "is_authorized_dag", is_authorized_dag)
    return token("a-reader", "viewer")


@pytest.mark.parametrize("route", ["/api/capacity", "/api/insights"])
def test_an_unknown_dag_and_an_unreadable_dag_get_the_same_answer(
    client: Any, history: dict[str, str], train_hidden: dict[str, str], route: str
) -> None:
    """No existence oracle: a DAG that exists but may not be read answers as one that does not exist."""
    unknown = get(client, f"{route}?{WIDE}&dag_id=no_such_dag", train_hidden)
    hidden = get(client, f"{route}?{WIDE}&dag_id=t_page_train", train_hidden)
    assert (unknown.status_code, unknown.json()) == (404, {"detail": not_readable("no_such_dag")})
    assert (hidden.status_code, hidden.json()) == (404, {"detail": not_readable("t_page_train")})
    assert hidden.text.replace("t_page_train", "no_such_dag") == unknown.text
    # The same DAG for a user who may read it: its records.
    assert get(client, f"{route}?{WIDE}&dag_id=t_page_train", token("viewer", "viewer")).status_code == 200


def test_a_record_shows_under_the_task_that_pushed_it_whatever_it_claims(
    client: Any, history: dict[str, str], train_hidden: dict[str, str]
) -> None:
    """A task of t_page_process (readable) pushes a copy of t_page_train's record (hidden from the user),
    naming t_page_train's DAG, run and task: the page shows it as the pushing task's own, in its own run,
    and links neither t_page_train's task instance nor the job link t_page_train stored."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import delete, select

    from airflow_provider_sm_prefs.links import SageMakerPreferenceJobLink

    source = {"dag_id": "t_page_train", "run_id": history["fallback"], "task_id": "job", "map_index": -1}
    forged_at = {"dag_id": "t_page_process", "run_id": history["processing"], "task_id": "consume"}

    def stored(session: Any, key: str) -> Any:
        where = [getattr(XComModel, name) == value for name, value in source.items()]
        return XComModel.deserialize_value(
            session.scalar(select(XComModel).where(XComModel.key == key, *where))
        )

    with create_session() as session:
        claimed_value, hidden_url = (
            stored(session, RECORD_KEY),
            stored(session, SageMakerPreferenceJobLink.key),
        )
        XComModel.set(key=RECORD_KEY, value=claimed_value, session=session, **forged_at)
    assert claimed_value["dag_id"] == "t_page_train" and hidden_url.endswith("/_emulator/view/jobs/page-fb")
    try:
        data = get(client, f"/api/capacity?{WIDE}", train_hidden).json()
        rows = data["jobs"]["rows"]
        forged = next(row for row in rows if row["task_id"] == "consume")
        assert (forged["dag_id"], forged["run_id"], forged["map_index"]) == (
            "t_page_process",
            history["processing"],
            -1,
        )
        run = history["processing"].replace("+", "%2B").replace(":", "%3A")
        assert forged["ti_url"] == f"/dags/t_page_process/runs/{run}/tasks/consume"
        assert forged["job_url"] != hidden_url and "_emulator" not in forged["job_url"]
        assert all(row["dag_id"] != "t_page_train" for row in rows)
        assert all("t_page_train" not in row["ti_url"] and row["job_url"] != hidden_url for row in rows)
        # The charts and the insights count it under the pushing task as well.
        assert all("t_page_train" not in series["name"] for series in data["fallback"]["series"])
        insight = get(client, f"/api/insights?{WIDE}", train_hidden).json()
        tasks = {(row["dag_id"], row["task_id"]) for row in insight["fallback_premium_usd"]["by_task"]}
        assert ("t_page_process", "consume") in tasks and all(dag != "t_page_train" for dag, _ in tasks)
        # Filtered to its DAG, it is there too; the DAG it names stays hidden.
        mine = get(client, f"/api/capacity?{WIDE}&dag_id=t_page_process&task_id=consume", train_hidden).json()
        assert [row["dag_id"] for row in mine["jobs"]["rows"]] == ["t_page_process"]
        assert get(client, f"/api/capacity?{WIDE}&dag_id=t_page_train", train_hidden).status_code == 404
    finally:
        with create_session() as session:
            session.execute(
                delete(XComModel).where(
                    XComModel.key == RECORD_KEY,
                    XComModel.dag_id == "t_page_process",
                    XComModel.task_id == "consume",
                )
            )


#: What the page's answers must carry: only its own scripts, styles and API; framed by Airflow's UI only.
CSP_DIRECTIVES = {
    "default-src": "'none'",
    "script-src": "'self'",
    "style-src": "'self'",
    "connect-src": "'self'",
    "base-uri": "'self'",
    "frame-ancestors": "'self'",
}


def assert_hardened(response: Any) -> None:
    policy = dict(
        part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";")
    )
    assert {name: policy.get(name) for name in CSP_DIRECTIVES} == CSP_DIRECTIVES
    assert "unsafe" not in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "SAMEORIGIN"


def assert_no_inline_code(page: str) -> None:
    """Nothing the policy would block: every script is a file, no event handler or style attribute."""
    scripts = re.findall(r"<script\b[^>]*>", page)
    assert scripts and all(" src=" in tag for tag in scripts), scripts
    assert not re.search(r"<script\b[^>]*>[^<]+</script>", page)
    assert not re.search(r"\son[a-z]+\s*=", page) and " style=" not in page and "<style" not in page


def test_the_page_and_its_api_answer_with_a_content_security_policy(client: Any) -> None:
    viewer = token("viewer", "viewer")
    page = get(client, "/?dag_id=t_page_train", viewer)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert_hardened(page)
    assert_no_inline_code(page.text)
    for path, expected in (
        ("/api/filters", 200),
        ("/static/capacity.js", 200),
        ("/static/nothing.js", 404),
        ("/api/capacity?page=0", 400),
    ):
        answer = get(client, path, viewer)
        assert answer.status_code == expected
        assert_hardened(answer)
    anonymous = get(client, "/")  # the login redirect (3.1+) or the sign-in page (3.0)
    assert_hardened(anonymous)
    if anonymous.status_code == 200:
        assert_no_inline_code(anonymous.text)


airflow_3_0_only = pytest.mark.skipif(
    AIRFLOW_V_3_1_PLUS, reason="Airflow 3.1 and later: the page reads Airflow's own login cookie"
)


def set_cookies(response: Any) -> list[str]:
    return [value for name, value in response.headers.multi_items() if name == "set-cookie"]


@airflow_3_0_only
def test_the_sign_in_script_is_a_file_that_hands_the_token_to_the_session_route(client: Any) -> None:
    script = client.get("/sm-prefs/sign-in.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert (
        'localStorage.getItem("token")' in script.text and 'Authorization: "Bearer " + token' in script.text
    )
    assert "document.cookie" not in script.text


@airflow_3_0_only
@pytest.mark.parametrize(("base", "secure"), [("http://testserver", False), ("https://testserver", True)])
def test_the_page_cookie_is_http_only_strict_and_secure_over_https(
    client: Any, base: str, secure: bool
) -> None:
    from airflow_provider_sm_prefs.compat.page import PAGE_TOKEN_COOKIE

    jwt = token("viewer", "viewer")
    # A proxy's X-Forwarded-Proto counts only when the api-server trusts it (--proxy-headers): not here.
    answer = client.post(f"{base}/sm-prefs/session", headers={**jwt, "X-Forwarded-Proto": "https"})
    client.cookies.clear()
    assert answer.status_code == 204
    (cookie,) = set_cookies(answer)
    attributes = [part.strip() for part in cookie.split(";")]
    assert attributes[0] == f"{PAGE_TOKEN_COOKIE}={jwt['Authorization'][7:]}"
    assert {"HttpOnly", "Path=/sm-prefs", "SameSite=strict"} <= set(attributes)
    assert ("Secure" in attributes) is secure
    max_age = int(next(a for a in attributes if a.startswith("Max-Age="))[8:])
    assert 0 < max_age <= 24 * 3600  # no longer than the token lives ([api_auth] jwt_expiration_time)


@airflow_3_0_only
def test_only_a_valid_bearer_token_starts_a_page_session(client: Any) -> None:
    from airflow_provider_sm_prefs.compat.page import PAGE_TOKEN_COOKIE

    jwt = token("viewer", "viewer")["Authorization"][7:]
    # A cookie alone does not count: another site can make a browser send cookies, not headers.
    without = client.post("/sm-prefs/session", cookies={PAGE_TOKEN_COOKIE: jwt, "_token": jwt})
    forged = client.post("/sm-prefs/session", headers={"Authorization": "Bearer not-a-jwt"})
    client.cookies.clear()
    assert without.status_code == 401 and set_cookies(without) == []
    assert forged.status_code == 403 and set_cookies(forged) == []


@airflow_3_0_only
def test_airflows_logout_ends_the_page_cookie(client: Any) -> None:
    from airflow_provider_sm_prefs.compat.page import PAGE_TOKEN_COOKIE

    try:
        assert client.post("/sm-prefs/session", headers=token("viewer", "viewer")).status_code == 204
        assert client.cookies.get(PAGE_TOKEN_COOKIE)
        page = client.get("/sm-prefs/")
        assert page.status_code == 200 and "static/capacity.js" in page.text
        # What Airflow 3.0's UI does on logout: drop its token, then open the logout route.
        logout = client.get("/api/v2/auth/logout", follow_redirects=False)
        assert logout.status_code == 307
        (expiry,) = [c for c in set_cookies(logout) if c.startswith(f"{PAGE_TOKEN_COOKIE}=")]
        assert {"Max-Age=0", "Path=/sm-prefs", "HttpOnly"} <= {part.strip() for part in expiry.split(";")}
        assert client.cookies.get(PAGE_TOKEN_COOKIE) is None
        after = client.get("/sm-prefs/")
        assert "static/capacity.js" not in after.text and "sign-in.js" in after.text
    finally:
        client.cookies.clear()
