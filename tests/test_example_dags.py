"""Example DAGs import cleanly, without connections, variables, network or database at parse time."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

DAGS = Path(__file__).resolve().parent.parent / "dags_examples"
EXPECTED = {
    "sm_prefs_hyperpod_nightly",
    "sm_prefs_job_reconciler",
    "sm_prefs_nightly_retrain",
    "sm_prefs_processing_cpu",
    "sm_prefs_watch_external_job",
}

_PARSE_OFFLINE = textwrap.dedent(
    """
    import socket, sys
    attempts = []
    def refuse(self, address, *a, **k):
        attempts.append(address)
        raise OSError(f"network access at parse time: {address}")
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = lambda address, *a, **k: refuse(None, address)
    from tests.airflow_versions import DagBag
    bag = DagBag(sys.argv[1])
    print("DAGS", sorted(bag.dag_ids))
    print("ERRORS", dict(bag.import_errors))
    print("NETWORK", attempts)
    sys.exit(1 if bag.import_errors or attempts else 0)
    """
)


def test_example_dags_parse_with_no_network_and_no_database(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        # A database that cannot exist: any DB access at parse time would fail the import.
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/missing/dir/airflow.db",
    }
    env.pop("AIRFLOW_CONN_AWS_DEFAULT", None)
    result = subprocess.run(
        [sys.executable, "-c", _PARSE_OFFLINE, str(DAGS)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"DAGS {sorted(EXPECTED)}" in result.stdout
    assert "NETWORK []" in result.stdout


def test_invalid_literal_preferences_fail_the_dag_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad_dag.py"
    bad.write_text(
        textwrap.dedent(
            """
            from datetime import datetime
            from airflow.sdk import DAG
            from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator
            with DAG("bad", start_date=datetime(2026, 1, 1), schedule=None):
                SageMakerPreferenceTrainingOperator(
                    task_id="train",
                    config={"TrainingJobName": "x", "ResourceConfig": {"InstanceCount": 1}},
                    instance_preferences=["ml.g5.48xlarge", "ml.g5.48xlarge"],
                )
            """
        )
    )
    from tests.airflow_versions import DagBag

    bag = DagBag(str(tmp_path))
    assert list(bag.import_errors) == [str(bad)]
    assert "instance_preferences[1]: ml.g5.48xlarge appears twice" in next(iter(bag.import_errors.values()))
