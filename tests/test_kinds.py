"""Per-kind facts: every name in a JobKindSpec exists in botocore's SageMaker model."""

from __future__ import annotations

import ast
from pathlib import Path

import boto3
import pytest

import airflow_provider_sm_prefs
from airflow_provider_sm_prefs.domain import hyperpod_outcome, kinds
from airflow_provider_sm_prefs.domain.kinds import GROUP_KIND, SPECS, JobKind, JobKindSpec, kind_of
from airflow_provider_sm_prefs.domain.record import CapacityRecord
from airflow_provider_sm_prefs.operators.reconciler import EVERY_KIND, SageMakerJobReconcilerOperator
from airflow_provider_sm_prefs.reconcile import groups
from airflow_provider_sm_prefs.reconcile.__main__ import parse_args

PACKAGE = Path(airflow_provider_sm_prefs.__file__).parent


@pytest.fixture(scope="module")
def model() -> object:
    return boto3.session.Session().client("sagemaker", region_name="us-east-1").meta.service_model


def _members(model: object, operation: str, direction: str) -> set[str]:
    op = model.operation_model(operation)  # type: ignore[attr-defined]
    shape = op.output_shape if direction == "output" else op.input_shape
    return set(shape.members)


def _op(method: str) -> str:
    return "".join(part.capitalize() for part in method.split("_"))


@pytest.mark.parametrize("kind", list(JobKind))
def test_every_operation_and_field_is_the_service_models(kind: JobKind, model: object) -> None:
    spec = kind.spec
    assert spec.kind is kind and SPECS[kind] is spec
    create_in = _members(model, _op(spec.create), "input")
    assert spec.name_field in create_in and spec.cluster_path[0] in create_in
    assert spec.arn_field in _members(model, _op(spec.create), "output")
    describe_out = _members(model, _op(spec.describe), "output")
    assert {spec.name_field, spec.arn_field, spec.status_field, spec.end_time_field} <= describe_out
    assert ("SecondaryStatus" in describe_out) is spec.secondary_status
    assert spec.name_field in _members(model, _op(spec.stop), "input")
    list_out = _members(model, _op(spec.list), "output")
    assert spec.summaries_field in list_out
    summary = model.operation_model(_op(spec.list)).output_shape.members[spec.summaries_field].member  # type: ignore[attr-defined]
    assert {spec.name_field, spec.status_field} <= set(summary.members)


def test_cluster_settings_are_found_where_each_kind_keeps_them() -> None:
    training = {"ResourceConfig": {"InstanceCount": 2}}
    processing = {"ProcessingResources": {"ClusterConfig": {"InstanceCount": 3}}}
    assert JobKind.TRAINING.spec.cluster_of(training) == {"InstanceCount": 2}
    assert JobKind.PROCESSING.spec.cluster_of(processing) == {"InstanceCount": 3}
    assert JobKind.PROCESSING.spec.cluster_of(training) == {}
    assert JobKind.PROCESSING.cluster_field == "ProcessingResources.ClusterConfig"


def test_a_response_tells_its_kind() -> None:
    assert kind_of({"TrainingJobName": "a", "TrainingJobStatus": "InProgress"}) is JobKind.TRAINING
    assert kind_of({"ProcessingJobStatus": "Completed"}) is JobKind.PROCESSING
    assert kind_of({"Name": "x"}) is None


def test_the_console_path_and_log_group_of_each_kind() -> None:
    """What the extra links (:mod:`airflow_provider_sm_prefs.links`) and the log readers open."""
    assert (JobKind.TRAINING.spec.console_path, JobKind.TRAINING.spec.log_group) == (
        "jobs",
        "/aws/sagemaker/TrainingJobs",
    )
    assert (JobKind.PROCESSING.spec.console_path, JobKind.PROCESSING.spec.log_group) == (
        "processing-jobs",
        "/aws/sagemaker/ProcessingJobs",
    )


def test_a_kinds_names_follow_from_its_kind_and_label_by_sagemakers_naming_rule() -> None:
    """Only the facts no rule gives are written per kind; every name SageMaker derives from the kind
    is derived the same way here (the service model test above checks each against botocore)."""
    spec = JobKindSpec(
        kind=JobKind.PROCESSING,
        label="Processing",
        cluster_path=("ProcessingResources", "ClusterConfig"),
        secondary_status=False,
        console_path="processing-jobs",
        pending_limit=False,
        training_plans=False,
        max_instance_count=100,
    )
    assert spec == JobKind.PROCESSING.spec
    assert (spec.name_field, spec.arn_field, spec.status_field, spec.end_time_field) == (
        "ProcessingJobName",
        "ProcessingJobArn",
        "ProcessingJobStatus",
        "ProcessingEndTime",
    )
    assert (spec.create, spec.describe, spec.stop, spec.list, spec.summaries_field) == (
        "create_processing_job",
        "describe_processing_job",
        "stop_processing_job",
        "list_processing_jobs",
        "ProcessingJobSummaries",
    )
    training = JobKind.TRAINING.spec
    assert (training.name_field, training.end_time_field, training.list, training.summaries_field) == (
        "TrainingJobName",
        "TrainingEndTime",
        "list_training_jobs",
        "TrainingJobSummaries",
    )


def test_the_facts_no_naming_rule_gives_are_the_documented_ones() -> None:
    # Training: SageMaker bounds the wait (MaxPendingTimeInSeconds) and entries may name a training plan;
    # processing: neither, and at most 100 instances (ProcessingClusterConfig.InstanceCount).
    training, processing = JobKind.TRAINING.spec, JobKind.PROCESSING.spec
    assert (training.pending_limit, training.training_plans, training.max_instance_count) == (
        True,
        True,
        None,
    )
    assert (processing.pending_limit, processing.training_plans, processing.max_instance_count) == (
        False,
        False,
        100,
    )


def _modules_spelling(value: str) -> list[str]:
    """The package modules whose code holds the string constant ``value`` (docstrings mention it, never equal it)."""
    return sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(
            isinstance(node, ast.Constant) and node.value == value
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )
    )


def test_the_hyperpod_group_kind_is_spelt_once_in_the_kinds_module() -> None:
    assert _modules_spelling("hyperpod-group") == ["domain/kinds.py"]


def test_every_module_names_the_group_kind_of_the_kinds_module_and_its_persisted_value_holds() -> None:
    assert GROUP_KIND == "hyperpod-group"  # in every capacity record and reconciler report already written
    assert hyperpod_outcome.GROUP_KIND is kinds.GROUP_KIND and groups.GROUP_KIND is kinds.GROUP_KIND
    assert GROUP_KIND not in {kind.value for kind in JobKind}  # a group has no JobKindSpec
    record = CapacityRecord(
        dag_id="d", task_id="t", run_id="r", map_index=-1, try_number=1, job_kind=GROUP_KIND
    )
    assert record.is_group and CapacityRecord.from_dict(record.as_dict()) == record


def test_the_reconciler_command_and_operator_look_at_the_same_job_kinds() -> None:
    assert tuple(kind.value for kind in JobKind) == EVERY_KIND
    assert SageMakerJobReconcilerOperator(task_id="r").kinds == list(EVERY_KIND)
    for kind in EVERY_KIND:
        assert parse_args(["--kind", kind]).kinds == [kind]
    # Groups are a switch of their own in both (``--no-hyperpod-groups``, ``hyperpod_groups=False``).
    with pytest.raises(SystemExit):
        parse_args(["--kind", GROUP_KIND])
    with pytest.raises(ValueError, match=GROUP_KIND):
        SageMakerJobReconcilerOperator(task_id="r", kinds=[GROUP_KIND])
