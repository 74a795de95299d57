"""A clear is not a retry: how the operators tell them apart (the running-Airflow test is in tests/e2e)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sm_prefs.operators.submission import cleared_since
from tests.operators.test_dag_runs import training_config


def test_a_clear_is_told_from_a_retry_by_max_tries() -> None:
    # Airflow raises max_tries on a clear (try_number + retries) and leaves it on a retry.
    assert cleared_since({"job_name": "j", "max_tries": 2}, 4)
    assert not cleared_since({"job_name": "j", "max_tries": 2}, 2)
    # A record written before max_tries was kept: a retry, as before.
    assert not cleared_since({"job_name": "j"}, 4)
    assert not cleared_since({"job_name": "j", "max_tries": 2}, None)


@pytest.mark.usefixtures("airflow_db")
def test_a_retry_after_the_job_failed_submits_a_new_job(sm: Any, run_test_dag: Any) -> None:
    # A CPU-only list with nothing free fails at once; the first try dies right after Create, so the
    # retry finds the job Failed and submits the next one (-r2), which fails the same way.
    sm.load_scenario({"time_scale": 6000, "capacity": {"ml.c5.xlarge": [{"from": 0, "free": 0}]}})
    states, _ = run_test_dag(
        "t_train_crash",
        config=training_config(InstanceCount=1),
        prefs=["ml.c5.xlarge"],
        max_pending=None,
    )
    assert states["job"] == "failed"
    jobs = {j["name"]: j["status"] for j in sm.jobs()}
    assert jobs == {"nightly": "Failed", "nightly-r2": "Failed"}
