"""The capacity page's FastAPI app, mounted by Airflow's api-server under :data:`URL_PREFIX`.

Every route authenticates with Airflow's own dependency (``get_user``: the UI's session cookie or a
``Bearer`` token from ``/auth/token``; on Airflow 3.0 the same token, see ``compat.page``) and reads only the DAGs the auth manager lets the user read
(``get_authorized_dag_ids``, as the core API's DAG filters do). Without a valid login the JSON routes
answer 401/403 and the page redirects to Airflow's login.

Routes (under the prefix):

- ``GET /`` — the page (HTML; its script and the bundled Chart.js under ``/static``).
- ``GET /api/filters`` — the readable DAGs that have records, with their tasks, and this deployment's id.
- ``GET /api/capacity`` — everything the page draws (jobs, and HyperPod instance groups beside them); query ``since``, ``until`` (ISO 8601; default the
  last 30 days), ``dag_id``, ``task_id``, ``page`` (from 1), ``page_size`` (1–200). Bad values get a
  400 that names the parameter.
- ``GET /api/insights`` — what the fallbacks cost, which entries ever win, when in the day, how
  acceptance windows play out, and each HyperPod instance group's fallback share and node mix over time
  (:mod:`.insights`); the same query, scope and answers to bad input as
  ``/api/capacity``. Hours of the day are in UTC and in the deployment's time zone
  (``[core] default_timezone``).

Every answer carries :data:`SECURITY_HEADERS`: a Content-Security-Policy that lets the page run only its
own files (the charting library is bundled, nothing is inline) and talk only to its own origin, may be
framed only by Airflow's UI (same origin), and no content sniffing.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.configuration import conf
from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.responses import FileResponse, HTMLResponse, Response
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from airflow_provider_sm_prefs.compat.page import login_response, optional_user, required_user
from airflow_provider_sm_prefs.compat.page import router as login_router
from airflow_provider_sm_prefs.links import CAPACITY_PAGE_PREFIX
from airflow_provider_sm_prefs.plugin.insights import insights
from airflow_provider_sm_prefs.plugin.query import dags_with_records, load_entries, with_links
from airflow_provider_sm_prefs.plugin.stats import Filters, summarize

__all__ = ["CONTENT_SECURITY_POLICY", "SECURITY_HEADERS", "URL_PREFIX", "app", "parse_filters"]

#: Where Airflow mounts the app.
URL_PREFIX = CAPACITY_PAGE_PREFIX
STATIC_DIR = Path(__file__).resolve().parent / "static"
DEFAULT_RANGE = timedelta(days=30)
MAX_RANGE = timedelta(days=731)
MAX_PAGE_SIZE = 200
_TASK_ID = re.compile(r"^[\w.-]{1,250}$")

#: Airflow's login, as each supported Airflow reads it (airflow_provider_sm_prefs.compat.page).
GetUserDep = Annotated[Any, Depends(required_user)]


def _readable_dag_ids(user: GetUserDep) -> set[str]:
    """The DAGs the auth manager lets ``user`` read (the core API's ``ReadableDagsFilterDep`` does the same)."""
    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))


ReadableDagIds = Annotated[set[str], Depends(_readable_dag_ids)]

#: The page loads its script, style and charting library from its own origin and nothing inline; it
#: reads only its own API. ``frame-ancestors 'self'``: Airflow's UI (3.1+) shows it in a frame of its own
#: origin, no other site may.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'self'",
    )
)
#: Headers on every answer of the app (pages, JSON, static files and errors alike).
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "SAMEORIGIN",  # frame-ancestors, for browsers that read only this
    "Referrer-Policy": "same-origin",  # the page's URL names DAGs: not for the console's logs
}


class SecurityHeaders:
    """An ASGI middleware that adds :data:`SECURITY_HEADERS` to every answer that has not set them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


app = FastAPI(
    title="SageMaker capacity",
    description="Capacity decisions of SageMaker jobs with instance preferences, across DAG runs.",
    docs_url=None,
    redoc_url=None,
    openapi_url=None,
)
app.add_middleware(SecurityHeaders)
app.include_router(login_router)


def _bad(parameter: str, message: str) -> HTTPException:
    return HTTPException(status.HTTP_400_BAD_REQUEST, detail=f"{parameter}: {message}")


def _parse_time(parameter: str, raw: str | None) -> datetime | None:
    if raw is None or raw == "":
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00") if raw.endswith("Z") else raw)
    except ValueError:
        raise _bad(
            parameter, f"{raw!r} is not an ISO 8601 date or time; use e.g. 2026-11-01 or 2026-11-01T02:00:00Z"
        ) from None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _parse_int(parameter: str, raw: str | None, default: int, low: int, high: int | None) -> int:
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _bad(parameter, f"{raw!r} is not a whole number") from None
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"{low} or more"
        raise _bad(parameter, f"{value} is out of range; use a number {bounds}")
    return value


def parse_filters(params: dict[str, str], now: datetime | None = None) -> Filters:
    """The page's filters from query parameters; raises a 400 naming the parameter for bad input."""
    unknown = sorted(set(params) - {"since", "until", "dag_id", "task_id", "page", "page_size"})
    if unknown:
        raise _bad(unknown[0], "unknown parameter; use since, until, dag_id, task_id, page or page_size")
    until = _parse_time("until", params.get("until")) or (now or datetime.now(timezone.utc))
    since = _parse_time("since", params.get("since")) or until - DEFAULT_RANGE
    if since >= until:
        raise _bad("since", f"{since.isoformat()} is not before until ({until.isoformat()})")
    if until - since > MAX_RANGE:
        raise _bad("since", f"the range is longer than {MAX_RANGE.days} days; choose a shorter one")
    task_id = params.get("task_id") or None
    if task_id is not None and not _TASK_ID.match(task_id):
        raise _bad("task_id", f"{task_id!r} is not a task id (letters, digits, _, - and . only)")
    return Filters(
        since=since,
        until=until,
        dag_id=params.get("dag_id") or None,
        task_id=task_id,
        page=_parse_int("page", params.get("page"), 1, 1, None),
        page_size=_parse_int("page_size", params.get("page_size"), 25, 1, MAX_PAGE_SIZE),
    )


