"""Human-readable pages of the offline SageMaker: the job list and one job (HTML, no scripts).

They stand in for the SageMaker console when a connection points at the offline SageMaker: the
operators' "SageMaker Job" link opens ``/_emulator/view/jobs/<name>`` there. Pure rendering from the
admin views of :meth:`Job.view <offline_sagemaker.models.Job.view>`; no HTTP here.
"""

from __future__ import annotations

import html
import urllib.parse
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

__all__ = ["VIEW_PREFIX", "job_page", "job_path", "jobs_page", "not_found_page"]

#: Where the pages are served, under the admin prefix.
VIEW_PREFIX = "/_emulator/view"

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#1f2933;max-width:70rem}
h1{font-size:1.4rem;margin-bottom:.2rem}h2{font-size:1.1rem;margin-top:1.8rem}
.sub{color:#52606d;margin-top:0}
table{border-collapse:collapse;margin-top:.5rem}th,td{border:1px solid #d9e2ec;padding:.35rem .7rem;text-align:left}
th{background:#f0f4f8}tr.selected td{background:#e6f4ea;font-weight:600}
.status{display:inline-block;padding:.1rem .5rem;border-radius:.3rem;background:#e4e7eb}
.Completed{background:#c6f7d0}.Failed{background:#ffd6d6}.Stopped,.Stopping{background:#fde8c8}
.InProgress{background:#d9eaff}
"""


def job_path(name: str) -> str:
    """The path of one job's page."""
    return f"{VIEW_PREFIX}/jobs/{urllib.parse.quote(name, safe='')}"


def _time(epoch: float | None) -> str:
    if epoch is None:
        return "—"
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    minutes, seconds = divmod(round(value), 60)
    return f"{value:.0f} s ({minutes} min {seconds} s)" if minutes else f"{value:.0f} s"


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)} · offline SageMaker</title><style>{_STYLE}</style></head>"
        f"<body>{body}<p class='sub'><a href='{VIEW_PREFIX}'>All jobs</a> · offline SageMaker "
        "(offline-sagemaker)</p></body></html>"
    )


def _row(*cells: Any, css: str = "") -> str:
    cls = f" class='{css}'" if css else ""
    return f"<tr{cls}>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"


def job_page(job: Mapping[str, Any], scenario_name: str) -> str:
    """One job: status, preference list with the selected entry marked, timing and transitions."""
    name = str(job["name"])
    status = str(job["status"])
    secondary = job.get("secondary_status") or ""
    rank = job.get("selected_rank")
    prefs: Sequence[Mapping[str, Any]] = job.get("preferences") or []
    pref_rows = "".join(
        _row(
            index,
            entry.get("instance_type"),
            entry.get("instance_count"),
            entry.get("training_plan_arn") or "on-demand",
            "selected" if index == rank else "",
            css="selected" if index == rank else "",
        )
        for index, entry in enumerate(prefs, start=1)
    )
    selected = (
        f"{job['selected_instance_count']} × {job['selected_instance_type']} "
        f"(entry {rank} of {len(prefs)}, {job.get('capacity') or 'on-demand'})"
        if job.get("selected_instance_type")
        else "nothing yet"
    )
    facts = "".join(
        _row(label, value)
        for label, value in (
            ("Kind", job.get("kind")),
            ("ARN", job.get("arn")),
            ("Selected", selected),
            ("Creation to capacity", _seconds(job.get("waited_seconds"))),
            ("Created", _time(job.get("created_at"))),
            ("Capacity acquired", _time(job.get("selected_at"))),
            ("Ended", _time(job.get("end_time"))),
            ("Failure reason", job.get("failure_reason") or "—"),
        )
    )
    timeline = "".join(
        _row(
            _time(t.get("emulated_time")), t.get("status"), t.get("secondary_status") or "", t.get("message")
        )
        for t in job.get("timeline") or []
    )
    body = (
        f"<h1>{html.escape(name)}</h1>"
        f"<p class='sub'><span class='status {html.escape(status)}'>{html.escape(status)}</span> "
        f"{html.escape(secondary)} · scenario {html.escape(scenario_name)}</p>"
        f"<table id='facts'><tbody>{facts}</tbody></table>"
        "<h2>Instance preferences</h2>"
        "<table id='preferences'><thead><tr><th>#</th><th>Instance type</th><th>Count</th>"
        f"<th>Capacity</th><th></th></tr></thead><tbody>{pref_rows}</tbody></table>"
        "<h2>Transitions</h2>"
        "<table id='transitions'><thead><tr><th>Time (emulated)</th><th>Status</th><th>Secondary status</th>"
        f"<th>Message</th></tr></thead><tbody>{timeline}</tbody></table>"
        "<h2 id='logs'>Logs</h2><p class='sub'>This offline SageMaker does not write the job's CloudWatch "
        "log streams; the transitions above are its record of the job.</p>"
    )
    return _page(name, body)


def jobs_page(jobs: Sequence[Mapping[str, Any]], scenario_name: str) -> str:
    """Every job, newest first, each linking to its page."""
    rows = "".join(
        "<tr>"
        f"<td><a href='{job_path(str(j['name']))}'>{html.escape(str(j['name']))}</a></td>"
        f"<td>{html.escape(str(j['kind']))}</td><td>{html.escape(str(j['status']))}</td>"
        f"<td>{html.escape(str(j.get('selected_instance_type') or '—'))}</td>"
        f"<td>{html.escape(str(j.get('selected_rank') or '—'))}</td>"
        f"<td>{html.escape(_time(j.get('created_at')))}</td></tr>"
        for j in reversed(jobs)
    )
    body = (
        f"<h1>Jobs</h1><p class='sub'>scenario {html.escape(scenario_name)}</p>"
        "<table id='jobs'><thead><tr><th>Name</th><th>Kind</th><th>Status</th><th>Selected</th>"
        f"<th>Rank</th><th>Created</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return _page("Jobs", body)


def not_found_page(name: str) -> str:
    """The page for a job this offline SageMaker does not know (e.g. after a restart)."""
    return _page(
        name,
        f"<h1>{html.escape(name)}</h1><p>No job of this name: the offline SageMaker keeps jobs in memory, "
        "so a restart or a scenario reset forgets them.</p>",
    )
