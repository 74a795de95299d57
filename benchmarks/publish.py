"""Publish benchmark results into the docs: small JSON files in docs/data/ and the tables of docs/performance.md.

The benchmarks write their results under git-ignored directories; publishing is a deliberate step::

    make perf-doc                                  # = python -m benchmarks.publish
    python -m benchmarks.publish RESULT.json ...   # these benchmarks/results/bench-*.json files
    python -m benchmarks.publish --render          # only re-render docs/performance.md from docs/data/

What it publishes: the given ``make bench`` results (default: the newest one that is not a smoke run), with
every list longer than :data:`MAX_LIST` left out (raw timings and call logs stay in benchmarks/results/);
``build/performance/latency.json`` (``make latency``), ``build/capacity-page/bench.json``
(``make bench-page``) and the newest ``benchmarks/results/credentials-*.json`` (``make bench-credentials``)
when they exist. The tables between the ``<!-- generated: ... -->`` markers of
docs/performance.md are rendered from docs/data/ only, by the benchmarks' own report code, so every published
figure comes from a committed file (tests/benchmarks/test_performance_doc.py checks the page against them).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data"
PAGE = ROOT / "docs" / "performance.md"
RESULTS = ROOT / "benchmarks" / "results"
LATENCY_RUN = ROOT / "build" / "performance" / "latency.json"
CAPACITY_PAGE_RUN = ROOT / "build" / "capacity-page" / "bench.json"
LATENCY = DATA / "latency.json"
CAPACITY_PAGE = DATA / "capacity-page.json"
#: ``make bench-credentials``'s newest full result, published as is (it holds no raw samples).
CREDENTIALS = DATA / "credentials.json"
#: The same benchmark before botocore's refresh windows were fitted to the session (kept for comparison).
CREDENTIALS_BEFORE = DATA / "credentials-before-fit.json"
#: Lists longer than this are raw samples, not figures: they are not published.
MAX_LIST = 50
SECTIONS = ("latency", "capacity-page", "retry-budget", "bench", "credentials")
_MARKED = re.compile(
    r"(<!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL
)


def slim(value: Any) -> Any:
    """``value`` without its long lists (raw samples), recursively."""
    if isinstance(value, Mapping):
        return {k: slim(v) for k, v in value.items() if not (isinstance(v, list) and len(v) > MAX_LIST)}
    if isinstance(value, list):
        return [slim(v) for v in value]
    return value


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _not_published(command: str) -> str:
    return f"No result is published yet: run `{command}`, then `make perf-doc`.\n"


def render_latency() -> str:
    from harness.latency import render_markdown

    if not LATENCY.exists():
        return _not_published("make latency")
    data = _load(LATENCY)
    first, cap = data.get("poll_interval"), data.get("max_poll_interval")
    cadence = (
        f"poll cadence {first:g} s"
        + (" fixed" if not cap or cap <= first else f" growing to {cap:g} s")
        + "; "
        if first
        else ""
    )
    return (
        f"Recorded {data['recorded_at']} on Airflow {data['airflow_version']}, {data['cpus']} CPUs "
        f"({cadence}{_triggerers(data)}seconds; percentiles are per column); `docs/data/{LATENCY.name}`:\n\n"
        + render_markdown(data)
    )


def _triggerers(data: dict[str, Any]) -> str:
    """Whether the triggerers were warm (each had ended tasks) when the measured runs began."""
    if "warm" not in data:  # results published before the harness said
        return ""
    if not data["warm"]:
        return "triggerers cold; "
    reads = ", ".join(f"{r:g} s" for r in data.get("cold_start", []))
    return f"triggerers warm, their first reads took {reads} before; "


def render_capacity_page() -> str:
    from benchmarks.capacity_page import profile_rows, rows
    from benchmarks.report import table

    if not CAPACITY_PAGE.exists():
        return _not_published("make bench-page")
    data = _load(CAPACITY_PAGE)
    parts = [
        f"{data['machine']['nproc']} CPUs, load average {data['machine']['loadavg_start'][0]:.1f} at the start "
        f"and {data['loadavg_end'][0]:.1f} at the end, {data['database']}; `docs/data/{CAPACITY_PAGE.name}`:",
        table(("measurement", "value", "goal", "met?"), rows(data)),
    ]
    if data.get("api_profile"):
        parts += [
            "Where one request's time goes, in-process in the same deployment:",
            table(("step", "time"), profile_rows(data["api_profile"])),
        ]
    return "\n\n".join(parts) + "\n"


def bench_files() -> list[Path]:
    return sorted(DATA.glob("bench-*.json"))


def render_bench() -> str:
    from benchmarks.report import render

    files = bench_files()
    if not files:
        return _not_published("make bench")
    parts = []
    for path in files:
        data = _load(path)
        machine = data.get("machine") or {}
        facts = ", ".join(
            str(x)
            for x in (
                data.get("started_utc") or data.get("started"),
                f"commit {data['commit']}" if data.get("commit") else None,
                f"{machine['nproc']} CPUs" if machine.get("nproc") else None,
            )
            if x
        )
        parts.append(f"#### `docs/data/{path.name}`" + (f" ({facts})" if facts else ""))
        parts.append(render(data).replace("\n### ", "\n##### ").replace("### ", "##### ", 1))
    return "\n\n".join(parts) + "\n"


def render_retry_budget() -> str:
    """The table of ``python -m benchmarks.retry_budget``, from its committed result."""
    from benchmarks.retry_budget import OUTPUT
    from benchmarks.retry_budget import table as retry_table

    if not OUTPUT.exists():
        return _not_published("python -m benchmarks.retry_budget")
    data = _load(OUTPUT)
    return f"`docs/data/{OUTPUT.name}` (seed {data['seed']}):\n\n{retry_table(data)}\n"


def render_credentials() -> str:
    """The table of ``make bench-credentials``, from its committed result."""
    from benchmarks.credentials import render

    if not CREDENTIALS.exists():
        return _not_published("make bench-credentials")
    data = _load(CREDENTIALS)
    machine = data.get("machine") or {}
    load = machine.get("loadavg_start") or [None]
    facts = f"{data['started_utc']}, commit {data.get('git_revision')}, {machine.get('nproc')} CPUs"
    if load[0] is not None:
        facts += f", load average {load[0]:.1f} at the start"
    text = f"`docs/data/{CREDENTIALS.name}` ({facts}), `{data['command']}`:\n\n{render(data)}\n"
    if CREDENTIALS_BEFORE.exists():
        before = _load(CREDENTIALS_BEFORE)
        text += (
            f"\nBefore the refresh windows were fitted to the session, `docs/data/{CREDENTIALS_BEFORE.name}` "
            f"({before['started_utc']}; {before.get('note', '')}):\n\n{render(before)}\n"
        )
    return text


def credentials_result() -> Path | None:
    """The newest ``make bench-credentials`` result that is not a smoke run, if any."""
    found = sorted(p for p in RESULTS.glob("credentials-*.json") if not p.stem.endswith("-smoke"))
    return found[-1] if found else None


RENDERERS = {
    "latency": render_latency,
    "capacity-page": render_capacity_page,
    "retry-budget": render_retry_budget,
    "bench": render_bench,
    "credentials": render_credentials,
}


def render_page(text: str) -> str:
    """``text`` (docs/performance.md) with every generated section rendered anew from docs/data/."""
    seen = set()

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in RENDERERS:
            raise ValueError(f"docs/performance.md: unknown generated section {name!r}; known: {SECTIONS}")
        seen.add(name)
        return match[1] + "\n" + RENDERERS[name]() + "\n" + match[4]

    out = _MARKED.sub(fill, text)
    missing = set(SECTIONS) - seen
    if missing:
        raise ValueError(f"docs/performance.md lacks the generated sections {sorted(missing)}")
    return out


def publish(results: Sequence[Path]) -> list[Path]:
    """Copy the results into docs/data/ (slimmed); returns the files written."""
    DATA.mkdir(parents=True, exist_ok=True)
    written = []
    for source in results:
        target = DATA / source.name
        target.write_text(json.dumps(slim(_load(source)), indent=1, default=str) + "\n", encoding="utf-8")
        written.append(target)
    credentials = credentials_result()
    for source, target in (
        (LATENCY_RUN, LATENCY),
        (CAPACITY_PAGE_RUN, CAPACITY_PAGE),
        (credentials, CREDENTIALS),
    ):
        if source is not None and source.exists():
            target.write_text(json.dumps(slim(_load(source)), indent=1, default=str) + "\n", encoding="utf-8")
            written.append(target)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.publish", description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", type=Path, help="bench-*.json files (default: the newest)")
    parser.add_argument("--render", action="store_true", help="only re-render docs/performance.md")
    args = parser.parse_args(argv)
    if not args.render:
        results = args.results
        if not results:
            newest = sorted(p for p in RESULTS.glob("bench-*.json") if not p.stem.endswith("-smoke"))
            results = newest[-1:]
        for path in publish(results):
            print(f"wrote {path.relative_to(ROOT)}")
    PAGE.write_text(render_page(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
