"""A deployment's metadata database restored from the migrated dump is the database a migration makes.

Every e2e deployment after the first on an Airflow release loads the dump the first one left
(:func:`harness.database.migrated_dump`) instead of running ``airflow db migrate`` again: compared here
table by table and row by row (``pg_dump`` of both), with the restore path's own log line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.database import MetadataDatabase, migrated_dump

pytestmark = pytest.mark.e2e


def airflow_env(database: MetadataDatabase, home: Path) -> dict[str, str]:
    import os

    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        **database.airflow_env(),
    }


def test_a_restored_database_equals_a_migrated_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SM_PREFS_MIGRATED_DB_CACHE", str(tmp_path / "cache"))
    dumps = []
    for name in ("migrated", "restored"):
        home, logs = tmp_path / name, tmp_path / f"{name}-logs"
        home.mkdir()
        logs.mkdir()
        database = MetadataDatabase("postgres", home, logs)
        database.start()
        try:
            database.migrate(airflow_env(database, home), timeout=600)
            dumps.append(database.dump())
        finally:
            database.stop()
        said = (logs / "db-migrate.log").read_text()
        assert ("restored the migrated database" in said) == (name == "restored"), said
    cached = migrated_dump("postgres")
    assert cached is not None and cached.parent == tmp_path / "cache" and cached.exists()
    assert b"CREATE TABLE public.dag_run" in dumps[0] and b"alembic_version" in dumps[0]
    assert comparable(dumps[1]) == comparable(dumps[0])


def comparable(dump: bytes) -> list[bytes]:
    """A dump's lines without pg_dump's per-dump ``\\restrict`` key (random in every dump)."""
    return [line for line in dump.splitlines() if not line.startswith((b"\\restrict", b"\\unrestrict"))]
