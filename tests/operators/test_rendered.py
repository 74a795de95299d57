"""What an operator derives from its arguments is derived again only when their values change."""

from __future__ import annotations

from datetime import timedelta

from airflow_provider_sm_prefs.operators.rendered import Derived


def test_equal_values_keep_what_was_derived_however_their_objects_are_shared() -> None:
    derived: Derived[int] = Derived()
    calls = []

    def derive() -> int:
        calls.append(1)
        return len(calls)

    config = {
        "OutputDataConfig": {"S3OutputPath": "s3://models/out"},
        "ResourceConfig": {"VolumeSizeInGB": 50},
    }
    assert derived.get((config, None), derive) == 1
    # The same values, one inner dict now referenced from elsewhere too (marshal's version 3 writes an
    # object referenced more than once with a back-reference flag: other bytes for equal values).
    held = config["OutputDataConfig"]
    assert derived.get((config, None), derive) == 1
    assert held is config["OutputDataConfig"]
    # Other values, or equal values of other types, are derived again.
    assert derived.get(({**config, "OutputDataConfig": {"S3OutputPath": "s3://other"}}, None), derive) == 2
    assert derived.get(({**config, "OutputDataConfig": {"S3OutputPath": "s3://other"}}, 1), derive) == 3
    assert derived.get(({**config, "OutputDataConfig": {"S3OutputPath": "s3://other"}}, True), derive) == 4


def test_anything_but_builtins_is_compared_by_identity() -> None:
    derived: Derived[str] = Derived()
    hour = timedelta(hours=1)
    assert derived.get((hour,), lambda: "first") == "first"
    assert derived.get((hour,), lambda: "second") == "first"
    assert derived.get((timedelta(hours=1),), lambda: "third") == "third"
