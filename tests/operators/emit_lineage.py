"""Run test DAGs with dag.test() in a process of its own, with Airflow's OpenLineage provider writing
every event to a file: ``python tests/operators/emit_lineage.py EVENTS_FILE DAG_ID...``.

A process of its own because Airflow decides once per process, when it loads plugins, whether the
OpenLineage listener is registered; the test session has loaded them without a transport. The
environment (Airflow home, DAG bundles, the ``aws_default`` connection to the offline SageMaker)
comes from the test session that starts this.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(events_file: str, dag_ids: list[str]) -> dict[str, dict[str, str | None]]:
    os.environ["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
        {"type": "file", "log_file_path": events_file, "append": True}
    )
    os.environ["AIRFLOW__OPENLINEAGE__NAMESPACE"] = "sm-prefs-tests"

    import importlib.util

    path = Path(__file__).resolve().parent.parent / "dags" / "sm_prefs_lineage_dags.py"
    spec = importlib.util.spec_from_file_location("sm_prefs_lineage_dags", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    states = {}
    for dag_id in dag_ids:
        dagrun = getattr(module, dag_id).test()
        states[dag_id] = {ti.task_id: ti.state for ti in dagrun.get_task_instances()}
    return states


if __name__ == "__main__":
    states = main(sys.argv[1], sys.argv[2:])
    # One write, on a line of its own: a log line another thread writes meanwhile cannot split it.
    sys.stdout.write("\nSTATES " + json.dumps(states) + "\n")
    sys.stdout.flush()
