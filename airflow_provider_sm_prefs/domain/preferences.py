"""Instance preference lists: the public names of the model, in one import.

Pure Python: no Airflow, no boto. DAG authors import it at parse time::

    from airflow_provider_sm_prefs.domain.preferences import InstancePreference, InstancePreferenceList

    prefs = InstancePreferenceList(
        [
            InstancePreference("ml.g6e.48xlarge", 2),
            {"instance_type": "ml.g5.48xlarge", "instance_count": 4},
            {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": "2"},  # Jinja renders strings
        ],
        kind="training",
    )

Rules follow the SageMaker guides (rule numbers R1..R14 as in the README's "Rules checked before any
AWS call"). SageMaker's own client validation only checks minimums, so everything here is what makes a
bad list fail before a single AWS call instead of after a round trip, or worse, after a retry storm.

Each concern has its module, and this one names them all:

* :mod:`~airflow_provider_sm_prefs.domain.preference_entry`: one entry, how a raw entry is read, its rules;
* :mod:`~airflow_provider_sm_prefs.domain.preference_list`: the list, its rules and those of the request
  around it;
* :mod:`~airflow_provider_sm_prefs.domain.requests`: Create requests from a DAG's arguments.
"""

from __future__ import annotations

from airflow_provider_sm_prefs.domain.catalog import is_accelerated_type as is_accelerated
from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preference_entry import (
    ACCEPT_AFTER,
    FIELD,
    PROCESSING_MAX_COUNT,
    TRAINING_PLAN_ARN,
    InstancePreference,
)
from airflow_provider_sm_prefs.domain.preference_list import (
    MAX_ENTRIES,
    MAX_PENDING_SECONDS,
    MIN_PENDING_SECONDS,
    InstancePreferenceList,
)
from airflow_provider_sm_prefs.domain.requests import (
    build_request,
    check_request,
    job_level_count,
    to_seconds,
    without_list,
)
from airflow_provider_sm_prefs.domain.requirements import WorkloadRequirements

__all__ = [
    "ACCEPT_AFTER",
    "FIELD",
    "MAX_ENTRIES",
    "MAX_PENDING_SECONDS",
    "MIN_PENDING_SECONDS",
    "PROCESSING_MAX_COUNT",
    "TRAINING_PLAN_ARN",
    "InstancePreference",
    "InstancePreferenceList",
    "InvalidInstancePreferencesError",
    "JobKind",
    "WorkloadRequirements",
    "build_request",
    "check_request",
    "is_accelerated",
    "job_level_count",
    "to_seconds",
    "without_list",
]
