"""The guardrails' look-up cache believes only files no other user could have written.

Tests run as root, so "another user" is simulated by giving a directory or an entry to uid 12345, or by
opening it to everyone (mode 0777); the entries planted there are written by the cache's own code, as a
local attacker running it would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.hooks import preflight
from airflow_provider_sm_prefs.hooks.cache import TtlCache
from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook

OTHER_UID = 12345
PRICE_KEY = ("price", "training", "ml.p5.48xlarge", "aws_default", "us-east-1", None, "d1g35t")
P5 = "ml.p5.48xlarge"
#: The offline SageMaker's list price of the type the planted entries undercut.
SCENARIO: dict[str, Any] = {"time_scale": 0, "prices": {P5: 55.04}}


def plant(directory: Path, key: tuple[Any, ...], value: Any, expires_in: float = 3600.0) -> Path:
    """An entry for ``key`` written by the cache's own code, as anyone who can run it could."""
    TtlCache(directory).put(key, value, ttl=expires_in)
    (path,) = directory.glob("*.json")
    return path


def give_away(*paths: Path) -> None:
    for path in paths:
        os.chown(path, OTHER_UID, OTHER_UID, follow_symlinks=False)


@pytest.fixture
def private(tmp_path: Path) -> Path:
    """A cache directory as the cache makes it: ours, mode 0700."""
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o700)
    return directory


def test_a_second_process_reads_what_the_first_cached(tmp_path: Path) -> None:
    directory = tmp_path / "made" / "airflow-sm-prefs-0"  # missing: the cache creates it
    writer = TtlCache(directory)
    writer.put(PRICE_KEY, 55.04, ttl=3600)
    assert TtlCache(directory).get(PRICE_KEY) == (True, 55.04)
    assert oct(directory.stat().st_mode & 0o777) == "0o700"
    (entry,) = directory.iterdir()
    assert oct(entry.stat().st_mode & 0o777) == "0o600" and entry.name.endswith(".json")


def test_a_directory_another_user_made_first_is_not_believed(
    private: Path, caplog: pytest.LogCaptureFixture
) -> None:
    entry = plant(private, PRICE_KEY, 0.01)
    give_away(private, entry)
    cache = TtlCache(private)
    with caplog.at_level(logging.WARNING, logger="airflow_provider_sm_prefs.hooks.cache"):
        assert cache.get(PRICE_KEY) == (False, None)
    assert str(private) in caplog.text and f"owned by uid {OTHER_UID}" in caplog.text
    # The cache still works, in memory, and writes nothing where the other user could read it.
    cache.put(PRICE_KEY, 55.04, ttl=3600)
    assert cache.get(PRICE_KEY) == (True, 55.04)
    assert cache.directory is None and [p.name for p in private.iterdir()] == [entry.name]
    assert json.loads(entry.read_text())["value"] == 0.01


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o755], ids=["0777", "0770", "0755"])
def test_a_directory_open_to_group_or_others_is_not_believed(
    private: Path, mode: int, caplog: pytest.LogCaptureFixture
) -> None:
    plant(private, PRICE_KEY, 0.01)
    private.chmod(mode)  # ours, but others could have put the entry there (or read what we cache)
    with caplog.at_level(logging.WARNING, logger="airflow_provider_sm_prefs.hooks.cache"):
        assert TtlCache(private).get(PRICE_KEY) == (False, None)
    assert str(private) in caplog.text and f"mode {mode:04o}" in caplog.text


