"""The waiting strategies compared: our trigger's default, the amazon provider's trigger, a naive poller,
and our trigger in event mode, with event details used as data (the default) and as hints only (the
earlier behaviour: every event worth a look costs a Describe).

Each variant turns a job name into the ``(classpath, kwargs)`` pair the scheduler would store for a
deferred task; the trigger process rebuilds the trigger from it, as the triggerer does. Trigger
classes are imported lazily, so the harness process never imports Airflow.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

OURS = "ours"
STOCK = "stock"
NAIVE = "naive"
EVENTS = "events"
EVENTS_HINT = "events-hint"
#: The event-mode variants, run side by side.
EVENT_MODES: tuple[str, ...] = (EVENTS, EVENTS_HINT)
#: The variants run by default.
ALL_VARIANTS: tuple[str, ...] = (OURS, STOCK, NAIVE)
#: Environment variable of the Airflow option ``[sm_prefs] event_queue_url``: with it set, the triggers
#: learn of job changes from that SQS queue and keep only a slow safety List loop.
EVENT_QUEUE_ENV = "AIRFLOW__SM_PREFS__EVENT_QUEUE_URL"
#: Environment variable of ``[sm_prefs] event_detail`` (``data`` or ``hint``).
EVENT_DETAIL_ENV = "AIRFLOW__SM_PREFS__EVENT_DETAIL"

CAPACITY_TRIGGER = "airflow_provider_sm_prefs.triggers.capacity.SageMakerCapacityTrigger"
STOCK_TRIGGER = "airflow.providers.amazon.aws.triggers.sagemaker.SageMakerTrigger"


def load_class(classpath: str) -> type:
    """Import ``module.Class``."""
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def accepts(classpath: str, parameter: str) -> bool:
    """True if the trigger's constructor takes ``parameter`` (the stock trigger has no ``creation_time``)."""
    return parameter in inspect.signature(load_class(classpath)).parameters


@dataclass(frozen=True)
class Variant:
    """One waiting strategy.

    :param key: short name used on the command line and in results.
    :param description: what it is, for the report.
    :param classpath: the trigger class.
    :param kwargs: ``(job_name, preferences, poll_interval) -> constructor kwargs``.
    :param event_mode: the harness routes SageMaker job state-change events to an SQS queue on the
        emulator's endpoint and names it to the trigger process in :data:`EVENT_QUEUE_ENV`.
    :param env: Airflow options of the trigger process, as environment variables.
    """

    key: str
    description: str
    classpath: str
    kwargs: Callable[[str, list[dict[str, Any]], float], dict[str, Any]]
    event_mode: bool = False
    env: Mapping[str, str] = field(default_factory=dict)

    def serialized(
        self, job_name: str, preferences: list[dict[str, Any]], poll_interval: float
    ) -> dict[str, Any]:
        """The trigger's kwargs as they come back from ``serialize()`` (what the triggerer stores)."""
        cls = load_class(self.classpath)
        trigger = cls(**self.kwargs(job_name, preferences, poll_interval))
        classpath, kwargs = trigger.serialize()
        if classpath != self.classpath:
            raise RuntimeError(f"{self.classpath} serialized itself as {classpath}")
        return dict(kwargs)


def _ours(job_name: str, preferences: list[dict[str, Any]], poll_interval: float) -> dict[str, Any]:
    # Defaults except the cadence: shared_poll stays at its default.
    return {
        "job_name": job_name,
        "job_kind": "training",
        "wait_for": "capacity",
        "preferences": preferences,
        "poll_interval": poll_interval,
        "aws_conn_id": "aws_default",
    }


def _naive(job_name: str, preferences: list[dict[str, Any]], poll_interval: float) -> dict[str, Any]:
    return {
        **_ours(job_name, preferences, poll_interval),
        "max_poll_interval": poll_interval,
        "shared_poll": False,
    }


def _stock(job_name: str, preferences: list[dict[str, Any]], poll_interval: float) -> dict[str, Any]:
    return {
        "job_name": job_name,
        "job_type": "training",
        "waiter_delay": max(1, round(poll_interval)),
        "waiter_max_attempts": 480,
        "aws_conn_id": "aws_default",
    }


VARIANTS: dict[str, Variant] = {
    OURS: Variant(
        OURS,
        "SageMakerCapacityTrigger, defaults (shared_poll default), poll_interval",
        CAPACITY_TRIGGER,
        _ours,
    ),
    STOCK: Variant(
        STOCK,
        "amazon provider SageMakerTrigger(job_type=training), waiter_delay=poll_interval",
        STOCK_TRIGGER,
        _stock,
    ),
    NAIVE: Variant(
        NAIVE,
        "SageMakerCapacityTrigger(shared_poll=False, max_poll_interval=poll_interval): one Describe per job per interval",
        CAPACITY_TRIGGER,
        _naive,
    ),
    EVENTS: Variant(
        EVENTS,
        "ours in event mode: [sm_prefs] event_queue_url names an SQS queue fed by an EventBridge rule "
        "for SageMaker job state changes; only the slow safety List loop polls; an event's detail "
        "ends a wait without a Describe when it is newer than what the wait saw and complete "
        "([sm_prefs] event_detail = data, the default)",
        CAPACITY_TRIGGER,
        _ours,
        event_mode=True,
        env={EVENT_DETAIL_ENV: "data"},
    ),
    EVENTS_HINT: Variant(
        EVENTS_HINT,
        "events with [sm_prefs] event_detail = hint: every event worth a look makes the trigger Describe "
        "its job (the earlier behaviour)",
        CAPACITY_TRIGGER,
        _ours,
        event_mode=True,
        env={EVENT_DETAIL_ENV: "hint"},
    ),
}
