"""Airflow discovers the provider through its entry point."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import airflow_provider_sm_prefs
from airflow_provider_sm_prefs import get_provider_info


def test_provider_info_names_existing_modules() -> None:
    info = get_provider_info()
    assert info["package-name"] == "airflow-provider-sm-prefs"
    assert info["versions"] == [airflow_provider_sm_prefs.__version__]
    for section in ("operators", "sensors", "hooks", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for link in info["extra-links"]:
        module, _, cls = link.rpartition(".")
        assert hasattr(importlib.import_module(module), cls)


def test_providers_manager_finds_the_provider() -> None:
    from airflow.providers_manager import ProvidersManager

    providers = ProvidersManager().providers
    assert "airflow-provider-sm-prefs" in providers
    assert providers["airflow-provider-sm-prefs"].version == airflow_provider_sm_prefs.__version__


def test_airflow_providers_list_shows_the_provider() -> None:
    result = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "airflow"), "providers", "list", "--output", "plain"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "airflow-provider-sm-prefs" in result.stdout
