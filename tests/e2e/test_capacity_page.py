"""The capacity page in a running Airflow: a seeded history of 60 runs, a login in headless Chromium, the
page, a DAG filter, a job opened, the Insights section; the numbers shown equal those computed here from the
XCom records; every endpoint behind Airflow's authentication and DAG authorization (SimpleAuthManager,
multi-team)."""

from __future__ import annotations

import json
import math
import secrets
import statistics
import tempfile
from collections import Counter, defaultdict
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_provider_sm_prefs.plugin.stats import percentile
from harness.deployment import LocalAirflow
from harness.history import HISTORY_DAGS, SCENARIO

# Seeding the history (60 dag.test() runs) takes a few minutes on a 2-core machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

NIGHTLY = "sm_prefs_nightly_retrain"
HISTORY_NIGHTLY = HISTORY_DAGS[0]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "capacity-page"
ADMIN = ("admin", secrets.token_urlsafe(12))
VIEWER = ("mlviewer", secrets.token_urlsafe(12))
_PASSWORDS = Path(tempfile.mkdtemp(prefix="sm-prefs-e2e-auth-")) / "passwords.json"
_PASSWORDS.write_text(json.dumps(dict([ADMIN, VIEWER])))

E2E_SCENARIO = SCENARIO
E2E_DAGS = (NIGHTLY, *HISTORY_DAGS)
E2E_LOGIN = ADMIN
# The Airflow the deployment runs (this interpreter's): multi-team arrives with 3.3, plugin views with 3.1.
AIRFLOW = tuple(int(part) for part in version("apache-airflow").split(".")[:2])
MULTI_TEAM = AIRFLOW >= (3, 3)
E2E_TEAMS = ("mlteam", "research") if MULTI_TEAM else ()
# Multi-team: the viewer belongs to team "mlteam"; the example DAGs' bundle is given to team "research".
E2E_ENV = {
    **({"AIRFLOW__CORE__MULTI_TEAM": "True"} if MULTI_TEAM else {}),
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN[0]}:admin,{VIEWER[0]}:viewer"
    + (":mlteam" if MULTI_TEAM else ""),
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(_PASSWORDS),
}


@pytest.fixture(scope="module")
def history(airflow: LocalAirflow) -> list[dict[str, Any]]:
    """One run of the nightly example through the scheduler and triggerer, then the 60 seeded runs."""
    run_id = airflow.trigger_dag(NIGHTLY)
    assert airflow.wait_for_run(NIGHTLY, run_id, timeout=600) == "success"
    runs = airflow.seed_history(60)
    assert len(runs) == 60
    recorded = {
        (dag, e["run_id"])
        for dag in HISTORY_DAGS
        for e in airflow.api(
            "GET",
            f"/api/v2/dags/{dag}/dagRuns/~/taskInstances/~/xcomEntries",
            params={"xcom_key": "capacity_outcome", "limit": 500},
        )["xcom_entries"]
    }
    missing = [r for r in runs if (r["dag_id"], r["run_id"]) not in recorded]
    assert missing == [], f"seeded runs without a capacity record: {missing}"
    return runs


def token(airflow: LocalAirflow, login: tuple[str, str]) -> dict[str, str]:
    answer = httpx.post(f"{airflow.api_url}/auth/token", json={"username": login[0], "password": login[1]})
    assert answer.status_code in (200, 201), answer.text
    return {"Authorization": f"Bearer {answer.json()['access_token']}"}


def records(airflow: LocalAirflow, dag_id: str) -> list[dict[str, Any]]:
    """Every capacity record of ``dag_id``, read through the REST API (not through the page)."""
    entries = airflow.api(
        "GET",
        f"/api/v2/dags/{dag_id}/dagRuns/~/taskInstances/~/xcomEntries",
        params={"xcom_key": "capacity_outcome", "limit": 500},
    )["xcom_entries"]
    found = [airflow.xcom(dag_id, e["run_id"], e["task_id"], key="capacity_outcome") for e in entries]
    assert all(isinstance(value, dict) for value in found), found
    return found


