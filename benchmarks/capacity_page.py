"""Benchmark: the capacity page and its JSON API with N capacity records, in a real deployment with a login.

    .venv/bin/python -m benchmarks.capacity_page                 # 10,000 records (make bench-page)
    .venv/bin/python -m benchmarks.capacity_page --records 2000 --api-repeats 5 --page-repeats 3

1. Starts a local Airflow (:mod:`harness.deployment`: api-server, scheduler, triggerer, dag-processor,
   private PostgreSQL) whose SimpleAuthManager requires a login (one Admin user, a fresh password).
2. Runs ``e2e_fleet`` once for real against the offline SageMaker (two mapped training jobs), then clones
   that run's DagRun and TaskInstance rows into N task instances over the last 60 days, each with a
   ``capacity_outcome`` record in XCom (:mod:`benchmarks.capacity_records`,
   :mod:`benchmarks.capacity_seed_db`).
3. Times ``GET /sm-prefs/api/capacity`` over HTTP with a Bearer token from ``POST /auth/token`` (every
   record in range: since = 90 days ago): the first call, then warm calls; the same filtered to the
   fleet DAG at page 5; ``/api/filters``; the response sizes.
4. Times ``GET /sm-prefs/api/insights`` the same way, right after the api-server restarted (its first
   call reads every record anew, as the first ``/api/capacity`` did): the first call, warm calls, and
   warm calls filtered to the fleet DAG. The seeded records are priced and varied (fallbacks, entries
   left out, acceptance windows, hours of the day), so every section of the insights has work to do.
5. Opens ``/sm-prefs/?range=90`` in headless Chromium (Debian's chromium + chromedriver, Selenium),
   logged in through Airflow's login form, and times navigation start → ``body[data-ready=1]`` (the
   page fetched ``api/capacity`` and drew everything): a first load with an empty browser cache, then
   reloads, then a first visit right after the api-server restarted (nothing cached anywhere); page
   weight from the Resource Timing API. Screenshot in ``build/capacity-page/bench.png``.

Prints a table (measurement | value | goal | met?) and writes ``build/capacity-page/bench.json``.
Exits non-zero only when something fails, never for a missed goal.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from benchmarks.capacity_records import FLEET_DAG, SINGLE_JOB, plan_runs
from benchmarks.processes import git_revision, machine_info
from benchmarks.report import table
from harness.browser import headless_chromium
from harness.errors import DeploymentError

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "capacity-page"
USER = "admin"
PREFIX = "/sm-prefs"
API_GOAL_S, PAGE_GOAL_S = 1.0, 2.0
RANGE_DAYS = 90
#: Set by the page's own script when it has fetched api/capacity and drawn; recorded at that instant.
READY_PROBE = """
(() => {
  const mark = () => {
    if (window.__benchReadyAt === undefined && document.body && document.body.dataset.ready === "1") {
      window.__benchReadyAt = performance.now();
    }
  };
  new MutationObserver(mark).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-ready"]});
})();
"""
PAGE_FACTS = """
const nav = performance.getEntriesByType("navigation")[0];
const entry = (e) => ({name: e.name, transfer: e.transferSize, encoded: e.encodedBodySize,
                       decoded: e.decodedBodySize, ms: Math.round(e.duration)});
