"""The figures and the table of :mod:`benchmarks.credentials_airflow`, from what it observed of one mode."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.airflow_observe import (
    MetadataCounts,
    blocked_warnings,
    renewals_after_refusal,
    session_use,
    usage_totals,
)
from benchmarks.processes import FAKE_KEY
from benchmarks.workload import pending_seconds
from harness.config import FAKE_ACCESS_KEY_ID

DAG_ID = "bench_credentials_airflow"


def _slow_between(probe: Mapping[str, Any], start_epoch: float, end_epoch: float) -> int:
    return sum(1 for t, _ in probe.get("slow") or [] if start_epoch <= float(t) <= end_epoch)


def figures(
    plan: Any,
    seen: Mapping[str, Any],
    final: Mapping[str, Any],
    probe: Mapping[str, Any],
    jobs: Sequence[Mapping[str, Any]],
    db: MetadataCounts,
    af: Any,
    run_id: str,
    times: tuple[float, float, float, float, float],
) -> dict[str, Any]:
    """One mode's figures; ``times``: capacity, scenario loaded (monotonic and epoch), triggered, end."""
    capacity_at, loaded, load_epoch, triggered, end = times
    states: Mapping[str, int] = seen["states"]
    marks: Mapping[str, float] = seen["marks"]
    snaps: Mapping[str, Mapping[str, Any]] = seen["snaps"]
    frm, to = snaps.get("waiting_from"), snaps.get("waiting_to")
    ts = plan.time_scale
    taken = marks.get("all_taken")
    hours_after = (capacity_at - taken) * ts / 3600 if taken is not None else None
    creds = final["credentials"]
    refused = {str(k): int(v) for k, v in (creds.get("refused") or {}).items()}
    waiting: dict[str, Any] = {}
    if frm is not None and to is not None:
        refused_from = frm["credentials"].get("refused") or {}
        waiting = {
            "sts_sessions": int(to["credentials"]["sessions"]) - int(frm["credentials"]["sessions"]),
            "refused": {
                k: int(v) - int(refused_from.get(k, 0))
                for k, v in (to["credentials"].get("refused") or {}).items()
            },
            "real_seconds": round(float(to["t"]) - float(frm["t"]), 1),
            "emulated_hours": round((float(to["t"]) - float(frm["t"])) * ts / 3600, 2),
            **session_use(frm["stats"], to["stats"]),
        }
        waiting["sessions_per_emulated_hour"] = (
            round(waiting["sts_sessions"] / waiting["emulated_hours"], 1)
            if waiting["emulated_hours"]
            else None
        )
    keys = final["stats"].get("access_keys") or {}
    pending = [s for s in (pending_seconds(j) for j in jobs) if s is not None]
    usage = usage_totals(seen["usage"])
    failed = sum(states.get(s, 0) for s in ("failed", "upstream_failed", "up_for_retry"))
    failures = db.failures()
    for failure in failures[:2]:
        try:
            text = af.task_log(DAG_ID, run_id, failure["task_id"], map_index=failure["map_index"])
            failure["log_tail"] = text[-1500:]
        except Exception as err:
            failure["log_tail"] = f"(no log: {err})"

    def epoch_of(t: float) -> float:
        return load_epoch + (t - loaded)

    return {
        "figures": {
            "waits": plan.waits,
            "succeeded": states.get("success", 0),
            "failed": failed,
            "still_deferred": states.get("deferred", 0),
            "states": dict(states),
            "failed_examples": failures,
            "hours_after_last_taken": round(hours_after, 2) if hours_after is not None else None,
            "long_enough": hours_after is not None and hours_after >= plan.hours,
            "pending_hours_min": round(min(pending) / 3600, 2) if pending else None,
            "pending_hours_median": round(statistics.median(pending) / 3600, 2) if pending else None,
            "sts_sessions": int(creds["sessions"]),
            "refused": refused,
            "refused_total": sum(refused.values()),
            "renewed_after_refusal": renewals_after_refusal(af.log_dir),
            "while_waiting": waiting,
            "long_term_key_calls": sum(keys.get(FAKE_KEY, {}).values()) + sum(keys.get(FAKE_ACCESS_KEY_ID, {}).values()),
            "probe": {k: v for k, v in probe.items() if k != "slow"},
            "probe_over_50ms_while_waiting": (
                _slow_between(probe, epoch_of(float(frm["t"])), epoch_of(float(to["t"]))) if frm and to else None
            ),
            "blocked_warnings": blocked_warnings(af.process_log("triggerer")),
            "triggerer": usage,
            "real_minutes": round((end - triggered) / 60, 1),
            "emulated_hours": round((end - loaded) * ts / 3600, 1),
        },
        "probe_slow": probe.get("slow"),
        "credential_settings": creds,
        "operations": final["stats"].get("operations"),
    }  # fmt: skip


def _cell(value: Any) -> str:
    return "–" if value is None else str(value)


def render(result: Mapping[str, Any]) -> str:
    """The Markdown table of the modes."""
    lines = [
        "| mode | waits | succeeded | failed | still deferred | emulated h in triggerer before capacity | "
        "STS sessions (all / while waiting) | refused expired/invalid | session keys while waiting | "
        "long-term key calls | probe max ms | probe p99 ms | probe samples > 50 ms (while waiting) | "
        "blocked warnings | "
        "triggerer CPU s | triggerer peak RSS MiB | real min | emulated h |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for run in result["runs"]:
        f = run.get("figures")
        if not f:
            lines.append(f"| {run['mode']} | run failed: {run.get('error')} |")
            continue
        w, p, b, t = f["while_waiting"], f["probe"], f["blocked_warnings"], f["triggerer"]
        lines.append(
            f"| {run['mode']} | {f['waits']} | {f['succeeded']} | {f['failed']} | {f['still_deferred']} | "
            f"{_cell(f['hours_after_last_taken'])} | {f['sts_sessions']} / {_cell(w.get('sts_sessions'))} | "
            f"{f['refused'].get('expired', 0)}/{f['refused'].get('invalid', 0)} | "
            f"{_cell(w.get('session_keys'))} | {f['long_term_key_calls']} | {_cell(p.get('max_ms'))} | "
            f"{_cell(p.get('p99_ms'))} | {_cell(p.get('over_counted'))} "
            f"({_cell(f['probe_over_50ms_while_waiting'])}) | {b['count']} | "
            f"{_cell(t['cpu_seconds'])} | {_cell(t['peak_rss_mib'])} | {f['real_minutes']} | "
            f"{f['emulated_hours']} |"
        )
    return "\n".join(lines)
