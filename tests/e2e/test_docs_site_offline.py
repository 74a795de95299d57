"""The documentation site opened from the file system: search works and no request leaves the machine.

The site is built from this checkout into a temporary directory (``mkdocs build --strict``, as ``make docs``
does), so the test never reads a stale build/site. Chromium opens ``index.html`` over ``file://``; its
DevTools network events (ChromeDriver's performance log) list every URL the pages asked for.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from harness.browser import headless_chromium

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
#: A word the site's pages use often (the search index must return several pages for it).
QUERY = "acceptance window"
#: Hosts a page may ask without leaving the machine.
LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=240,
    )
    return out


@pytest.fixture(scope="module")
def offline_browser() -> Iterator[Any]:
    driver = headless_chromium(network_log=True)
    try:
        yield driver
    finally:
        driver.quit()


def _requested_urls(driver: Any) -> list[str]:
    """Every URL a page or frame asked for since the last call (the log is drained by reading it)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _leaves_the_machine(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("file", "data", "blob", "about", "chrome-error"):
        return False
    return parts.hostname not in LOCAL_HOSTS


def _wait(timeout: float, check: Any, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def test_search_from_file_finds_pages_without_a_network_request(site: Path, offline_browser: Any) -> None:
    from selenium.webdriver.common.by import By

    driver = offline_browser
    driver.get((site / "index.html").as_uri())
    search = _wait(
        20,
        lambda: [
            e for e in driver.find_elements(By.CSS_SELECTOR, "input.md-search__input") if e.is_displayed()
        ],
        "a visible search box",
    )[0]
    search.click()
    search.send_keys(QUERY)
    results = _wait(
        20,
        lambda: driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item a[href]"),
        f"search results for {QUERY!r}",
    )
    hrefs = {r.get_attribute("href") for r in results}
    assert any(h.startswith(site.as_uri()) and "acceptance-windows.html" in h for h in hrefs), sorted(hrefs)

    # Following a result opens the page from the file system too, with its own scripts and styles.
    results[0].click()
    _wait(20, lambda: driver.current_url != (site / "index.html").as_uri(), "the result's page")
    _wait(20, lambda: driver.execute_script("return document.readyState") == "complete", "the page to load")

    urls = _requested_urls(driver)
    assert any(u.endswith("/search/search_index.js") for u in urls), "the search index was never loaded"
    assert any(u.endswith("/iframe-worker/shim.js") for u in urls), "the worker shim was never loaded"
    outside = sorted({u for u in urls if _leaves_the_machine(u)})
    assert outside == [], f"requests that left the machine: {outside}"
