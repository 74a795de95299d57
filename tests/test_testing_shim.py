"""airflow_provider_sm_prefs.testing, the offline SageMaker's import path before it became the
offline-sagemaker distribution: it warns, is offline_sagemaker itself, and says what to install without it.

Each check runs in a fresh interpreter: the warning is emitted once per process, on the first import.
"""

from __future__ import annotations

import subprocess
import sys

INSTALL = "pip install 'airflow-provider-sm-prefs[testing]'"


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_importing_the_old_path_warns_with_the_new_import_and_the_install_line() -> None:
    result = python(
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    from airflow_provider_sm_prefs.testing import OfflineSageMaker\n"
        "    import airflow_provider_sm_prefs.testing.server\n"
        "(warning,) = [w for w in caught if issubclass(w.category, DeprecationWarning)]\n"
        "print(warning.filename)\n"
        "print(warning.message)\n"
    )
    assert result.returncode == 0, result.stderr
    filename, message = result.stdout.strip().split("\n", 1)
    assert "airflow_provider_sm_prefs.testing is deprecated" in message
    assert "import offline_sagemaker instead" in message
    assert INSTALL in message and "pip install offline-sagemaker" in message
    # The warning points at the importing code, not at the import machinery.
    assert filename == "<string>"


def test_the_old_names_and_submodules_are_the_offline_sagemaker_objects_themselves() -> None:
    result = python(
        "import importlib, warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "import offline_sagemaker, offline_sagemaker.server, offline_sagemaker.jobs\n"
        "import airflow_provider_sm_prefs.testing as old\n"
        "import airflow_provider_sm_prefs.testing.server as old_server\n"
        "from airflow_provider_sm_prefs.testing import OfflineSageMaker, load_scenario, jobs\n"
        "from airflow_provider_sm_prefs.testing.scenario import ScenarioError\n"
        "from airflow_provider_sm_prefs.testing.jobs import training_config\n"
        "assert old_server is offline_sagemaker.server\n"
        "assert OfflineSageMaker is offline_sagemaker.OfflineSageMaker\n"
        "assert load_scenario is offline_sagemaker.load_scenario\n"
        "assert ScenarioError is offline_sagemaker.ScenarioError\n"
        "assert jobs is offline_sagemaker.jobs and training_config is offline_sagemaker.jobs.training_config\n"
        "assert set(old.__all__) == set(offline_sagemaker.__all__) <= set(dir(old))\n"
        "# The modules keep their own spec: they are the offline_sagemaker modules, reloadable as such.\n"
        "assert offline_sagemaker.server.__spec__.name == 'offline_sagemaker.server'\n"
        "importlib.reload(offline_sagemaker.server)\n"
        "try:\n"
        "    import airflow_provider_sm_prefs.testing.no_such_module\n"
        "except ModuleNotFoundError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('imported a module offline_sagemaker does not have')\n"
        "try:\n"
        "    old.NoSuchName\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    assert result.returncode == 0, result.stderr


def test_without_offline_sagemaker_the_import_error_says_what_to_install() -> None:
    result = python(
        "import sys\n"
        "sys.modules['offline_sagemaker'] = None  # as if the distribution were not installed\n"
        "try:\n"
        "    import airflow_provider_sm_prefs.testing\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('imported')\n"
    )
    assert result.returncode == 0, result.stderr
    assert INSTALL in result.stdout and "offline_sagemaker" in result.stdout
