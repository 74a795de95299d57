"""Whether event mode is on for a connection, and its consumer: read in the triggerer when a wait starts.

The queue comes from the AWS connection's extra ``sm_prefs_event_queue_url`` if it has that key (an empty
value turns event mode off for the connection), else from ``[sm_prefs] event_queue_url``. It serves the
waits in the connection's own region (:func:`queue_serves`): a wait in another region polls. See
:mod:`.eventbridge_queue` for what event mode does, docs/events.md for setting it up.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings
from airflow_provider_sm_prefs.triggers.eventbridge_queue import EventQueueConsumer, consumer_for

#: Connection extra naming the queue (overrides the config option; empty or "off" turns event mode off).
CONNECTION_EXTRA = "sm_prefs_event_queue_url"
#: Default of ``[sm_prefs] event_safety_list_seconds``: the List loop's cadence while events flow.
DEFAULT_SAFETY_LIST_SECONDS = 300.0


class EventDetail(str, Enum):
    """``[sm_prefs] event_detail``: what a wait does with an event's detail."""

    #: A detail newer than what the wait has seen, that ends it and holds every field the outcome
    #: needs, ends the wait without a Describe (:mod:`~airflow_provider_sm_prefs.domain.event_detail`).
    DATA = "data"
    #: Every event that shows a change worth a look makes the trigger Describe its job.
    HINT = "hint"


@dataclass(frozen=True)
class EventMode:
    """Event mode as a wait finds it configured.

    :param consumer: the process's consumer of the queue.
    :param safety_list_seconds: the List loop's cadence while events flow.
    :param detail: what a wait does with an event's detail.
    """

    consumer: EventQueueConsumer
    safety_list_seconds: float
    detail: EventDetail = EventDetail.DATA


def configured_queue_url(connection_extra: dict[str, Any] | None) -> str | None:
    """The queue of event mode: the connection's extra, else ``[sm_prefs] event_queue_url``; None when off.

    Read in the triggerer when a wait starts, never at DAG parse time.
    """
    if connection_extra and CONNECTION_EXTRA in connection_extra:
        value = connection_extra.get(CONNECTION_EXTRA)
    else:
        from airflow.configuration import conf

        value = conf.get("sm_prefs", "event_queue_url", fallback=None)
    text = str(value or "").strip()
    return None if text.lower() in ("", "off", "none", "false") else text


def safety_list_seconds() -> float:
    """``[sm_prefs] event_safety_list_seconds``: the List loop's cadence while events flow."""
    from airflow.configuration import conf

    value = conf.getfloat("sm_prefs", "event_safety_list_seconds", fallback=DEFAULT_SAFETY_LIST_SECONDS)
    return max(1.0, value)


def event_detail() -> EventDetail:
    """``[sm_prefs] event_detail``: ``data`` (the default) or ``hint``.

    :raises ValueError: naming the option and the values it takes.
    """
    from airflow.configuration import conf

    value = str(conf.get("sm_prefs", "event_detail", fallback=EventDetail.DATA.value) or "").strip().lower()
    try:
        return EventDetail(value or EventDetail.DATA.value)
    except ValueError:
        choices = ", ".join(d.value for d in EventDetail)
        raise ValueError(f"[sm_prefs] event_detail: {value!r} is not one of {choices}") from None


def _connection(settings: AwsSettings) -> tuple[dict[str, Any], str | None]:
    """The connection's extra, and its own region (not the wait's ``region_name``; None when unset)."""
    if not settings.aws_conn_id:
        return {}, None
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    hook = AwsBaseHook(client_type="sqs", **{**settings.hook_kwargs(), "region_name": None})
    return dict(hook.conn_config.extra_config or {}), hook.conn_config.region_name


def queue_serves(settings: AwsSettings, connection_region: str | None) -> bool:
    """Whether the queue of a connection receives the events of a wait with these settings. The queue is
    fed by the EventBridge rule of its own region, the connection's: a wait in another region (a job the
    task moved to one of its ``regions`` with the task's connection) polls, unless that region has a
    connection of its own naming a queue there. A region unknown on either side is taken to match."""
    wanted = settings.region_name
    return not (wanted and connection_region and wanted != connection_region)


async def event_mode_for(settings: AwsSettings) -> EventMode | None:
    """Event mode for these settings: the consumer of the configured queue, the safety List cadence and
    what to do with an event's detail; None if off.

    Reads the connection (through a thread: it may block) and the config when a wait starts.
    """
    from asgiref.sync import sync_to_async

    extra, connection_region = await sync_to_async(_connection, thread_sensitive=False)(settings)
    url = configured_queue_url(extra)
    if url is None or not queue_serves(settings, connection_region):
        return None

    def opener() -> Any:
        from airflow_provider_sm_prefs.hooks.base import ProviderAwsHook

        return ProviderAwsHook(client_type="sqs", **settings.hook_kwargs()).get_async_conn()  # type: ignore[no-untyped-call]

    return EventMode(consumer_for(settings.pool_key(), opener, url), safety_list_seconds(), event_detail())
