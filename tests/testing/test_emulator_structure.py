"""The shape of the emulator package: a light pytest plugin and lazily imported public names.

Import cycles and module sizes are checked for the whole provider in tests/test_package.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROVIDER = "airflow_provider_sm_prefs"
PACKAGE = f"{PROVIDER}.testing"


def test_loading_the_pytest_plugin_imports_no_server_yaml_moto_or_botocore() -> None:
    code = (
        "import json, sys\n"
        "import airflow_provider_sm_prefs.testing.pytest_plugin\n"
        "import airflow_provider_sm_prefs.testing\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(result.stdout))
    assert "airflow_provider_sm_prefs.testing.pytest_plugin" in loaded
    heavy = {
        name
        for name in loaded
        if name.split(".")[0] in {"yaml", "moto", "botocore", "boto3", "werkzeug"}
        or (name.startswith(f"{PACKAGE}.") and name != f"{PACKAGE}.pytest_plugin")
    }
    assert heavy == set()


def test_the_package_exports_its_public_names_on_first_use() -> None:
    code = (
        "import sys\n"
        "import airflow_provider_sm_prefs.testing as t\n"
        "assert 'airflow_provider_sm_prefs.testing.server' not in sys.modules\n"
        "from airflow_provider_sm_prefs.testing import OfflineSageMaker, load_scenario\n"
        "assert OfflineSageMaker.__module__ == 'airflow_provider_sm_prefs.testing.server'\n"
        "assert set(t.__all__) <= set(dir(t))\n"
        "try:\n"
        "    t.NoSuchName\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], timeout=120, check=True)
