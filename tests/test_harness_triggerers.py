"""The deployment's triggerer HA mode: how many triggerer processes, their names and command lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import COMPONENTS, DeploymentConfig, triggerer_names


def test_one_triggerer_by_default_named_as_before(tmp_path: Path) -> None:
    config = DeploymentConfig(root=tmp_path, api_port=8999)
    assert config.components == COMPONENTS == ("api-server", "scheduler", "dag-processor", "triggerer")
    assert config.command("triggerer")[1:] == ["triggerer", "--skip-serve-logs"]


def test_two_triggerers_run_the_same_command_under_their_own_names(tmp_path: Path) -> None:
    config = DeploymentConfig(root=tmp_path, api_port=8999, triggerers=2)
    assert config.components == ("api-server", "scheduler", "dag-processor", "triggerer", "triggerer-2")
    assert config.command("triggerer-2") == config.command("triggerer")
    assert config.command("scheduler")[1:] == ["scheduler", "--skip-serve-logs"]
    with pytest.raises(KeyError):
        config.command("triggerer-3")
    assert triggerer_names(3) == ("triggerer", "triggerer-2", "triggerer-3")


def test_no_triggerer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="triggerers"):
        DeploymentConfig(root=tmp_path, api_port=8999, triggerers=0)
