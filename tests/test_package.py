"""The package as shipped: no import cycles, modules of a readable size, and a wheel that installs and
imports with only its runtime dependencies (the offline SageMaker, the offline-sagemaker distribution,
with the ``testing`` extra)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "airflow_provider_sm_prefs"
NAME = PACKAGE.name
#: The offline SageMaker's distribution, a member of this uv workspace.
EMULATOR = ROOT / "offline-sagemaker"
MAX_LINES = 500
#: No module is longer, whatever its docstring says: past this a module holds more than one concern.
HARD_MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """Package modules ``path`` imports, at top level or inside functions (lazy imports count too)."""
    found: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # ``from pkg import submodule`` imports the submodule.
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return {m for m in found if m in MODULES and m != module_name(path)}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (each group once)."""
    reach = {node: reachable(graph, node) for node in graph}
    groups = {
        tuple(sorted({node} | {other for other in reach[node] if node in reach[other]}))
        for node in graph
        if node in reach[node]
    }
    return sorted(list(group) for group in groups)


def test_no_module_of_the_package_takes_part_in_an_import_cycle() -> None:
    graph = {name: imported_modules(path) for name, path in MODULES.items()}
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: The layers, lowest first: a module never imports one of a higher layer (lazy imports count too). The
#: triggerer loads triggers, hooks and what they import; never an operator or a sensor, and so never the
#: whole operator package.
LAYERS = (("domain",), ("hooks", "triggers"), ("operators", "sensors", "plugin", "reconcile"))


def layer_of(module: str) -> int | None:
    part = module.removeprefix(f"{NAME}.").split(".")[0]
    return next((i for i, names in enumerate(LAYERS) if part in names), None)


def test_no_module_imports_one_of_a_higher_layer() -> None:
    wrong = [
        f"{name} imports {target}"
        for name, path in MODULES.items()
        if (own := layer_of(name)) is not None
        for target in sorted(imported_modules(path))
        if (theirs := layer_of(target)) is not None and theirs > own
    ]
    assert wrong == []
    graph = {name: imported_modules(path) for name, path in MODULES.items()}
    for trigger in (m for m in MODULES if m.startswith(f"{NAME}.triggers.")):
        assert not {m for m in reachable(graph, trigger) if m.startswith(f"{NAME}.operators")}, trigger


DOMAIN = f"{NAME}.domain"
DOMAIN_MODULES = sorted(m for m in MODULES if m == DOMAIN or m.startswith(f"{DOMAIN}."))


def foreign_imports(source: str, package: str) -> list[str]:
    """What code of ``package`` imports beyond the standard library and the domain (lazy imports too)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import name``: what is imported is pkg.name, a module or something of pkg's.
            names = [f"{base}.{alias.name}" for alias in node.names] if base == NAME else [base]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            inside = name == DOMAIN or name.startswith(f"{DOMAIN}.")
            if (top == NAME and not inside) or (top != NAME and top not in sys.stdlib_module_names):
                found.append(name)
    return found


@pytest.mark.parametrize("name", DOMAIN_MODULES)
def test_the_domain_imports_nothing_but_itself_and_the_standard_library(name: str) -> None:
    # No Airflow, botocore, boto3 or aiobotocore, and none of the glue around the domain.
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    assert foreign_imports(path.read_text(encoding="utf-8"), package) == []


def test_the_domain_check_finds_airflow_boto_and_glue_imports() -> None:
    source = (
        "import json\n"
        "from botocore.exceptions import ClientError\n"
        "def later():\n    from airflow.sdk import BaseOperator\n"
        f"from {NAME}.hooks import sagemaker\n"
        "from . import preferences\n"
        "from .. import links\n"
    )
    assert sorted(foreign_imports(source, DOMAIN)) == sorted(
        ["botocore.exceptions", "airflow.sdk", f"{NAME}.hooks", f"{NAME}.links"]
    )
    assert len(DOMAIN_MODULES) >= 15


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_readable_or_say_why_not(name: str) -> None:
    path = MODULES[name]
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if lines <= MAX_LINES:
        return
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert f"over {MAX_LINES} lines" in docstring, (
        f"{name} has {lines} lines and its docstring does not say why"
    )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_the_hard_limit(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= HARD_MAX_LINES, (
        f"{name} has {lines} lines; split it into modules of one concern each, "
        f"none over {HARD_MAX_LINES} lines"
    )


# -- the wheel -----------------------------------------------------------------------------------------


def _uv() -> list[str]:
    found = shutil.which("uv", path=os.path.dirname(sys.executable)) or shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def _run(*command: str | Path, cwd: Path = ROOT, timeout: float = 900) -> str:
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(*_uv(), "build", "--out-dir", out, "--quiet", ROOT)
    return out


@pytest.fixture(scope="module")
def emulator_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offline-sagemaker wheel built from this workspace (the testing extra's dependency)."""
    out = tmp_path_factory.mktemp("emulator-dist")
    _run(*_uv(), "build", "--wheel", "--out-dir", out, "--quiet", EMULATOR)
    (wheel,) = out.glob("offline_sagemaker-*.whl")
    return wheel


