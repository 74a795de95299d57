"""Job names derived from the task instance when the config gives none."""

from __future__ import annotations

import re

from airflow_provider_sm_prefs.hooks.sagemaker import derive_job_name, sanitize_job_name

VALID = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def test_the_name_is_readable_and_the_same_for_every_try() -> None:
    name = derive_job_name("nightly_retrain", "train", "manual__2026-11-30T13:14:09.420686+00:00")
    assert re.fullmatch(r"nightly-retrain-train-[0-9a-f]{10}", name)
    assert derive_job_name("nightly_retrain", "train", "manual__2026-11-30T13:14:09.420686+00:00") == name


def test_runs_map_indexes_and_tasks_get_different_names() -> None:
    base = derive_job_name("d", "t", "run-1")
    assert derive_job_name("d", "t", "run-2") != base
    assert derive_job_name("d", "t2", "run-1") != base
    mapped = derive_job_name("d", "t", "run-1", map_index=3)
    assert mapped != base and mapped.startswith("d-t-3-")


def test_long_ids_keep_the_hash_and_leave_room_for_a_resubmission_suffix() -> None:
    dag_id, task_id = "a" * 200, "group.deeply_nested.train_the_model_" + "x" * 100
    first = derive_job_name(dag_id, task_id, "scheduled__2026-11-30T02:00:00+00:00")
    second = derive_job_name(dag_id, task_id, "scheduled__2026-12-01T02:00:00+00:00")
    assert first != second  # the readable part is cut; the hash of the run still tells them apart
    assert VALID.match(first) and len(first) <= 63 - len("-r999")
    resubmitted = sanitize_job_name(first, suffix="-r999")
    assert resubmitted == first + "-r999" and VALID.match(resubmitted)
