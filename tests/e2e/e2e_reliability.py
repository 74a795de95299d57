"""The reliability table: rows recorded by the e2e tests, rendered as markdown.

An e2e session writes only under the git-ignored ``build/reliability/``: ``reliability.json`` holds the
published rows of ``docs/reliability.json`` with this session's rows merged in (rows of scenarios not run
keep their last result, so a partial run never drops a row) and ``reliability.md`` renders them. Publishing
the last run into ``docs/`` is a deliberate step::

    make reliability-doc   # = .venv/bin/python tests/e2e/e2e_reliability.py
    .venv/bin/python tests/e2e/e2e_reliability.py --render   # re-render docs/reliability.md only

The soak (``make soak``, harness/soak.py) writes its own report, ``build/reliability/soak.json``;
``make reliability-doc`` publishes it as ``docs/soak.json`` too, and the document renders it as a section
after the table (the last published soak when this run has none). The chaos run (``make chaos``,
harness/chaos.py) likewise: ``build/reliability/chaos.json``, published as ``docs/chaos.json`` and rendered
as the section after the soak's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: The published table.
ROWS = ROOT / "docs" / "reliability.json"
TABLE = ROOT / "docs" / "reliability.md"
#: The last e2e session's table (``build/`` is not tracked).
RUN_DIR = ROOT / "build" / "reliability"
RUN_ROWS = RUN_DIR / "reliability.json"
RUN_TABLE = RUN_DIR / "reliability.md"
#: The soak's report: the last ``make soak`` run's, and the published one.
SOAK = ROOT / "docs" / "soak.json"
RUN_SOAK = RUN_DIR / "soak.json"
#: The chaos run's report (``make chaos``, harness/chaos.py): the last run's, and the published one.
CHAOS = ROOT / "docs" / "chaos.json"
RUN_CHAOS = RUN_DIR / "chaos.json"
COLUMNS = (
    ("scenario", "Scenario"),
    ("load", "Load"),
    ("faults", "Faults injected"),
    ("outcome", "Outcome"),
    ("jobs_created", "Jobs created"),
    ("unattended", "Jobs left running unattended"),
    ("seconds", "Wall time (s)"),
)

HEADER = """# Reliability under faults

Produced by the end-to-end suite against a real Airflow {airflow} deployment (API server, scheduler with
LocalExecutor, DAG processor and triggerer as separate processes, {database} metadata DB) and the offline
SageMaker (`sm-prefs-emulator`), on the machine that ran it. Every figure comes from the run: task states,
XComs and logs through Airflow's REST API v2, job counts and call counts from the emulator's own ledger.
Do not edit by hand; reproduce with

```
make e2e              # = .venv/bin/pytest -m e2e tests/e2e, the short soak included (writes build/reliability/reliability.json and .md)
make e2e-ha           # the two-triggerer HA scenario at full size (200 tasks; make e2e, which recorded this table, runs it with 60)
make soak             # the soak section below (make e2e runs only the short soak, which is not published)
make chaos            # the chaos section below (make e2e runs only the short chaos run, the table's chaos row)
make reliability-doc  # publishes the last of these runs: docs/reliability.json, docs/soak.json, docs/chaos.json and this file
```

Each row keeps the result of the last run of its scenario: `make e2e` alone replaces the HA row with a
run of fewer tasks. The figures below are rendered from the committed JSON files by
`.venv/bin/python tests/e2e/e2e_reliability.py --render`.