def test_the_distributions_pass_twine_check_and_carry_the_changelog(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    output = _run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist)
    assert output.count("PASSED") == 2, output
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert f"{NAME}/CHANGELOG.md" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    # The capacity page works air-gapped: its page, script, style and charting library ship inside.
    static = f"{NAME}/plugin/static/"
    for asset in (
        "index.html",
        "capacity.js",
        "capacity.css",
        "vendor/chart.umd.min.js",
        "vendor/chart.js.LICENSE.md",
    ):
        assert static + asset in names, names
    with zipfile.ZipFile(wheel) as archive:
        entry_points = archive.read(
            next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        ).decode()
    assert "[airflow.plugins]" in entry_points and "SageMakerCapacityPlugin" in entry_points
    # The offline SageMaker is a distribution of its own: its plugin and command come with it. The one
    # command of the provider is the reconciler's.
    assert "[pytest11]" not in entry_points, entry_points
    scripts = entry_points.split("[console_scripts]", 1)[1].split("\n[", 1)[0].split()
    assert scripts == ["sm-prefs-reconcile", "=", "airflow_provider_sm_prefs.reconcile.__main__:main"], (
        scripts
    )
    # Only what an installed user can run: no development harness, tests or example DAGs.
    assert all(n.startswith((f"{NAME}/", f"{NAME}-")) for n in names), names
    assert not [n for n in names if n.endswith(("deployment.py", "postgres.py", "demo.py"))], names
    # No emulator module: the earlier import path is one deprecation shim.
    assert not [n for n in names if n.startswith(f"{NAME}/testing/") or "offline_sagemaker" in n], names
    assert f"{NAME}/testing.py" in names


def test_the_sdist_holds_what_builds_and_documents_the_package_only(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    top = {name.split("/")[0] for name in names}
    # hatchling adds PKG-INFO and the .gitignore whose patterns it applied; nothing else beyond the list.
    expected = {NAME, "README.md", "CHANGELOG.md", "LICENSE", "pyproject.toml", "PKG-INFO", ".gitignore"}
    assert top == expected, top
    assert f"{NAME}/plugin/static/index.html" in names


@pytest.mark.parametrize("extra", ["", "testing"])
def test_the_wheel_installs_with_only_its_dependencies_and_imports_every_module(
    dist: Path, emulator_wheel: Path, tmp_path: Path, extra: str
) -> None:
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path / "venv"
    _run(*_uv(), "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    # The testing extra brings offline-sagemaker, which is not on the package index: its wheel from this
    # workspace is given alongside. It ships a pytest plugin: pytest is there whenever pytest loads it.
    requirements = [f"{wheel}[{extra}]", emulator_wheel, "pytest"] if extra else [str(wheel)]
    _run(*_uv(), "pip", "install", "--quiet", "--python", python, *requirements)
    # The OpenLineage facet class needs the OpenLineage provider (the `openlineage` extra; `testing` has it);
    # the deprecated emulator path needs offline-sagemaker (the `testing` extra).
    needs_extra = (f"{NAME}.testing", f"{NAME}.operators.lineage_facet")
    shipped = [m for m in MODULES if extra or not m.startswith(needs_extra)]
    if extra:
        shipped += ["offline_sagemaker.server", f"{NAME}.testing.server"]
    code = (
        "import importlib, importlib.util, warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        f"for name in {shipped!r}:\n"
        "    importlib.import_module(name)\n"
        "print('moto', importlib.util.find_spec('moto') is not None)\n"
        "try:\n"
        f"    import {NAME}.testing\n"
        "except ImportError as exc:\n"
        "    print('testing:', exc)\n"
        "else:\n"
        "    print('testing: imported')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHON"))}
    env["AIRFLOW_HOME"] = str(tmp_path / "airflow_home")
    result = subprocess.run(
        [python, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # The emulator's dependencies come only with the extra.
    assert f"moto {bool(extra)}" in result.stdout
    if extra:
        assert "testing: imported" in result.stdout
    else:
        assert "pip install 'airflow-provider-sm-prefs[testing]'" in result.stdout, result.stdout


EARLIER_PATHS = ["catalog", "events", "exceptions", "guardrails", "kinds", "outcome", "preferences"]
EARLIER_PATHS += ["record", "requirements", "status"]


@pytest.mark.parametrize("name", EARLIER_PATHS)
def test_the_import_paths_of_earlier_releases_are_the_domain_modules_themselves(name: str) -> None:
    import importlib

    # The same module object: a class imported through either path is the same class (isinstance,
    # except clauses and pickles agree), and private names resolve too.
    assert importlib.import_module(f"{NAME}.{name}") is importlib.import_module(f"{DOMAIN}.{name}")
