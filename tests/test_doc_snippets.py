"""Every Python snippet of the documentation runs.

Collects every fenced ``python`` block of README.md, docs/**/*.md and offline-sagemaker/README.md and runs
each in its own process (the repository's Python, a temporary working directory) with AWS pointed at an
offline SageMaker: boto3 clients (``AWS_ENDPOINT_URL``), Airflow's ``aws_default`` connection and fake
credentials, so no snippet can reach AWS. A block that is deliberately not runnable says why on the line
right before its fence::

    <!-- snippet: not-runnable: needs the SageMaker Python SDK's own venv -->

and a fragment that continues the block above it in the same file says::

    <!-- snippet: continues -->

(it runs after that block's code, in the same process). The README's main DAG does not only parse: it
runs with ``dag.test()`` against the emulator, as the example DAGs do in tests/test_example_dag_runs.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
EMULATOR_DIR = ROOT / "offline-sagemaker"
README_MAX_LINES = 200
SNIPPET_TIMEOUT = 300

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<info>[^\s`]*)")
_MARKER = re.compile(r"^<!--\s*snippet:\s*(?P<kind>[a-z-]+)\s*(?::(?P<reason>.*?))?\s*-->$")
_LINK = re.compile(
    r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\((?P<image>[^)\s]+)\)"
)


@dataclass(frozen=True)
class Snippet:
    """One fenced python block: where it is, its code, and the marker on the line before it."""

    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    marker: str | None  # "not-runnable", "continues", another word (an error) or None
    reason: str  # the not-runnable reason, stripped
    prefix: str  # the code of the blocks it continues, run first

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _documents() -> list[Path]:
    paths = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    if (EMULATOR_DIR / "README.md").exists():
        paths.append(EMULATOR_DIR / "README.md")
    return paths


def _blocks(path: Path) -> Iterator[tuple[int, str, str, str | None]]:
    """(fence line, info string, dedented body, the stripped line before the fence) of every fence."""
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE_OPEN.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            line = lines[end]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            end += 1
        before = lines[index - 1].strip() if index > 0 else None
        yield index + 1, opening["info"].lower(), textwrap.dedent("\n".join(body)) + "\n", before
        index = end + 1


def collect() -> list[Snippet]:
    snippets: list[Snippet] = []
    for path in _documents():
        previous: Snippet | None = None
        for line, info, code, before in _blocks(path):
            if info not in ("python", "py", "python3"):
                continue
            marker = _MARKER.match(before or "")
            kind = marker["kind"] if marker else None
            reason = (marker["reason"] or "").strip() if marker else ""
            prefix = ""
            if kind == "continues" and previous is not None:
                prefix = previous.prefix + previous.code
            snippet = Snippet(path, line, code, kind, reason, prefix)
            snippets.append(snippet)
            previous = snippet
    return snippets


SNIPPETS = collect()


def _emulator_import_path() -> str | None:
    """Where ``offline_sagemaker`` comes from for the snippets: installed, else the source tree."""
    if importlib.util.find_spec("offline_sagemaker") is not None:
        return None
    if (EMULATOR_DIR / "offline_sagemaker" / "__init__.py").exists():
        return str(EMULATOR_DIR)
    return None


def _offline_sagemaker_class() -> Any:
    extra = _emulator_import_path()
    if extra is not None and extra not in sys.path:
        sys.path.insert(0, extra)
    try:
        from offline_sagemaker import OfflineSageMaker
    except ImportError:  # a tree from before the emulator had a distribution of its own
        from airflow_provider_sm_prefs.testing import OfflineSageMaker  # type: ignore[no-redef]
    return OfflineSageMaker


@pytest.fixture(scope="module")
def emulator() -> Iterator[Any]:
    with _offline_sagemaker_class()(scenario="default") as server:
        yield server


@pytest.fixture
def snippet_env(emulator: Any, tmp_path: Path) -> dict[str, str]:
    """The environment of a snippet's process: AWS and ``aws_default`` at the emulator, nothing real."""
    emulator.load_scenario("default")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AIRFLOW_CONN_"))}
    env.update(emulator.airflow_env(conn_id="aws_default"))
    env["AWS_ENDPOINT_URL"] = emulator.endpoint_url
    path = [str(ROOT)]
    extra = _emulator_import_path()
    if extra is not None:
        path.append(extra)
    env["PYTHONPATH"] = os.pathsep.join(path + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    # A DAG a snippet defines is found the way dag.test() finds every DAG: in a configured bundle.
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(tmp_path)
    env["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps(
        [
            {
                "name": "doc-snippets",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(tmp_path), "refresh_interval": 0},
            }
        ]
    )
    return env


#: Appended to the README's main DAG: run it, fast (the operators' 30 s poll is for real AWS), and check it.
_RUN_DAG = """

if __name__ == "__main__":  # not when dag.test() parses this file again from its bundle
    for _task in dag.tasks:
        if hasattr(_task, "poll_interval"):
            _task.poll_interval = 0.2
    _run = dag.test()
    _states = {ti.task_id: ti.state for ti in _run.get_task_instances()}
    print("DAG RUN STATES", _states)
    assert _states and all(state == "success" for state in _states.values()), _states
"""


def _is_readme_main_dag(snippet: Snippet) -> bool:
    first = next((s for s in SNIPPETS if s.path == README), None)
    return snippet == first and "with DAG(" in snippet.code and " as dag" in snippet.code


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_snippet_runs(snippet: Snippet, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    assert snippet.marker in (None, "not-runnable", "continues"), (
        f"{snippet.id}: unknown snippet marker {snippet.marker!r} "
        "(use <!-- snippet: not-runnable: <reason> --> or <!-- snippet: continues -->)"
    )
    if snippet.marker == "not-runnable":
        assert snippet.reason, f"{snippet.id}: a not-runnable marker needs a reason after the colon"
        pytest.skip(f"not runnable: {snippet.reason}")
    if snippet.marker == "continues":
        assert snippet.prefix, f"{snippet.id}: 'continues' but no python block above it in the same file"
    code = snippet.prefix + snippet.code
    runs_dag = _is_readme_main_dag(snippet)
    if runs_dag:
        request.getfixturevalue("airflow_db")
        code += _RUN_DAG
    env = request.getfixturevalue("snippet_env")
    script = tmp_path / "doc_snippet.py"
    script.write_text(code, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=SNIPPET_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, (
        f"{snippet.id} failed (exit {result.returncode}); mark it "
        "<!-- snippet: not-runnable: <reason> --> only if it cannot run anywhere but its real setting.\n"
        f"--- code ---\n{code}\n--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-6000:]}"
    )
    if runs_dag:
        assert "DAG RUN STATES" in result.stdout, f"{snippet.id}: dag.test() did not run"


def test_snippets_are_found() -> None:
    """The collection itself works: the README has its DAG, and the docs have more than a few blocks."""
    assert any(s.path == README for s in SNIPPETS)
    assert len(SNIPPETS) >= 10


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}"


def _relative_links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    # Links inside code blocks are code, not links.
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    targets = [m["target"] or m["image"] for m in _LINK.finditer(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_readme_relative_links_exist() -> None:
    links = _relative_links(README)
    assert links, "README.md links into the documentation"
    missing = [t for t in links if not (ROOT / t.split("#", 1)[0]).exists()]
    assert missing == [], f"README.md links to files that do not exist: {missing}"
