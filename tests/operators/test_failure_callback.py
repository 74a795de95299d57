"""The operators' default on_failure_callback (callbacks.StopUnattendedJob) against the offline SageMaker.

The callback is what Airflow runs when it fails a task without running it (the scheduler race
apache/airflow#72716 sends a TaskCallbackRequest to the DAG processor); here it is called directly
with the context shapes of both places it runs: the DAG processor (parsed task, possibly a
MappedOperator; XCom readable, task state store not) and the task runner (the task itself).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_provider_sm_prefs.callbacks import (
    STOP_UNATTENDED_JOB,
    StopUnattendedJob,
    operator_settings,
    recorded_job_name,
    with_job_stop,
)
from airflow_provider_sm_prefs.domain.identity import AirflowIdentity, OwnerClaim
from airflow_provider_sm_prefs.domain.outcome import XComKey
from airflow_provider_sm_prefs.domain.preferences import JobKind, build_request
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook
from airflow_provider_sm_prefs.operators import SageMakerPreferenceTrainingOperator
from offline_sagemaker.jobs import training_config
from tests.airflow_versions import DagSerialization, sends_failure_callback

G5, P4D = "ml.g5.48xlarge", "ml.p4d.24xlarge"
PREFS = [{"instance_type": P4D, "instance_count": 1}, {"instance_type": G5, "instance_count": 4}]


def config(name: str = "cb") -> dict[str, Any]:
    return training_config(name)


def user_callback(context: Any) -> None:
    pass


class FakeTI:
    """The part of a RuntimeTaskInstance the callback uses; records xcom_pull calls."""

    def __init__(self, xcom: dict[str, Any] | None = None, map_index: int = -1) -> None:
        self.dag_id, self.run_id = "cb_dag", "cb_run"
        self.task_id = "job"
        self.map_index = map_index
        self.xcom = xcom or {}
        self.pulls: list[dict[str, Any]] = []

    def xcom_pull(self, **kwargs: Any) -> Any:
        self.pulls.append(kwargs)
        return self.xcom.get(kwargs["key"])


class FakeStore:
    def __init__(self, value: Any = None, error: bool = False) -> None:
        self.value, self.error = value, error

    def get(self, key: str) -> Any:
        if self.error:  # what the DAG processor's supervisor answers: an unhandled request
            raise RuntimeError("Unhandled request")
        return self.value if key == "sm_prefs_job" else None


@pytest.fixture
def slow_sm(sm: Any) -> Any:
    """A real-time clock: a new job stays InProgress (Starting) for the whole test."""
    sm.load_scenario(
        {
            "name": "callback-slow",
            "time_scale": 1,
            "job_runtime_seconds": 3600,
            "phase_seconds": {"starting": 600, "downloading": 30, "uploading": 30, "stopping": 600},
        }
    )
    return sm


@pytest.fixture(autouse=True)
def deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__SM_PREFS__DEPLOYMENT_ID", "tests")


WEST_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1"


def create(name: str, map_index: int = -1, deployment: str = "tests", region: str | None = None) -> None:
    """A job as the task instance FakeTI stands for created it: tagged with its identity (``deployment``),
    in ``region`` (the connection's by default; us-west-2 with an image of its own)."""
    tags = AirflowIdentity("cb_dag", "job", "cb_run", map_index, 1, deployment).as_dict()
    request, prefs = build_request("training", training_config(name, tags=tags), PREFS, 3600)
    if region == "us-west-2":
        request["AlgorithmSpecification"]["TrainingImage"] = WEST_IMAGE
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default", region_name=region)
    hook.create_job(JobKind.TRAINING, request, prefs)


def stops(sm: Any, name: str) -> int:
    return int(sm.stats()["jobs"].get(name, {}).get("StopTrainingJob", 0))


def operator(**kwargs: Any) -> SageMakerPreferenceTrainingOperator:
    return SageMakerPreferenceTrainingOperator(
        task_id="job", config=config(), instance_preferences=PREFS, **kwargs
    )


# -- attaching ---------------------------------------------------------------------------------------------


def test_with_job_stop_appends_once_after_the_users_callbacks() -> None:
    assert with_job_stop(None) == [STOP_UNATTENDED_JOB]
    assert with_job_stop(user_callback) == [user_callback, STOP_UNATTENDED_JOB]
    assert with_job_stop([user_callback]) == [user_callback, STOP_UNATTENDED_JOB]
    assert with_job_stop([user_callback, STOP_UNATTENDED_JOB]) == [user_callback, STOP_UNATTENDED_JOB]
    assert with_job_stop([StopUnattendedJob()])[0] is not STOP_UNATTENDED_JOB  # no duplicate added


def test_operators_carry_the_callback_next_to_the_users_one() -> None:
    assert operator().on_failure_callback == [STOP_UNATTENDED_JOB]
    assert operator(on_failure_callback=user_callback).on_failure_callback == [
        user_callback,
        STOP_UNATTENDED_JOB,
    ]
    assert sends_failure_callback(operator())
    with DAG(
        "cb_defaults", schedule=None, start_date=datetime(2026, 1, 1), default_args={"retries": 0}
    ) as dag:
        from_default_args = SageMakerPreferenceTrainingOperator(
            task_id="job", config=config(), instance_preferences=PREFS
        )
    assert dag.get_task("job") is from_default_args
    with DAG(
        "cb_dag_default",
        schedule=None,
        start_date=datetime(2026, 1, 1),
        default_args={"on_failure_callback": user_callback},
    ):
        task = SageMakerPreferenceTrainingOperator(task_id="job", config=config(), instance_preferences=PREFS)
    assert task.on_failure_callback == [user_callback, STOP_UNATTENDED_JOB]


def test_mapped_tasks_carry_it_too_so_the_scheduler_sends_the_callback() -> None:
    """``.partial()`` never calls __init__ at parse time: it takes the callback from __init__'s default."""
    with DAG("cb_mapped", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        SageMakerPreferenceTrainingOperator.partial(
            task_id="job", instance_preferences=PREFS, aws_conn_id="other", stop_job_on_kill=True
        ).expand(config=[config("a"), config("b")])
    mapped = dag.get_task("job")
    assert mapped.on_failure_callback == [STOP_UNATTENDED_JOB]
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert sends_failure_callback(serialized.get_task("job"))
    kind, settings = operator_settings(mapped, {})
    assert kind is JobKind.TRAINING
    assert settings == {
        "aws_conn_id": "other",
        "region_name": None,
        "verify": None,
        "botocore_config": None,
        "stop_job_on_kill": True,
    }


def test_a_dag_default_callback_keeps_the_stop_on_mapped_tasks() -> None:
    """A DAG's ``default_args`` callback replaces the operator's default in ``.partial()`` on every minor."""
    with DAG(
        "cb_mapped_default",
        schedule=None,
        start_date=datetime(2026, 1, 1),
        default_args={"on_failure_callback": user_callback},
    ) as dag:
        SageMakerPreferenceTrainingOperator.partial(task_id="job", instance_preferences=PREFS).expand(
            config=[config("a")]
        )
        SageMakerPreferenceTrainingOperator.partial(
            task_id="own", instance_preferences=PREFS, on_failure_callback=[user_callback, user_callback]
        ).expand(config=[config("b")])
    assert dag.get_task("job").on_failure_callback == [user_callback, STOP_UNATTENDED_JOB]
    assert dag.get_task("own").on_failure_callback == [user_callback, user_callback, STOP_UNATTENDED_JOB]
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert sends_failure_callback(serialized.get_task("job"))


# -- deciding and stopping ---------------------------------------------------------------------------------


def test_stops_a_job_still_in_progress_as_the_dag_processor_calls_it(slow_sm: Any) -> None:
    create("cb-running", map_index=3)
    ti = FakeTI({XComKey.JOB_NAME.value: "cb-running"}, map_index=3)
    STOP_UNATTENDED_JOB({"task": operator(), "ti": ti, "task_state_store": FakeStore(error=True)})
    assert stops(slow_sm, "cb-running") == 1
    assert slow_sm.job("cb-running")["status"] == "Stopping"
    assert ti.pulls == [
        {"task_ids": "job", "key": XComKey.JOB_NAME.value, "map_indexes": 3},
        {"task_ids": "job", "key": XComKey.REGION.value, "map_indexes": 3},
    ]


def test_stops_the_job_in_the_region_the_task_moved_it_to(slow_sm: Any) -> None:
    """A stage in one of the task's regions: the job is there, under the region's own connection if any."""
    create("cb-west", region="us-west-2")
    create("cb-west")  # the same name in the task's own region: not the one to stop
    regions = [
        {
            "region": "us-west-2",
            "after": 3600,
            "overrides": {
                "AlgorithmSpecification": {"TrainingImage": WEST_IMAGE},
                "OutputDataConfig": {"S3OutputPath": "s3://w/o"},
            },
        }
    ]
    ti = FakeTI({XComKey.JOB_NAME.value: "cb-west", XComKey.REGION.value: "us-west-2"})
    STOP_UNATTENDED_JOB(
        {"task": operator(regions=regions), "ti": ti, "task_state_store": FakeStore(error=True)}
    )
    assert slow_sm.job("cb-west", region="us-west-2")["status"] == "Stopping"
    assert slow_sm.job("cb-west", region="us-east-1")["status"] == "InProgress"


def test_leaves_alone_a_job_of_another_deployment_in_the_region_the_xcom_names(slow_sm: Any) -> None:
    """The XCom names a region and a job there, but the job's tags are another deployment's: not ours."""
    create("cb-foreign", deployment="someone-else", region="us-west-2")
    ti = FakeTI({XComKey.JOB_NAME.value: "cb-foreign", XComKey.REGION.value: "us-west-2"})
    STOP_UNATTENDED_JOB({"task": operator(), "ti": ti, "task_state_store": FakeStore(error=True)})
    assert slow_sm.job("cb-foreign", region="us-west-2")["status"] == "InProgress"
    assert stops(slow_sm, "cb-foreign") == 0


def test_leaves_alone_a_job_our_code_already_stopped_or_that_ended(slow_sm: Any) -> None:
    """CapacityTimeoutError stopped its job (Stopping); a failed/completed/stopped job has ended."""
    create("cb-stopped")
    SageMakerPreferenceHook(aws_conn_id="aws_default").stop_job(
        JobKind.TRAINING, "cb-stopped", OwnerClaim(created=True)
    )
    STOP_UNATTENDED_JOB({"task": operator(), "ti": FakeTI({XComKey.JOB_NAME.value: "cb-stopped"})})
    assert stops(slow_sm, "cb-stopped") == 1  # only the operator's own stop


def test_leaves_alone_a_job_that_never_reached_sagemaker(slow_sm: Any) -> None:
    STOP_UNATTENDED_JOB({"task": operator(), "ti": FakeTI({XComKey.JOB_NAME.value: "cb-never"})})
    assert stops(slow_sm, "cb-never") == 0


def test_respects_stop_job_on_kill_false(slow_sm: Any) -> None:
    create("cb-keep")
    STOP_UNATTENDED_JOB(
        {"task": operator(stop_job_on_kill=False), "ti": FakeTI({XComKey.JOB_NAME.value: "cb-keep"})}
    )
    assert stops(slow_sm, "cb-keep") == 0
    assert slow_sm.job("cb-keep")["status"] == "InProgress"


def test_falls_back_to_the_state_store_in_the_worker(slow_sm: Any) -> None:
    """A try that failed before pushing its XCom: the previous try's job is in the state store."""
    create("cb-earlier-try")
    store = FakeStore({"job_name": "cb-earlier-try", "submission": 1, "kind": "training"})
    STOP_UNATTENDED_JOB({"task": operator(), "ti": FakeTI(), "task_state_store": store})
    assert stops(slow_sm, "cb-earlier-try") == 1


def test_never_stops_a_job_of_the_same_name_tagged_by_another_deployment(slow_sm: Any) -> None:
    create("cb-theirs", deployment="af-theirs")
    STOP_UNATTENDED_JOB({"task": operator(), "ti": FakeTI({XComKey.JOB_NAME.value: "cb-theirs"})})
    assert stops(slow_sm, "cb-theirs") == 0 and slow_sm.job("cb-theirs")["status"] == "InProgress"


def test_nothing_recorded_means_nothing_to_do() -> None:
    assert recorded_job_name({"ti": FakeTI(), "task_state_store": FakeStore(error=True)}) is None
    assert recorded_job_name({"ti": FakeTI(), "task_state_store": FakeStore(None)}) is None
    STOP_UNATTENDED_JOB({"task": operator(), "ti": FakeTI()})  # no AWS call: no connection needed


def test_a_foreign_task_is_ignored() -> None:
    class Other:
        aws_conn_id = "aws_default"

    STOP_UNATTENDED_JOB({"task": Other(), "ti": FakeTI({XComKey.JOB_NAME.value: "x"})})