def test_a_symlinked_directory_is_not_followed(
    tmp_path: Path, private: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plant(private, PRICE_KEY, 0.01)
    link = tmp_path / "airflow-sm-prefs-0"
    link.symlink_to(private, target_is_directory=True)
    cache = TtlCache(link)
    with caplog.at_level(logging.WARNING, logger="airflow_provider_sm_prefs.hooks.cache"):
        assert cache.get(PRICE_KEY) == (False, None)
        cache.put(("quotas",), {"q": 1.0}, ttl=60)
    assert str(link) in caplog.text and "symlink" in caplog.text
    assert len(list(private.iterdir())) == 1  # nothing written through the link


def test_an_entry_that_is_a_symlink_or_someone_elses_file_is_a_miss(tmp_path: Path, private: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    planted = plant(elsewhere, PRICE_KEY, 0.01)
    (private / planted.name).symlink_to(planted)
    assert TtlCache(private).get(PRICE_KEY) == (False, None)

    (private / planted.name).unlink()
    foreign = plant(private, PRICE_KEY, 0.01)
    give_away(foreign)
    assert TtlCache(private).get(PRICE_KEY) == (False, None)


@pytest.fixture
def fifo(private: Path) -> Iterator[Path]:
    """A FIFO under the entry name of PRICE_KEY; released afterwards so a blocked reader can end."""
    name = plant(private, PRICE_KEY, 0.01)
    name.unlink()
    os.mkfifo(name, 0o600)
    yield name
    # A reader blocked on the FIFO (a regression) gets end-of-file and its thread ends; else none waits.
    with contextlib.suppress(OSError):
        os.close(os.open(name, os.O_WRONLY | os.O_NONBLOCK))


def test_a_fifo_planted_under_an_entry_name_is_a_miss_not_a_hang(private: Path, fifo: Path) -> None:
    result: list[tuple[bool, Any]] = []
    reader = threading.Thread(target=lambda: result.append(TtlCache(private).get(PRICE_KEY)), daemon=True)
    reader.start()
    reader.join(timeout=30)  # a generous bound: a read that blocks fails the test instead of hanging it
    assert not reader.is_alive(), "reading the cache blocked on a FIFO"
    assert result == [(False, None)]


def test_an_entry_that_claims_to_outlive_its_ttl_is_a_miss(private: Path) -> None:
    now = 1_800_000_000.0
    entry = plant(private, PRICE_KEY, 0.01)
    entry.write_text(json.dumps({"expires": now + 10 * 365 * 86400, "value": 0.01}))
    assert TtlCache(private, clock=lambda: now).get(PRICE_KEY) == (False, None)
    # Within a day (the longest lifetime, a price's) it is believed; beyond the lifetime its key is given, it is not.
    entry.write_text(json.dumps({"expires": now + 86400.0, "value": 0.01}))
    assert TtlCache(private, clock=lambda: now).get(PRICE_KEY) == (True, 0.01)
    assert TtlCache(private, clock=lambda: now).get(PRICE_KEY, ttl=600) == (False, None)


def test_the_guardrails_price_comes_from_aws_not_from_a_planted_entry(
    sm: Any, private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm.load_scenario(SCENARIO)

    def look() -> Any:
        hook = SageMakerPreferenceHook(aws_conn_id="aws_default")
        return hook.preflight_facts(JobKind.TRAINING, [(P5, None)], checks=False, prices=True)

    monkeypatch.setattr(preflight, "_CACHE", TtlCache(private))
    assert look().prices == {P5: 55.04}
    (entry,) = private.glob("*.json")
    entry.write_text(json.dumps({**json.loads(entry.read_text()), "value": 0.01}))
    give_away(private, entry)  # as if another user had made the directory and priced p5 at $0.01

    monkeypatch.setattr(preflight, "_CACHE", TtlCache(private))  # the next task process
    assert look().prices == {P5: 55.04}
    assert sm.stats()["operations"]["GetProducts"] == 2


def test_the_configured_directory_is_used_when_it_is_ours(sm: Any, caplog: pytest.LogCaptureFixture) -> None:
    sm.load_scenario(SCENARIO)
    directory = Path(os.environ["SM_PREFS_CACHE_DIR"])  # tests/conftest.py's, made by mkdtemp (0700)
    with caplog.at_level(logging.WARNING, logger="airflow_provider_sm_prefs.hooks.cache"):
        SageMakerPreferenceHook(aws_conn_id="aws_default").preflight_facts(
            JobKind.TRAINING, [(P5, None)], checks=False, prices=True
        )
    assert caplog.text == "" and any(directory.glob("*.json"))
