"""The web page end to end: headless Chromium (Debian's chromium + chromedriver) via selenium
against a real uvicorn server on 127.0.0.1, with `FakeCorrector` so the highlights are known.

Skipped, with the reason, where chromium, chromedriver or selenium is missing (`.ci/run`
installs the Debian packages; `pip install -e .[dev]` brings selenium).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from test_service import CORRECTED, SENTENCE, FakeCorrector
from test_service_server import service_thread

from service.app import create_app
from service.settings import Settings

CHROMIUM = os.environ.get("CHROMIUM_BIN") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT_S = 20


def _missing() -> str | None:
    for label, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)):
        if not Path(path).exists():
            return f"{label} not found at {path} (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e .[dev])"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


@pytest.fixture(scope="module")
def server_url():
    app = create_app(Settings(warmup=False, max_text_chars=40), corrector=FakeCorrector())
    with service_thread(app) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="csc-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1000,900",
    ):
        options.add_argument(flag)
    # An explicit driver path keeps selenium from looking for (or downloading) one itself.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _submit(browser, url: str, text: str, threshold: str = ""):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url + "/")
    box = browser.find_element(By.ID, "input")
    box.clear()
    box.send_keys(text)
    if threshold:
        browser.find_element(By.ID, "threshold").send_keys(threshold)
    browser.find_element(By.ID, "submit").click()
    wait = WebDriverWait(browser, WAIT_S)
    wait.until(lambda b: b.find_element(By.ID, "status").text not in ("", "…")
               or b.find_element(By.ID, "error").is_displayed())
    return wait, ec


def test_page_highlights_changed_characters_and_lists_edits(browser, server_url, tmp_path):
    from selenium.webdriver.common.by import By

    _submit(browser, server_url, SENTENCE)
    assert browser.find_element(By.ID, "result").is_displayed()
    assert browser.find_element(By.ID, "output").text == CORRECTED
    marks = browser.find_elements(By.CSS_SELECTOR, "#output mark.changed")
    assert [(m.text, m.get_attribute("data-position")) for m in marks] == [("应", "4"), ("座", "10")]
    assert "因 → 应" in marks[0].get_attribute("title")
    rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in browser.find_elements(By.CSS_SELECTOR, "#edits tbody tr")]
    assert rows == [["4", "因", "应", "90.0%", "pinyin"], ["10", "坐", "座", "60.0%", "shape"]]
    assert "2 edit(s)" in browser.find_element(By.ID, "status").text
    browser.save_screenshot(str(tmp_path / "page.png"))  # kept by pytest's tmp dir for a look


def test_page_sends_the_threshold(browser, server_url):
    from selenium.webdriver.common.by import By

    _submit(browser, server_url, SENTENCE, threshold="0.9")
    assert browser.find_element(By.ID, "output").text == "少先队员应该为老人让坐。"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#edits tbody tr")) == 1


def test_page_with_nothing_to_fix_and_emoji(browser, server_url):
    from selenium.webdriver.common.by import By

    text = "今天天气很好。"
    _submit(browser, server_url, text)
    assert browser.find_element(By.ID, "output").text == text
    assert browser.find_elements(By.CSS_SELECTOR, "#output mark") == []
    assert browser.find_element(By.ID, "no-edits").is_displayed()
    # Positions count code points: an emoji before the error must not shift the highlight.
    # (chromedriver's send_keys cannot type astral characters, so the text is set by script.)
    browser.execute_script("document.getElementById('input').value = arguments[0];", "😀因该")
    browser.find_element(By.ID, "submit").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, WAIT_S).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#output mark"))
    assert [m.text for m in browser.find_elements(By.CSS_SELECTOR, "#output mark")] == ["应"]
    assert browser.find_element(By.ID, "output").text == "😀应该"


def test_page_shows_server_errors(browser, server_url):
    from selenium.webdriver.common.by import By

    _submit(browser, server_url, "好" * 41)  # the server under test allows 40 characters
    error = browser.find_element(By.ID, "error")
    assert error.is_displayed()
    assert "422" in error.text and "limit is 40" in error.text
