"""The deployments of a chaos run: each one's Airflow, run and reconciler, and the second deployment
that ``--deployments 2`` starts beside the first, sharing its offline SageMaker.

Apart from the driver (:mod:`harness.chaos`) because telling two deployments apart is its own concern:
which access key id signs each one's calls, which generated id each keeps, which jobs each owns (the
``sm-prefs:deployment`` tag), and the part of the report that compares them (:func:`foreign_stops`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_sm_prefs.domain.identity import IdentityKey
from harness.chaos_accounting import STOP_OPERATION, foreign_stops, passed
from harness.chaos_plan import DAG_ID, fleet_owners
from harness.config import FAKE_SECRET_ACCESS_KEY
from harness.deployment import LocalAirflow
from harness.reconciling import ReconcilerLoop
from harness.rest import TERMINAL_RUN_STATES

#: The second deployment's AWS access key id (the first keeps aws_default's): the offline SageMaker counts
#: calls per access key id, which tells the two deployments' StopTrainingJob calls apart.
SECOND_ACCESS_KEY_ID = "AKIASMPREFSDEPLOYB02"
#: The Airflow Variable a deployment keeps its generated id in (operators/identity.py).
DEPLOYMENT_VARIABLE = "sm_prefs_deployment_id"
#: The identity tag naming the deployment that created a job.
DEPLOYMENT_TAG = IdentityKey.DEPLOYMENT.value


@dataclass
class Deployment:
    """One deployment of a run: its Airflow, its fleet's run, and what tells its calls and jobs apart."""

    label: str
    af: LocalAirflow
    run_id: str
    specs: Sequence[Mapping[str, Any]]
    #: Its ``aws_default`` connection's access key id (the offline SageMaker counts calls by it).
    access_key_id: str
    #: Its generated id (the Airflow Variable), once a task created it.
    deployment_id: str | None = None
    #: Its reconciler loop (``--stop`` passes) while the fleet runs.
    loop: ReconcilerLoop = field(init=False)
    #: Its run had not ended by the deadline (and was failed).
    timed_out: bool = False

    def __post_init__(self) -> None:
        self.loop = ReconcilerLoop(self.af)

    def run_ended(self) -> bool:
        """Whether its run of the fleet has ended (False while its api-server does not answer)."""
        with contextlib.suppress(Exception):
            return bool(self.af.dag_run(DAG_ID, self.run_id)["state"] in TERMINAL_RUN_STATES)
        return False

    def read_deployment_id(self) -> str | None:
        """The id the deployment generated (its Airflow Variable), read over its REST API; None before
        any task created it or while the api-server is down."""
        if self.deployment_id is None:
            with contextlib.suppress(Exception):
                self.deployment_id = str(
                    self.af.api("GET", f"/api/v2/variables/{DEPLOYMENT_VARIABLE}")["value"]
                ).strip()
        return self.deployment_id

    def owners(self) -> dict[str, int]:
        """Its tasks' base job names (derived names need its id: none before it exists)."""
        named = all(spec["config"].get("TrainingJobName") for spec in self.specs)
        if not named and self.read_deployment_id() is None:
            return {}
        return fleet_owners(self.specs, self.run_id, self.deployment_id)


def second_deployment(root: Path, first: LocalAirflow, **kwargs: Any) -> LocalAirflow:
    """The second deployment of ``--deployments 2``, not started: the LocalExecutor with one scheduler and
    one triggerer, its own ``AIRFLOW_HOME`` and PostgreSQL server under ``root``, ``first``'s offline
    SageMaker, and an ``aws_default`` connection of its own access key id (:data:`SECOND_ACCESS_KEY_ID`).
    Neither sets ``[sm_prefs] deployment_id``: each generates its own."""
    sm = first.sm
    connection = {
        "conn_type": "aws",
        "login": SECOND_ACCESS_KEY_ID,
        "password": FAKE_SECRET_ACCESS_KEY,
        "extra": {"endpoint_url": sm.endpoint_url, "region_name": sm.region},
    }
    return LocalAirflow(
        root,
        executor="local",
        database="postgres",
        emulator_url=sm.endpoint_url,
        extra_env={"AIRFLOW_CONN_AWS_DEFAULT": json.dumps(connection)},
        **{
            "poll_interval": 2.0,
            "max_poll_interval": 5.0,
            "parallelism": 16,
            "startup_timeout": 480.0,
            **kwargs,
        },
    )


def job_tags(af: LocalAirflow, jobs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Each job's tags (ListTags), read from the offline SageMaker as anyone would."""
    client = af.sm.boto3_client("sagemaker")
    found = {}
    for job in jobs:
        pages = client.get_paginator("list_tags").paginate(ResourceArn=job["arn"])
        found[job["name"]] = {t["Key"]: t["Value"] for page in pages for t in page.get("Tags", [])}
    return found


def shared_sagemaker_report(
    af: LocalAirflow,
    deployments: Sequence[Deployment],
    results: Sequence[Mapping[str, Any]],
    jobs: Sequence[Mapping[str, Any]],
    tags: Mapping[str, Mapping[str, str]],
) -> dict[str, Any]:
    """The two-deployment part of the report: each deployment's id and invariants, the foreign stops, the
    jobs no deployment owns."""
    ids = [d.deployment_id for d in deployments]
    stats = af.sm.stats()
    stop_calls = {
        name: int(ops.get(STOP_OPERATION, 0))
        for name, ops in stats.get("jobs", {}).items()
        if ops.get(STOP_OPERATION)
    }
    owner_of = {name: tags.get(name, {}).get(DEPLOYMENT_TAG) for name in {*stop_calls, *tags}}
    foreign = foreign_stops(
        owner_of,
        {str(d.deployment_id): list(d.loop.ledger.stopped) for d in deployments},
        stop_calls,
        {
            str(d.deployment_id): int(
                stats.get("access_keys", {}).get(d.access_key_id, {}).get(STOP_OPERATION, 0)
            )
            for d in deployments
        },
        int(stats.get("operations", {}).get(STOP_OPERATION, 0)),
    )
    unowned = [
        f"{j['name']} (tag {tags.get(j['name'], {}).get(DEPLOYMENT_TAG)})"
        for j in jobs
        if tags.get(j["name"], {}).get(DEPLOYMENT_TAG) not in ids
    ]
    ids_differ = None not in ids and len(set(ids)) == len(ids)
    return {
        "deployments": [
            {
                "label": d.label,
                "executor": "CeleryExecutor" if d.af.config.executor == "celery" else "LocalExecutor",
                "schedulers": d.af.config.schedulers,
                "triggerers": d.af.config.triggerers,
                "workers": d.af.config.workers,
                "deployment_id": d.deployment_id,
                "access_key_id": d.access_key_id,
                "run_id": d.run_id,
                "killed": d.af is af,
                "result": dict(result),
                "ok": passed(result),
            }
            for d, result in zip(deployments, results, strict=True)
        ],
        "deployment_ids_differ": ids_differ,
        "foreign_stops": foreign,
        "unowned_jobs": unowned,
        "shared_ok": ids_differ
        and foreign["count"] == 0
        and not unowned
        and all(passed(result) for result in results),
    }
