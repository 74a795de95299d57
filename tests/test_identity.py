"""The identity tags' domain: values fitted to AWS's rules, the user's tags kept and checked, limits."""

from __future__ import annotations

import pytest

from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.identity import (
    MAX_TAGS,
    MAX_VALUE_LENGTH,
    TAG_PREFIX,
    AirflowIdentity,
    IdentityKey,
    default_deployment_id,
    tag_problems,
    tag_value,
    with_identity,
)

IDENTITY = AirflowIdentity(
    dag_id="nightly",
    task_id="group.train",
    run_id="manual__2026-09-15T00:00:00+00:00",
    map_index=-1,
    try_number=2,
    deployment_id="prod-eu",
)


def test_the_identity_tags_name_dag_task_run_map_index_try_and_deployment_under_one_prefix() -> None:
    assert IDENTITY.as_dict() == {
        "sm-prefs:dag-id": "nightly",
        "sm-prefs:task-id": "group.train",
        "sm-prefs:run-id": "manual__2026-09-15T00:00:00+00:00",
        "sm-prefs:map-index": "-1",
        "sm-prefs:try-number": "2",
        "sm-prefs:deployment": "prod-eu",
    }
    assert all(key.value.startswith(TAG_PREFIX) and not key.value.startswith("aws:") for key in IdentityKey)
    assert IDENTITY.tags()[0] == {"Key": "sm-prefs:dag-id", "Value": "nightly"}
    assert tag_problems(IDENTITY.tags()) == []


def test_a_long_run_id_is_shortened_to_a_readable_head_and_a_hash_the_same_every_time() -> None:
    run_id = "asset_triggered__" + "x" * 300
    value = tag_value(run_id)
    assert len(value) == MAX_VALUE_LENGTH
    assert value.startswith("asset_triggered__xxx") and value == tag_value(run_id)
    # Two run ids that differ only past the cut get different values.
    assert tag_value(run_id + "a") != tag_value(run_id + "b")
    assert tag_value(run_id + "a")[:-10] == tag_value(run_id + "b")[:-10]


def test_characters_aws_refuses_are_replaced_and_the_value_stays_unique() -> None:
    assert tag_value("manual__2026-09-15 équipe/ü=1@x") == "manual__2026-09-15 équipe/ü=1@x"  # allowed
    fixed = tag_value("run#1,retry")
    assert fixed.startswith("run_1_retry..") and tag_problems([{"Key": "k", "Value": fixed}]) == []
    assert tag_value("run#1") != tag_value("run,1")


def test_the_users_tags_are_kept_first_and_the_identity_follows() -> None:
    user = [{"Key": "team", "Value": "ml"}, {"Key": "sm-prefs:cost-center", "Value": "42"}]
    merged = with_identity(user, IDENTITY)
    assert merged is not None and merged[:2] == user and merged[2:] == IDENTITY.tags()
    assert with_identity(user, None) == user
    assert with_identity(None, None) is None


def test_a_user_tag_with_an_identity_key_is_an_error_naming_the_key_and_the_fix() -> None:
    with pytest.raises(InvalidInstancePreferencesError) as info:
        with_identity([{"Key": "team", "Value": "x"}, {"Key": "sm-prefs:dag-id", "Value": "mine"}], IDENTITY)
    assert "config.Tags[1].Key: 'sm-prefs:dag-id' is an identity tag" in str(info.value)
    assert "identity_tags=False" in str(info.value)
    # Without identity tags the same key is the user's to set.
    assert with_identity([{"Key": "sm-prefs:dag-id", "Value": "mine"}], None) is not None


def test_more_than_50_tags_in_all_is_an_error_saying_how_many_to_drop() -> None:
    user = [{"Key": f"k{i}", "Value": "v"} for i in range(MAX_TAGS - len(IdentityKey) + 1)]
    with pytest.raises(
        InvalidInstancePreferencesError, match="make 51; AWS allows at most 50.*drop 1 of yours"
    ):
        with_identity(user, IDENTITY)
    assert len(with_identity(user[:-1], IDENTITY) or []) == MAX_TAGS
    assert len(with_identity(user + [{"Key": "one-more", "Value": ""}], None) or []) == len(user) + 1


@pytest.mark.parametrize(
    ("tag", "words"),
    [
        ({"Key": "aws:team", "Value": "x"}, "starts with aws:"),
        ({"Key": "AWS:team", "Value": "x"}, "starts with aws:"),
        ({"Key": "k" * 129, "Value": "x"}, "129 characters; AWS allows 1 to 128"),
        ({"Key": "", "Value": "x"}, "0 characters"),
        ({"Key": "team", "Value": "v" * 257}, "257 characters; AWS allows at most 256"),
        ({"Key": "team#", "Value": "x"}, "'#' not allowed"),
        ({"Key": "team", "Value": 3}, "expected a string"),
        ({"Value": "x"}, "expected {'Key': str"),
    ],
)
def test_a_users_tag_aws_would_refuse_is_named_before_any_call(tag: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidInstancePreferencesError, match="config.Tags\\[0\\]") as info:
        with_identity([tag], IDENTITY)
    assert words in str(info.value)


