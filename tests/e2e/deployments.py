"""Deployments shared by the e2e modules whose settings agree.

Starting a deployment (PostgreSQL, the offline SageMaker, api-server, scheduler, DAG processor,
triggerer) costs a minute or more of a 2-core machine; most modules need nothing of theirs but their own
emulator scenario. A module's deployment settings (:func:`settings_of`: executor, environment, login,
teams, triggerers, database) are its key: consecutive modules with the same key share one deployment, and
the collection order puts them next to each other (:func:`grouped`). The emulator's scenario is not part
of the key: a module that takes over a running deployment loads its own scenario first, which resets the
emulator's world (jobs, clusters, statistics, clock) as a fresh emulator would have it. What a module
leaves in Airflow (finished runs, a generated deployment id) stays; every scenario works on runs and jobs
of its own, and the per-test isolation (conftest ``_isolated``) fails whatever it left running.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.deployment import LocalAirflow

#: Where every deployment's OpenLineage events (one JSON event per line) and preflight cache go. Only a
#: DAG that asks for lineage (t_train_lineage, ``enable_lineage``) emits any: with ``selective_enable``
#: every other task and DAG run returns from the listener before it builds an event or forks.
OUTPUTS = Path(tempfile.mkdtemp(prefix="sm-prefs-e2e-outputs-"))
LINEAGE_EVENTS = OUTPUTS / "openlineage-events.jsonl"
#: The guardrails' file cache of quotas and prices (keyed by a digest of the access key id).
PREFLIGHT_CACHE = OUTPUTS / "preflight-cache"
#: The environment of every deployment; a module's ``E2E_ENV`` adds to it (and wins).
DEFAULT_ENV = {
    "SM_PREFS_CACHE_DIR": str(PREFLIGHT_CACHE),
    "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
        {"type": "file", "log_file_path": str(LINEAGE_EVENTS), "append": True}
    ),
    "AIRFLOW__OPENLINEAGE__NAMESPACE": "sm-prefs-e2e",
    "AIRFLOW__OPENLINEAGE__SELECTIVE_ENABLE": "True",
}


@dataclass(frozen=True)
class Settings:
    """What a module's deployment is started with (its emulator scenario aside)."""

    executor: str
    env: tuple[tuple[str, str], ...]
    login: tuple[str, str] | None
    teams: tuple[str, ...]
    triggerers: int | None
    database: str


def settings_of(module: ModuleType) -> Settings:
    env = {**DEFAULT_ENV, **(getattr(module, "E2E_ENV", None) or {})}
    login = getattr(module, "E2E_LOGIN", None)
    return Settings(
        executor=getattr(module, "E2E_EXECUTOR", os.environ.get("SM_PREFS_E2E_EXECUTOR", "local")),
        env=tuple(sorted(env.items())),
        login=tuple(login) if login else None,  # type: ignore[arg-type]
        teams=tuple(getattr(module, "E2E_TEAMS", ())),
        triggerers=getattr(module, "E2E_TRIGGERERS", None),
        # PostgreSQL by default: SQLite stalls once dozens of tasks defer and resume at once (see the
        # report in docs/reliability.md); SM_PREFS_E2E_DB=sqlite runs the suite on SQLite anyway.
        database=os.environ.get("SM_PREFS_E2E_DB", "postgres"),
    )


def grouped(items: Sequence[Any], uses_deployment: Callable[[Any], bool]) -> list[Any]:
    """``items`` with the modules of one deployment key next to each other, in the order each key first
    appears; a module stays whole, its tests in their order (modules without a deployment first)."""
    with_deployment = {item.module for item in items if uses_deployment(item)}
    order: dict[Settings | None, int] = {None: -1}
    keys = {}
    for item in items:
        if item.module not in keys:
            keys[item.module] = settings_of(item.module) if item.module in with_deployment else None
            order.setdefault(keys[item.module], len(order))
    return sorted(items, key=lambda item: order[keys[item.module]])


@dataclass
class DeploymentPool:
    """The one running deployment and its key; a module with another key stops it and starts its own."""

    root: Callable[[], Path]
    current: tuple[Settings, LocalAirflow] | None = None
    started: list[LocalAirflow] = field(default_factory=list)

    def take(self, module: ModuleType) -> tuple[LocalAirflow, bool]:
        """The deployment for ``module`` and whether it is started anew (the caller then waits for it)."""
        settings = settings_of(module)
        scenario = getattr(module, "E2E_SCENARIO", "default")
        if self.current is not None:
            running_settings, deployment = self.current
            if running_settings == settings and self._healthy(deployment):
                deployment.sm.load_scenario(scenario)  # also the scenario's faults, none left of the last
                return deployment, False
            self.stop()
        deployment = LocalAirflow(
            self.root(),
            scenario=scenario,
            poll_interval=0.5,
            max_poll_interval=2.0,
            parallelism=24,
            database=settings.database,
            extra_env=dict(settings.env),
            login=settings.login,
            teams=settings.teams,
            triggerers=settings.triggerers,
            executor=settings.executor,
        )
        self.current = (settings, deployment)
        self.started.append(deployment)
        return deployment, True

    @staticmethod
    def _healthy(deployment: LocalAirflow) -> bool:
        """Every component still runs (a module that killed one restarts it, or the deployment is not
        handed on)."""
        try:
            deployment.supervisor.check_running()
        except Exception as err:
            sys.stderr.write(f"\nnot sharing the deployment: {err}\n")
            return False
        return True

    def stop(self) -> None:
        if self.current is None:
            return
        _, deployment = self.current
        self.current = None
        deployment.stop()
        sys.stderr.write(f"\ne2e deployment logs kept in {deployment.log_dir}\n")