def duration(seconds: float | None) -> str:
    """What the page shows for a number of seconds (capacity.js ``duration``)."""
    if seconds is None:
        return "–"
    s = math.floor(seconds + 0.5)  # Math.round
    if s < 60:
        return f"{s}s"
    m, h = s // 60, s // 3600
    return f"{m}m {s % 60:02d}s" if h == 0 else f"{h}h {m % 60:02d}m"


def expected_tiles(found: list[dict[str, Any]]) -> dict[str, str]:
    """The page's summary tiles, computed from the records alone (one job per record here: no retries)."""
    decided = [r for r in found if r["preference_rank"] is not None]
    waits = [float(r["pending_seconds"]) for r in decided]
    fell_back = sum(1 for r in decided if r["preference_rank"] != 1)
    kinds = Counter(r["failure_kind"] for r in found if r["failure_kind"])
    return {
        "jobs": str(len(found)),
        "fallback_rate": f"{100 * fell_back / len(decided):.1f}%",
        "median_time_to_capacity": duration(round(statistics.median(waits), 1)),
        "p95_time_to_capacity": duration(round(percentile(waits, 95) or 0.0, 1)),
        "capacity_timeout": str(kinds["capacity_timeout"]),
        "quota": str(kinds["quota"]),
        "cpu_no_capacity": str(kinds["cpu_no_capacity"]),
    }


def watch_csp(browser: Any) -> None:
    """Record every Content-Security-Policy violation of the pages the browser opens from now on."""
    browser.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument",
        {
            "source": "window.__cspViolations = [];"
            "document.addEventListener('securitypolicyviolation', function (e) {"
            "  window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI); });"
        },
    )


