"""Control of an offline SageMaker running in another process (e.g. the CLI's), over its admin routes."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from offline_sagemaker.admin import JSON_CONTENT_TYPE
from offline_sagemaker.controls import EmulatorControls

__all__ = ["RemoteSageMaker"]


class RemoteSageMaker(EmulatorControls):
    """Admin access to an emulator running elsewhere (another process), over its ``/_emulator`` routes.

    :param endpoint_url: ``http://host:port`` of the running emulator.
    :param timeout: seconds per admin request.
    """

    def __init__(self, endpoint_url: str, timeout: float = 10.0) -> None:
        self._endpoint_url = endpoint_url.rstrip("/")
        self._timeout = timeout
        self._region = str(self._call("GET", "health").get("region", "us-east-1"))

    @property
    def endpoint_url(self) -> str:
        """``http://host:port`` of the remote emulator."""
        return self._endpoint_url

    def _admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        # The server takes a request that changes state only as JSON (see admin.refusal): always a body.
        if method != "GET" and body is None:
            body = {}
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self._endpoint_url + path,
            data=data,
            method=method,
            headers={"Content-Type": JSON_CONTENT_TYPE} if data is not None else {},
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                return error.code, json.loads(raw or b"null")
            except ValueError:
                return error.code, {"error": raw.decode(errors="replace")}
