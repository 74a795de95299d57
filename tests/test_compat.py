"""The fallbacks of airflow_provider_sm_prefs.compat, on whichever Airflow minor this suite runs.

``make compat`` runs this file on every supported minor: each test takes the path that minor takes, or
forces the older path where it is reachable on any minor (the trigger's kill path, the page's login).
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_sm_prefs import compat
from airflow_provider_sm_prefs.domain.job_state import STATE_KEY, JobState, JobStateStore
from airflow_provider_sm_prefs.triggers import capacity, kill
from tests.triggers.test_capacity_trigger import _with_task, staggered, submit, trigger


def test_one_module_names_the_airflow_minor() -> None:
    # The rest of the package does not ask which Airflow it runs on.
    import pathlib
    import re

    compat_dir = pathlib.Path(compat.__file__).parent
    package = compat_dir.parent
    asking = re.compile(r"AIRFLOW_V_3_\d_PLUS|airflow\.__version__|version_compat")
    offenders = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if compat_dir not in path.parents and asking.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_job_state_fallback_is_installed_exactly_where_there_is_no_task_state_store() -> None:
    assert (JobStateStore.fallback is None) is compat.AIRFLOW_V_3_3_PLUS
    assert compat.TRIGGER_ON_KILL is compat.AIRFLOW_V_3_3_PLUS


def test_a_variable_key_names_the_dag_fits_the_variable_route_and_airflows_limit() -> None:
    key = compat.variable_key("nightly", "scheduled__2026-12-01T00:00:00+00:00", "group.train", -1)
    assert key.startswith(f"{STATE_KEY}.nightly.") and "/" not in key
    assert key != compat.variable_key("nightly", "scheduled__2026-12-01T00:00:00+00:00", "group.train", 0)
    assert key != compat.variable_key("nightly", "scheduled__2026-12-02T00:00:00+00:00", "group.train", -1)
    long = compat.variable_key("d" * 250, "r" * 250, "t" * 250, 3)
    assert len(long) <= 250 and "/" not in long


def test_no_variable_store_without_a_task_instance() -> None:
    assert compat.variable_state_store({}) is None
    assert compat.variable_state_store({"ti": SimpleNamespace(dag_id="d", run_id="", task_id="t")}) is None
    store = compat.variable_state_store(
        {"ti": SimpleNamespace(dag_id="d", run_id="r", task_id="t", map_index=None)}
    )
    assert store is not None and store.key == compat.variable_key("d", "r", "t", -1)
    assert store.description.startswith("SageMaker job state of d.t, run r")


class _Channel:
    """The Task SDK's variable calls, answered as the execution API does (not found, then the value)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str, deserialize_json: bool = False) -> Any:
        from airflow.sdk.exceptions import AirflowRuntimeError, ErrorType

        if key not in self.values:
            raise AirflowRuntimeError(SimpleNamespace(error=ErrorType.VARIABLE_NOT_FOUND, detail={}))
        return self.values[key]

    def set(self, key: str, value: Any, description: str | None = None, serialize_json: bool = False) -> None:
        assert isinstance(value, str) and not serialize_json
        self.values[key] = value


def test_the_variable_store_keeps_a_job_state_across_store_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.execution_time import context as sdk_context

    channel = _Channel()
    monkeypatch.setattr(sdk_context, "_get_variable", channel.get)
    monkeypatch.setattr(sdk_context, "_set_variable", channel.set)
    ti = SimpleNamespace(dag_id="nightly", run_id="manual__1", task_id="train", map_index=2)
    first = JobStateStore(compat.variable_state_store({"ti": ti}))
    assert first.load() is None
    first.save(
        JobState.submitted(
            None, job_name="nightly-train", kind="training", submission=1, max_tries=2, try_number=1
        )
    )
    again = JobStateStore(compat.variable_state_store({"ti": ti}))
    state = again.load()
    assert state is not None and (state.job_name, state.submission, state.max_tries) == (
        "nightly-train",
        1,
        2,
    )
    key = compat.variable_key("nightly", "manual__1", "train", 2)
    stored = json.loads(channel.values[key])
    assert stored[STATE_KEY]["job_name"] == "nightly-train"
    channel.values[key] = "not json"
    assert again.load() is None  # junk reads as nothing, never raises


