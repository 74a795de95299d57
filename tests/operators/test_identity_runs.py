"""Real dag.test() runs: the job an operator created carries the Airflow identity tags (ListTags against
the offline SageMaker), next to the config's own; a bad or clashing tag fails before any Create."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.operators.test_dag_runs import NIGHTLY, creates, processing_config, training_config

pytestmark = pytest.mark.usefixtures("airflow_db")

CPU = [{"instance_type": "ml.m5.xlarge", "instance_count": 1}]


def tags_of(sm: Any, name: str) -> dict[str, str]:
    client = sm.boto3_client("sagemaker")
    return {t["Key"]: t["Value"] for t in client.list_tags(ResourceArn=sm.job(name)["arn"])["Tags"]}


def test_a_training_job_carries_dag_task_run_map_index_try_and_deployment(
    sm: Any, run_test_dag: Any, capacity_record: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", "prod-eu")
    config = training_config(tags={"team": "ml"})
    states, xcom = run_test_dag("t_train_capacity", config=config, prefs=NIGHTLY, max_pending=3600)
    assert states == {"job": "success", "consume": "success"} and xcom is not None
    tags = tags_of(sm, "nightly")
    assert tags["team"] == "ml"  # the user's own tag is kept
    assert tags["sm-prefs:dag-id"] == "t_train_capacity"
    assert tags["sm-prefs:task-id"] == "job"
    assert tags["sm-prefs:run-id"].startswith("manual__")
    assert (tags["sm-prefs:map-index"], tags["sm-prefs:try-number"]) == ("-1", "1")
    assert tags["sm-prefs:deployment"] == "prod-eu"
    # The operator pushes what it tagged the job with, and its record (the capacity page's row) says it too.
    ours = {k: v for k, v in tags.items() if k.startswith("sm-prefs:")}
    assert xcom["identity_tags"] == ours
    record = capacity_record("t_train_capacity")
    assert record is not None and record["identity_tags"] == ours


def test_without_a_configured_id_each_deployment_generates_its_own_even_from_the_same_compose_file(
    sm: Any, run_test_dag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow's compose file gives every deployment the same API server URL, which earlier releases hashed
    into the id: two such deployments shared it. The id is now generated once and kept in the deployment's
    own metadata database."""
    from airflow.models.variable import Variable

    from airflow_provider_sm_prefs.domain.identity import default_deployment_id
    from airflow_provider_sm_prefs.operators import identity

    compose_url = "http://airflow-apiserver:8080/execution/"
    monkeypatch.delenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", raising=False)
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", compose_url)

    def one_deployment(job: str) -> str:
        """A run in a deployment of its own: a metadata database without the Variable, a fresh process."""
        Variable.delete(identity.DEPLOYMENT_VARIABLE)
        monkeypatch.setattr(identity, "_generated", {})
        states, _ = run_test_dag(
            "t_process", config={**processing_config(), "ProcessingJobName": job}, prefs=CPU, max_pending=3600
        )
        assert states["job"] == "success"
        tags = tags_of(sm, job)
        assert tags["sm-prefs:dag-id"] == "t_process"
        return tags["sm-prefs:deployment"]

    first, second = one_deployment("prep-a"), one_deployment("prep-b")
    for generated in (first, second):
        assert re.fullmatch(r"af-[0-9a-f]{16}", generated), generated
    assert first != second
    assert default_deployment_id(compose_url) not in (first, second)
    # Kept in the database: the next run (any process of the deployment) reads the same id.
    assert Variable.get(identity.DEPLOYMENT_VARIABLE) == second
    monkeypatch.setattr(identity, "_generated", {})
    states, _ = run_test_dag(
        "t_process",
        config={**processing_config(), "ProcessingJobName": "prep-c"},
        prefs=CPU,
        max_pending=3600,
    )
    assert tags_of(sm, "prep-c")["sm-prefs:deployment"] == second


def test_a_retry_that_reattaches_keeps_the_tags_of_the_try_that_created_the_job(
    sm: Any, run_test_dag: Any, capacity_record: Any
) -> None:
    states, xcom = run_test_dag("t_train_crash", config=training_config(), prefs=NIGHTLY, max_pending=3600)
    assert states == {"job": "success", "consume": "success"} and creates(sm) == 1
    assert tags_of(sm, "nightly")["sm-prefs:try-number"] == "1"
    assert xcom is not None and xcom["identity_tags"]["sm-prefs:try-number"] == "1"
    # Try 2's record names the try that created the job, as the job's tags do.
    record = capacity_record("t_train_crash")
    assert record is not None and (record["try_number"], record["identity_tags"]["sm-prefs:try-number"]) == (
        2,
        "1",
    )


def test_a_user_tag_with_an_identity_key_fails_before_create_naming_the_key(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    config = training_config(tags={"sm-prefs:dag-id": "mine"})
    states, _ = run_test_dag("t_train_capacity", config=config, prefs=NIGHTLY, max_pending=3600)
    assert states["job"] == "failed"
    assert creates(sm) == 0 and sm.stats()["jobs"] == {}
    out = capfd.readouterr()
    assert "config.Tags[0].Key: 'sm-prefs:dag-id' is an identity tag" in out.out + out.err


def test_more_than_50_tags_in_all_fail_before_create(
    sm: Any, run_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    config = training_config(tags={f"k{i}": "v" for i in range(44)})
    states, _ = run_test_dag("t_train_capacity", config=config, prefs=NIGHTLY, max_pending=3600)
    assert states["job"] == "failed" and creates(sm) == 0
    out = capfd.readouterr()
    # Six identity tags and the hand-off tag: t_train_capacity leaves its job running (wait_for_completion=False).
    assert "44 tags and 7 identity tags make 51; AWS allows at most 50" in out.out + out.err


def test_identity_tags_false_sends_only_the_users_tags(
    sm: Any, run_test_dag: Any, capacity_record: Any
) -> None:
    config = training_config(tags={f"k{i}": "v" for i in range(50)})  # 50 of the user's own fit then
    states, xcom = run_test_dag("t_train_untagged", config=config, prefs=NIGHTLY, max_pending=3600)
    assert states["job"] == "success" and xcom is not None
    tags = tags_of(sm, "nightly")
    assert len(tags) == 50 and not any(k.startswith("sm-prefs:") for k in tags)
    assert xcom["identity_tags"] is None
    record = capacity_record("t_train_untagged")
    assert record is not None and record["identity_tags"] == {}


def test_the_config_switch_turns_them_off_for_the_deployment(
    sm: Any, run_test_dag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__SM_PREFS__IDENTITY_TAGS", "False")
    states, _ = run_test_dag("t_train_capacity", config=training_config(), prefs=NIGHTLY, max_pending=3600)
    assert states["job"] == "success"
    assert tags_of(sm, "nightly") == {}
