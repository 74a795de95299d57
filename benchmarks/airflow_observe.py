"""What :mod:`benchmarks.credentials_airflow` reads from a running :class:`~harness.deployment.LocalAirflow`:
task-instance states and triggers from its PostgreSQL, CPU and peak memory of its triggerer's processes
from ``/proc``, and the triggerer's own warnings about a blocked event loop from its log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import psutil

#: Airflow's warning (``TriggerRunner.block_watchdog``) when its event loop missed a 0.1 s sleep by more
#: than ``[triggerer] blocked_main_thread_warning_threshold`` (0.2 s by default).
BLOCKED = re.compile(r"async thread was blocked for ([0-9.]+) seconds")
#: States a wait ends in (Airflow's terminal task-instance states).
ENDED = ("success", "failed", "skipped", "upstream_failed", "removed")


class MetadataCounts:
    """Counts from the deployment's PostgreSQL (read-only queries).

    :param dsn: ``postgresql://user@127.0.0.1:port/database``.
    :param dag_id: the benchmark DAG.
    """

    def __init__(self, dsn: str, dag_id: str) -> None:
        import psycopg2

        self._conn = psycopg2.connect(dsn)
        self._conn.autocommit = True
        self.dag_id = dag_id

    @classmethod
    def of(cls, af: Any, dag_id: str) -> MetadataCounts:
        pg = af.postgres
        if pg is None:
            raise RuntimeError("the benchmark needs the deployment on PostgreSQL (make postgres)")
        return cls(f"postgresql://{pg.user}@127.0.0.1:{pg.port}/{pg.database}", dag_id)

    def states(self, task_prefix: str = "wait_") -> dict[str, int]:
        """``{state: count}`` of the DAG's task instances whose id starts with ``task_prefix``."""
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT coalesce(state, 'none'), count(*) FROM task_instance "
                "WHERE dag_id = %s AND task_id LIKE %s GROUP BY 1",
                (self.dag_id, task_prefix + "%"),
            )
            return {str(state): int(n) for state, n in cur.fetchall()}

    def triggers_assigned(self) -> int:
        """Triggers of the DAG's deferred task instances that a triggerer has taken (``triggerer_id`` set)."""
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM trigger t JOIN task_instance ti ON ti.trigger_id = t.id "
                "WHERE ti.dag_id = %s AND ti.task_id LIKE 'wait_%%' AND t.triggerer_id IS NOT NULL",
                (self.dag_id,),
            )
            row = cur.fetchone()
            return int(row[0]) if row else 0

    def failures(self, limit: int = 5) -> list[dict[str, Any]]:
        """A few task instances of the waits that did not succeed, with their state."""
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT task_id, map_index, state FROM task_instance WHERE dag_id = %s AND task_id LIKE "
                "'wait_%%' AND state IN ('failed', 'up_for_retry', 'upstream_failed') ORDER BY map_index "
                "LIMIT %s",
                (self.dag_id, limit),
            )
            return [{"task_id": t, "map_index": m, "state": s} for t, m, s in cur.fetchall()]

    def close(self) -> None:
        self._conn.close()


def process_usage(pids: Iterable[int]) -> dict[str, Any]:
    """CPU seconds (user + system) and peak RSS (``VmHWM``, MiB) of each of ``pids`` that still runs."""
    usage: dict[str, Any] = {}
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            times = proc.cpu_times()
            cmdline = " ".join(proc.cmdline())[:120]
        except psutil.Error:
            continue
        peak = None
        try:
            for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
                if line.startswith("VmHWM:"):
                    peak = round(int(line.split()[1]) / 1024, 1)
        except OSError:
            pass
        usage[str(pid)] = {
            "cpu_seconds": round(times.user + times.system, 1),
            "peak_rss_mib": peak,
            "cmdline": cmdline,
        }
    return usage


def usage_totals(usage: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """CPU seconds summed over the processes, and the largest single peak RSS."""
    peaks = [float(u["peak_rss_mib"]) for u in usage.values() if u.get("peak_rss_mib") is not None]
    return {
        "processes": len(usage),
        "cpu_seconds": round(sum(float(u["cpu_seconds"]) for u in usage.values()), 1),
        "peak_rss_mib": max(peaks) if peaks else None,
    }


def blocked_warnings(log: Path) -> dict[str, Any]:
    """Airflow's "async thread was blocked" warnings in a triggerer's log: how many, the longest (s)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    seconds = [float(m.group(1)) for m in BLOCKED.finditer(text)]
    return {"count": len(seconds), "max_seconds": max(seconds) if seconds else None}


#: What the provider logs when AWS refused a session token as expired and it renewed and resent the call
#: (``airflow_provider_sm_prefs/hooks/renewal.py``).
RENEWED = "renewing the credentials and sending it again"


def renewals_after_refusal(log_dir: Path) -> int:
    """Calls refused as expired that the provider renewed and sent again, in every log of a deployment."""
    return sum(p.read_text(errors="replace").count(RENEWED) for p in log_dir.rglob("*.log") if p.is_file())


def session_use(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, int]:
    """Between two ``stats()`` snapshots: session keys (``ASIA...``) that signed SageMaker calls, those
    calls, and the calls signed with any other key but the harness's."""
    keys_before: Mapping[str, Mapping[str, int]] = before.get("access_keys") or {}
    keys_after: Mapping[str, Mapping[str, int]] = after.get("access_keys") or {}
    used = calls = 0
    for key, ops in keys_after.items():
        if not key.startswith("ASIA"):
            continue
        delta = sum(ops.values()) - sum((keys_before.get(key) or {}).values())
        if delta > 0:
            used += 1
            calls += delta
    return {"session_keys": used, "session_calls": calls}
