"""``ace-gym serve --ui``: the play page, driven in a headless Chromium (tests/browser.py) against a
real server; what it shows is what the session routes answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
import httpx

from ace_gym.server.config import ServerConfig
from tests.browser import console_errors, headless_chromium
from tests.server_helpers import serving

ENV_IDS = ("ACE-course-v0", "ACE-meal-v0")


@pytest.fixture(scope="module")
def server() -> Any:
    with serving(ServerConfig(env_ids=ENV_IDS, ui=True)) as (url, _app):
        yield url


@pytest.fixture(scope="module")
def browser() -> Any:
    with headless_chromium() as driver:
        yield driver


def _reset(browser: Any, url: str, env_id: str, seed: str) -> None:
    browser.get(f"{url}/ui")
    _wait(browser, lambda: browser.find_element("css selector", f"#env-id option[value='{env_id}']")).click()
    seed_box = browser.find_element("id", "seed")
    seed_box.clear()
    seed_box.send_keys(seed)
    browser.find_element("id", "reset").click()


def _wait(browser: Any, condition: Any) -> Any:
    from selenium.common.exceptions import NoSuchElementException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, 20, ignored_exceptions=(NoSuchElementException,)).until(lambda _: condition())


def _tool_form(browser: Any, name: str) -> Any:
    return _wait(browser, lambda: browser.find_element("css selector", f"form.tool[data-tool='{name}']"))


def test_play_an_episode_through_the_forms(server: str, browser: Any, tmp_path: Path) -> None:
    with httpx.Client(base_url=server) as client:  # what a client gets for the same reset
        expected = client.post("/envs/ACE-meal-v0/reset", json={"seed": 3}).json()["observation"]
    _reset(browser, server, "ACE-meal-v0", "3")
    _wait(browser, lambda: browser.find_element("id", "task").text)
    assert browser.find_element("id", "task").text == expected["value"].strip()
    hidden = len(expected["info"]["hidden_positions"])
    assert len(browser.find_elements("css selector", "#grid td.hidden")) == hidden
    form = _tool_form(browser, "get_current_grid_state")
    names = [f.get_attribute("data-tool") for f in browser.find_elements("css selector", "form.tool")]
    assert {"set_slot", "done", "get_current_grid_state"} <= set(names)
    form.find_element("tag name", "button").click()
    _wait(browser, lambda: browser.find_elements("css selector", "#log .entry"))
    assert '"status": "success"' in browser.find_element("css selector", "#log .entry pre").text
    set_slot = _tool_form(browser, "set_slot")
    set_slot.find_element("name", "row").send_keys("99")
    set_slot.find_element("name", "col").send_keys("0")
    set_slot.find_element("name", "id").send_keys("nothing")
    set_slot.find_element("tag name", "button").click()
    _wait(browser, lambda: len(browser.find_elements("css selector", "#log .entry")) == 2)
    assert browser.find_elements("css selector", "#log .entry.failed")  # the env's error reply, shown as sent
    _tool_form(browser, "done").find_element("tag name", "button").click()
    _wait(browser, lambda: browser.find_element("id", "score").text)
    assert browser.find_element("id", "score").text.startswith("score 0")
    browser.save_screenshot(str(tmp_path / "play.png"))
    assert (tmp_path / "play.png").stat().st_size > 10_000
    assert console_errors(browser) == []


def test_the_page_refuses_what_the_server_refuses_with_its_message(server: str, browser: Any) -> None:
    _reset(browser, server, "ACE-course-v0", "-1")
    error = _wait(browser, lambda: browser.find_element("id", "error").text)
    with httpx.Client(base_url=server) as client:
        refusal = client.post("/envs/ACE-course-v0/reset", json={"seed": -1})
    assert error == f"refused ({refusal.status_code} {refusal.json()['code']}): {refusal.json()['detail']}"
    _reset(browser, server, "ACE-course-v0", "0")
    _tool_form(browser, "done")
    raw = browser.find_element("id", "raw-action")
    raw.clear()
    raw.send_keys(json.dumps({"name": "<img src=x onerror=window.__pwned=1>", "arguments": {}}))
    browser.find_element("css selector", "#raw button").click()
    _wait(browser, lambda: browser.find_elements("css selector", "#log .entry"))
    assert "<img src=x onerror=window.__pwned=1>" in browser.find_element("id", "log").text
    assert browser.execute_script("return window.__pwned") is None
    refused = console_errors(browser)  # the browser logs the refused request itself; the page's script raised nothing
    assert refused and all("status of 422" in entry["message"] for entry in refused)
    assert browser.execute_script("return document.getElementById('error').textContent") == ""


def test_without_ui_there_is_no_page(server: str) -> None:
    with serving(ServerConfig(env_ids=ENV_IDS)) as (url, _app), httpx.Client(base_url=url) as client:
        assert client.get("/ui").status_code == 404
    with httpx.Client(base_url=server) as client:
        assert client.get("/ui").headers["content-type"].startswith("text/html")
