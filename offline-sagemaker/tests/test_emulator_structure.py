"""The shape of the emulator package: a light pytest plugin, lazily imported public names, no Airflow, no
import cycles, modules of a readable size, and no process-wide patch as an import side effect."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import offline_sagemaker

PACKAGE = "offline_sagemaker"
SOURCE = Path(offline_sagemaker.__file__).resolve().parent
MODULES = {
    PACKAGE if p.name == "__init__.py" else f"{PACKAGE}.{p.stem}": p for p in sorted(SOURCE.glob("*.py"))
}
MAX_LINES = 500


def test_loading_the_pytest_plugin_imports_no_server_yaml_moto_or_botocore() -> None:
    code = (
        "import json, sys\n"
        "import offline_sagemaker.pytest_plugin\n"
        "import offline_sagemaker\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(result.stdout))
    assert "offline_sagemaker.pytest_plugin" in loaded
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
        "import offline_sagemaker as t\n"
        "assert 'offline_sagemaker.server' not in sys.modules\n"
        "from offline_sagemaker import OfflineSageMaker, load_scenario\n"
        "assert OfflineSageMaker.__module__ == 'offline_sagemaker.server'\n"
        "assert set(t.__all__) <= set(dir(t))\n"
        "try:\n"
        "    t.NoSuchName\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], timeout=120, check=True)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at top level or inside functions (relative imports resolved)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = f"{PACKAGE}.{node.module or ''}".rstrip(".") if node.level else node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_no_module_imports_airflow_or_the_provider() -> None:
    foreign = {
        name: sorted(m for m in imports(path) if m.split(".")[0] in {"airflow", "airflow_provider_sm_prefs"})
        for name, path in MODULES.items()
    }
    assert {name: found for name, found in foreign.items() if found} == {}
    assert len(MODULES) >= 30


def test_no_module_takes_part_in_an_import_cycle() -> None:
    graph = {name: {m for m in imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph[node])
        return seen

    assert sorted(name for name in graph if name in reach(name)) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_readable_or_say_why_not(name: str) -> None:
    text = MODULES[name].read_text(encoding="utf-8")
    if len(text.splitlines()) <= MAX_LINES:
        return
    assert f"over {MAX_LINES} lines" in (ast.get_docstring(ast.parse(text)) or ""), name


def test_moto_is_patched_when_a_server_starts_not_when_the_handler_is_imported() -> None:
    code = (
        "import moto.sqs.models as m\n"
        "before = m.Queue.__dict__['delete_message']\n"
        "import offline_sagemaker.handler, offline_sagemaker.moto_speedups as s\n"
        "assert m.Queue.__dict__['delete_message'] is before and not s._APPLIED\n"
        "from offline_sagemaker import OfflineSageMaker\n"
        "with OfflineSageMaker():\n"
        "    assert m.Queue.__dict__['delete_message'] is s._delete_message and s._APPLIED\n"
    )
    subprocess.run([sys.executable, "-c", code], timeout=120, check=True)


def test_the_version_is_the_distributions() -> None:
    import importlib.metadata

    assert importlib.metadata.version("offline-sagemaker") == offline_sagemaker.__version__
