"""Capacity metrics through Airflow's own metrics layer (StatsD, Datadog or OpenTelemetry, as configured).

Emitted by the task process once per try, from its :class:`~airflow_provider_sm_prefs.domain.record.CapacityRecord`:

========================================  =======  =====================================================
name                                      type     when
========================================  =======  =====================================================
``sm_prefs.capacity.time_to_capacity``    timer    an entry was selected: the job's pending time
``sm_prefs.capacity.selected``            counter  an entry was selected
``sm_prefs.capacity.fallback``            counter  the selected entry was not the first
``sm_prefs.capacity.timeout``             counter  no entry got capacity within the pending budget
``sm_prefs.capacity.quota_rejected``      counter  SageMaker rejected the list for quota
``sm_prefs.capacity.no_capacity``         counter  a CPU-only list found no capacity
========================================  =======  =====================================================

Tags (where the backend takes them): ``dag_id``, ``task_id``, ``job_kind``, and for selections
``instance_type`` and ``rank``. With Airflow's default configuration no backend is on and nothing is sent.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from airflow_provider_sm_prefs.domain.record import CapacityRecord, FailureKind

log = logging.getLogger(__name__)

PREFIX = "sm_prefs.capacity"
_FAILURE_COUNTERS = {
    FailureKind.CAPACITY_TIMEOUT.value: f"{PREFIX}.timeout",
    FailureKind.QUOTA.value: f"{PREFIX}.quota_rejected",
    FailureKind.NO_CAPACITY.value: f"{PREFIX}.no_capacity",
}


def emit(record: CapacityRecord) -> None:
    """Send the metrics of one try's record; a metrics backend that fails never fails the task."""
    try:
        from airflow_provider_sm_prefs.compat import Stats

        tags = {"dag_id": record.dag_id, "task_id": record.task_id, "job_kind": record.job_kind}
        if record.failure_kind is None and record.selected_instance_type:
            tags |= {"instance_type": record.selected_instance_type, "rank": str(record.preference_rank)}
            Stats.timing(
                f"{PREFIX}.time_to_capacity", timedelta(seconds=record.pending_seconds or 0), tags=tags
            )
            Stats.incr(f"{PREFIX}.selected", tags=tags)
            if record.fell_back:
                Stats.incr(f"{PREFIX}.fallback", tags=tags)
        elif record.failure_kind in _FAILURE_COUNTERS:
            Stats.incr(_FAILURE_COUNTERS[record.failure_kind], tags=tags)
    except Exception:
        log.warning("Could not send capacity metrics", exc_info=True)
