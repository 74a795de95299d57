"""Test-session environment: an isolated AIRFLOW_HOME and fake AWS credentials.

This runs before any test module imports Airflow, so Airflow reads its configuration from a
throw-away home and never from the developer's own ~/airflow.
"""

from __future__ import annotations

import os
import tempfile

_HOME = tempfile.mkdtemp(prefix="sm-prefs-airflow-home-")
os.environ.setdefault("AIRFLOW_HOME", _HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", os.path.join(os.path.dirname(__file__), "..", "dags_examples"))
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
# Credentials for the offline SageMaker only; they are never valid anywhere.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.pop("AWS_PROFILE", None)
