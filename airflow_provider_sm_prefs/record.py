"""The import path of earlier releases: the same module as :mod:`airflow_provider_sm_prefs.domain.record`."""

import sys

from airflow_provider_sm_prefs.domain import record as _module
from airflow_provider_sm_prefs.domain.record import *  # noqa: F403 (the public names, for type checkers)

sys.modules[__name__] = _module