def wait_ready(browser: Any, timeout: float = 60) -> None:
    """The page drew its data, and its policy blocked nothing it needs (when :func:`watch_csp` watches)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, timeout).until(
        lambda b: b.execute_script("return document.body && document.body.dataset.ready === '1'")
    )
    assert browser.execute_script("return window.__cspViolations || []") == []


def tiles(browser: Any) -> dict[str, str]:
    from selenium.webdriver.common.by import By

    return {
        el.get_attribute("data-stat"): el.text for el in browser.find_elements(By.CSS_SELECTOR, "[data-stat]")
    }


@pytest.mark.core
def test_login_the_page_a_dag_filter_and_a_job(airflow: LocalAirflow, history: Any, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    watch_csp(browser)
    # Not logged in: the page sends the browser to Airflow's login form, which comes back to the page.
    browser.get(f"{airflow.api_url}/sm-prefs/")
    WebDriverWait(browser, 60).until(lambda b: "/auth/login" in b.current_url)
    WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.NAME, "username"))
    browser.find_element(By.NAME, "username").send_keys(ADMIN[0])
    browser.find_element(By.NAME, "password").send_keys(ADMIN[1])
    browser.save_screenshot(str(SCREENSHOTS / "1-login.png"))
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 60).until(lambda b: "/sm-prefs/" in b.current_url)
    wait_ready(browser)
    assert not browser.find_element(By.CSS_SELECTOR, "[data-testid=error]").is_displayed()
    browser.save_screenshot(str(SCREENSHOTS / "2-all-dags.png"))
    everything = [*records(airflow, NIGHTLY), *(r for dag in HISTORY_DAGS for r in records(airflow, dag))]
    assert tiles(browser)["jobs"] == str(len(everything)) == "61"

    # Filter by DAG: the numbers are those of its records.
    Select(browser.find_element(By.CSS_SELECTOR, "[data-testid=dag-filter]")).select_by_value(HISTORY_NIGHTLY)
    browser.find_element(By.CSS_SELECTOR, "[data-testid=apply]").click()
    WebDriverWait(browser, 30).until(lambda b: f"dag_id={HISTORY_NIGHTLY}" in b.current_url)
    wait_ready(browser)
    nightly = records(airflow, HISTORY_NIGHTLY)
    assert len(nightly) == 30
    shown = tiles(browser)
    expected = expected_tiles(nightly)
    assert {k: shown[k] for k in expected} == expected
    waits = {
        row.find_elements(By.TAG_NAME, "td")[0].text: row.find_elements(By.TAG_NAME, "td")[2].text
        for row in browser.find_elements(By.CSS_SELECTOR, "tr.wait-row")
    }
    chosen = Counter(r["selected_instance_type"] for r in nightly if r["selected_instance_type"])
    assert waits == {t: str(n) for t, n in chosen.items()}
    assert set(chosen) == {"ml.g6.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge"}
    pager = browser.find_element(By.CSS_SELECTOR, "[data-testid=page]").text
    assert pager == "page 1 of 2 (30 jobs)"
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(SCREENSHOTS / "3-dag-filter.png"))

    # Open a job: the newest row's job link goes to the offline SageMaker's page for that job.
    first = browser.find_element(By.CSS_SELECTOR, "tr.job-row")
    newest = max(nightly, key=lambda r: r["run_id"])
    assert first.get_attribute("data-job-name") == newest["job_name"]
    # Its identity tags: their count in the cell, every tag in its tooltip.
    cell = first.find_element(By.CSS_SELECTOR, ".identity-tags")
    tags = json.loads(cell.get_attribute("data-tags"))
    assert tags == newest["identity_tags"]
    assert (tags["sm-prefs:dag-id"], tags["sm-prefs:run-id"]) == (HISTORY_NIGHTLY, newest["run_id"])
    assert cell.text == f"{len(tags)} tags"
    tooltip = cell.get_attribute("title")
    assert f"sm-prefs:task-id = {newest['task_id']}" in tooltip
    assert f"sm-prefs:deployment = {tags['sm-prefs:deployment']}" in tooltip
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", first)
    browser.save_screenshot(str(SCREENSHOTS / "3b-job-table.png"))
    job_link = first.find_elements(By.TAG_NAME, "a")[1]
    href = job_link.get_attribute("href")
    assert href.endswith(f"/_emulator/view/jobs/{newest['job_name']}")
    ti_link = first.find_elements(By.TAG_NAME, "a")[0].get_attribute("href")
    assert f"/dags/{HISTORY_NIGHTLY}/runs/" in ti_link and ti_link.endswith("/tasks/train")
    browser.get(href)
    WebDriverWait(browser, 30).until(lambda b: newest["job_name"] in b.page_source)
    shown = newest["selected_instance_type"] or newest["job_status"]
    assert shown and shown in browser.page_source
    browser.save_screenshot(str(SCREENSHOTS / "4-job.png"))


def login(browser: Any, airflow: LocalAirflow) -> None:
    """Airflow's login form, as a user who opens the page first; back on the page when it returns."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    watch_csp(browser)
    browser.get(f"{airflow.api_url}/sm-prefs/")
    WebDriverWait(browser, 60).until(
        lambda b: (
            b.find_elements(By.NAME, "username")
            or b.execute_script("return document.body && document.body.dataset.ready === '1'")
        )
    )
    if browser.find_elements(By.NAME, "username"):
        browser.find_element(By.NAME, "username").send_keys(ADMIN[0])
        browser.find_element(By.NAME, "password").send_keys(ADMIN[1])
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        WebDriverWait(browser, 60).until(lambda b: "/sm-prefs/" in b.current_url)
    wait_ready(browser)


def expected_premium(found: list[dict[str, Any]]) -> tuple[float, float, int]:
    """(premium, spend, unpriced fallback jobs) of the records alone: for each job that ran on an entry other
    than the first as written, (hourly_cost - first_choice_hourly_cost) x billable hours."""
    premium = spend = 0.0
    unpriced = 0
    for r in found:
        if r["selected_instance_type"] is None:
            continue
        hourly, first, billable = r["hourly_cost"], r["first_choice_hourly_cost"], r["billable_seconds"]
        if hourly is not None and billable is not None:
            spend += hourly * billable / 3600
        rank = r["preference_rank"]
        if not (rank > 1 if rank is not None else r["fell_back"] is True):
            continue
        if hourly is None or first is None or billable is None:
            unpriced += 1
        else:
            premium += (hourly - first) * billable / 3600
    return premium, spend, unpriced


