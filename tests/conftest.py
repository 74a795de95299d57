"""Test-session environment: an isolated AIRFLOW_HOME and fake AWS credentials.

This runs before any test module imports Airflow, so Airflow reads its configuration from a
throw-away home and never from the developer's own ~/airflow.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile


def _own_directory(variable: str, prefix: str) -> None:
    """``variable`` names a new temporary directory of this process, unless the developer set it.

    pytest-xdist's workers inherit the environment of the process that started them: a directory this
    module made there (marked in ``SM_PREFS_TESTS_MADE_<variable>``) is replaced, so that every worker
    has its own Airflow home (its own SQLite metadata database) and its own look-up cache.
    """
    marker = f"SM_PREFS_TESTS_MADE_{variable}"
    if variable in os.environ and os.environ.get(marker) != os.environ[variable]:
        return
    os.environ[variable] = os.environ[marker] = tempfile.mkdtemp(prefix=prefix)


_own_directory("AIRFLOW_HOME", "sm-prefs-airflow-home-")
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
# dag.test() runs triggers in its own process, where Airflow's scheduler race the dwell guards against
# (apache/airflow#72716) cannot happen: no dwell, so waits end as soon as SageMaker says. Tests of the
# dwell set it explicitly; the e2e deployments run with the default.
os.environ.setdefault("AIRFLOW__SM_PREFS__MIN_DEFER_SECONDS", "0")
# Credentials for the offline SageMaker only; they are never valid anywhere.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
# The guardrails' look-up cache shared by task processes: one directory per test session (per worker).
_own_directory("SM_PREFS_CACHE_DIR", "sm-prefs-cache-")
os.environ.pop("AWS_PROFILE", None)


import functools  # noqa: E402
import importlib.util  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402


def _share_botocore_models() -> None:
    """Every botocore session of a test process reads the service models through one loader.

    Each hook, trigger and test client opens its own session, and each new session parses the JSON models
    again (SageMaker's alone is megabytes): about a quarter of a dag.test() run's CPU. With one loader
    they are parsed once per process; the clients, their requests and their HTTP calls are the same.
    """
    import botocore.loaders
    import botocore.session

    botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)


_share_botocore_models()


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A migrated metadata database in the session's AIRFLOW_HOME (dag.test() needs one)."""
    airflow = os.path.join(os.path.dirname(sys.executable), "airflow")
    result = subprocess.run(
        [airflow, "db", "migrate"], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    from tests.airflow_versions import AIRFLOW_V_3_1_PLUS

    if not AIRFLOW_V_3_1_PLUS:
        # From 3.1 on, dag.test() writes the DAG folder's DAGs to the database first, as the DAG processor
        # of a deployment does; 3.0's does not, and the capacity page lists only DAGs it knows.
        result = subprocess.run(
            [airflow, "dags", "reserialize"], capture_output=True, text=True, timeout=300, check=False
        )
        assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="session")
def offline_sm_server() -> Iterator[Any]:
    """One offline SageMaker for the session; each test loads its own scenario (which resets it)."""
    from offline_sagemaker import OfflineSageMaker

    with OfflineSageMaker(scenario="default") as server:
        yield server


@pytest.fixture
def sm(offline_sm_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The offline SageMaker, reset to the default scenario, with aws_default pointing at it."""
    offline_sm_server.load_scenario("default")
    for key, value in offline_sm_server.airflow_env(conn_id="aws_default").items():
        monkeypatch.setenv(key, value)
    return offline_sm_server


@functools.cache
def _test_dags() -> ModuleType:
    """tests/dags/sm_prefs_test_dags.py: one DAG per operator shape, configured by run_conf."""
    path = Path(__file__).resolve().parent / "dags" / "sm_prefs_test_dags.py"
    spec = importlib.util.spec_from_file_location("sm_prefs_test_dags", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RunResult = tuple[dict[str, str | None], dict[str, Any] | None]


def _stream_handlers() -> set[tuple[logging.Logger, logging.Handler]]:
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    return {
        (logger, handler)
        for logger in loggers
        for handler in logger.handlers
        if type(handler) is logging.StreamHandler
    }


@pytest.fixture
def run_test_dag(airflow_db: None, tmp_path: Path) -> Callable[..., RunResult]:
    """``run_test_dag(dag_id, **conf)``: dag.test() one test DAG; returns task states and what its
    ``consume`` task read from the job task's XComs (None if it did not run)."""

    def run(dag_id: str, **conf: Any) -> RunResult:
        out = tmp_path / f"{dag_id}-out.json"
        from tests.airflow_versions import AIRFLOW_V_3_1_PLUS

        before = _stream_handlers()
        task_logger = logging.getLogger("airflow.task")
        propagate = task_logger.propagate
        if not AIRFLOW_V_3_1_PLUS:
            # Airflow 3.0's dag.test() prints the task log through its own handler on the task logger,
            # which also propagates to the root handler of Airflow's logging config: every line twice.
            task_logger.propagate = False
        try:
            # Every param, defaults included: a value one run passed must not leak into the next run.
            dagrun = getattr(_test_dags(), dag_id).test(
                run_conf={**_test_dags().PARAMS, **conf, "out": str(out)}
            )
        finally:
            # Airflow 3.0's dag.test() adds a handler on the sys.stdout of the moment to the task logger,
            # once per process: in the next test that stream is a closed capture, and every task log line
            # comes out a second time as a logging error. What a run added goes when it ends.
            for logger, handler in _stream_handlers() - before:
                logger.removeHandler(handler)
            task_logger.propagate = propagate
        states = {ti.task_id: ti.state for ti in dagrun.get_task_instances()}
        return states, (json.loads(out.read_text()) if out.exists() else None)

    return run


@pytest.fixture
def capacity_record(airflow_db: None) -> Callable[..., dict[str, Any] | None]:
    """``capacity_record(dag_id)``: the capacity record the job task of the DAG's latest run left in XCom."""

    def read(dag_id: str, task_id: str = "job") -> dict[str, Any] | None:
        from airflow.models.dagrun import DagRun
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        from airflow_provider_sm_prefs.domain.record import RECORD_KEY

        with create_session() as session:
            run_id = session.scalar(
                select(DagRun.run_id).where(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).limit(1)
            )
            if run_id is None:
                return None
            row = session.scalars(
                XComModel.get_many(run_id=run_id, key=RECORD_KEY, dag_ids=dag_id, task_ids=task_id)
            ).first()
            return None if row is None else XComModel.deserialize_value(row)

    return read


@pytest.fixture(autouse=True)
def _fresh_guardrail_cache() -> None:
    """Each test loads its own scenario at the same endpoint: no quota or price cached by an earlier test."""
    from airflow_provider_sm_prefs.hooks.preflight import clear_cache

    clear_cache()
