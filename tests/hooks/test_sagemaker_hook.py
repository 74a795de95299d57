"""The hook's AWS calls against the offline SageMaker, and its pure helpers."""

from __future__ import annotations

import re
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from airflow_provider_sm_prefs.domain.exceptions import JobSubmissionError, NotOursError, QuotaExceededError
from airflow_provider_sm_prefs.domain.identity import AirflowIdentity, IdentityKey, OwnerClaim
from airflow_provider_sm_prefs.domain.preferences import JobKind, build_request
from airflow_provider_sm_prefs.hooks.sagemaker import (
    SageMakerPreferenceHook,
    is_not_found,
    is_transient,
    sanitize_job_name,
    service_now,
)
from offline_sagemaker.jobs import training_config

G5, P4D = "ml.g5.48xlarge", "ml.p4d.24xlarge"


def request(name: str = "hooked", prefs: Any = None) -> tuple[dict[str, Any], Any]:
    config = training_config(name)
    return build_request(
        "training",
        config,
        prefs or [{"instance_type": P4D, "instance_count": 1}, {"instance_type": G5, "instance_count": 4}],
        3600,
    )


def client_error(code: str, status: int = 400, message: str = "x") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op"
    )


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (client_error("ThrottlingException"), True),
        (client_error("InternalFailure", 500), True),
        (client_error("ServiceUnavailable", 503), True),
        (client_error("SomethingNew", 502), True),
        (EndpointConnectionError(endpoint_url="http://x"), True),
        (client_error("ValidationException"), False),
        (client_error("AccessDeniedException", 403), False),
        (client_error("ResourceLimitExceeded"), False),
    ],
)
def test_transient_errors_are_told_from_terminal_ones(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


def test_not_found_is_recognised_by_code_and_message() -> None:
    assert is_not_found(client_error("ValidationException", message="Requested resource not found."))
    assert not is_not_found(client_error("ValidationException", message="bad input"))


@pytest.mark.parametrize(
    ("raw", "suffix"),
    [("nightly_retrain 2026/11/29", ""), ("x" * 80, "-r2"), ("--weird..name--", ""), ("", "")],
)
def test_job_names_are_sanitised(raw: str, suffix: str) -> None:
    name = sanitize_job_name(raw, suffix)
    assert re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", name), name
    assert name.endswith(suffix)


def test_service_clock_comes_from_the_date_header() -> None:
    response = {"ResponseMetadata": {"HTTPHeaders": {"date": "Sun, 29 Nov 2026 02:00:00 GMT"}}}
    assert service_now(response).isoformat() == "2026-11-29T02:00:00+00:00"


def test_create_describe_stop_round_trip(sm: Any) -> None:
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    req, prefs = request()
    hook.create_job(JobKind.TRAINING, req, prefs)
    described = hook.describe_job(JobKind.TRAINING, "hooked")
    assert described is not None and described["TrainingJobName"] == "hooked"
    assert hook.describe_job(JobKind.TRAINING, "nope") is None
    assert hook.stop_job(JobKind.TRAINING, "hooked", OwnerClaim(created=True)) is True


def test_a_stop_reads_the_jobs_tags_first_and_leaves_another_owners_job_running(sm: Any) -> None:
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    mine = AirflowIdentity("nightly", "train", "scheduled__1", -1, 1, "af-mine").as_dict()
    theirs = {**mine, IdentityKey.DEPLOYMENT.value: "af-theirs"}
    req, prefs = request("same-dag-other-deployment")
    req["Tags"] = [{"Key": k, "Value": v} for k, v in theirs.items()]
    hook.create_job(JobKind.TRAINING, req, prefs)
    with pytest.raises(NotOursError) as refused:
        hook.stop_job(JobKind.TRAINING, "same-dag-other-deployment", OwnerClaim.of_tags(mine))
    assert "'af-theirs'" in str(refused.value) and "same-dag-other-deployment" in str(refused.value)
    # An untagged job, or no claim at all: nothing proves it ours either.
    req, prefs = request("untagged")
    hook.create_job(JobKind.TRAINING, req, prefs)
    for name, claim in (("untagged", OwnerClaim.of_tags(mine)), ("same-dag-other-deployment", OwnerClaim())):
        with pytest.raises(NotOursError):
            hook.stop_job(JobKind.TRAINING, name, claim)
    assert sm.stats()["jobs"]["same-dag-other-deployment"].get("StopTrainingJob", 0) == 0
    assert sm.stats()["jobs"]["untagged"].get("StopTrainingJob", 0) == 0
    # Its own claim (another try of the same task instance) stops it.
    assert hook.stop_job(JobKind.TRAINING, "same-dag-other-deployment", OwnerClaim.of_tags(theirs)) is True


def test_stopping_an_ended_job_is_not_an_error(sm: Any) -> None:
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    req, prefs = request("short")
    hook.create_job(JobKind.TRAINING, req, prefs)
    sm.advance(100000)
    assert sm.job("short")["status"] == "Completed"
    assert hook.stop_job(JobKind.TRAINING, "short", OwnerClaim(created=True)) is False


#: A seed under which the Create meets several faults before one succeeds.
SEED_OF_A_RUN_OF_FAULTS = 4


def test_create_rides_out_throttling_without_duplicates(sm: Any) -> None:
    # A seeded scenario faults the same calls every run: several throttles and 5xx before the Create that
    # succeeds (unseeded, one run in a few hundred drew ten faults in a row and failed the test).
    sm.load_scenario({"seed": SEED_OF_A_RUN_OF_FAULTS})
    sm.set_faults(throttle_rate=0.5, error_rate=0.1)
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")  # botocore's standard mode, 10 requests
    try:
        req, prefs = request("throttled")
        hook.create_job(JobKind.TRAINING, req, prefs)
    finally:
        faults = sm.stats()
        sm.clear_faults()
    assert [j["name"] for j in sm.jobs()] == ["throttled"]
    refused = sum(faults["throttled"].values()) + sum(faults["errors"].values())
    assert refused >= 3, faults


def test_quota_rejection_names_the_entry(sm: Any) -> None:
    sm.load_scenario({"quotas": {"training": {G5: 1}}})
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    req, prefs = request("quota")
    with pytest.raises(QuotaExceededError) as err:
        hook.create_job(JobKind.TRAINING, req, prefs)
    assert err.value.instance_type == G5
    assert "instance_preferences[1] (ml.g5.48xlarge) lacks quota" in str(err.value)
    assert "The account-level service limit 'ml.g5.48xlarge for training job usage' is 1 Instances" in str(
        err.value
    )


def test_other_rejections_become_submission_errors(sm: Any) -> None:
    sm.load_scenario({"training_plans": []})
    hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
    plan = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/unknown-plan"
    req, prefs = request(
        "noplan", [{"instance_type": "ml.p5.48xlarge", "instance_count": 1, "training_plan_arn": plan}]
    )
    with pytest.raises(JobSubmissionError, match="ValidationException"):
        hook.create_job(JobKind.TRAINING, req, prefs)