def expected_dead_entries(found: list[dict[str, Any]]) -> set[tuple[str, str, int, str]]:
    """(DAG, task, position as written, instance type) of the entries offered by at least 5 jobs, none of
    which selected them."""
    offered: Counter[tuple[str, str, int, str, Any]] = Counter()
    selected: Counter[tuple[str, str, int, str, Any]] = Counter()
    for r in found:
        written = [(e["instance_type"], e.get("instance_count")) if isinstance(e, dict) else (e, None)
                   for e in r["preferences"]]  # fmt: skip
        rank = r["preference_rank"]
        if rank is None and r["selected_instance_type"] in [t for t, _ in written]:
            rank = [t for t, _ in written].index(r["selected_instance_type"]) + 1
        for position, (instance_type, count) in enumerate(written, start=1):
            key = (r["dag_id"], r["task_id"], position, instance_type, count)
            offered[key] += 1
            selected[key] += rank == position
    return {key[:4] for key, n in offered.items() if n >= 5 and selected[key] == 0}


def expected_hours(found: list[dict[str, Any]]) -> dict[tuple[str, int], list[float]]:
    """The waits of the jobs that selected each instance type, by hour of their creation (UTC)."""
    cells: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in found:
        if r["selected_instance_type"] is None or not r["created_at"]:
            continue
        created = datetime.fromisoformat(r["created_at"].replace("Z", "+00:00"))
        created = created.replace(tzinfo=timezone.utc) if created.tzinfo is None else created
        cells[(r["selected_instance_type"], created.astimezone(timezone.utc).hour)].append(
            float(r["pending_seconds"])
        )
    return cells


