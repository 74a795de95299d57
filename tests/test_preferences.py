"""Every client-side rule of the instance preference list, on both sides."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from datetime import timedelta
from typing import Any

import botocore
import botocore.session
import pytest
from botocore.validate import ParamValidator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_sm_prefs.domain import service_model
from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.preferences import (
    InstancePreference,
    InstancePreferenceList,
    JobKind,
    build_request,
    check_request,
    to_seconds,
)

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"
_MODEL = botocore.session.get_session().get_service_model("sagemaker")


def training_config(**resource: Any) -> dict[str, Any]:
    return {
        "TrainingJobName": "nightly",
        "AlgorithmSpecification": {
            "TrainingImage": "123.dkr.ecr.us-east-1.amazonaws.com/t:1",
            "TrainingInputMode": "File",
        },
        "RoleArn": "arn:aws:iam::123456789012:role/sm",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "ResourceConfig": {"VolumeSizeInGB": 50, **resource},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    }


def processing_config(**cluster: Any) -> dict[str, Any]:
    return {
        "ProcessingJobName": "prep",
        "AppSpecification": {"ImageUri": "123.dkr.ecr.us-east-1.amazonaws.com/p:1"},
        "RoleArn": "arn:aws:iam::123456789012:role/sm",
        "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30, **cluster}},
    }


def botocore_accepts(operation: str, request: dict[str, Any]) -> None:
    report = ParamValidator().validate(request, _MODEL.operation_model(operation).input_shape)
    assert not report.has_errors(), report.generate_report()


def problems_of(excinfo: pytest.ExceptionInfo[InvalidInstancePreferencesError]) -> str:
    return "\n".join(excinfo.value.problems)


# -- accepted input forms ---------------------------------------------------------------------------


def test_accepts_objects_snake_case_api_cased_and_string_counts_alike() -> None:
    objects = InstancePreferenceList(
        [InstancePreference("ml.g6e.48xlarge", 2), InstancePreference("ml.g5.48xlarge", 4)]
    )
    snake = InstancePreferenceList(
        [
            {"instance_type": "ml.g6e.48xlarge", "instance_count": 2},
            {"instance_type": "ml.g5.48xlarge", "instance_count": "4"},
        ]
    )
    api = InstancePreferenceList(
        [
            {"InstanceType": "ml.g6e.48xlarge", "InstanceCount": "2"},
            {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 4},
        ]
    )
    assert objects == snake == api
    assert api[1].instance_count == 4 and isinstance(api[1].instance_count, int)


def test_accepts_a_template_rendered_list_string() -> None:
    rendered = "[{'instance_type': 'ml.g5.12xlarge', 'instance_count': '2'}, {'instance_type': 'ml.g6.12xlarge', 'instance_count': 2}]"
    prefs = InstancePreferenceList(rendered)
    assert prefs.instance_types == ["ml.g5.12xlarge", "ml.g6.12xlarge"]
    assert InstancePreferenceList('["ml.g5.xlarge", "ml.g6.xlarge"]').instance_types == [
        "ml.g5.xlarge",
        "ml.g6.xlarge",
    ]


def test_as_list_round_trips_and_is_json_safe() -> None:
    import json

    prefs = InstancePreferenceList(
        [InstancePreference("ml.p5.48xlarge", 2, PLAN), InstancePreference("ml.p4d.24xlarge", 4)]
    )
    assert InstancePreferenceList(json.loads(json.dumps(prefs.as_list()))) == prefs


@pytest.mark.parametrize("count", ["two", "2.5", 2.5, True, [2]])
def test_non_integer_counts_are_rejected_naming_the_entry(count: Any) -> None:
    with pytest.raises(InvalidInstancePreferencesError) as err:
        InstancePreferenceList(
            [
                {"instance_type": "ml.g5.xlarge", "instance_count": 1},
                {"instance_type": "ml.g6.xlarge", "instance_count": count},
            ]
        )
    assert "instance_preferences[1].instance_count" in problems_of(err)


def test_unknown_keys_get_a_did_you_mean() -> None:
    with pytest.raises(InvalidInstancePreferencesError) as err:
        InstancePreferenceList([{"instance_type": "ml.g5.xlarge", "instance_cout": 2}])
    assert (
        "instance_preferences[0]: unknown key 'instance_cout'; did you mean 'instance_count'?"
        in problems_of(err)
    )


# -- R1: 1..5 entries --------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 5])
def test_r1_one_to_five_entries_accepted(n: int) -> None:
    types = ["ml.g6e.48xlarge", "ml.g5.48xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g6.48xlarge"][:n]
    assert len(InstancePreferenceList(types)) == n


def test_r1_six_entries_rejected_naming_what_to_drop() -> None:
    types = [
        "ml.g6e.48xlarge",
        "ml.g5.48xlarge",
        "ml.p4d.24xlarge",
        "ml.p5.48xlarge",
        "ml.g6.48xlarge",
        "ml.g4dn.12xlarge",
    ]
    with pytest.raises(InvalidInstancePreferencesError) as err:
        InstancePreferenceList(types)
    assert "6 entries given; SageMaker accepts at most 5" in problems_of(err)
    assert "ml.g4dn.12xlarge" in problems_of(err)


def test_r1_empty_list_rejected() -> None:
    with pytest.raises(InvalidInstancePreferencesError, match="the list is empty"):
        InstancePreferenceList([])


# -- R2: each type once ------------------------------------------------------------------------------


def test_r2_duplicate_type_rejected_naming_both_entries() -> None:
    with pytest.raises(InvalidInstancePreferencesError) as err:
        InstancePreferenceList(["ml.g6e.48xlarge", "ml.g5.48xlarge", "ml.g5.48xlarge"])
    assert (
        "instance_preferences[2]: ml.g5.48xlarge appears twice (also at instance_preferences[1]); "
        "each instance type may appear once" in problems_of(err)
    )


def test_r2_distinct_types_accepted() -> None:
    assert InstancePreferenceList(["ml.g5.48xlarge", "ml.g5.24xlarge"]).instance_types == [
        "ml.g5.48xlarge",
        "ml.g5.24xlarge",
    ]


# -- R3: counts uniform or per entry -----------------------------------------------------------------


def test_r3_uniform_count_at_job_level_accepted() -> None:
    request, _ = build_request(
        "training", training_config(InstanceCount=2), ["ml.g6e.48xlarge", "ml.g5.48xlarge"], 3600
    )
    assert request["ResourceConfig"]["InstanceCount"] == 2
    assert all("InstanceCount" not in e for e in request["ResourceConfig"]["InstancePreferences"])


def test_r3_per_entry_counts_accepted() -> None:
    request, prefs = build_request(
        "training",
        training_config(),
        [
            {"instance_type": "ml.g6e.48xlarge", "instance_count": 2},
            {"instance_type": "ml.g5.48xlarge", "instance_count": 4},
        ],
        3600,
    )
    assert prefs.per_entry_counts
    assert "InstanceCount" not in request["ResourceConfig"]


def test_r3_counts_in_both_places_rejected() -> None:
    with pytest.raises(InvalidInstancePreferencesError) as err:
        build_request(
            "training",
            training_config(InstanceCount=2),
            [{"instance_type": "ml.g6e.48xlarge", "instance_count": 2}],
        )
    assert "ResourceConfig.InstanceCount: counts are given both per entry and at job level" in problems_of(
        err
    )


def test_r3_counts_nowhere_rejected() -> None:
    with pytest.raises(InvalidInstancePreferencesError, match="no count anywhere"):
        build_request("training", training_config(), ["ml.g6e.48xlarge"])


def test_r3_counts_on_only_some_entries_rejected_naming_the_missing() -> None:
    with pytest.raises(InvalidInstancePreferencesError) as err:
        InstancePreferenceList([{"instance_type": "ml.g6e.48xlarge", "instance_count": 2}, "ml.g5.48xlarge"])
    assert "instance_preferences[1]: instance_count missing" in problems_of(err)


@pytest.mark.parametrize("count", [0, -1])
def test_counts_below_one_rejected(count: int) -> None:
    with pytest.raises(
        InvalidInstancePreferencesError, match=r"instance_preferences\[0\].instance_count: .* out of range"
    ):
        InstancePreferenceList([{"instance_type": "ml.g5.xlarge", "instance_count": count}])


def test_processing_count_above_100_rejected_and_100_accepted() -> None:
    assert InstancePreferenceList([{"instance_type": "ml.m5.xlarge", "instance_count": 100}], "processing")
    with pytest.raises(InvalidInstancePreferencesError, match=r"out of range; use 1..100"):
        InstancePreferenceList([{"instance_type": "ml.m5.xlarge", "instance_count": 101}], "processing")


# -- R4: not with a job-level InstanceType -----------------------------------------------------------


def test_r4_job_level_instance_type_rejected() -> None:
    with pytest.raises(InvalidInstancePreferencesError) as err:
        build_request(
            "training", training_config(InstanceType="ml.g5.48xlarge", InstanceCount=1), ["ml.g6e.48xlarge"]
        )
    assert (
        "ResourceConfig.InstanceType: ml.g5.48xlarge is set together with instance_preferences"
        in problems_of(err)
    )


def test_r4_processing_job_level_instance_type_rejected() -> None:
    with pytest.raises(
        InvalidInstancePreferencesError, match="ProcessingResources.ClusterConfig.InstanceType"
    ):
        build_request(
            "processing", processing_config(InstanceType="ml.m5.xlarge", InstanceCount=1), ["ml.c5.xlarge"]
        )


# -- R5: not with InstanceGroups, InstancePlacementConfig or Spot ------------------------------------


@pytest.mark.parametrize(
    ("extra", "top", "field"),
    [
        (
            {
                "InstanceGroups": [
                    {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "InstanceGroupName": "a"}
                ]
            },
            {},
            "ResourceConfig.InstanceGroups",
        ),
        (
            {"InstancePlacementConfig": {"EnableMultipleJobs": True}},
            {},
            "ResourceConfig.InstancePlacementConfig",
        ),
        ({}, {"EnableManagedSpotTraining": True}, "EnableManagedSpotTraining"),
    ],
)
def test_r5_exclusive_features_rejected(extra: dict[str, Any], top: dict[str, Any], field: str) -> None:
    config = {**training_config(InstanceCount=1, **extra), **top}
    with pytest.raises(InvalidInstancePreferencesError) as err:
        build_request("training", config, ["ml.g6e.48xlarge"])
    assert f"{field}: " in problems_of(err)


def test_r5_spot_explicitly_off_is_fine() -> None:
    build_request(
        "training", {**training_config(InstanceCount=1), "EnableManagedSpotTraining": False}, ["ml.g5.xlarge"]
    )


# -- R6/R7: training plans ---------------------------------------------------------------------------


def test_r6_one_plan_per_entry_accepted_and_rendered_as_a_one_item_list() -> None:
    request, prefs = build_request(
        "training",
        training_config(),
        [
            {"instance_type": "ml.p5.48xlarge", "instance_count": 2, "training_plan_arn": PLAN},
            {"instance_type": "ml.p4d.24xlarge", "instance_count": 4},
        ],
        7200,
    )
    assert request["ResourceConfig"]["InstancePreferences"][0]["TrainingPlanArns"] == [PLAN]
    assert "TrainingPlanArns" not in request["ResourceConfig"]["InstancePreferences"][1]
    botocore_accepts("CreateTrainingJob", request)


def test_r6_two_plans_on_one_entry_rejected() -> None:
    with pytest.raises(
        InvalidInstancePreferencesError,
        match=r"instance_preferences\[0\].training_plan_arn: an entry takes exactly one",
    ):
        InstancePreferenceList(
            [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "TrainingPlanArns": [PLAN, PLAN + "2"]}]
        )


def test_r6_malformed_plan_arn_rejected() -> None:
    with pytest.raises(InvalidInstancePreferencesError, match="is not a training plan ARN"):
        InstancePreferenceList(
            [InstancePreference("ml.p5.48xlarge", 2, "arn:aws:sagemaker:us-east-1:1:notebook/x")]
        )


def test_r7_job_level_plan_with_entry_plans_rejected() -> None:
    with pytest.raises(
        InvalidInstancePreferencesError,
        match="ResourceConfig.TrainingPlanArn: a job-level training plan cannot",
    ):
        build_request(
            "training", training_config(TrainingPlanArn=PLAN), [InstancePreference("ml.p5.48xlarge", 2, PLAN)]
        )


def test_r7_job_level_plan_alone_accepted() -> None:
    request, _ = build_request(
        "training",
        training_config(TrainingPlanArn=PLAN, InstanceCount=2),
        ["ml.p5.48xlarge", "ml.p4d.24xlarge"],
        3600,
    )
    botocore_accepts("CreateTrainingJob", request)


# -- R8: processing is On-Demand only ----------------------------------------------------------------


def test_r8_processing_entry_with_a_plan_rejected() -> None:
    with pytest.raises(InvalidInstancePreferencesError, match="processing jobs use On-Demand capacity only"):
        InstancePreferenceList([InstancePreference("ml.g5.xlarge", 1, PLAN)], kind="processing")


# -- R12: job-level settings stay job-level ------------------------------------------------------------


def test_r12_volume_settings_on_an_entry_rejected_with_the_fix() -> None:
    with pytest.raises(InvalidInstancePreferencesError) as err:
        InstancePreferenceList(
            [{"instance_type": "ml.g5.xlarge", "instance_count": 1, "VolumeSizeInGB": 100}]
        )
    assert (
        "instance_preferences[0].VolumeSizeInGB: VolumeSizeInGB applies to whichever entry is selected"
        in problems_of(err)
    )


def test_r12_volume_settings_on_the_job_are_kept() -> None:
    request, _ = build_request(
        "training", training_config(InstanceCount=1, KeepAlivePeriodInSeconds=600), ["ml.g5.xlarge"]
    )
    assert request["ResourceConfig"]["VolumeSizeInGB"] == 50
    assert request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 600


# -- R13: MaxPendingTimeInSeconds --------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [1800, 86400, 2_419_200])
def test_r13_pending_time_in_range_rendered_for_an_accelerated_training_list(seconds: int) -> None:
    request, _ = build_request(
        "training", training_config(InstanceCount=1), ["ml.g6e.48xlarge", "ml.g5.48xlarge"], seconds
    )
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxPendingTimeInSeconds": seconds}


@pytest.mark.parametrize("seconds", [600, 1799, 2_419_201])
def test_r13_pending_time_out_of_range_rejected_with_the_minimum_named(seconds: int) -> None:
    with pytest.raises(InvalidInstancePreferencesError, match="max_pending: .*(minimum|maximum)"):
        build_request("training", training_config(InstanceCount=1), ["ml.g6e.48xlarge"], seconds)


def test_r13_pending_time_in_config_out_of_range_rejected() -> None:
    config = training_config(InstanceCount=1)
    config["StoppingCondition"]["MaxPendingTimeInSeconds"] = 100
    with pytest.raises(
        InvalidInstancePreferencesError,
        match="StoppingCondition.MaxPendingTimeInSeconds: 100 is outside 1800..2419200",
    ):
        build_request("training", config, ["ml.g6e.48xlarge"])


def test_r13_conflicting_pending_time_in_two_places_rejected() -> None:
    config = training_config(InstanceCount=1)
    config["StoppingCondition"]["MaxPendingTimeInSeconds"] = 3600
    with pytest.raises(
        InvalidInstancePreferencesError, match="conflicts with StoppingCondition.MaxPendingTimeInSeconds"
    ):
        build_request("training", config, ["ml.g6e.48xlarge"], 7200)


def test_r13_not_rendered_for_cpu_only_lists_which_sagemaker_evaluates_once() -> None:
    request, prefs = build_request(
        "training", training_config(InstanceCount=1), ["ml.m5.xlarge", "ml.c5.xlarge"], 3600
    )
    assert not prefs.waits_for_capacity
    assert "MaxPendingTimeInSeconds" not in request["StoppingCondition"]


def test_r13_processing_has_no_pending_field() -> None:
    config = processing_config(InstanceCount=1)
    config["StoppingCondition"] = {"MaxRuntimeInSeconds": 60, "MaxPendingTimeInSeconds": 3600}
    with pytest.raises(InvalidInstancePreferencesError, match="processing jobs have no such field"):
        build_request("processing", config, ["ml.g5.xlarge"])
    request, _ = build_request("processing", processing_config(InstanceCount=1), ["ml.g5.xlarge"], 3600)
    assert "StoppingCondition" not in request


# -- R14: valid types per kind, from botocore's model ------------------------------------------------


@pytest.mark.parametrize(
    "instance_type",
    ["ml.trn1.32xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.c5n.18xlarge", "ml.p3dn.24xlarge"],
)
def test_r14_training_only_types_rejected_for_processing(instance_type: str) -> None:
    assert InstancePreferenceList([instance_type], "training")
    with pytest.raises(InvalidInstancePreferencesError, match=f"{instance_type} is a training-only type"):
        InstancePreferenceList([instance_type], "processing")


def test_r14_typo_gets_a_suggestion() -> None:
    with pytest.raises(InvalidInstancePreferencesError, match="did you mean ml.g5.48xlarge"):
        InstancePreferenceList(["ml.g5.48xlarg"])


def test_r14_types_come_from_botocore_service_model() -> None:
    for kind, shape in (("training", "TrainingInstanceType"), ("processing", "ProcessingInstanceType")):
        assert service_model.instance_types(kind) == frozenset(_MODEL.shape_for(shape).enum)


def test_r14_parse_time_snapshot_equals_botocore_enums() -> None:
    """Parse-time checks answer from INSTANCE_TYPES_SNAPSHOT: it must be exactly botocore's enums."""
    training = frozenset(_MODEL.shape_for("TrainingInstanceType").enum)
    processing = frozenset(_MODEL.shape_for("ProcessingInstanceType").enum)
    snapshot = service_model.INSTANCE_TYPES_SNAPSHOT
    text = json.dumps(
        {
            "botocore": botocore.__version__,
            "training": sorted(training),
            "training_only": sorted(training - processing),
        },
        indent=1,
    )
    assert snapshot["training"] == training and snapshot["processing"] == processing, (
        "The installed botocore's instance types differ from the snapshot; write this to "
        f"airflow_provider_sm_prefs/domain/instance_types_snapshot.json:\n{text}\n"
        f"(processing-only types, which the snapshot cannot express: {sorted(processing - training)})"
    )


