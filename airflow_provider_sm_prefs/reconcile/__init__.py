"""The reconciler: stop the provider's running jobs whose owning task is gone (dry run by default).

The decisions are :mod:`airflow_provider_sm_prefs.domain.reconcile`'s; a pass is :class:`Reconciler`;
task states come from a :class:`TaskStateSource` (the Task SDK inside a task, the REST API from the
command line: ``python -m airflow_provider_sm_prefs.reconcile`` or ``sm-prefs-reconcile``). The maintenance
DAG's operator is :class:`~airflow_provider_sm_prefs.operators.reconciler.SageMakerJobReconcilerOperator`.
"""

from airflow_provider_sm_prefs.reconcile.engine import RateLimiter, Reconciler, ReconcileReport
from airflow_provider_sm_prefs.reconcile.sources import (
    RestApiTaskStates,
    StateUnavailable,
    TaskSdkTaskStates,
    TaskStateSource,
)

__all__ = [
    "RateLimiter",
    "ReconcileReport",
    "Reconciler",
    "RestApiTaskStates",
    "StateUnavailable",
    "TaskSdkTaskStates",
    "TaskStateSource",
]
