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


__all__ = [
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "DagBag",
    "DagSerialization",
    "import_string",
]
