"""The distribution as shipped: wheel and sdist pass twine's strict check and hold only the package and
its documents, and the wheel installed alone in a fresh environment (no Airflow there) serves SageMaker
from its console script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import offline_sagemaker

DISTRIBUTION = Path(__file__).resolve().parents[1]
PACKAGE = "offline_sagemaker"


def _uv() -> list[str]:
    found = shutil.which("uv", path=os.path.dirname(sys.executable)) or shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def _run(*command: str | Path, cwd: Path = DISTRIBUTION, timeout: float = 900) -> str:
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(*_uv(), "build", "--out-dir", out, "--quiet", DISTRIBUTION)
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with the wheel and only what it depends on."""
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path_factory.mktemp("venv") / "venv"
    _run(*_uv(), "venv", "--quiet", "--python", sys.executable, venv)
    _run(*_uv(), "pip", "install", "--quiet", "--python", venv / "bin" / "python", wheel)
    return venv


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHON", "AWS_"))}
    env["HOME"] = str(tmp_path)
    return env


def test_the_distributions_pass_twine_check(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    assert wheel.name == f"{PACKAGE}-{offline_sagemaker.__version__}-py3-none-any.whl"
    output = _run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist)
    assert output.count("PASSED") == 2, output


def test_the_wheel_holds_the_package_its_scenarios_license_and_entry_points(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = archive.read(info).decode()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    dist_info = f"{PACKAGE}-{offline_sagemaker.__version__}.dist-info/"
    assert all(n.startswith((f"{PACKAGE}/", dist_info)) for n in names), names
    assert f"{PACKAGE}/scenarios/first-choice-scarce.yaml" in names
    assert f"{PACKAGE}/__main__.py" in names
    assert f"{dist_info}licenses/LICENSE" in names
    assert not [n for n in names if "/tests/" in n or n.endswith(("uv.lock", ".pyc"))], names
    assert "offline-sagemaker = offline_sagemaker.cli:main" in entry_points
    assert "sm-prefs-emulator = offline_sagemaker.cli:main" in entry_points
    assert (
        "[pytest11]" in entry_points and "offline_sagemaker = offline_sagemaker.pytest_plugin" in entry_points
    )
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert not [r for r in requires if "airflow" in r.lower()], requires


def test_the_sdist_holds_the_package_readme_changelog_license_and_pyproject_only(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    top = {name.split("/")[0] for name in names}
    # hatchling adds PKG-INFO and the .gitignore whose patterns it applied; no tests, no lock file.
    expected = {PACKAGE, "README.md", "CHANGELOG.md", "LICENSE", "pyproject.toml", "PKG-INFO", ".gitignore"}
    assert top == expected, top
    assert f"{PACKAGE}/scenarios/default.yaml" in names


def test_the_wheel_alone_serves_sagemaker_from_its_console_script(venv: Path, tmp_path: Path) -> None:
    python = venv / "bin" / "python"
    env = _clean_env(tmp_path)
    # Only its own dependencies: no Airflow, no provider.
    no_airflow = subprocess.run(
        [python, "-c", "import airflow"], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert no_airflow.returncode != 0 and "No module named 'airflow'" in no_airflow.stderr
    assert not list((venv / "lib").glob("python*/site-packages/airflow_provider_sm_prefs*"))

    server = subprocess.Popen(
        [venv / "bin" / "offline-sagemaker", "--port", "0", "--scenario", "first-choice-scarce"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        endpoint = server.stdout.readline().strip()
        assert endpoint.startswith("http://127.0.0.1:"), (endpoint, server.stderr)
        code = (
            "import sys, boto3\n"
            "from offline_sagemaker import OfflineSageMaker\n"
            "sm = OfflineSageMaker.attach(sys.argv[1])\n"
            "# The scenario the command loaded, on a frozen clock: only advance() moves it, however busy the host.\n"
            "sm.load_scenario({**sm.scenario_dict(), 'time_scale': 0})\n"
            "client = boto3.client('sagemaker', endpoint_url=sys.argv[1], region_name='us-east-1',\n"
            "                      aws_access_key_id='testing', aws_secret_access_key='testing')\n"
            "client.create_training_job(\n"
            "    TrainingJobName='wheel-check',\n"
            "    AlgorithmSpecification={'TrainingImage': '123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1',\n"
            "                            'TrainingInputMode': 'File'},\n"
            "    RoleArn='arn:aws:iam::123456789012:role/SageMakerRole',\n"
            "    OutputDataConfig={'S3OutputPath': 's3://models/out'},\n"
            "    ResourceConfig={'InstancePreferences': [{'InstanceType': 'ml.g6.48xlarge', 'InstanceCount': 2},\n"
            "                                            {'InstanceType': 'ml.g5.48xlarge', 'InstanceCount': 4}],\n"
            "                    'VolumeSizeInGB': 50},\n"
            "    StoppingCondition={'MaxRuntimeInSeconds': 86400, 'MaxPendingTimeInSeconds': 3600},\n"
            ")\n"
            "sm.advance(120)\n"
            "resource = client.describe_training_job(TrainingJobName='wheel-check')['ResourceConfig']\n"
            "print(resource['SelectedInstanceType'], resource['SelectedInstanceCount'])\n"
        )
        result = subprocess.run(
            [python, "-c", code, endpoint], capture_output=True, text=True, timeout=120, env=env, check=False
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.split() == ["ml.g5.48xlarge", "4"]
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
        assert server.stdout is not None and server.stderr is not None
        server.stdout.close()
        server.stderr.close()
    assert server.returncode == 0


def test_python_dash_m_runs_the_command(venv: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [venv / "bin" / "python", "-m", PACKAGE, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_clean_env(tmp_path),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: offline-sagemaker")
