"""What the tests need that moved between the Airflow 3 minors the provider supports (3.0 to 3.3).

The provider's own differences live in ``airflow_provider_sm_prefs.compat``; these are the tests' only.
"""

from __future__ import annotations

from airflow.providers.common.compat.module_loading import import_string
from airflow.providers.common.compat.version_compat import (
    AIRFLOW_V_3_1_PLUS,
    AIRFLOW_V_3_2_PLUS,
    AIRFLOW_V_3_3_PLUS,
)

try:  # Airflow 3.2 and later
    from airflow.serialization.serialized_objects import DagSerialization
except ImportError:
    from airflow.serialization.serialized_objects import SerializedDAG as DagSerialization

try:  # Airflow 3.3 and later
    from airflow.dag_processing.dagbag import DagBag
except ImportError:
    from airflow.models.dagbag import DagBag  # type: ignore[no-redef]


def sends_failure_callback(task: object) -> bool:
    """What the scheduler reads before it sends a failure callback for a task failed outside its process.

    Airflow 3.1 and later read ``has_on_failure_callback``; 3.0 reads the (serialized) callbacks themselves.
    """
    if AIRFLOW_V_3_1_PLUS:
        return bool(task.has_on_failure_callback)
    return bool(task.on_failure_callback)


__all__ = [
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "DagBag",
    "DagSerialization",
    "import_string",
    "sends_failure_callback",
]