@pytest.mark.parametrize("kind", ["training", "processing"])
def test_r14_accepts_instance_type_agrees_with_the_service_model(kind: str) -> None:
    model_types = service_model.instance_types(kind)
    others = service_model.instance_types("training") | {
        "ml.g5.48xlarg",
        "ml.nope.xlarge",
        "",
        "ML.M5.XLARGE",
    }
    for instance_type in sorted(model_types | others):
        assert service_model.accepts_instance_type(kind, instance_type) is (instance_type in model_types)
    with pytest.raises(ValueError, match="job kind must be one of"):
        service_model.accepts_instance_type("inference", "ml.m5.xlarge")


def test_r14_type_missing_from_snapshot_is_looked_up_in_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A type a newer botocore added (absent from the snapshot) is still accepted."""
    trimmed = service_model.INSTANCE_TYPES_SNAPSHOT["training"] - {"ml.g6e.48xlarge"}
    monkeypatch.setitem(service_model.INSTANCE_TYPES_SNAPSHOT, "training", trimmed)
    assert service_model.accepts_instance_type("training", "ml.g6e.48xlarge")
    assert InstancePreferenceList(["ml.g6e.48xlarge"]).instance_types == ["ml.g6e.48xlarge"]


def test_check_request_gives_each_call_its_own_problems() -> None:
    entries: list[Any] = [{"instance_type": "ml.g5.xlarge", "instance_count": 1}, "ml.g5.48xlarg"]
    with pytest.raises(InvalidInstancePreferencesError) as first:
        check_request("training", training_config(), entries)
    first.value.problems.append("changed by the caller")
    with pytest.raises(InvalidInstancePreferencesError) as second:
        check_request("training", training_config(), entries)
    assert second.value.problems == first.value.problems[:-1]
    assert len(second.value.problems) == 3  # the type, a count on one entry only, no job-level count
    # Lists of objects and of plain values give the same result.
    objects = [InstancePreference("ml.g5.xlarge", 1), InstancePreference("ml.g5.48xlarge", 2)]
    plain = [entry.as_dict() for entry in objects]
    assert check_request("training", training_config(), objects) == check_request(
        "training", training_config(), plain
    )


def test_checking_a_valid_list_does_not_read_botocore_service_model() -> None:
    """The model (~1 MB of gzip'd JSON) would cost every DAG-parsing process tens of milliseconds."""
    code = (
        "from airflow_provider_sm_prefs.domain import preferences, service_model\n"
        "config = {'ResourceConfig': {'InstanceCount': 1}}\n"
        "preferences.check_request('training', config, ['ml.g6e.48xlarge', 'ml.p4d.24xlarge'], 3600)\n"
        "preferences.build_request('processing', {}, [{'instance_type': 'ml.m5.xlarge', 'instance_count': 2}])\n"
        "assert service_model._service_model.cache_info().currsize == 0, 'read the service model'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


# -- where the list comes from ------------------------------------------------------------------------


def test_list_in_config_is_used_when_no_argument_is_given() -> None:
    config = processing_config(InstanceCount=1)
    config["ProcessingResources"]["ClusterConfig"]["InstancePreferences"] = [
        {"InstanceType": "ml.m5.xlarge"},
        {"InstanceType": "ml.c5.xlarge"},
    ]
    request, prefs = build_request("processing", config)
    assert prefs.instance_types == ["ml.m5.xlarge", "ml.c5.xlarge"]
    botocore_accepts("CreateProcessingJob", request)


def test_list_in_both_places_rejected() -> None:
    config = processing_config(InstanceCount=1)
    config["ProcessingResources"]["ClusterConfig"]["InstancePreferences"] = [{"InstanceType": "ml.m5.xlarge"}]
    with pytest.raises(InvalidInstancePreferencesError, match="given both as an argument and in config"):
        build_request("processing", config, ["ml.c5.xlarge"])


def test_list_in_neither_place_rejected() -> None:
    with pytest.raises(InvalidInstancePreferencesError, match="instance_preferences: missing"):
        build_request("processing", processing_config(InstanceCount=1))


def test_all_problems_are_reported_at_once() -> None:
    config = training_config(InstanceType="ml.m5.xlarge", InstanceCount=1)
    config["EnableManagedSpotTraining"] = True
    with pytest.raises(InvalidInstancePreferencesError) as err:
        build_request("training", config, ["ml.g5.48xlarge", "ml.g5.48xlarge", "ml.nope.xlarge"])
    text = problems_of(err)
    for fragment in (
        "appears twice",
        "ml.nope.xlarge is not a SageMaker training",
        "ResourceConfig.InstanceType",
        "EnableManagedSpotTraining",
    ):
        assert fragment in text
    assert str(err.value).startswith("4 problems with the instance preference request")


# -- waiting semantics -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("types", "waits"),
    [
        (["ml.m5.xlarge", "ml.c5.xlarge"], False),
        (["ml.m5.xlarge", "ml.g5.xlarge"], True),
        (["ml.trn1.32xlarge"], True),
        (["ml.p4d.24xlarge", "ml.c5n.18xlarge"], True),
    ],
)
def test_list_waits_for_capacity_iff_it_has_an_accelerated_entry(types: list[str], waits: bool) -> None:
    assert InstancePreferenceList(types).waits_for_capacity is waits


def test_rank_and_describe() -> None:
    prefs = InstancePreferenceList(
        [InstancePreference("ml.g6e.48xlarge", 2), InstancePreference("ml.g5.48xlarge", 4)]
    )
    assert prefs.rank_of("ml.g5.48xlarge") == 2
    assert prefs.describe() == "ml.g6e.48xlarge×2 → ml.g5.48xlarge×4"
    with pytest.raises(KeyError):
        prefs.rank_of("ml.p5.48xlarge")


@pytest.mark.parametrize(
    ("value", "seconds"), [(timedelta(hours=2), 7200), (3600, 3600), ("1800", 1800), (None, None)]
)
def test_to_seconds(value: Any, seconds: int | None) -> None:
    assert to_seconds(value) == seconds


@pytest.mark.parametrize("value", ["soon", -5, timedelta(0)])
def test_to_seconds_rejects_nonsense(value: Any) -> None:
    with pytest.raises(InvalidInstancePreferencesError, match="max_pending"):
        to_seconds(value)


def test_module_imports_neither_airflow_nor_boto() -> None:
    code = (
        "import sys; import airflow_provider_sm_prefs.domain.preferences, airflow_provider_sm_prefs.domain.outcome; "
        "bad=[m for m in sys.modules if m.split('.')[0] in ('airflow','boto3','botocore','aiobotocore')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


# -- property-based: valid lists render to botocore-valid requests; invalid ones are named ---------


def _types(kind: str) -> list[str]:
    return sorted(service_model.instance_types(kind))


@st.composite
def valid_lists(draw: st.DrawFn, kind: str) -> tuple[list[dict[str, Any]], bool]:
    types = draw(st.lists(st.sampled_from(_types(kind)), min_size=1, max_size=5, unique=True))
    per_entry = draw(st.booleans())
    high = 100 if kind == "processing" else 64
    entries = []
    for t in types:
        entry: dict[str, Any] = {"instance_type": t}
        if per_entry:
            count = draw(st.integers(1, high))
            entry["instance_count"] = draw(st.sampled_from([count, str(count)]))
        entries.append(entry)
    return entries, per_entry


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data(), kind=st.sampled_from(["training", "processing"]))
def test_random_valid_lists_render_to_requests_botocore_accepts(data: st.DataObject, kind: str) -> None:
    entries, per_entry = data.draw(valid_lists(kind))
    extra = {} if per_entry else {"InstanceCount": 2}
    if kind == "training":
        seconds = data.draw(st.integers(1800, 2_419_200))
        request, prefs = build_request(kind, training_config(**extra), entries, seconds)
        assert check_request(kind, training_config(**extra), entries, seconds) == prefs
        botocore_accepts("CreateTrainingJob", request)
        rendered = request["ResourceConfig"]["InstancePreferences"]
        assert ("MaxPendingTimeInSeconds" in request["StoppingCondition"]) is prefs.waits_for_capacity
    else:
        request, prefs = build_request(kind, processing_config(**extra), entries)
        assert check_request(kind, processing_config(**extra), entries) == prefs
        botocore_accepts("CreateProcessingJob", request)
        rendered = request["ProcessingResources"]["ClusterConfig"]["InstancePreferences"]
    assert [e["InstanceType"] for e in rendered] == [e["instance_type"] for e in entries]
    assert all(isinstance(e.get("InstanceCount", 1), int) for e in rendered)


_MUTATIONS = ("duplicate", "bad_type", "bad_count", "missing_count", "too_many")


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data(), kind=st.sampled_from(["training", "processing"]), mutation=st.sampled_from(_MUTATIONS))
def test_random_invalid_lists_are_rejected_naming_the_offending_entry(
    data: st.DataObject, kind: str, mutation: str
) -> None:
    types = data.draw(st.lists(st.sampled_from(_types(kind)), min_size=2, max_size=5, unique=True))
    entries: list[dict[str, Any]] = [{"instance_type": t, "instance_count": 1} for t in types]
    index = data.draw(st.integers(1, len(entries) - 1))
    if mutation == "duplicate":
        entries[index]["instance_type"] = entries[0]["instance_type"]
        expected = f"instance_preferences[{index}]: {entries[0]['instance_type']} appears twice"
    elif mutation == "bad_type":
        entries[index]["instance_type"] = data.draw(
            st.sampled_from(["ml.x9.huge", "m5.xlarge", "ml.g5.48xlarg"])
        )
        expected = f"instance_preferences[{index}]: {entries[index]['instance_type']} is not"
    elif mutation == "bad_count":
        entries[index]["instance_count"] = data.draw(
            st.sampled_from([0, -3, "1.5", "many", 101 if kind == "processing" else 0])
        )
        expected = f"instance_preferences[{index}].instance_count"
    elif mutation == "missing_count":
        del entries[index]["instance_count"]
        expected = f"instance_preferences[{index}]: instance_count missing"
    else:
        pool = [t for t in _types(kind) if t not in types]
        entries += [{"instance_type": t, "instance_count": 1} for t in pool[: 6 - len(entries)]]
        expected = "6 entries given; SageMaker accepts at most 5"
    with pytest.raises(InvalidInstancePreferencesError) as err:
        build_request(kind, training_config() if kind == "training" else processing_config(), entries)
    assert any(p.startswith(expected) or expected in p for p in err.value.problems), err.value.problems
    assert JobKind(kind)
    with pytest.raises(InvalidInstancePreferencesError) as checked:
        check_request(kind, training_config() if kind == "training" else processing_config(), entries)
    assert checked.value.problems == err.value.problems


