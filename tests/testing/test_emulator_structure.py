"""The shape of the emulator package: no import cycles, a light pytest plugin, small modules."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import airflow_provider_sm_prefs

PROVIDER = "airflow_provider_sm_prefs"
PACKAGE = f"{PROVIDER}.testing"
PROVIDER_ROOT = Path(airflow_provider_sm_prefs.__file__).parent
TESTING_ROOT = PROVIDER_ROOT / "testing"
#: Modules about the local Airflow deployment and the demo, leaving the package; not the emulator's.
NOT_EMULATOR = {"deployment", "postgres", "demo", "iam"}
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PROVIDER_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def provider_modules() -> dict[str, Path]:
    return {module_name(path): path for path in PROVIDER_ROOT.rglob("*.py")}


def imported_modules(path: Path, known: dict[str, Path]) -> Iterator[str]:
    """Every provider module ``path`` imports, at any level (functions, ``TYPE_CHECKING`` blocks)."""
    current = module_name(path)
    package = current if path.name == "__init__.py" else current.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # ``from package import name``: the submodule if ``name`` is one, else the package itself.
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                yield name


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module, or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_emulator_module_takes_part_in_an_import_cycle() -> None:
    known = provider_modules()
    graph = {name: set(imported_modules(path, known)) for name, path in known.items()}
    assert graph[f"{PACKAGE}.scenario_fields"] >= {f"{PACKAGE}.botocore_model"}  # the walk sees imports
    in_testing = [c for c in cycles(graph) if any(m == PACKAGE or m.startswith(f"{PACKAGE}.") for m in c)]
    assert in_testing == []


def test_the_cycle_finder_finds_lazy_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]


def test_loading_the_pytest_plugin_imports_no_server_yaml_moto_or_botocore() -> None:
    code = (
        "import json, sys\n"
        "import airflow_provider_sm_prefs.testing.pytest_plugin\n"
        "import airflow_provider_sm_prefs.testing\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(result.stdout))
    assert "airflow_provider_sm_prefs.testing.pytest_plugin" in loaded
    heavy = {
        name
        for name in loaded
        if name.split(".")[0] in {"yaml", "moto", "botocore", "boto3", "werkzeug"}
        or (name.startswith(f"{PACKAGE}.") and name != f"{PACKAGE}.pytest_plugin")
    }
    assert heavy == set()


def test_the_package_exports_its_public_names_on_first_use() -> None:
    code = (
        "import sys\n"
        "import airflow_provider_sm_prefs.testing as t\n"
        "assert 'airflow_provider_sm_prefs.testing.server' not in sys.modules\n"
        "from airflow_provider_sm_prefs.testing import OfflineSageMaker, load_scenario\n"
        "assert OfflineSageMaker.__module__ == 'airflow_provider_sm_prefs.testing.server'\n"
        "assert set(t.__all__) <= set(dir(t))\n"
        "try:\n"
        "    t.NoSuchName\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], timeout=120, check=True)


def test_emulator_modules_stay_small() -> None:
    sizes = {
        path.name: len(path.read_text(encoding="utf-8").splitlines())
        for path in TESTING_ROOT.glob("*.py")
        if path.stem not in NOT_EMULATOR
    }
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES} == {}
