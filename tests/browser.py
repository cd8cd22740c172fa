"""A headless Chromium for the page tests (Debian's ``chromium`` and ``chromium-driver``, driven
by selenium; ``scripts/install_test_deps.sh`` installs them). Without them the tests skip, naming
what is missing."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVER = "chromedriver"


@contextmanager
def headless_chromium(page_load_strategy: str = "normal") -> Iterator[Any]:
    """A selenium WebDriver of a headless Chromium that keeps the page's console log; skips the
    test when selenium, the browser or its driver is not installed. ``page_load_strategy``:
    selenium's (``"none"``: ``get`` returns before the page has loaded)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra)")
    browser = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    driver_path = shutil.which(DRIVER)
    if browser is None or driver_path is None:
        pytest.skip("no chromium and chromium-driver on PATH (scripts/install_test_deps.sh installs them as root)")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    options.page_load_strategy = page_load_strategy
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1600",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """The console entries at level SEVERE since the last call (errors, uncaught exceptions)."""
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
