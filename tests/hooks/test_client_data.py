"""The triggers' shared async client is created on the event loop without parsing botocore's data there.

aiobotocore creates a client inside ``__aenter__``, on the event loop. Creating one reads the service model
(several MB of JSON for SageMaker) and the endpoint data (1.2 MB); parsed there, the first trigger of a
process held every other wait for 90-200 ms, longer on a busy host. The hook's session reads them in
``get_async_conn``'s thread instead.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from botocore.loaders import JSONFileLoader

from airflow_provider_sm_prefs.hooks.base import preload_client_data
from airflow_provider_sm_prefs.hooks.pool import shared_client
from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every botocore data file read from now on: its path, and whether the main thread read it.

    With empty loaders, as in a fresh triggerer process: the amazon provider gives every async session its
    one module-level loader, and the test session shares one for the sync sessions (tests/conftest.py), so
    after an earlier test in this process nothing would be read at all.
    """
    import botocore.loaders
    import botocore.session
    from airflow.providers.amazon.aws.hooks import base_aws

    monkeypatch.setattr(base_aws, "_loader", botocore.loaders.Loader())
    monkeypatch.setattr(botocore.session, "create_loader", botocore.loaders.create_loader)
    seen: list[tuple[str, bool]] = []
    original = JSONFileLoader.load_file

    def recorded(self: Any, file_path: str) -> Any:
        seen.append((file_path, threading.current_thread() is threading.main_thread()))
        return original(self, file_path)

    monkeypatch.setattr(JSONFileLoader, "load_file", recorded)
    return seen


def test_the_shared_client_is_created_on_the_loop_without_reading_botocores_data(
    sm: Any, reads: list[tuple[str, bool]]
) -> None:
    settings = AwsSettings()

    async def main() -> None:
        async with shared_client(settings.pool_key(), settings.hook().get_async_conn) as client:
            await client.list_training_jobs()

    asyncio.run(main())  # the loop runs in the main thread; get_async_conn's sync part in a worker thread
    read = [path for path, _ in reads]
    assert any("sagemaker" in path and "service-2" in path for path in read), read
    assert any(path.endswith("endpoints") for path in read), read
    assert [path for path, on_loop in reads if on_loop] == []


def test_preloading_leaves_a_service_without_some_files_to_botocore(sm: Any) -> None:
    session = AwsSettings().hook().get_session(deferrable=True)
    # No such service: every file is missing, nothing raises; botocore reports it when a client is made.
    preload_client_data(session, "no-such-service")
    loader = session.get_component("data_loader")
    assert loader.load_data_with_path("partitions")
