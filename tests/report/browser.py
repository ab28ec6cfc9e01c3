"""Debian's Chromium, headless, driven by selenium through Debian's chromedriver.

The flags keep it off the network: without them it waits on lookups this machine cannot make.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@contextmanager
def chromium(width: int = 1280, height: int = 1000) -> Iterator[webdriver.Chrome]:
    """A fresh browser with its own profile; console messages kept for `get_log("browser")`."""
    with tempfile.TemporaryDirectory(prefix="report-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # Both paths given: selenium does not look for (or download) a driver of its own.
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        try:
            driver.set_page_load_timeout(60)
            yield driver
        finally:
            driver.quit()
