"""The plugin as Airflow sees it: registered by entry point, listed by ``airflow plugins``, linked from
the navigation, each DAG and each task; its bundled charting library is the one its notice names."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_sm_prefs import plugin
from airflow_provider_sm_prefs.plugin import api
from tests.airflow_versions import AIRFLOW_V_3_1_PLUS

STATIC = Path(plugin.__file__).resolve().parent / "static"
#: sha256 of chart.umd.min.js from the npm package chart.js 4.6.1 (registry.npmjs.org/chart.js/-/chart.js-4.6.1.tgz).
CHART_JS_SHA256 = "87364cc2b2a76a6684929e7d6b80b18a897794db38400caff1fcf1791c6925d2"


def test_airflow_plugins_lists_the_capacity_page() -> None:
    airflow = os.path.join(os.path.dirname(sys.executable), "airflow")
    result = subprocess.run(
        [airflow, "plugins", "--output", "json"], capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    # The JSON list is the output's last line; Airflow 3.0 prints its log lines ("[2026-...") before it.
    listing = next(line for line in reversed(result.stdout.splitlines()) if line.startswith("[{"))
    plugins = {p["name"]: p for p in json.loads(listing)}
    found = plugins["sm_prefs_capacity"]
    assert "airflow_provider_sm_prefs.plugin" in found["source"]
    assert "/sm-prefs" in str(found["fastapi_apps"])


def test_the_page_is_linked_from_the_navigation_each_dag_and_each_task() -> None:
    if not AIRFLOW_V_3_1_PLUS:  # 3.0's UI has no plugin views; menu items there need the FAB provider
        assert not hasattr(plugin.SageMakerCapacityPlugin, "external_views")
        assert not plugin.SageMakerCapacityPlugin.appbuilder_menu_items
        return
    views = {v["destination"]: v for v in plugin.SageMakerCapacityPlugin.external_views}
    assert views["nav"]["href"] == "/sm-prefs/" and views["nav"]["category"] == "browse"
    assert views["dag"]["href"] == "/sm-prefs/?dag_id={DAG_ID}"
    assert views["task"]["href"] == "/sm-prefs/?dag_id={DAG_ID}&task_id={TASK_ID}"
    assert plugin.URL_PREFIX == api.URL_PREFIX


def test_the_capacity_history_link_opens_the_page_for_the_task(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.models.taskinstancekey import TaskInstanceKey

    from airflow_provider_sm_prefs.links import CapacityHistoryLink

    key = TaskInstanceKey(dag_id="nightly retrain", task_id="train", run_id="r", try_number=1)
    link = CapacityHistoryLink()
    assert link.get_link(None, ti_key=key) == "/sm-prefs/?dag_id=nightly+retrain&task_id=train"  # type: ignore[arg-type]
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/ml/")
    assert link.get_link(None, ti_key=key).startswith("/ml/sm-prefs/?")  # type: ignore[arg-type]
    assert link.xcom_key == "sm_prefs_capacity_link"


def test_the_bundled_chart_library_is_the_released_file_with_its_licence() -> None:
    digest = hashlib.sha256((STATIC / "vendor" / "chart.umd.min.js").read_bytes()).hexdigest()
    assert digest == CHART_JS_SHA256
    assert "MIT License" in (STATIC / "vendor" / "chart.js.LICENSE.md").read_text()


def test_the_page_loads_nothing_from_another_host() -> None:
    for name in ("index.html", "capacity.js", "capacity.css"):
        text = (STATIC / name).read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name