def test_a_refused_variable_write_raises_rather_than_passing_for_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.sdk.exceptions import AirflowRuntimeError, ErrorType
    from airflow.sdk.execution_time import context as sdk_context

    channel = _Channel()

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AirflowRuntimeError(SimpleNamespace(error=ErrorType.GENERIC_ERROR, detail={}))

    monkeypatch.setattr(sdk_context, "_get_variable", channel.get)
    monkeypatch.setattr(sdk_context, "_set_variable", refuse)
    store = JobStateStore(
        compat.variable_state_store({"ti": SimpleNamespace(dag_id="d", run_id="r", task_id="t")})
    )
    with pytest.raises(AirflowRuntimeError):
        store.save(
            JobState.submitted(None, job_name="d-t", kind="training", submission=1, max_tries=1, try_number=1)
        )


async def _until_the_trigger_looked(sm: Any, name: str) -> None:
    """Until the trigger has Described its job (it is then inside run, waiting for the next look)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while not sm.stats()["jobs"].get(name, {}).get("DescribeTrainingJob"):
        assert loop.time() < deadline, "the trigger never looked at its job"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("state", "stopped"),
    [
        ("failed", True),  # marked failed while deferred
        ("success", True),  # marked success
        ("deferred", False),  # moved to another triggerer, or the triggerer stopped
        ("scheduled", False),  # fired and resumed: the task looks after its job
        (None, False),  # cleared: the cleared try stops the job before running again
    ],
)
def test_before_3_3_a_cancelled_trigger_stops_the_job_only_when_its_task_ended(
    sm: Any, monkeypatch: pytest.MonkeyPatch, state: str | None, stopped: bool
) -> None:
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    monkeypatch.setattr(capacity, "TRIGGER_ON_KILL", False)
    monkeypatch.setattr(
        RuntimeTaskInstance,
        "get_task_states",
        staticmethod(lambda **criteria: {"scheduled__1": {"train": state}}),
    )
    sm.load_scenario(staggered(1, step=100000))
    name = f"cancelled-{state}"
    submit(sm, name)

    async def main() -> None:
        waiting = asyncio.ensure_future(_with_task(trigger(name)).run().__anext__())
        await _until_the_trigger_looked(sm, name)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.gather(*kill.KILLS)

    asyncio.run(main())
    assert (sm.job(name)["status"] in ("Stopping", "Stopped")) is stopped, sm.job(name)["status"]


def test_from_3_3_a_cancelled_trigger_leaves_the_kill_to_on_kill(
    sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    monkeypatch.setattr(capacity, "TRIGGER_ON_KILL", True)
    monkeypatch.setattr(
        RuntimeTaskInstance,
        "get_task_states",
        staticmethod(lambda **criteria: {"scheduled__1": {"train": "failed"}}),
    )
    sm.load_scenario(staggered(1, step=100000))
    submit(sm, "on-kill-owns-it")

    async def main() -> None:
        waiting = asyncio.ensure_future(_with_task(trigger("on-kill-owns-it")).run().__anext__())
        await _until_the_trigger_looked(sm, "on-kill-owns-it")
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(main())
    assert sm.job("on-kill-owns-it")["status"] == "InProgress"


@pytest.mark.usefixtures("airflow_db")
def test_an_outcome_key_whose_value_is_none_reads_as_none_and_does_not_fail_the_task(
    run_test_dag: Any,
) -> None:
    """Airflow 3.0's execution API refuses a None XCom (422): pushed as is, it would fail the task."""
    states, pulled = run_test_dag("t_null_xcom")
    assert states == {"push_nothing": "success", "pull_nothing": "success"}
    assert pulled == {"nothing": None, "something": 0}
