"""Headless Chromium from Debian's packages (``chromium``, ``chromium-driver``; ``make browser`` installs
them with .ci/chromium.sh), driven by Selenium, which downloads no browser of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import DeploymentError

__all__ = ["CHROMEDRIVER", "CHROMIUM", "headless_chromium"]

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def headless_chromium(width: int = 1400, height: int = 1000, *, network_log: bool = False) -> Any:
    """A Selenium ``webdriver.Chrome`` on Debian's Chromium, headless, no implicit waits; quit() it.

    :param network_log: record the DevTools events of every page in ChromeDriver's performance log
        (``driver.get_log("performance")``), e.g. to check which URLs a page asked for.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        raise DeploymentError(f"{CHROMIUM} or {CHROMEDRIVER} missing: run `make browser` (.ci/chromium.sh)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*_FLAGS, f"--window-size={width},{height}"):
        options.add_argument(flag)
    if network_log:
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    return driver
