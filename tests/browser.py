"""The headless Chromium the flow page's browser tests drive (tests/test_web_ui.py,
tests/test_web_page.py): the ``browser`` fixture, a wait that survives redraws, screenshots.

``MISSING`` says why there is no browser (Chromium or its driver not found, selenium not
installed), or is empty; the browser tests skip with that reason, loudly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("FLOWACTORS_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FLOWACTORS_CHROMEDRIVER", "/usr/bin/chromedriver")
_NOT_FOUND = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
MISSING = ""
if _NOT_FOUND:
    MISSING = (f"THE FLOW PAGE IS NOT TESTED: {', '.join(_NOT_FOUND)} not found. Install Chromium and its driver "
               f"with 'make browser' (apt-get install chromium chromium-driver)")
try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    MISSING = MISSING or "THE FLOW PAGE IS NOT TESTED: selenium is not installed (pip install -e '.[test]')"

__all__ = ["MISSING", "By", "Select", "browser", "shoot", "wait_for"]


@pytest.fixture
def browser():
    """A headless Chromium, quit after the test; the test skips, saying why, without one."""
    if MISSING:
        pytest.skip(MISSING)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1600,820", "--hide-scrollbars"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def shoot(driver, name: str) -> None:
    """A screenshot for the README, when ``FLOWACTORS_SCREENSHOTS`` names the folder for it."""
    folder = os.environ.get("FLOWACTORS_SCREENSHOTS")
    if folder:
        assert driver.save_screenshot(str(Path(folder) / name))


def wait_for(driver, condition, message: str):
    """``condition``'s first true value; a part of the page redrawn while it looked is looked at again."""
    return WebDriverWait(driver, 20, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: condition(d), message)
