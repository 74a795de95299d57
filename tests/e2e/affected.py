"""The e2e scenarios a change touches, and running them (``make e2e-affected``).

CI runs only the ``core`` scenarios on every change; the others run in ``make e2e``, which takes about 45
minutes. A change to the triggers that breaks a non-core scenario would land unseen. This maps the files a
change touches (``git diff`` against a base, untracked files included) to the areas of the e2e suite that
cover them, and runs those areas' scenarios: each area is a pytest marker (registered in pyproject.toml)
that tests/e2e/conftest.py puts on the scenarios of the area's modules, from :data:`MODULE_AREAS`.

The base is ``origin/main`` when that exists, else the merge-base of ``HEAD`` with ``main`` (on ``main``
itself: ``HEAD``, so the uncommitted changes); ``--base`` (``make e2e-affected BASE=...``) overrides it.
A file no rule names inside the package, the harness or the emulator runs every area: better a long run
than a scenario left out. Files outside them (the README, unit tests) run none.

    python tests/e2e/affected.py [--base REV] [--list] [-- PYTEST_ARGS...]
"""

from __future__ import annotations

import argparse
import fnmatch
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Every area, with what it covers (the marker's description in pyproject.toml says the same).
AREAS = ("operators", "triggers", "hyperpod", "reconciler", "page", "metrics", "docs", "chaos", "soak")

#: The e2e modules of each area: conftest.py marks every scenario of a module with its areas.
MODULE_AREAS: dict[str, tuple[str, ...]] = {
    "test_airflow_e2e.py": ("operators", "triggers"),
    "test_run_types.py": ("operators", "triggers", "page"),
    "test_triggerer_ha.py": ("triggers",),
    "test_event_mode.py": ("triggers",),
    "test_credentials_airflow.py": ("triggers",),
    "test_hyperpod_e2e.py": ("hyperpod",),
    "test_reconciler_e2e.py": ("reconciler",),
    "test_capacity_page.py": ("page",),
    "test_metrics_e2e.py": ("metrics",),
    "test_docs_site_offline.py": ("docs",),
    "test_chaos.py": ("chaos",),
    "test_soak.py": ("soak",),
    # Every deployment's database (harness/database.py: any harness change runs every area anyway).
    "test_migrated_database.py": ("operators",),
}

ALL = AREAS
#: (glob, areas), the first match wins: the specific rules before the general ones.
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tests/e2e/test_*.py", ()),  # a changed scenario module: its own areas (MODULE_AREAS)
    ("airflow_provider_sm_prefs/*hyperpod*", ("hyperpod",)),
    ("airflow_provider_sm_prefs/reconcile/*", ("reconciler",)),
    ("airflow_provider_sm_prefs/domain/reconcile.py", ("reconciler",)),
    ("harness/reconciling.py", ("reconciler",)),
    ("airflow_provider_sm_prefs/plugin/*", ("page",)),
    ("airflow_provider_sm_prefs/compat/page.py", ("page",)),
    ("harness/history.py", ("page",)),
    ("harness/browser.py", ("page", "docs")),
    ("airflow_provider_sm_prefs/metrics.py", ("metrics",)),
    ("airflow_provider_sm_prefs/triggers/*", ("triggers", "operators", "hyperpod", "chaos", "soak")),
    ("airflow_provider_sm_prefs/sensors/*", ("triggers",)),
    ("airflow_provider_sm_prefs/callbacks.py", ("operators", "reconciler", "chaos")),
    # The rest of the package: the operators' path (submission, waits, outcome, guardrails, hooks).
    ("airflow_provider_sm_prefs/*", ("operators", "triggers", "chaos", "soak")),
    ("dags_examples/*", ("operators", "page", "metrics", "soak")),
    ("tests/dags/*", ALL),
    ("harness/chaos*.py", ("chaos",)),  # the chaos run and its plan, accounting, report and deployments
    ("harness/redis.py", ("chaos",)),
    # The chaos run takes the report directory and the capacity-timeout mark from these two.
    ("harness/soak_report.py", ("soak", "chaos")),
    ("harness/soak_accounting.py", ("soak", "chaos")),
    ("harness/soak*.py", ("soak",)),  # the soak and its plan, accounting and report modules
    ("harness/memory.py", ("soak", "chaos")),  # the memory sampler both runs take
    ("harness/*", ALL),
    ("offline-sagemaker/*", ALL),
    ("tests/e2e/*", ALL),  # conftest.py, e2e_support.py, e2e_reliability.py, this file
    ("docs/*", ("docs",)),
    ("mkdocs.yml", ("docs",)),
    ("pyproject.toml", ALL),
    ("uv.lock", ALL),
)


def areas_of(path: str) -> tuple[str, ...]:
    """The areas a change of ``path`` (relative to the repository) touches; () for none."""
    name = Path(path).name
    if fnmatch.fnmatch(path, "tests/e2e/test_*.py"):
        return MODULE_AREAS.get(name, ALL)
    for pattern, areas in RULES:
        if fnmatch.fnmatch(path, pattern):
            return areas
    return ()


def affected(paths: Iterable[str]) -> dict[str, list[str]]:
    """``{area: [the changed paths that select it]}``, in the order of :data:`AREAS`."""
    found: dict[str, list[str]] = {}
    for path in paths:
        for area in areas_of(path):
            found.setdefault(area, []).append(path)
    return {area: found[area] for area in AREAS if area in found}


def marker_expression(areas: Iterable[str]) -> str:
    """The ``-m`` expression of the scenarios of ``areas``."""
    return "e2e and (" + " or ".join(areas) + ")"


def default_base() -> str:
    """``origin/main`` when it exists, else the merge-base of HEAD with ``main``."""
    if _git("rev-parse", "--verify", "--quiet", "origin/main", check=False):
        return "origin/main"
    return _git("merge-base", "HEAD", "main").strip()


def changed_files(base: str) -> list[str]:
    """The files that differ between ``base`` and the working tree, and the untracked ones."""
    diff = _git("diff", "--name-only", base, "--")
    untracked = _git("ls-files", "--others", "--exclude-standard")
    return sorted({line for line in (diff + untracked).splitlines() if line})


def _git(*args: str, check: bool = True) -> str:
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {result.stderr.strip()} (pass --base REV)")
    return result.stdout if result.returncode == 0 else ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--base", help="compare with this revision (default: origin/main, else merge-base with main)"
    )
    parser.add_argument(
        "--list", action="store_true", help="print the areas and the pytest command; run nothing"
    )
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    base = args.base or default_base()
    selected = affected(changed_files(base))
    if not selected:
        print(f"e2e-affected: no e2e area covers the files changed since {base}; nothing to run")
        return 0
    for area, paths in selected.items():
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        print(f"e2e-affected: {area}: {shown}")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        marker_expression(selected),
        "tests/e2e",
        *args.pytest_args,
    ]
    print("e2e-affected: " + " ".join(repr(c) if " " in c else c for c in command), flush=True)
    if args.list:
        return 0
    return subprocess.run(command, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
