"""The outcome's fields are declared once: the record, its reader, the facet and the page follow.

A field added to ``CapacityOutcome`` (plus the record's own line when the record carries it, which
these tests ask for) needs nothing else: the record copies it, the reader checks its type, the facet
carries it when marked ``facet(...)``, with its JSON Schema and its class attribute.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest

from airflow_provider_sm_prefs.domain import lineage, schema
from airflow_provider_sm_prefs.domain.hyperpod_outcome import GroupOutcome
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.outcome import CapacityOutcome, XComKey
from airflow_provider_sm_prefs.domain.record import RECORD_VERSION, CapacityRecord, TaskInstanceRef
from airflow_provider_sm_prefs.plugin.stats import GROUP_FIELDS, JOB_FIELDS, Entry, Filters, summarize

TI = TaskInstanceRef("nightly", "train", "scheduled__2026-11-30", map_index=-1, try_number=1)
NOW = datetime(2026, 11, 30, 2, 0, tzinfo=timezone.utc)
OUTCOME_FIELDS = {f.name: f for f in dataclasses.fields(CapacityOutcome)}
GROUP_OUTCOME_FIELDS = {f.name: f for f in dataclasses.fields(GroupOutcome)}
RECORD_FIELDS = {f.name: f for f in dataclasses.fields(CapacityRecord)}
HINTS = {
    CapacityOutcome: typing.get_type_hints(CapacityOutcome),
    GroupOutcome: typing.get_type_hints(GroupOutcome),
    CapacityRecord: typing.get_type_hints(CapacityRecord),
}
#: A value of each JSON type, to fill every field and to find one a field must not hold.
SAMPLES: dict[type, Any] = {
    str: "text",
    int: 7,
    float: 2.5,
    bool: True,
    list: [{"key": "value"}],
    dict: {"key": "value"},
    type(None): None,
}


def sample(annotation: Any) -> Any:
    """A value of ``annotation`` (its first type that is not None)."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    first = next(arg for arg in args if arg is not type(None))
    return SAMPLES[typing.get_origin(first) or first]


def full_outcome() -> CapacityOutcome:
    """An outcome with a value in every field, none of them a default."""
    return CapacityOutcome(**{name: sample(HINTS[CapacityOutcome][name]) for name in OUTCOME_FIELDS})


def real_outcome(cls: type[CapacityOutcome] = CapacityOutcome, **extra: Any) -> CapacityOutcome:
    return cls(
        job_name="nightly",
        job_kind="training",
        job_arn="arn:aws:sagemaker:us-east-1:123456789012:training-job/nightly",
        selected_instance_type="ml.g5.48xlarge",
        selected_instance_count=4,
        preference_rank=2,
        fell_back=True,
        pending_seconds=1227.0,
        capacity="on-demand",
        accelerators={"model": "A10G", "total": 32, "memory_gib_per_device": 24},
        job_status="InProgress",
        preferences=[{"instance_type": "ml.g6.48xlarge", "instance_count": 2}],
        hourly_cost=65.16,
        **extra,
    )


def shipped_schema() -> dict[str, Any]:
    text = resources.files("airflow_provider_sm_prefs").joinpath(lineage.SCHEMA_RESOURCE).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


# -- the record ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "name"),
    [(CapacityOutcome, name) for name in sorted(OUTCOME_FIELDS)]
    + [(GroupOutcome, name) for name in sorted(GROUP_OUTCOME_FIELDS)],
)
def test_every_outcome_field_is_a_record_field_unless_outcome_only(cls: type, name: str) -> None:
    declared = {f.name: f for f in dataclasses.fields(cls)}
    if schema.info(declared[name]).recorded:
        assert name in RECORD_FIELDS, (
            f"CapacityRecord lacks the outcome's field {name!r}: declare it there (optional, with a default), "
            f"or mark it OUTCOME_ONLY in {cls.__name__}"
        )
        # The record holds whatever the outcome does (and None, for a try that failed).
        held = set(schema.runtime_types(HINTS[cls][name]) or ())
        assert held <= set(schema.reader_types(CapacityRecord)[name] or held)
    else:
        assert name not in RECORD_FIELDS, f"{name!r} is OUTCOME_ONLY but the record declares it"


