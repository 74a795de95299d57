"""The import path of earlier releases: the same module as :mod:`airflow_provider_sm_prefs.domain.windows`."""

import sys

from airflow_provider_sm_prefs.domain import windows as _module
from airflow_provider_sm_prefs.domain.windows import *  # noqa: F403 (the public names, for type checkers)

sys.modules[__name__] = _module