*Jobs created* counts SageMaker jobs that exist in the emulator after the scenario (`CreateTrainingJob`
calls the emulator accepted). *Jobs left running unattended* counts emulator jobs still `InProgress`
whose task is no longer running, deferred, queued or waiting for a retry — work nobody watches or stops.
Every scenario asserts it is 0. In the Airflow scheduler race row, Airflow 3.3.2 fails a task whose
trigger fires before the scheduler has processed the worker's exit from the deferral
(apache/airflow#72716; some of the 30 tasks, more under load, before the triggers held such events):
the row asserts that every task succeeds, and reports how long the triggers held their events
(`min_defer_seconds`) and how long the scheduler really took to process the exits.

"""


class Ledger:
    """Rows of the reliability table recorded by this test session.

    :param database: the metadata database the deployment runs on, for the table's header.
    """

    def __init__(self, database: str = "?") -> None:
        self.rows: list[dict[str, Any]] = []
        self.database = database

    def record(
        self,
        id: str,
        *,
        order: int,
        scenario: str,
        load: str,
        faults: str,
        outcome: str,
        jobs_created: int,
        unattended: int,
        seconds: float,
    ) -> None:
        """One scenario's row; ``id`` keys it in the JSON file, ``order`` places it in the table."""
        from airflow import __version__ as airflow_version

        self.rows.append(
            {
                "id": id,
                "order": order,
                "scenario": scenario,
                "load": load,
                "faults": faults,
                "outcome": outcome,
                "jobs_created": jobs_created,
                "unattended": unattended,
                "seconds": round(seconds, 1),
                "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "airflow_version": airflow_version,
                "metadata_db": self.database,
            }
        )


def load_rows(path: Path = ROWS) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows: list[dict[str, Any]] = json.loads(path.read_text())
    return rows


def merge(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of ``new`` replace rows of ``old`` with the same ``id``; order follows ``new``, then ``old``."""
    fresh = {row["id"] for row in new}
    return [dict(r) for r in new] + [dict(r) for r in old if r["id"] not in fresh]


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def load_soak(path: Path = SOAK) -> dict[str, Any] | None:
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def render(
    rows: Sequence[Mapping[str, Any]],
    soak: Mapping[str, Any] | None = None,
    chaos: Mapping[str, Any] | None = None,
) -> str:
    """The markdown document for ``rows`` (sorted by their ``order``), and the soak's and the chaos run's
    sections if any."""
    ordered = sorted(rows, key=lambda r: (r.get("order", 99), r["id"]))
    airflow = next((r.get("airflow_version") for r in ordered if r.get("airflow_version")), "3.x")
    database = next((r.get("metadata_db") for r in ordered if r.get("metadata_db")), "?")
    lines = [HEADER.format(airflow=airflow, database=database)]
    lines.append("| " + " | ".join(title for _, title in COLUMNS) + " |")
    lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    for row in ordered:
        lines.append("| " + " | ".join(_cell(row.get(key, "")) for key, _ in COLUMNS) + " |")
    recorded = sorted({str(r.get("recorded_at", ""))[:10] for r in ordered if r.get("recorded_at")})
    total = sum(float(r.get("seconds") or 0) for r in ordered)
    lines.append("")
    lines.append(
        f"Recorded {', '.join(recorded) or 'never'}; scenarios' wall time {total:.0f} s in total "
        "(starting the deployment not included)."
    )
    if soak is not None:
        from harness.soak import render_markdown

        lines += ["", render_markdown(soak).rstrip("\n")]
    if chaos is not None:
        from harness import chaos as chaos_run

        lines += ["", chaos_run.render_markdown(chaos).rstrip("\n")]
    return "\n".join(lines) + "\n"


def write(
    new_rows: Sequence[Mapping[str, Any]],
    base_path: Path = ROWS,
    rows_path: Path = RUN_ROWS,
    table_path: Path = RUN_TABLE,
    soak: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Merge ``new_rows`` into the rows of ``base_path``; write them and their table; returns all rows.

    ``soak``: the soak report to render after the table (default: the run's, else the published one).
    """
    rows = merge(load_rows(base_path), new_rows)
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    rows_path.write_text(json.dumps(rows, indent=2, sort_keys=True) + "\n")
    table_path.parent.mkdir(parents=True, exist_ok=True)
    if soak is None:
        soak = load_soak(RUN_SOAK) or load_soak(SOAK)
    table_path.write_text(render(rows, soak, load_soak(RUN_CHAOS) or load_soak(CHAOS)))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=f"Publish the last e2e run's table ({RUN_ROWS.relative_to(ROOT)}) into docs/."
    )
    parser.add_argument(
        "--render", action="store_true", help=f"only re-render {TABLE.relative_to(ROOT)} from its JSON file"
    )
    args = parser.parse_args(argv)
    source = ROWS if args.render else RUN_ROWS
    if not args.render and not RUN_ROWS.exists() and (RUN_SOAK.exists() or RUN_CHAOS.exists()):
        source = ROWS  # only a soak or a chaos run ran: publish it with the published table
    rows = load_rows(source)
    if not rows:
        print(f"no rows in {source}; run the e2e suite first (make e2e)", file=sys.stderr)
        return 1
    soak = load_soak(SOAK) if args.render else (load_soak(RUN_SOAK) or load_soak(SOAK))
    if not args.render and RUN_SOAK.exists() and soak is not None:
        SOAK.write_text(json.dumps(soak, indent=2, sort_keys=True) + "\n")
        print(f"wrote {SOAK.relative_to(ROOT)} from {RUN_SOAK.relative_to(ROOT)}")
    if not args.render and RUN_CHAOS.exists():
        CHAOS.write_text(RUN_CHAOS.read_text())
        print(f"wrote {CHAOS.relative_to(ROOT)} from {RUN_CHAOS.relative_to(ROOT)}")
    write([], base_path=source, rows_path=ROWS, table_path=TABLE, soak=soak)
    print(
        f"wrote {TABLE.relative_to(ROOT)} and {ROWS.relative_to(ROOT)} from {source.relative_to(ROOT)} ({len(rows)} rows)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