def test_a_key_given_twice_and_tags_that_are_no_list_are_named() -> None:
    assert "appears twice" in tag_problems([{"Key": "a", "Value": ""}, {"Key": "a", "Value": ""}])[0]
    assert "expected a list" in tag_problems({"team": "ml"}, "cluster_config.Tags")[0]


def test_the_default_deployment_id_hashes_the_api_servers_address_never_credentials() -> None:
    base = default_deployment_id("https://airflow.example.com")
    assert base.startswith("airflow-") and len(base) == len("airflow-") + 12
    # The execution API lives under the base URL: workers and the API server derive the same id.
    assert default_deployment_id("https://airflow.example.com/execution/") == base
    assert default_deployment_id("https://AIRFLOW.example.com/") == base
    db = "postgresql+psycopg2://user:secret@db.internal:5432/airflow"
    assert default_deployment_id(db) == default_deployment_id(db.replace("secret", "rotated"))
    assert default_deployment_id(db) != default_deployment_id(db.replace("/airflow", "/staging"))
    assert default_deployment_id(None) == "airflow"


class _Deployment:
    """One metadata database's Variables and an emulated clock; ``during_sleep`` runs what other
    components do while a component sleeps (the interleaving a race needs, without real time)."""

    def __init__(self) -> None:
        self.variables: dict[str, str] = {}
        self.clock = 1_000.0
        self.during_sleep: list[object] = []
        self.slept = 0.0

    def read(self, key: str) -> str | None:
        return self.variables.get(key)

    def write(self, key: str, value: str) -> None:
        self.variables[key] = value

    def now(self) -> float:
        return self.clock

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        while self.during_sleep:
            self.during_sleep.pop(0)()  # type: ignore[operator]
        self.clock += seconds

    def settle(self) -> str:
        from airflow_provider_sm_prefs.operators.identity import settled_deployment_id

        return settled_deployment_id(self.read, self.write, self.now, self.sleep)


def test_a_component_that_reads_the_id_while_first_writes_race_takes_the_id_that_stays() -> None:
    from airflow_provider_sm_prefs.operators.identity import CREATED_VARIABLE, DEPLOYMENT_VARIABLE

    deployment = _Deployment()
    # Component A found no id and wrote one; component B, which also found none, has not written yet.
    deployment.write(CREATED_VARIABLE, f"{deployment.clock:.3f}")
    deployment.write(DEPLOYMENT_VARIABLE, "af-aaaaaaaaaaaaaaaa")
    deployment.clock += 0.2

    def b_writes() -> None:
        deployment.write(CREATED_VARIABLE, f"{deployment.clock + 0.3:.3f}")
        deployment.write(DEPLOYMENT_VARIABLE, "af-bbbbbbbbbbbbbbbb")

    deployment.during_sleep.append(b_writes)
    # A reader now reads A's id, which B is about to replace: it must end with the id that stays.
    assert deployment.settle() == "af-bbbbbbbbbbbbbbbb" == deployment.variables[DEPLOYMENT_VARIABLE]


def test_an_id_written_long_ago_or_without_a_write_time_is_taken_at_once() -> None:
    from airflow_provider_sm_prefs.operators.identity import CREATED_VARIABLE, DEPLOYMENT_VARIABLE

    deployment = _Deployment()
    deployment.write(DEPLOYMENT_VARIABLE, "af-0123456789abcdef")  # an earlier release's: no write time
    assert deployment.settle() == "af-0123456789abcdef" and deployment.slept == 0
    deployment.write(CREATED_VARIABLE, f"{deployment.clock - 3600:.3f}")
    assert deployment.settle() == "af-0123456789abcdef" and deployment.slept == 0


def test_the_first_component_writes_an_id_and_takes_what_is_stored_once_writes_settled() -> None:
    import re

    from airflow_provider_sm_prefs.operators.identity import CREATED_VARIABLE, DEPLOYMENT_VARIABLE

    deployment = _Deployment()
    chosen = deployment.settle()
    assert re.fullmatch(r"af-[0-9a-f]{16}", chosen) and deployment.variables[DEPLOYMENT_VARIABLE] == chosen
    assert float(deployment.variables[CREATED_VARIABLE]) == 1_000.0
    assert deployment.slept >= 6.0  # the settle time and the clock skew allowed for
