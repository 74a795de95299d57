"""Test-session environment: an isolated AIRFLOW_HOME and fake AWS credentials.

This runs before any test module imports Airflow, so Airflow reads its configuration from a
throw-away home and never from the developer's own ~/airflow.
"""

from __future__ import annotations

import json
import os
import tempfile

_HOME = tempfile.mkdtemp(prefix="sm-prefs-airflow-home-")
os.environ.setdefault("AIRFLOW_HOME", _HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault(
    "AIRFLOW__CORE__DAGS_FOLDER", os.path.join(os.path.dirname(__file__), "..", "dags_examples")
)
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
# dag.test() runs DAGs from configured bundles: the examples and the suite's own DAGs.
os.environ.setdefault(
    "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST",
    json.dumps(
        [
            {
                "name": name,
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": os.path.join(_ROOT, path), "refresh_interval": 0},
            }
            for name, path in (("examples", "dags_examples"), ("test-dags", "tests/dags"))
        ]
    ),
)
# Example DAGs read their poll cadence from the environment at parse time; tests poll fast.
os.environ.setdefault("SM_PREFS_POLL_INTERVAL", "0.2")
os.environ.setdefault("SM_PREFS_MAX_POLL_INTERVAL", "0.5")
# Credentials for the offline SageMaker only; they are never valid anywhere.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.pop("AWS_PROFILE", None)


import subprocess  # noqa: E402
import sys  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A migrated metadata database in the session's AIRFLOW_HOME (dag.test() needs one)."""
    airflow = os.path.join(os.path.dirname(sys.executable), "airflow")
    result = subprocess.run(
        [airflow, "db", "migrate"], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="session")
def offline_sm_server() -> Iterator[Any]:
    """One offline SageMaker for the session; each test loads its own scenario (which resets it)."""
    from airflow_provider_sm_prefs.testing import OfflineSageMaker

    with OfflineSageMaker(scenario="default") as server:
        yield server


@pytest.fixture
def sm(offline_sm_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The offline SageMaker, reset to the default scenario, with aws_default pointing at it."""
    offline_sm_server.load_scenario("default")
    for key, value in offline_sm_server.airflow_env(conn_id="aws_default").items():
        monkeypatch.setenv(key, value)
    return offline_sm_server