def _dag_scope(readable: set[str], dag_id: str | None) -> set[str]:
    """The DAGs a request reads: the readable ones, or the one it names if the user may read it.

    A DAG that does not exist and one the user may not read get the same answer, so the page tells no
    one which DAG ids exist beyond those they may read.
    """
    if dag_id is None:
        return readable
    if dag_id in readable:
        return {dag_id}
    raise HTTPException(
        status.HTTP_404_NOT_FOUND,
        detail=f"dag_id: DAG {dag_id!r} is not found or not readable; choose one of the DAGs /api/filters lists",
    )


def _ui_root() -> str:
    """The Airflow UI's base path ("" when it is served at the host's root)."""
    return urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")


@app.get("/api/capacity")
def capacity(request: Request, session: SessionDep, readable: ReadableDagIds) -> dict[str, Any]:
    """Everything the page draws, for the query's range and DAG/task."""
    filters = parse_filters(dict(request.query_params))
    dag_ids = _dag_scope(readable, filters.dag_id)
    entries, skipped = load_entries(session, dag_ids, filters)
    result = summarize(entries, filters, skipped=skipped)
    with_links(session, [*result["jobs"]["rows"], *result["groups"]["rows"]], _ui_root())
    return result


@app.get("/api/insights")
def capacity_insights(request: Request, session: SessionDep, readable: ReadableDagIds) -> dict[str, Any]:
    """The insights of the query's range and DAG/task (same query and scope as ``/api/capacity``)."""
    filters = parse_filters(dict(request.query_params))
    dag_ids = _dag_scope(readable, filters.dag_id)
    entries, skipped = load_entries(session, dag_ids, filters)
    return insights(entries, filters, tz=_default_timezone(), skipped=skipped)


def _default_timezone() -> str:
    """The deployment's time zone, ``[core] default_timezone`` (read per request, as Airflow's conf is)."""
    name = conf.get("core", "default_timezone", fallback="utc") or "utc"
    if name == "system":  # Airflow resolved it once, at start-up
        from airflow.settings import TIMEZONE

        return str(TIMEZONE.name)
    return name


@app.get("/api/filters")
def filters(session: SessionDep, readable: ReadableDagIds) -> dict[str, Any]:
    """The DAGs the user may read that have capacity records, with the tasks that left them."""
    dags = dags_with_records(session, readable)
    return {
        "dags": [{"dag_id": dag_id, "tasks": tasks} for dag_id, tasks in dags.items()],
        "deployment_id": _deployment_id(),
    }


def _deployment_id() -> str | None:
    """The id this deployment's jobs are tagged with (``sm-prefs:deployment``); None before the first task
    generated it."""
    from airflow.configuration import conf

    from airflow_provider_sm_prefs.operators.identity import DEPLOYMENT_VARIABLE

    given = (conf.get("sm_prefs", "deployment_id", fallback="") or "").strip()
    if given:
        return given
    from airflow.models.variable import Variable

    try:
        stored = Variable.get(DEPLOYMENT_VARIABLE, default_var=None)
    except Exception:  # the page still works without it
        return None
    return str(stored).strip() or None if stored else None


@app.get("/", response_class=HTMLResponse, response_model=None)
def page(request: Request, user: Annotated[Any, Depends(optional_user)]) -> Response:
    """The capacity page; a visitor who is not logged in is sent to Airflow's login first."""
    if user is None:
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return login_response(request, here, get_auth_manager().get_url_login(next_url=here))
    root = request.scope.get("root_path", "").rstrip("/")
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    html = html.replace("{{BASE}}", f"{root}/")
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


@app.get("/static/{name:path}", dependencies=[Depends(required_user)])
def static(name: str) -> FileResponse:
    """The page's script, style and the bundled charting library (for logged-in users only)."""
    path = (STATIC_DIR / name).resolve()
    if not path.is_file() or STATIC_DIR not in path.parents or path.name == "index.html":
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no static file {name!r}")
    return FileResponse(path, headers={"Cache-Control": "private, max-age=3600"})
