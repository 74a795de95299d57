"""Hostile input, systematically (Hypothesis): the preference parser, the request builder and the
offline SageMaker's rules, over arbitrary JSON-like lists and rendered-template junk.

Properties:
- the provider raises only its documented exception, each problem naming a field, never a
  ``KeyError``/``TypeError`` — and since it raises before building a request, nothing reaches AWS;
- every list the client accepts renders a request that botocore's own validator and the offline
  SageMaker's rules accept too (no valid list the server rejects);
- a list the client rejects is rejected by the server too, except for the rules only the client checks
  (listed in ``CLIENT_ONLY``: known gaps, each with the reason).
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.preferences import build_request, check_request, to_seconds
from offline_sagemaker import jobs
from offline_sagemaker.exceptions import ValidationError
from offline_sagemaker.rules import training_job_spec, validate_shape
from offline_sagemaker.scenario_types import Scenario

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"
TYPES = ["ml.p5.48xlarge", "ml.g5.48xlarge", "ml.g6.48xlarge", "ml.c5.xlarge", "ml.p4d.24xlarge"]
KEYS = [
    "instance_type",
    "instance_count",
    "training_plan_arn",
    "training_plan_arns",
    "accept_after",
    "InstanceType",
    "InstanceCount",
    "TrainingPlanArns",
    "VolumeSizeInGB",
]
#: A problem starts with the field it is about: ``instance_preferences[2].instance_count: ...``,
#: ``ResourceConfig.InstanceCount: ...``, ``max_pending: ...`` (several fields: comma-separated).
FIELD_FIRST = re.compile(r"^[A-Za-z_][\w.\[\]]*(, [A-Za-z_][\w.\[\]]*)*: ")

junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=80),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=20,
)
count = st.one_of(st.integers(-3, 120), st.sampled_from(["2", " 4 ", "two", "2.0", "", "1e3"]), junk)
entry = st.one_of(
    st.sampled_from(TYPES),
    st.fixed_dictionaries(
        {"instance_type": st.sampled_from(TYPES)},
        optional={
            "instance_count": count,
            "training_plan_arn": st.one_of(st.just(PLAN), junk),
            "accept_after": st.one_of(
                st.integers(-10, 20000), st.sampled_from(["7200", "soon", "nan"]), junk
            ),
        },
    ),
    st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=10), junk | st.sampled_from(TYPES), max_size=5),
    junk,
)
lists = st.one_of(st.lists(entry, max_size=7), junk, st.text(max_size=200).map(lambda s: "[" + s))


def training_config(**resource: Any) -> dict[str, Any]:
    return jobs.training_config("hostile", **resource)


configs = st.one_of(
    st.just(training_config()),
    st.just(training_config(InstanceCount=2)),
    st.builds(training_config, InstanceCount=count),
    junk,
)
pendings = st.one_of(st.none(), st.integers(1000, 3_000_000))


def problems_of(err: InvalidInstancePreferencesError) -> list[str]:
    return [str(p) for p in err.problems]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prefs=lists, config=configs, max_pending=pendings)
def test_any_input_gets_only_the_documented_error_naming_each_field(
    prefs: Any, config: Any, max_pending: Any
) -> None:
    try:
        check_request("training", config, prefs, max_pending)
    except InvalidInstancePreferencesError as err:
        problems = problems_of(err)
        assert problems
        for problem in problems:
            assert FIELD_FIRST.match(problem), problem


@given(
    value=junk | st.sampled_from(["1800", "1e4", " 60 ", "-5", "0", float("inf"), float("nan"), "inf", "nan"])
)
def test_max_pending_junk_gets_only_the_documented_error(value: Any) -> None:
    try:
        seconds = to_seconds(value)
    except InvalidInstancePreferencesError as err:
        assert all(p.startswith("max_pending: ") for p in problems_of(err))
    else:
        assert seconds is None or seconds > 0


#: Rules only the client checks; a list breaking one of them (and nothing else) is accepted by SageMaker.
CLIENT_ONLY = {
    "accept_after": "acceptance windows are the provider's own; SageMaker never sees them",
    "applies to whichever entry is selected": "R12: SageMaker ignores unknown members of an entry",
    "unknown key": "SageMaker's parser drops members it does not know; the client refuses typos",
    "mixes snake_case and API-cased keys": "a client-side style rule",
    "max_pending": "max_pending is the operator's argument, not a request field",
}

#: Rules only SageMaker can check: they need the account's training plans (R6, R7).
SERVER_ONLY = ("TrainingPlanArns",)

valid_entry = st.fixed_dictionaries(
    {"instance_type": st.sampled_from(TYPES)},
    optional={"accept_after": st.integers(0, 7200)},
)


@settings(max_examples=300, deadline=None)
@given(
    prefs=st.lists(valid_entry | entry, min_size=1, max_size=6), counts=st.booleans(), max_pending=pendings
)
def test_client_and_offline_sagemaker_agree(prefs: list[Any], counts: bool, max_pending: Any) -> None:
    config = training_config() if counts else training_config(InstanceCount=2)
    if counts:
        prefs = [
            ({**p, "instance_count": p.get("instance_count", 1)} if isinstance(p, dict) else p) for p in prefs
        ]
    scenario = Scenario()
    try:
        request, _ = build_request("training", config, prefs, max_pending)
    except InvalidInstancePreferencesError as err:
        problems = problems_of(err)
        # What the server would get: the list as API entries where they can be built at all.
        raw = _as_api(prefs)
        assume(raw is not None)
        params = {**config, "ResourceConfig": {**config["ResourceConfig"], "InstancePreferences": raw}}
        if max_pending is not None:  # where the operator would render it
            params["StoppingCondition"] = {
                **config["StoppingCondition"],
                "MaxPendingTimeInSeconds": max_pending,
            }
        try:
            validate_shape("CreateTrainingJob", params)
            training_job_spec(params, scenario)
        except ValidationError:
            return  # both reject
        gaps = [p for p in problems if not any(marker in p for marker in CLIENT_ONLY)]
        assert gaps == [], f"the client rejects what SageMaker accepts: {gaps}"
        return
    # Everything the client accepts, botocore and the offline SageMaker accept as rendered — but for the
    # rules that need the account's state, which only SageMaker has (SERVER_ONLY).
    validate_shape("CreateTrainingJob", request)
    try:
        training_job_spec(request, scenario)
    except ValidationError as err:
        assert any(marker in str(err) for marker in SERVER_ONLY), (
            f"SageMaker rejects what the client accepts: {err}"
        )


def _as_api(prefs: list[Any]) -> list[dict[str, Any]] | None:
    """The entries as a user might put them straight into the request (API keys), or None."""
    out = []
    for p in prefs:
        if isinstance(p, str):
            out.append({"InstanceType": p})
        elif isinstance(p, dict) and isinstance(p.get("instance_type", p.get("InstanceType")), str):
            item: dict[str, Any] = {"InstanceType": p.get("instance_type", p.get("InstanceType"))}
            c = p.get("instance_count", p.get("InstanceCount"))
            if c is not None:
                item["InstanceCount"] = c
            if p.get("training_plan_arn") is not None:
                item["TrainingPlanArns"] = [p["training_plan_arn"]]
            plans = p.get("training_plan_arns", p.get("TrainingPlanArns"))
            if plans is not None:
                item["TrainingPlanArns"] = plans
            out.append(item)
        else:
            return None
    return out
