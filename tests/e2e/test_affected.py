"""``make e2e-affected``: the files a change touches select the e2e areas that cover them (no deployment)."""

from __future__ import annotations

from pathlib import Path

import pytest
from affected import AREAS, MODULE_AREAS, affected, areas_of, marker_expression

E2E_DIR = Path(__file__).parent


def test_every_scenario_module_belongs_to_an_area() -> None:
    modules = {path.name for path in E2E_DIR.glob("test_*.py")} - {Path(__file__).name, "test_settle.py"}
    assert modules == set(MODULE_AREAS), "a new e2e module needs its areas in affected.MODULE_AREAS"
    assert {area for areas in MODULE_AREAS.values() for area in areas} == set(AREAS)


def test_every_area_is_a_registered_marker(pytestconfig: pytest.Config) -> None:
    registered = {line.split(":", 1)[0] for line in pytestconfig.getini("markers")}
    assert set(AREAS) <= registered


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("airflow_provider_sm_prefs/triggers/dwell.py", {"triggers", "operators"}),
        ("airflow_provider_sm_prefs/operators/submission.py", {"operators", "triggers"}),
        ("airflow_provider_sm_prefs/reconcile/engine.py", {"reconciler"}),
        ("airflow_provider_sm_prefs/hooks/hyperpod.py", {"hyperpod"}),
        ("airflow_provider_sm_prefs/plugin/api.py", {"page"}),
        ("tests/e2e/test_reconciler_e2e.py", {"reconciler"}),
        ("harness/deployment.py", set(AREAS)),
        ("offline-sagemaker/offline_sagemaker/jobs.py", set(AREAS)),
    ],
)
def test_a_changed_file_selects_the_areas_that_cover_it(path: str, expected: set[str]) -> None:
    assert expected <= set(areas_of(path))


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("harness/chaos_plan.py", {"chaos"}),
        ("harness/soak_plan.py", {"soak"}),
        ("harness/soak_report.py", {"soak", "chaos"}),
        ("harness/memory.py", {"soak", "chaos"}),
    ],
)
def test_a_run_s_own_harness_module_selects_that_run_only(path: str, expected: set[str]) -> None:
    assert set(areas_of(path)) == expected


def test_files_no_scenario_covers_select_nothing() -> None:
    assert affected(["README.md", "CHANGELOG.md", "tests/test_preferences.py"]) == {}


def test_the_marker_expression_keeps_to_e2e_scenarios() -> None:
    assert marker_expression(["triggers", "hyperpod"]) == "e2e and (triggers or hyperpod)"