def test_a_record_copies_every_field_the_outcome_declares_for_it_and_reads_back_the_same() -> None:
    outcome = full_outcome()
    record = CapacityRecord.from_outcome(TI, outcome, "us-east-1", now=NOW)
    copied = schema.recorded(CapacityOutcome)
    assert copied and all(getattr(record, name) == getattr(outcome, name) for name in copied)
    assert CapacityRecord.from_dict(record.as_dict()) == record


def test_a_group_record_copies_every_field_the_group_outcome_declares_for_it() -> None:
    values = {name: sample(HINTS[GroupOutcome][name]) for name in GROUP_OUTCOME_FIELDS}
    outcome = GroupOutcome(**{**values, "job_kind": "hyperpod-group"})
    record = CapacityRecord.from_outcome(TI, outcome, "us-east-1", now=NOW)
    copied = schema.recorded(GroupOutcome)
    assert "mix" not in copied and "mix" not in RECORD_FIELDS  # the nodes say it
    assert copied and all(getattr(record, name) == getattr(outcome, name) for name in copied)
    assert record.is_group and CapacityRecord.from_dict(record.as_dict()) == record


@pytest.mark.parametrize("name", sorted(RECORD_FIELDS))
def test_the_reader_checks_every_record_field_against_its_declaration(name: str) -> None:
    data = CapacityRecord.from_outcome(TI, real_outcome(), "us-east-1", now=NOW).as_dict()
    assert CapacityRecord.from_dict(data) is not None
    allowed = schema.reader_types(CapacityRecord)[name]
    if name == "version":  # checked by value, before anything else
        assert allowed is None
        assert CapacityRecord.from_dict({**data, name: RECORD_VERSION + 1}) is None
        return
    assert allowed is not None
    wrong = next(value for value in SAMPLES.values() if not schema.holds(allowed, value))
    assert CapacityRecord.from_dict({**data, name: wrong}) is None


# -- the facet -------------------------------------------------------------------------------------------


def test_the_shipped_facet_schema_is_the_one_the_declaration_writes() -> None:
    text = resources.files("airflow_provider_sm_prefs").joinpath(lineage.SCHEMA_RESOURCE).read_text("utf-8")
    assert text == lineage.facet_schema_text(), (
        "the facet's JSON Schema is out of date; write it with: "
        "python -c \"from airflow_provider_sm_prefs.domain import lineage; print(lineage.facet_schema_text(), end='')\" "
        f"> airflow_provider_sm_prefs/{lineage.SCHEMA_RESOURCE}"
    )


@pytest.mark.parametrize("name", schema.facet_copies(CapacityOutcome))
def test_every_facet_field_of_the_outcome_is_in_the_schema_the_class_and_the_values(name: str) -> None:
    from airflow_provider_sm_prefs.operators.lineage_facet import SageMakerCapacityRunFacet

    camel = schema.camel(name)
    properties = shipped_schema()["$defs"]["SageMakerCapacityRunFacet"]["allOf"][1]["properties"]
    assert properties[camel]["type"] == schema.json_type(HINTS[CapacityOutcome][name], nullable=True)
    assert camel in {a.name for a in attrs.fields(SageMakerCapacityRunFacet)}
    outcome = full_outcome()
    assert lineage.capacity_facet_fields(JobKind.TRAINING, [], outcome)[camel] == getattr(outcome, name)
    assert lineage.capacity_facet_fields(JobKind.TRAINING, [])[camel] is None


def test_an_outcome_field_not_marked_for_the_facet_stays_out_of_it() -> None:
    properties = lineage.facet_properties()
    copied = set(schema.facet_copies(CapacityOutcome))
    assert {"job_arn", "secondary_status", "failure_reason", "training_seconds"}.isdisjoint(copied)
    assert not {"jobArn", "secondaryStatus", "failureReason", "trainingSeconds"} & set(properties)


# -- XCom keys and the page --------------------------------------------------------------------------------


def test_every_xcom_key_carries_the_outcome_field_of_its_name() -> None:
    outcome = full_outcome()
    assert {key.value for key in XComKey} <= set(OUTCOME_FIELDS)
    assert outcome.xcom_values() == {key.value: getattr(outcome, key.value) for key in XComKey}


