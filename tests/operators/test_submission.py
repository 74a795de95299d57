"""A clear is not a retry: how the operators tell them apart (the running-Airflow test is in tests/e2e)."""

from __future__ import annotations

from airflow_provider_sm_prefs.operators.submission import cleared_since


def test_a_clear_is_told_from_a_retry_by_max_tries() -> None:
    # Airflow raises max_tries on a clear (try_number + retries) and leaves it on a retry.
    assert cleared_since({"job_name": "j", "max_tries": 2}, 4)
    assert not cleared_since({"job_name": "j", "max_tries": 2}, 2)
    # A record written before max_tries was kept: a retry, as before.
    assert not cleared_since({"job_name": "j"}, 4)
    assert not cleared_since({"job_name": "j", "max_tries": 2}, None)