const error = document.querySelector("[data-testid=error]");
return {
  ready_ms: window.__benchReadyAt,
  load_ms: Number(document.body.dataset.loadMs),
  dom_content_loaded_ms: nav.domContentLoadedEventEnd,
  document: entry(nav),
  resources: performance.getEntriesByType("resource").map(entry),
  jobs_shown: document.querySelector("[data-stat=jobs]").textContent,
  rows_shown: document.querySelectorAll("tr.job-row").length,
  error: error && !error.hidden ? error.textContent : null,
};
"""


#: No capacity until the benchmark opens it (by jumping the emulated clock past SCARCE_UNTIL), once both
#: tasks have deferred and settled; each job then runs about 20 real seconds. A trigger that fires within
#: a scheduler loop or two of its deferral can fail the task on Airflow 3.3.2 (docs/limits.md), which an
#: immediate capacity or completion provokes on a busy machine.
SCARCE_UNTIL = 1_000_000
TEMPLATE_SCENARIO = {
    "name": "capacity-page-bench",
    "time_scale": 10,
    "job_runtime_seconds": 120,
    "phase_seconds": {"starting": 30, "downloading": 30, "uploading": 30, "stopping": 30},
    "pending_timeout_outcome": "stopped",
    "processing_when_no_capacity": "wait",
    "capacity": {
        name: [{"from": 0, "to": SCARCE_UNTIL, "free": 0}, {"from": SCARCE_UNTIL, "free": 8}]
        for name in ("ml.g6.48xlarge", "ml.g5.48xlarge")
    },
}


class BenchError(RuntimeError):
    """Something the benchmark needs did not work (not a missed goal)."""


# -- the deployment's data ---------------------------------------------------------------------------------
def training_config() -> dict[str, Any]:
    return {
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
            "TrainingInputMode": "File",
        },
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "OutputDataConfig": {"S3OutputPath": "s3://models/out"},
        "ResourceConfig": {"VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
    }


def run_template_dag(af: Any) -> dict[str, Any]:
    """One real run of the fleet DAG (two mapped jobs); the seed copies its rows.

    A failed try leaves a record too, so a failed run still serves as the template; its log is kept in
    the result.
    """
    started = time.monotonic()
    af.sm.load_scenario(TEMPLATE_SCENARIO)
    af.wait_for_dags([FLEET_DAG, *(w.dag_id for w in SINGLE_JOB)], timeout=240)
    conf = {
        "config": training_config(),
        "prefs": [
            {"instance_type": "ml.g6.48xlarge", "instance_count": 1},
            {"instance_type": "ml.g5.48xlarge", "instance_count": 1},
        ],
        "count": 2,
        "name_prefix": f"bench-{secrets.token_hex(3)}",
    }
    run_id = af.trigger_dag(FLEET_DAG, conf, logical_date=None)
    af.wait_for_tasks(
        FLEET_DAG,
        run_id,
        lambda tis: sum(ti["task_id"] == "job" and ti["state"] == "deferred" for ti in tis) == 2,
        timeout=180,
        describe="both jobs waiting for capacity",
    )
    time.sleep(10)  # the deferred task processes exit and the scheduler hears of it
    af.sm.advance(SCARCE_UNTIL - af.sm.clock()["elapsed"] + 1)
    state = af.wait_for_run(FLEET_DAG, run_id, timeout=300)
    result = {"dag_id": FLEET_DAG, "run_id": run_id, "state": state}
    if state != "success":
        result["tasks"] = af.ti_states(FLEET_DAG, run_id)
        result["job_0_log_tail"] = af.all_task_logs(FLEET_DAG, run_id, "job", map_index=0)[-3000:]
        print(f"note: the template run ended {state} ({result['tasks']}); see bench.json", flush=True)
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def seed(af: Any, records: int, now: datetime) -> dict[str, Any]:
    """Plan N records and write them into the deployment's database."""
    started = time.monotonic()
    plan = [asdict(run) for run in plan_runs(records, now=now)]
    path = OUT / "seed-plan.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    planned = time.monotonic() - started
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
        "from benchmarks.capacity_seed_db import main; "
        f"main({str(path)!r}, {FLEET_DAG!r})"
    )
    result: dict[str, Any] = json.loads(af.run_python(code, timeout=900).strip().splitlines()[-1])
    result["plan_seconds"] = round(planned, 2)
    result["total_seconds"] = round(time.monotonic() - started, 2)
    path.unlink()
    return result