def test_the_page_reads_only_record_fields_and_its_script_only_row_keys() -> None:
    assert set(JOB_FIELDS) <= set(RECORD_FIELDS)
    record = CapacityRecord.from_outcome(TI, real_outcome(), "us-east-1", now=NOW)
    filters = Filters(
        since=datetime(2026, 11, 1, tzinfo=timezone.utc), until=datetime(2026, 12, 1, tzinfo=timezone.utc)
    )
    (row,) = summarize([Entry(record=record, run_after=NOW)], filters)["jobs"]["rows"]
    assert {name: row[name] for name in JOB_FIELDS} == {name: getattr(record, name) for name in JOB_FIELDS}
    script = Path(__file__).parents[1] / "airflow_provider_sm_prefs" / "plugin" / "static" / "capacity.js"
    read = set(re.findall(r"\bj\.(\w+)", script.read_text(encoding="utf-8")))
    assert read and read <= set(row), read - set(row)


def test_the_group_table_reads_only_record_fields_and_its_script_only_group_row_keys() -> None:
    from tests.plugin.records import group_record_fields

    assert set(GROUP_FIELDS) <= set(RECORD_FIELDS)
    record = CapacityRecord(**group_record_fields(1, NOW, {"ml.p5.48xlarge": 2, "ml.p4d.24xlarge": 6}))
    filters = Filters(
        since=datetime(2026, 11, 1, tzinfo=timezone.utc), until=datetime(2027, 1, 1, tzinfo=timezone.utc)
    )
    (row,) = summarize([Entry(record=record, run_after=NOW)], filters)["groups"]["rows"]
    assert {name: row[name] for name in GROUP_FIELDS} == {
        name: getattr(record, name) for name in GROUP_FIELDS
    }
    script = Path(__file__).parents[1] / "airflow_provider_sm_prefs" / "plugin" / "static" / "capacity.js"
    read = set(re.findall(r"\bcg\.(\w+)", script.read_text(encoding="utf-8")))
    assert read and read <= set(row), read - set(row)


# -- one new field, declared once ----------------------------------------------------------------------------


def test_a_new_outcome_field_needs_its_declaration_and_nothing_else() -> None:
    """``spot_savings``: one line in the outcome, one in the record; everything else follows."""
    from openlineage.client.serde import Serde

    from airflow_provider_sm_prefs.operators.lineage_facet import capacity_facet_class

    outcome_cls = dataclasses.make_dataclass(
        "Outcome",
        [
            (
                "spot_savings",
                float | None,
                dataclasses.field(default=None, metadata=schema.facet("USD.", minimum=0)),
            )
        ],
        bases=(CapacityOutcome,),
        frozen=True,
    )
    record_cls = dataclasses.make_dataclass(
        "Record", [("spot_savings", float | None, None)], bases=(CapacityRecord,), frozen=True
    )
    outcome = real_outcome(outcome_cls, spot_savings=12.5)

    # The record copies it, and its reader checks it.
    record = record_cls.from_outcome(TI, outcome, "us-east-1", now=NOW)
    assert record.spot_savings == 12.5
    data = record.as_dict()
    assert (
        record_cls.from_dict(data) == record and record_cls.from_dict({**data, "spot_savings": 3}) is not None
    )
    assert record_cls.from_dict({**data, "spot_savings": "12.5"}) is None
    assert CapacityRecord.from_dict(data) == CapacityRecord.from_outcome(TI, outcome, "us-east-1", now=NOW)

    # The facet carries it: its JSON Schema, its class and its values.
    document = lineage.facet_schema(outcome_cls)
    own = document["$defs"]["SageMakerCapacityRunFacet"]["allOf"][1]
    assert own["properties"]["spotSavings"] == {
        "type": ["number", "null"],
        "minimum": 0,
        "description": "USD.",
    }
    assert list(own["properties"])[:-1] == list(lineage.facet_properties())  # added after the others
    facet_cls = capacity_facet_class(outcome_cls)
    emitted = json.loads(
        Serde.to_json(facet_cls(**lineage.capacity_facet_fields(JobKind.TRAINING, [], outcome)))
    )
    assert emitted["spotSavings"] == 12.5
    jsonschema.validate(emitted, own)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**emitted, "spotSavings": -1}, own)

    # The release's own classes are untouched by the variant.
    assert "spotSavings" not in lineage.facet_properties() and "spot_savings" not in RECORD_FIELDS
