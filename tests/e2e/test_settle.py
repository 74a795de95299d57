"""Between e2e scenarios: the callbacks the triggerer sent, matched to the DAG processor's lines on every
Airflow minor (no deployment). Airflow 3.0 names no task instance id in them: a callback never matched
made every scenario wait out the settle timeout, two minutes each."""

from __future__ import annotations

from e2e_support import callbacks_started

TI_A = "01a24cf4-96dd-7d6f-a251-b7d1d925a544"
TI_B = "01a24d02-0ccd-7d94-9a2d-e8d487789123"
RUN_A = "manual__2026-12-06T20:03:47.504405+00:00"
RUN_B = "manual__2026-12-06T20:18:29.692836+00:00_jG1UunZk"


def sent(ti: str, file: str, task: str, dag: str, run: str, kind: str) -> str:
    """The triggerer's line (Airflow 3.0 to 3.3 alike)."""
    return (
        f"2026-12-06T20:04:30Z [info] Sending callback: filepath='{file}' bundle_name='bundle-0-dags_examples' "
        f"bundle_version=None msg=None ti=TaskInstance(id=UUID('{ti}'), task_id='{task}', dag_id='{dag}', "
        f"run_id='{run}', try_number=1, map_index=-1, hostname='vm', context_carrier=None) "
        f"task_callback_type=<TaskInstanceState.{kind.upper()}: '{kind}'> type='TaskCallbackRequest'"
    )


TRIGGERER = "\n".join(
    [
        sent(TI_A, "nightly.py", "train", "nightly", RUN_A, "success"),
        sent(TI_B, "sensor.py", "wait", "sensor", RUN_B, "failed"),
    ]
)


def test_airflow_3_0_lines_name_the_task_by_dag_task_and_run_or_only_by_file() -> None:
    processor = [
        (
            "nightly.py.log",
            '{"timestamp":"2026-12-06T20:04:31.347716","level":"warning","event":"Task callback requested but '
            f'is not a failure callback","dag_id":"nightly","task_id":"train","run_id":"{RUN_A}","logger":"task"}}',
        ),
        (
            "sensor.py.log",
            '{"timestamp":"2026-12-06T20:18:47.500000","level":"info",'
            '"event":"Executing Task callback at index 0: on_failure","logger":"task"}',
        ),
    ]
    owed, started = callbacks_started([TRIGGERER], processor)
    assert owed == {TI_A, TI_B}
    assert started == {TI_A: 1796587471.347716, TI_B: 1796588327.5}


def test_airflow_3_3_lines_name_the_task_instance() -> None:
    processor = [
        (
            "nightly.py.log",
            '{"timestamp":"2026-12-06T20:04:31.347716Z","level":"warning","event":"Task callback requested but '
            f'is not a failure callback","dag_id":"nightly","task_id":"train","run_id":"{RUN_A}",'
            f'"ti_id":"{TI_A}","logger":"task"}}',
        ),
        (
            "sensor.py.log",
            '{"timestamp":"2026-12-06T20:18:47.500000Z","level":"info",'
            f'"event":"Executing Task callback at index 0: on_failure (ti_id={TI_B})","logger":"task"}}',
        ),
    ]
    owed, started = callbacks_started([TRIGGERER], processor)
    assert owed == {TI_A, TI_B}
    assert started == {TI_A: 1796587471.347716, TI_B: 1796588327.5}


def test_a_callback_of_another_run_or_file_is_still_owed() -> None:
    processor = [
        (
            "other.py.log",
            '{"timestamp":"2026-12-06T20:18:47.500000","event":"Executing Task callback at index 0: cb"}',
        ),
        (
            "nightly.py.log",
            '{"timestamp":"2026-12-06T20:04:31.000000","event":"Task callback requested but is not a failure '
            'callback","dag_id":"nightly","task_id":"train","run_id":"manual__another"}',
        ),
    ]
    owed, started = callbacks_started([TRIGGERER], processor)
    assert owed == {TI_A, TI_B}
    assert started == {}
