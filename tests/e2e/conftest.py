"""The e2e suite's deployment and its reliability ledger.

One :class:`LocalAirflow` (api-server, scheduler, dag-processor, triggerer — or two — and the offline
SageMaker as separate processes) per run of consecutive test modules with the same settings
(deployments.py). Every scenario records a row; at the end of the session the
rows, merged into the published ones, go to build/reliability/ (reliability.json and reliability.md);
``make reliability-doc`` publishes them into docs/. The session changes no tracked file.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import e2e_reliability
from deployments import DeploymentPool, grouped
from e2e_reliability import Ledger

from harness.browser import headless_chromium
from harness.deployment import LocalAirflow

#: Every DAG the e2e tests trigger; the deployment is ready once all are parsed.
E2E_DAGS = (
    "sm_prefs_nightly_retrain",
    "t_train_capacity",
    "t_train_complete",
    "t_train_lineage",
    "t_process",
    "e2e_fleet",
    "e2e_fleet_resume",
    "e2e_retry",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every scenario with the areas of its module (affected.MODULE_AREAS): ``make e2e-affected``
    selects the areas a change touches by these markers; and order the modules by deployment."""
    from affected import MODULE_AREAS

    for item in items:
        for area in MODULE_AREAS.get(item.path.name, ()):
            item.add_marker(getattr(pytest.mark, area))
    # The modules that can share a deployment run one after the other (deployments.py).
    here = Path(__file__).parent
    positions = [i for i, item in enumerate(items) if item.path.parent == here]
    ordered = grouped([items[i] for i in positions], lambda item: "airflow" in item.fixturenames)
    for position, item in zip(positions, ordered, strict=True):
        items[position] = item


#: Where the session wrote its reliability table, for the terminal summary.
_TABLE = pytest.StashKey[Path]()


@pytest.fixture(scope="session")
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    book = Ledger()
    yield book
    if book.rows and not os.environ.get("SM_PREFS_E2E_NO_TABLE"):
        e2e_reliability.write(book.rows)
        request.config.stash[_TABLE] = e2e_reliability.RUN_TABLE


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    table = config.stash.get(_TABLE, None)
    if table is not None:
        terminalreporter.write_line(
            f"reliability table of this run: {table} (make reliability-doc publishes it)"
        )


def _interrupt_on_sigterm(signum: int, frame: Any) -> None:
    # pytest tears fixtures down on KeyboardInterrupt but not on SIGTERM (CI cancel, `timeout`): without
    # this, a cancelled run would leave the deployment's processes behind.
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def _deployments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeploymentPool]:
    """The running deployment, handed from module to module while their settings agree (deployments.py)."""
    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    pool = DeploymentPool(lambda: Path(tmp_path_factory.mktemp("e2e-airflow")))
    try:
        yield pool
    finally:
        pool.stop()


@pytest.fixture(scope="module")
def airflow(request: pytest.FixtureRequest, _deployments: DeploymentPool, ledger: Ledger) -> LocalAirflow:
    """A running Airflow + offline SageMaker for the module's tests; stopped once a module needs other
    settings, or at the end of the session.

    A test module may set ``E2E_SCENARIO`` (the emulator's scenario), ``E2E_DAGS`` (the DAGs to wait for),
    ``E2E_ENV`` (more environment for every Airflow process, e.g. ``AIRFLOW__METRICS__...``) and
    ``E2E_LOGIN`` (``(user, password)``: the deployment requires that login, the REST client signs in),
    ``E2E_TEAMS`` (teams created before the components start), ``E2E_TRIGGERERS`` (triggerer
    processes, default 1; 2 runs Airflow's triggerer HA mode: ``triggerer`` and ``triggerer-2``) and
    ``E2E_EXECUTOR`` (``local`` or ``celery``: the CeleryExecutor topology, two workers, two schedulers,
    two triggerers). ``SM_PREFS_E2E_EXECUTOR=celery`` runs every module on the Celery topology. Modules
    whose settings (all but the scenario) agree share one deployment; each loads its own scenario.
    """
    deployment, fresh = _deployments.take(request.module)
    try:
        if fresh:
            deployment.start()
        deployment.wait_for_dags(getattr(request.module, "E2E_DAGS", E2E_DAGS), timeout=180)
        ledger.database = "PostgreSQL" if deployment.database_backend == "postgres" else "SQLite"
    except BaseException:
        _deployments.stop()
        _print_log_tails(deployment)
        raise
    return deployment


@pytest.fixture(autouse=True)
def _isolated(request: pytest.FixtureRequest) -> Iterator[None]:
    """A scenario must not leave work running into the next one: tasks of a scenario that failed
    half-way, and the failure callbacks that run after a run has ended (:func:`e2e_support.settle`)."""
    yield
    if "airflow" in request.fixturenames:
        from e2e_support import settle

        deployment = request.getfixturevalue("airflow")
        abandoned = deployment.fail_active_runs()
        if abandoned:
            sys.stderr.write(f"\nmarked failed after {request.node.name}: {abandoned}\n")
        try:
            settle(deployment)
        except AssertionError as err:
            # A component killed in the middle of a callback loses it: say so; the next scenario's own
            # checks show whether anything reached it.
            sys.stderr.write(f"\nwork of {request.node.name} still running after it ended: {err}\n")


def _print_log_tails(deployment: LocalAirflow, lines: int = 40) -> None:
    for log in sorted(deployment.log_dir.glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        sys.stderr.write(f"\n==> {log} <==\n" + "\n".join(tail) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    """Point at the component logs when an e2e test fails: that is where the story is."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and "airflow" in getattr(item, "funcargs", {}):
        deployment = item.funcargs["airflow"]
        if isinstance(deployment, LocalAirflow):
            report.sections.append(("e2e deployment", f"component logs: {deployment.log_dir}"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium from Debian's packages (``make e2e`` installs it: .ci/chromium.sh)."""
    driver = headless_chromium()
    try:
        yield driver
    finally:
        driver.quit()