# -- the JSON API ------------------------------------------------------------------------------------------
def timed_get(http: Any, path: str, params: Mapping[str, Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    response = http.get(path, params=params)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise BenchError(f"GET {path} -> {response.status_code}: {response.text[:500]}")
    return elapsed, response


def series(http: Any, path: str, params: Mapping[str, Any], repeats: int) -> dict[str, Any]:
    times = [timed_get(http, path, params)[0] for _ in range(repeats)]
    return {
        "median_s": statistics.median(times),
        "p95_s": _p95(times),
        "max_s": max(times),
        "calls": len(times),
        "all_s": [round(t, 4) for t in times],
    }


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * 0.95
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def measure_api(af: Any, since: str, repeats: int) -> dict[str, Any]:
    """Bearer-token calls in the page's order: the first ``/api/filters`` (the api-server imports the app),
    the first ``/api/capacity``, then warm calls."""
    http = af.rest.http  # signs in with POST /auth/token, sends Authorization: Bearer
    af.token()
    capacity = f"{PREFIX}/api/capacity"
    everything = {"since": since}
    first_filters_s = timed_get(http, f"{PREFIX}/api/filters", {})[0]
    cold_s, response = timed_get(http, capacity, everything)
    body = response.json()
    filtered = {"since": since, "dag_id": FLEET_DAG, "page": 5}
    filtered_body = timed_get(http, capacity, filtered)[1].json()
    warm = series(http, capacity, everything, repeats)
    again = timed_get(http, capacity, everything)[1].json()
    if {k: v for k, v in again.items() if k != "filters"} != {
        k: v for k, v in body.items() if k != "filters"
    }:
        raise BenchError("a warm /api/capacity answered differently from the first call")
    return {
        "first_filters_s": first_filters_s,
        "cold_s": cold_s,
        "warm": warm,
        "filtered": {"params": filtered, **series(http, capacity, filtered, repeats)},
        "filters_endpoint": series(http, f"{PREFIX}/api/filters", {}, max(3, repeats // 2)),
        "response_kb": len(response.content) / 1024,
        "response_transferred_kb": response.num_bytes_downloaded / 1024,
        "content_encoding": response.headers.get("content-encoding"),
        "summary": body["summary"],
        "jobs_total": body["jobs"]["total"],
        "filtered_summary": filtered_body["summary"],
        "filtered_page": {k: filtered_body["jobs"][k] for k in ("page", "pages", "total")},
    }


def measure_insights(af: Any, since: str, repeats: int) -> dict[str, Any]:
    """``/api/insights`` in a freshly started api-server: ``/api/filters`` first (the api-server imports
    the app), then the first ``/api/insights`` (every record read anew), warm calls, and warm calls
    filtered to the fleet DAG."""
    af.restart("api-server")
    af.wait_healthy(180)
    http = af.rest.http
    insights = f"{PREFIX}/api/insights"
    everything = {"since": since}
    first_filters_s = timed_get(http, f"{PREFIX}/api/filters", {})[0]
    cold_s, response = timed_get(http, insights, everything)
    body = response.json()
    filtered = {"since": since, "dag_id": FLEET_DAG}
    filtered_body = timed_get(http, insights, filtered)[1].json()
    warm = series(http, insights, everything, repeats)
    again = timed_get(http, insights, everything)[1].json()
    differ = sorted(k for k in body.keys() | again.keys() if k != "filters" and body.get(k) != again.get(k))
    if differ:  # "filters" holds the request's own "until" (now)
        raise BenchError(f"a warm /api/insights answered differently from the first call: {differ}")
    premium = body["fallback_premium_usd"]["total"]
    return {
        "first_filters_s": first_filters_s,
        "cold_s": cold_s,
        "warm": warm,
        "filtered": {"params": filtered, **series(http, insights, filtered, repeats)},
        "response_kb": len(response.content) / 1024,
        "response_transferred_kb": response.num_bytes_downloaded / 1024,
        "summary": body["summary"],
        "work": {
            "jobs_priced": premium["spend"]["records"],
            "fallback_jobs": premium["premium"]["fallback_jobs"],
            "fallback_jobs_priced": premium["premium"]["records"],
            "premium_usd": premium["premium"]["usd"],
            "entries": len(body["entries"]),
            "excluded": sum(row["excluded_total"] for row in body["entries"]),
            "instance_types_by_hour": len(body["hour_of_day"]["utc"]["rows"]),
            "staged_jobs": sum(row["jobs"] for row in body["acceptance_windows"]),
        },
        "filtered_summary": filtered_body["summary"],
    }


def profile_api(af: Any) -> dict[str, Any]:
    """The API's steps timed one by one inside the deployment (:mod:`benchmarks.capacity_profile`)."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
        f"from benchmarks.capacity_profile import main; main({RANGE_DAYS})"
    )
    result: dict[str, Any] = json.loads(af.run_python(code, timeout=600).strip().splitlines()[-1])
    (OUT / "api-profile.txt").write_text(
        "\n".join(result["explain"]) + "\n\n" + result["profile"], encoding="utf-8"
    )
    return result


def profile_rows(profile: Mapping[str, Any]) -> list[list[str]]:
    steps = (
        ("SQL: PostgreSQL + transfer (value as text)", profile["sql_text_s"]),
        ("driver: decode each JSON value", profile["fetch_s"] - profile["sql_text_s"]),
        ("read records (deserialize_value, from_dict)", profile["records_s"]),
        ("summarize (aggregation, page of jobs)", profile["summarize_s"]),
        ("job links of the page", profile["links_s"]),
        ("one request in-process, nothing cached", profile["total_s"]),
        ("one request in-process, records cached", profile["cached_s"]),
        ("insights (premium, entries, hours, windows)", profile["insights_s"]),
        ("one insights request in-process, records cached", profile["insights_cached_s"]),
        ("the rows without their values (listing query)", profile["keys_only_s"]),
        (f"for comparison: {profile['projected_fields']} fields extracted in SQL", profile["projection_s"]),
    )
    return [[name, f"{seconds * 1000:.0f} ms"] for name, seconds in steps]


# -- the page in a browser ---------------------------------------------------------------------------------
def open_browser() -> Any:
    """Headless Chromium from Debian's packages (``make browser`` installs it), as the e2e tests use."""
    try:
        driver = headless_chromium()
    except DeploymentError as err:
        raise BenchError(str(err)) from err
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": READY_PROBE})
    return driver


def _wait(driver: Any, timeout: float, check: Callable[[Any], Any], what: str) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout).until(check)
    except TimeoutException:
        raise BenchError(
            f"timed out after {timeout:.0f}s waiting for {what} at {driver.current_url}"
        ) from None


def log_in(driver: Any, base: str, password: str) -> str:
    """Sign in through SimpleAuthManager's login form, as a person does; returns how it went.

    The form then goes to ``next``: a small JSON answer rather than the Airflow UI, whose requests
    would keep the api-server busy while the first load of the page is timed.
    """
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/auth/login?next=%2Fapi%2Fv2%2Fversion")
    username = _wait(
        driver, 60, lambda d: d.find_elements(By.CSS_SELECTOR, "input[name=username]"), "the form"
    )
    username[0].send_keys(USER)
    driver.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(driver, 60, lambda d: d.get_cookie("_token"), "the _token cookie after signing in")
    _wait(driver, 30, lambda d: "/api/v2/version" in d.current_url, "the redirect after signing in")
    return "login form"


def load_page(driver: Any, url: str) -> dict[str, Any]:
    """Navigate to ``url`` and wait for the page to be ready; what the browser measured."""
    driver.get(url)
    _wait(driver, 120, lambda d: d.execute_script("return window.__benchReadyAt"), "body[data-ready=1]")
    facts: dict[str, Any] = driver.execute_script(PAGE_FACTS)
    if facts["error"]:
        raise BenchError(f"the page shows an error: {facts['error']}")
    if not facts["rows_shown"]:
        raise BenchError(f"the page drew no job rows (jobs tile: {facts['jobs_shown']!r})")
    return facts


def _weight(facts: Mapping[str, Any]) -> dict[str, Any]:
    static = [r for r in facts["resources"] if f"{PREFIX}/static/" in r["name"]]
    api = [r for r in facts["resources"] if f"{PREFIX}/api/" in r["name"]]
    document = facts["document"]
    return {
        "page_transferred_kb": (document["transfer"] + sum(r["transfer"] for r in static)) / 1024,
        "page_decoded_kb": (document["decoded"] + sum(r["decoded"] for r in static)) / 1024,
        "api_transferred_kb": sum(r["transfer"] for r in api) / 1024,
        "api_decoded_kb": sum(r["decoded"] for r in api) / 1024,
        "files": [
            {k: r[k] for k in ("name", "transfer", "decoded", "ms")} for r in [document, *static, *api]
        ],
    }


def measure_page(af: Any, password: str, repeats: int) -> dict[str, Any]:
    driver = open_browser()
    try:
        base = af.api_url
        how = log_in(driver, base, password)
        url = f"{base}{PREFIX}/?range={RANGE_DAYS}"
        driver.execute_cdp_cmd("Network.clearBrowserCache", {})
        cold = load_page(driver, url)
        warm = [load_page(driver, url) for _ in range(repeats)]
        OUT.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(OUT / "bench.png"))
        # A first visit after the api-server started: the app is imported and every record read anew.
        af.restart("api-server")
        af.wait_healthy(180)
        driver.execute_cdp_cmd("Network.clearBrowserCache", {})
        restarted = load_page(driver, url)
    finally:
        driver.quit()
    ready = [w["ready_ms"] / 1000 for w in warm]
    return {
        "login": how,
        "url": url,
        "cold_s": cold["ready_ms"] / 1000,
        "cold_load_ms": cold["load_ms"],
        "server_restarted_s": restarted["ready_ms"] / 1000,
        "server_restarted_load_ms": restarted["load_ms"],
        "cold_dom_content_loaded_ms": cold["dom_content_loaded_ms"],
        "warm_median_s": statistics.median(ready),
        "warm_max_s": max(ready),
        "warm_all_s": [round(r, 3) for r in ready],
        "warm_load_ms_median": statistics.median(w["load_ms"] for w in warm),
        "cold_weight": _weight(cold),
        "warm_weight": _weight(warm[-1]),
        "jobs_shown": cold["jobs_shown"],
        "rows_shown": cold["rows_shown"],
        "screenshot": str(OUT / "bench.png"),
    }


# -- report ------------------------------------------------------------------------------------------------
def _row(name: str, seconds: float | None, goal: float | None) -> list[str]:
    value = "-" if seconds is None else f"{seconds * 1000:.0f} ms"
    if goal is None:
        return [name, value, "", ""]
    met = "-" if seconds is None else ("yes" if seconds < goal else "NO")
    return [name, value, f"< {goal:g} s", met]


def rows(result: Mapping[str, Any]) -> list[list[str]]:
    api, insights, page = result["api"], result["insights"], result["page"]
    n = result["records_in_range"]
    out = [
        _row("API /api/filters, first call (imports the app)", api["first_filters_s"], None),
        _row(f"API /api/capacity, first call ({n:,} records)", api["cold_s"], API_GOAL_S),
        _row("API /api/capacity, warm median", api["warm"]["median_s"], API_GOAL_S),
        _row("API /api/capacity, warm p95", api["warm"]["p95_s"], API_GOAL_S),
        _row(f"API dag_id={FLEET_DAG}&page=5, warm median", api["filtered"]["median_s"], API_GOAL_S),
        _row(f"API dag_id={FLEET_DAG}&page=5, warm p95", api["filtered"]["p95_s"], API_GOAL_S),
        _row("API /api/filters, warm median", api["filters_endpoint"]["median_s"], None),
        [
            "API response size (raw / transferred)",
            f"{api['response_kb']:.1f} KB / {api['response_transferred_kb']:.1f} KB",
            "",
            "",
        ],
    ]
    if insights is not None:
        out += [
            _row(
                f"API /api/insights, first call after a restart ({n:,} records)",
                insights["cold_s"],
                API_GOAL_S,
            ),
            _row("API /api/insights, warm median", insights["warm"]["median_s"], API_GOAL_S),
            _row("API /api/insights, warm p95", insights["warm"]["p95_s"], API_GOAL_S),
            _row(
                f"API insights dag_id={FLEET_DAG}, warm median", insights["filtered"]["median_s"], API_GOAL_S
            ),
            _row(f"API insights dag_id={FLEET_DAG}, warm p95", insights["filtered"]["p95_s"], API_GOAL_S),
            [
                "API insights size (raw / transferred)",
                f"{insights['response_kb']:.1f} KB / {insights['response_transferred_kb']:.1f} KB",
                "",
                "",
            ],
        ]
    if page is not None:
        weight = page["cold_weight"]
        out += [
            _row("page interactive, empty browser cache", page["cold_s"], PAGE_GOAL_S),
            _row("page interactive, api-server just restarted", page["server_restarted_s"], PAGE_GOAL_S),
            _row("page interactive, reload median", page["warm_median_s"], PAGE_GOAL_S),
            _row("page interactive, reload max", page["warm_max_s"], PAGE_GOAL_S),
            [
                "page weight, cold (HTML + static / API JSON)",
                f"{weight['page_transferred_kb']:.1f} KB / {weight['api_transferred_kb']:.1f} KB",
                "",
                "",
            ],
        ]
    seeded = result["seed"]
    out.append(
        [
            "seeding (runs / task instances / XComs)",
            f"{seeded['runs']:,} / {seeded['task_instances']:,} / {seeded['xcoms']:,} in {seeded['total_seconds']:.0f} s",
            "",
            "",
        ]
    )
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from harness.deployment import local_airflow

    OUT.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(12)
    started = time.monotonic()
    result: dict[str, Any] = {
        "benchmark": "capacity_page",
        "started_at": datetime.now(timezone.utc).isoformat(),
        "git_revision": git_revision(),
        "machine": machine_info(),
        "records": args.records,
        "goals": {"api_s": API_GOAL_S, "insights_s": API_GOAL_S, "page_interactive_s": PAGE_GOAL_S},
    }
    # The last run's AIRFLOW_HOME (component and task logs) stays in build/ for a post-mortem.
    home = OUT / "deployment"
    shutil.rmtree(home, ignore_errors=True)
    with local_airflow(home, database=args.database, login=(USER, password)) as af:
        result["database"] = af.database_backend
        result["deployment_seconds"] = round(time.monotonic() - started, 1)
        print(
            f"deployment up in {result['deployment_seconds']:.0f}s ({af.database_backend}); running {FLEET_DAG} once",
            flush=True,
        )
        result["template_run"] = run_template_dag(af)
        now = datetime.now(timezone.utc)
        print(f"seeding {args.records:,} records ...", flush=True)
        result["seed"] = seed(af, args.records, now)
        since = (datetime.now(timezone.utc) - timedelta(days=RANGE_DAYS)).isoformat()
        print("timing the API ...", flush=True)
        result["api"] = measure_api(af, since, args.api_repeats)
        result["records_in_range"] = result["api"]["summary"]["records"]
        result["insights"] = None
        if not args.no_insights:
            print("timing the insights after an api-server restart ...", flush=True)
            result["insights"] = measure_insights(af, since, args.api_repeats)
        result["api_profile"] = None if args.no_profile else profile_api(af)
        result["page"] = None
        if not args.no_browser:
            print("timing the page in headless Chromium ...", flush=True)
            result["page"] = measure_page(af, password, args.page_repeats)
    result["seconds"] = round(time.monotonic() - started, 1)
    result["loadavg_end"] = list(os.getloadavg())
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.capacity_page", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--records", type=int, default=10_000, help="capacity records to seed (default 10,000)"
    )
    parser.add_argument("--api-repeats", type=int, default=10, help="warm API calls per measurement")
    parser.add_argument("--page-repeats", type=int, default=5, help="page reloads after the first load")
    parser.add_argument("--database", choices=("postgres", "auto", "sqlite"), default="postgres")
    parser.add_argument("--no-browser", action="store_true", help="skip the page (API only)")
    parser.add_argument("--no-profile", action="store_true", help="skip the API's step-by-step timing")
    parser.add_argument("--no-insights", action="store_true", help="skip /api/insights")
    parser.add_argument("--output", type=Path, default=OUT / "bench.json")
    args = parser.parse_args(argv)
    try:
        result = run(args)
    except Exception as err:
        print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    print()
    print(table(("measurement", "value", "goal", "met?"), rows(result)))
    print(
        f"goals: /api/capacity and /api/insights answer {result['records_in_range']:,} records in under "
        f"{API_GOAL_S:g} s warm; the page is interactive in under {PAGE_GOAL_S:g} s"
    )
    if result["api_profile"] is not None:
        print(
            f"\nwhere an API request's time goes ({result['api_profile']['records']:,} records, in-process):"
        )
        print(table(("step", "time"), profile_rows(result["api_profile"])))
        print(f"plan and cProfile: {OUT / 'api-profile.txt'}")
    load = result["machine"]["loadavg_start"][0], result["loadavg_end"][0]
    print(
        f"\n{result['machine']['nproc']} cores (load {load[0]:.1f} at start, {load[1]:.1f} at end), {result['database']}"
    )
    print(f"results in {args.output}")
    if result["page"] is not None:
        print(f"screenshot: {result['page']['screenshot']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
