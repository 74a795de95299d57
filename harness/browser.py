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


def headless_chromium(width: int = 1400, height: int = 1000) -> Any:
    """A Selenium ``webdriver.Chrome`` on Debian's Chromium, headless, no implicit waits; quit() it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        raise DeploymentError(f"{CHROMIUM} or {CHROMEDRIVER} missing: run `make browser` (.ci/chromium.sh)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*_FLAGS, f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    return driver