_CLUSTER_EXTRAS: list[dict[str, Any]] = [
    {},
    {"InstanceCount": 2},
    {"InstanceCount": "3"},
    {"InstanceCount": 0},
    {"InstanceCount": "0"},
    {"InstanceCount": 101},
    {"InstanceCount": "many"},
    {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
    {"InstanceGroups": [{"InstanceGroupName": "a"}]},
    {"TrainingPlanArn": PLAN, "InstanceCount": 1},
]
_STOPPING: list[Any] = [
    None,
    {"MaxRuntimeInSeconds": 3600},
    {"MaxPendingTimeInSeconds": 7200},
    {"MaxPendingTimeInSeconds": "7200"},
    {"MaxPendingTimeInSeconds": 60},
    {"MaxPendingTimeInSeconds": "soon"},
]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data(), kind=st.sampled_from(["training", "processing"]))
def test_check_request_enforces_exactly_what_build_request_does(data: st.DataObject, kind: str) -> None:
    """Parse-time checks (check_request) and execute-time ones (build_request) report the same problems."""
    entries: list[Any] = data.draw(valid_lists(kind))[0]
    if data.draw(st.booleans()):
        entries[0] = data.draw(st.sampled_from(["ml.x9.huge", {"instance_type": "ml.g5.xlarge", "Foo": 1}]))
    if data.draw(st.booleans()):
        entries[-1] = {
            "instance_type": entries[-1]["instance_type"]
            if isinstance(entries[-1], dict)
            else "ml.g5.xlarge",
            "training_plan_arn": PLAN,
        }
    extra = data.draw(st.sampled_from(_CLUSTER_EXTRAS))
    config = training_config(**extra) if kind == "training" else processing_config(**extra)
    stopping = data.draw(st.sampled_from(_STOPPING))
    if stopping is not None:
        config["StoppingCondition"] = stopping
    if data.draw(st.booleans()):
        config["EnableManagedSpotTraining"] = True
    seconds = data.draw(st.sampled_from([None, 600, 3600, 7200, 3_000_000]))
    original = copy.deepcopy(config)
    try:
        _, prefs = build_request(kind, config, entries, seconds)
    except InvalidInstancePreferencesError as err:
        with pytest.raises(InvalidInstancePreferencesError) as checked:
            check_request(kind, config, entries, seconds)
        assert checked.value.problems == err.problems
    else:
        assert check_request(kind, config, entries, seconds) == prefs
    assert config == original
