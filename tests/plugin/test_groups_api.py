"""HyperPod instance groups on the capacity page's API: records from real dag.test() runs of the group
operator against the offline SageMaker (a fallback mix, then a shortfall), read through Airflow's own
api-server app beside the jobs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.operators.test_hyperpod_runs import LIFECYCLE, ROLE, _client, _dags, _scenario, stepping
from tests.plugin import test_capacity_api
from tests.plugin.test_capacity_api import WIDE, get, token

#: The api-server app as the capacity API's tests start it (a module fixture: one app for this module).
client = test_capacity_api.client

P5, P5E, P4D = "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4d.24xlarge"


@pytest.fixture(scope="module")
def group_runs(airflow_db: None, offline_sm_server: Any) -> Iterator[dict[str, str]]:
    """Two runs of ``hp_page``: 8 nodes with p5 scarce (2 × p5 + 6 × p4d), then a shortfall; run ids by name."""
    sm = offline_sm_server
    runs: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as env:
        for key, value in sm.airflow_env(conn_id="aws_default").items():
            env.setenv(key, value)
        sm.load_scenario(_scenario(p5=2, p5e=0, p4d=8))
        with stepping(sm, 300):
            runs["mix"] = _dags().hp_page.test().run_id
        sm.load_scenario(_scenario(p5=0, p5e=0, p4d=4))
        _client(sm).create_cluster(
            ClusterName="nightly",
            InstanceGroups=[
                {
                    "InstanceGroupName": "gpu-workers",
                    "InstanceRequirements": {"InstanceTypes": [P5, P5E, P4D]},
                    "InstanceCount": 2,
                    "ExecutionRole": ROLE,
                    "LifeCycleConfig": LIFECYCLE,
                }
            ],
        )
        sm.advance(900)
        with stepping(sm, 300):
            runs["shortfall"] = _dags().hp_page.test().run_id
    yield runs


def test_a_group_row_shows_cluster_group_its_node_mix_and_its_fallback(
    client: Any, group_runs: dict[str, str]
) -> None:
    data = get(client, f"/api/capacity?{WIDE}&dag_id=hp_page", token("viewer", "viewer")).json()
    # Group tries are not jobs: the jobs' figures hold none of them.
    assert (data["summary"]["jobs"], data["jobs"]["rows"], data["configurations"]) == (0, [], [])
    assert data["summary"]["failures"] == {
        "capacity_timeout": 0,
        "quota": 0,
        "cpu_no_capacity": 0,
        "other": 0,
    }
    groups = data["groups"]
    assert groups["summary"] == {
        "records": 2,
        "tries": 2,
        "groups": 1,
        "reached": 1,
        "fell_back": 1,
        "fallback_rate": 1.0,
        "failures": 1,
    }
    rows = {row["run_id"]: row for row in groups["rows"]}
    mix = rows[group_runs["mix"]]
    assert (mix["cluster_name"], mix["group_name"], mix["job_kind"]) == (
        "nightly",
        "gpu-workers",
        "hyperpod-group",
    )
    assert mix["mix"] == "2 × ml.p5.48xlarge + 6 × ml.p4d.24xlarge"
    assert [(n["instance_type"], n["rank"], n["count"]) for n in mix["nodes"]] == [(P5, 1, 2), (P4D, 3, 6)]
    assert mix["fell_back"] is True and mix["phase"] == "reached-target"
    assert (mix["current_count"], mix["target_count"], mix["min_count"]) == (8, 8, 4)
    assert mix["hourly_cost"] == pytest.approx(2 * 55.04 + 6 * 37.69)
    assert mix["first_choice_hourly_cost"] == pytest.approx(8 * 55.04)
    assert mix["ti_url"].endswith("/tasks/scale") and mix["job_url"] == ""
    shortfall = rows[group_runs["shortfall"]]
    assert (shortfall["failure_kind"], shortfall["mix"], shortfall["group_name"]) == (
        "shortfall",
        "",
        "gpu-workers",
    )
    assert shortfall["target_count"] == 8 and shortfall["reason"]


def test_insights_give_the_groups_fallback_share_and_node_mix_per_run(
    client: Any, group_runs: dict[str, str]
) -> None:
    found = get(client, f"/api/insights?{WIDE}&dag_id=hp_page", token("viewer", "viewer")).json()
    assert found["summary"]["jobs"] == 0 and found["fallback_premium_usd"]["total"]["jobs"] == 0
    (group,) = found["cluster_groups"]
    assert (group["cluster_name"], group["group_name"], group["task_id"]) == (
        "nightly",
        "gpu-workers",
        "scale",
    )
    assert (group["tries"], group["reached"], group["fell_back"]) == (2, 1, 1)
    assert group["fallback_share"] is None and group["enough"] is False  # one try is no conclusion
    assert (group["nodes"], group["fallback_nodes"]) == (8, 6)
    assert group["failures"] == {"shortfall": 1} and group["instance_types"] == [P5, P4D]
    by_run = {run["run_id"]: run for run in group["mix_over_time"]}
    assert by_run[group_runs["mix"]]["counts"] == {P5: 2, P4D: 6}
    assert by_run[group_runs["shortfall"]]["counts"] == {}
    assert by_run[group_runs["shortfall"]]["failure_kind"] == "shortfall"


def test_the_filters_list_the_group_task(client: Any, group_runs: dict[str, str]) -> None:
    dags = {
        d["dag_id"]: d["tasks"] for d in get(client, "/api/filters", token("viewer", "viewer")).json()["dags"]
    }
    assert dags["hp_page"] == ["scale"]