def test_insights_the_premium_dead_entries_and_hours_equal_the_records(
    airflow: LocalAirflow, history: Any, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    login(browser, airflow)
    assert not browser.find_element(By.CSS_SELECTOR, "[data-testid=error]").is_displayed()
    found = [*records(airflow, NIGHTLY), *(r for dag in HISTORY_DAGS for r in records(airflow, dag))]
    premium, spend, unpriced = expected_premium(found)

    # The fallback premium, beside the spend: a sum in dollars the page shows with its cents.
    shown = browser.find_element(By.ID, "premium-usd")
    assert premium > 0, "the seeded history prices every entry: its fallbacks cost something"
    shown_usd = float(shown.get_attribute("data-premium-usd"))
    assert abs(shown_usd - premium) <= 0.01  # the same sum, added in another order
    assert shown.text == f"${shown_usd:.2f}"
    assert (
        abs(float(browser.find_element(By.ID, "spend-usd").get_attribute("data-spend-usd")) - spend) <= 0.01
    )
    assert browser.find_element(By.ID, "unpriced-jobs").get_attribute("data-unpriced-jobs") == str(unpriced)

    # Dead entries: flagged exactly where no job of enough selected the entry; the history has one.
    dead = expected_dead_entries(found)
    assert (HISTORY_NIGHTLY, "train", 4, "ml.p5.48xlarge") in dead
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.entry-row")
    flagged = {
        (r.get_attribute("data-dag-id"), r.get_attribute("data-task-id"), int(r.get_attribute("data-position")),
         r.get_attribute("data-entry"))
        for r in rows
        if r.get_attribute("data-never-selected") == "true"
    }  # fmt: skip
    assert flagged == dead
    dead_row = next(r for r in rows if r.get_attribute("data-never-selected") == "true")
    runs = dead_row.get_attribute("data-runs")
    assert f"never selected in {runs} runs" in dead_row.text

    # The busiest cell of the UTC heatmap: its selections and median wait.
    hours = expected_hours(found)
    (entry, hour), waits = max(hours.items(), key=lambda item: (len(item[1]), item[0]))
    cell = browser.find_element(
        By.CSS_SELECTOR, f'td.cell[data-timezone="UTC"][data-entry="{entry}"][data-hour="{hour}"]'
    )
    assert cell.get_attribute("data-selections") == str(len(waits)) == cell.text
    assert float(cell.get_attribute("data-median-wait")) == round(statistics.median(waits), 1)
    assert cell.get_attribute("data-records") == str(len(waits))
    total_cells = sum(
        int(c.get_attribute("data-selections"))
        for c in browser.find_elements(By.CSS_SELECTOR, 'td.cell[data-timezone="UTC"]')
    )
    assert total_cells == sum(map(len, hours.values()))

    # A screenshot of the section, tall enough to hold it whole (docs/images/capacity-insights.png).
    section = browser.find_element(By.ID, "insights")
    size = browser.get_window_size()
    browser.set_window_size(size["width"], max(size["height"], section.size["height"] + 200))
    browser.execute_script("arguments[0].scrollIntoView()", section)
    section.screenshot(str(SCREENSHOTS / "5-insights.png"))
    browser.set_window_size(size["width"], size["height"])


@pytest.mark.core
def test_nothing_without_a_login_and_only_readable_dags(airflow: LocalAirflow, history: Any) -> None:
    api = f"{airflow.api_url}/sm-prefs"
    for path in ("/api/capacity", "/api/filters", "/static/capacity.js"):
        assert httpx.get(api + path).status_code == 401
        assert httpx.get(api + path, headers={"Authorization": "Bearer forged"}).status_code == 403
    page = httpx.get(api + "/", follow_redirects=False)
    if AIRFLOW >= (3, 1):
        assert page.status_code == 307 and page.headers["location"].startswith("/auth/login")
    else:  # 3.0: the sign-in page, which holds no data (docs/compatibility.md, note 4)
        assert page.status_code == 200 and "data-testid" not in page.text
        assert 'data-login="/auth/login?next=%2Fsm-prefs%2F"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]

    admin, viewer = token(airflow, ADMIN), token(airflow, VIEWER)
    if not MULTI_TEAM:  # every user who may read a DAG sees its records
        seen = {d["dag_id"] for d in httpx.get(api + "/api/filters", headers=viewer).json()["dags"]}
        assert seen == {NIGHTLY, *HISTORY_DAGS}
        assert httpx.get(api + "/api/capacity", headers=viewer).json()["summary"]["jobs"] == 61
        return
    # The example DAGs' bundle belongs to team "research"; the viewer is in team "mlteam".
    airflow.run_python(
        "from sqlalchemy import select\n"
        "from airflow.models.dag import DagModel\n"
        "from airflow.models.team import dag_bundle_team_association_table as t\n"
        "from airflow.utils.session import create_session\n"
        "with create_session() as s:\n"
        f"    bundle = s.scalar(select(DagModel.bundle_name).where(DagModel.dag_id == {NIGHTLY!r}))\n"
        "    s.execute(t.insert().values(dag_bundle_name=bundle, team_name='research'))\n"
    )
    seen = {d["dag_id"] for d in httpx.get(api + "/api/filters", headers=viewer).json()["dags"]}
    assert seen == set(HISTORY_DAGS)
    assert NIGHTLY in {d["dag_id"] for d in httpx.get(api + "/api/filters", headers=admin).json()["dags"]}
    denied = httpx.get(api + "/api/capacity", params={"dag_id": NIGHTLY}, headers=viewer)
    unknown = httpx.get(api + "/api/capacity", params={"dag_id": "nope"}, headers=viewer)
    # A DAG the viewer may not read answers as one that does not exist.
    assert denied.status_code == unknown.status_code == 404
    assert denied.text.replace(NIGHTLY, "nope") == unknown.text
    all_viewer = httpx.get(api + "/api/capacity", params={"page_size": 200}, headers=viewer).json()
    assert all_viewer["summary"]["jobs"] == 60
    assert NIGHTLY not in {row["dag_id"] for row in all_viewer["jobs"]["rows"]}
    all_admin = httpx.get(api + "/api/capacity", headers=admin).json()
    assert all_admin["summary"]["jobs"] == 61

    assert httpx.get(api + "/api/capacity", params={"dag_id": "nope"}, headers=admin).json() == {
        "detail": "dag_id: DAG 'nope' is not found or not readable; choose one of the DAGs /api/filters lists"
    }
    for query, message in (
        ({"since": "last week"}, "since: 'last week' is not an ISO 8601"),
        ({"page": "-1"}, "page: -1 is out of range"),
    ):
        answer = httpx.get(api + "/api/capacity", params=query, headers=admin)
        assert answer.status_code == 400 and answer.json()["detail"].startswith(message)


def test_junk_under_the_key_is_skipped_and_counted(airflow: LocalAirflow, history: Any) -> None:
    run_id = history[0]["run_id"]
    airflow.run_python(
        "from airflow.models.xcom import XComModel\n"
        "from airflow.utils.session import create_session\n"
        "with create_session() as s:\n"
        f"    XComModel.set(key='capacity_outcome', value={{'version': 0}}, dag_id={history[0]['dag_id']!r},"
        f" task_id={next(iter(history[0]['states']))!r}, run_id={run_id!r}, map_index=-1, session=s)\n"
    )
    admin = token(airflow, ADMIN)
    summary = httpx.get(f"{airflow.api_url}/sm-prefs/api/capacity", headers=admin).json()["summary"]
    assert summary["skipped_records"] == 1 and summary["jobs"] == 60


@pytest.mark.core
def test_the_running_airflow_lists_the_plugin_and_its_views(airflow: LocalAirflow) -> None:
    plugins = {p["name"]: p for p in airflow.api("GET", "/api/v2/plugins")["plugins"]}
    if AIRFLOW < (3, 1):  # no plugin views on 3.0: the page by URL and by the extra link
        assert "/sm-prefs" in str(plugins["sm_prefs_capacity"]["fastapi_apps"])
        assert not plugins["sm_prefs_capacity"].get("external_views")
        return
    views = {v["destination"]: v for v in plugins["sm_prefs_capacity"]["external_views"]}
    assert views["nav"]["href"] == "/sm-prefs/" and views["nav"]["category"] == "browse"
    assert set(views) == {"nav", "dag", "task"}


_GROUP_RUNNER = """
import importlib.util, threading
from offline_sagemaker import RemoteSageMaker
spec = importlib.util.spec_from_file_location("sm_prefs_hyperpod_dags", {dag_file!r})
dags = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dags)
sm = RemoteSageMaker({endpoint!r})
types = ["ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4d.24xlarge"]
sm.load_scenario({{
    "name": "hyperpod-p5-scarce", "time_scale": 0, "start_epoch": 1_800_000_000,
    "capacity": {{t: [{{"from": 0, "free": n}}] for t, n in zip(types, (2, 0, 8))}},
    "prices": dict(zip(types, (55.04, 60.0, 37.69))),
    "clusters": {{"node_provisioning_seconds": 600, "node_shutdown_seconds": 60}},
}})
done = threading.Event()
def step():
    seen = 0
    while not done.wait(0.02):
        described = sm.stats()["operations"].get("DescribeCluster", 0)
        if described > seen:
            seen = described
            sm.advance(300)
thread = threading.Thread(target=step, daemon=True)
thread.start()
try:
    print("RUN_ID=" + dags.hp_page.test().run_id, flush=True)
finally:
    done.set()
    thread.join()
"""


def test_a_hyperpod_group_record_shows_with_its_node_mix(airflow: LocalAirflow, browser: Any) -> None:
    """A real run of the HyperPod group operator (p5 scarce: 2 × p5 + 6 × p4d) in this deployment; the page
    shows its row with the mix, and the insights its fallback, both read back from the browser."""
    from selenium.webdriver.common.by import By

    dag_file = Path(__file__).resolve().parents[1] / "dags" / "sm_prefs_hyperpod_dags.py"
    # The run is dag.test()'s alone: a scheduler that took up its task instance would get its task process
    # killed ("the task shouldn't be running anymore"). The DAG is paused when this deployment creates it.
    airflow.wait_for_dags(("hp_page",), timeout=180)
    assert airflow.api("GET", "/api/v2/dags/hp_page")["is_paused"], "hp_page must be paused in the deployment"
    output = airflow.run_python(
        _GROUP_RUNNER.format(dag_file=str(dag_file), endpoint=airflow.emulator_url), timeout=600
    )
    run_id = next(line[7:] for line in output.splitlines() if line.startswith("RUN_ID="))
    login(browser, airflow)
    browser.get(f"{airflow.api_url}/sm-prefs/?dag_id=hp_page&range=365")
    wait_ready(browser)
    assert not browser.find_element(By.CSS_SELECTOR, "[data-testid=error]").is_displayed()
    row = browser.find_element(By.CSS_SELECTOR, f'tr.group-row[data-run-id="{run_id}"]')
    assert (row.get_attribute("data-cluster"), row.get_attribute("data-group")) == ("nightly", "gpu-workers")
    assert row.get_attribute("data-mix") == "2 × ml.p5.48xlarge + 6 × ml.p4d.24xlarge"
    assert "2 × ml.p5.48xlarge + 6 × ml.p4d.24xlarge" in row.text and "nightly / gpu-workers" in row.text
    assert row.get_attribute("data-nodes") == "ml.p5.48xlarge:1:2,ml.p4d.24xlarge:3:6"
    assert row.get_attribute("data-fell-back") == "true" and "8 of 8 (4)" in row.text
    # The jobs' tiles count no group try.
    assert tiles(browser)["jobs"] == "0"
    insight = browser.find_element(By.CSS_SELECTOR, 'tr.cluster-group-row[data-group="gpu-workers"]')
    assert (insight.get_attribute("data-reached"), insight.get_attribute("data-fell-back")) == ("1", "1")
    assert browser.find_elements(By.CSS_SELECTOR, "[data-testid=group-mixes] canvas")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.find_element(By.CSS_SELECTOR, "[data-testid=groups]").screenshot(
        str(SCREENSHOTS / "6-groups.png")
    )


@pytest.mark.skipif(
    AIRFLOW >= (3, 1), reason="Airflow 3.1 and later: the page reads Airflow's own login cookie"
)
def test_on_airflow_3_0_the_page_cookie_follows_the_uis_login(airflow: LocalAirflow, browser: Any) -> None:
    """3.0's UI keeps its token in local storage: the page's sign-in hands it to the server, which sets an
    HttpOnly, SameSite=Strict cookie for the page; the UI's logout ends that cookie with its own login."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from airflow_provider_sm_prefs.compat.page import PAGE_TOKEN_COOKIE

    login(browser, airflow)
    # The UI moves its token from the login cookie into local storage, as after any visit to it.
    browser.get(f"{airflow.api_url}/")
    WebDriverWait(browser, 60).until(lambda b: b.execute_script("return localStorage.getItem('token')"))
    assert browser.get_cookie("_token") is None
    browser.get(f"{airflow.api_url}/sm-prefs/?range=365")
    wait_ready(browser)
    cookie = browser.get_cookie(PAGE_TOKEN_COOKIE)
    assert cookie is not None and cookie["value"] == browser.execute_script(
        "return localStorage.getItem('token')"
    )
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"], cookie["secure"]) == (
        True,
        "Strict",
        "/sm-prefs",
        False,  # plain http here
    )
    assert browser.execute_script("return document.cookie").find(PAGE_TOKEN_COOKIE) == -1
    # What the UI's logout does: drop the token, open Airflow's logout route.
    browser.execute_script("localStorage.removeItem('token'); location.replace('/api/v2/auth/logout')")
    WebDriverWait(browser, 60).until(lambda b: "/auth/login" in b.current_url)
    browser.get(f"{airflow.api_url}/sm-prefs/")
    WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.NAME, "username"))
    assert "/auth/login" in browser.current_url
    browser.get(f"{airflow.api_url}/sm-prefs/sign-in.js")  # a page under the cookie's path
    assert browser.get_cookie(PAGE_TOKEN_COOKIE) is None
