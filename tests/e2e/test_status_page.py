"""The status page in a real browser (Debian's Chromium, headless, driven by Playwright) against live servers."""

from __future__ import annotations

import shutil

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.support import artifacts

ADMIN, USER = "sk-admin-51f0c2", "sk-user-9a8b7c"


@pytest.fixture(scope="module")
def browser() -> Browser:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium on PATH (.ci/run installs Debian's chromium)")
    # The OpenBLAS that .ci/run preloads into every process breaks Node's and Chromium's threads
    # (pthread_create: Invalid argument): Playwright's driver and the browser start without it.
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("LD_PRELOAD", raising=False)
        manager = sync_playwright()
        playwright = manager.start()
    try:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        yield browser
        browser.close()
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture(scope="module")
def server(servers, tiny_models):
    # No watcher: each reload in these tests is the page's own button.
    return servers.start({"one": {"path": str(tiny_models.path("qwen3"))}, "two": {"path": str(tiny_models.path("llama"))}},
                         server={"watch_config": False})


@pytest.fixture(scope="module")
def keyed(servers, tiny_models):
    keys = [{"name": "ops", "key_env": "OPS_KEY", "admin": True}, {"name": "dev", "key_env": "DEV_KEY"}]
    return servers.start({"one": {"path": str(tiny_models.path("qwen3"))}}, keys=keys,
                         env={"OPS_KEY": ADMIN, "DEV_KEY": USER}, ready_key=ADMIN)


class Console:
    """Every console error and uncaught exception of a page."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: self.errors.append(str(error)))


def model_row(page: Page, model_id: str):
    return page.locator("#models tbody tr").filter(has=page.locator(f'th:text-is("{model_id}")'))


def send_traffic(server, requests: int = 4) -> None:
    client = server.openai()
    for index in range(requests):
        reply = client.chat.completions.create(model="one", messages=[{"role": "user", "content": f"hello {index}"}],
                                               max_tokens=8, temperature=0)
        assert reply.choices[0].finish_reason in ("stop", "length")


def test_the_page_shows_the_fleet_after_traffic_with_no_console_errors(server, browser, artifacts_dir):
    send_traffic(server)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    console = Console(page)
    page.goto(server.base_url + "/")  # a browser at the root is sent to the page
    assert page.url == server.base_url + "/ui"
    expect(page.locator("html")).to_have_class("js")
    assert page.locator("#models tbody th").all_inner_texts() == ["one", "two"]
    for model_id in ("one", "two"):
        expect(model_row(page, model_id).locator("td.state")).to_have_text("idle")
    one = model_row(page, "one").locator("td")
    headers = page.locator("#models thead th").all_inner_texts()[1:]
    cells = dict(zip(headers, one.all_inner_texts()))
    assert cells["PID"].isdigit() and cells["TTFT p50"].endswith((" ms", " s")), cells
    assert float(cells["Tokens/s"]) > 0 and cells["Cache hit"].endswith("%"), cells
    page.wait_for_function("document.querySelector('.updated').textContent.length > 0")
    page.wait_for_timeout(2500)  # at least one live refresh has swapped the fragment in
    path = artifacts.record(artifacts_dir / "status-page.png")
    page.screenshot(path=str(path), full_page=True)
    print(f"status page screenshot: {path}")
    assert console.errors == []
    page.close()


def test_without_javascript_the_first_paint_is_the_table(server, browser):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(server.base_url + "/ui")
    assert page.locator("#models tbody th").all_inner_texts() == ["one", "two"]
    assert not page.locator("button[data-action]").first.is_visible()  # actions need the script
    context.close()


def test_a_narrow_window_scrolls_the_table_not_the_page(server, browser):
    page = browser.new_page(viewport={"width": 360, "height": 740})
    page.goto(server.base_url + "/ui")
    expect(page.locator("#models")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.close()


def test_unloading_from_the_page_changes_its_state_and_loading_brings_it_back(server, browser):
    page = browser.new_page()
    console = Console(page)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
    page.goto(server.base_url + "/ui")
    row = model_row(page, "two")
    row.locator('button[data-action="unload"]').click()
    expect(row.locator("td.state")).to_have_text("unloaded", timeout=10_000)
    assert dialogs == ["Unload model two?"]
    expect(page.locator("#result")).to_contain_text("unload two: done")
    assert httpx.get(server.base_url + "/ready").json()["models"]["two"] == "unloaded"
    row.locator('button[data-action="load"]').click()
    expect(row.locator("td.state")).to_have_text("idle", timeout=120_000)
    assert console.errors == []
    page.close()


def test_a_bad_config_edit_shows_the_reload_error_until_it_is_fixed(server, browser):
    good = {model_id: dict(model) for model_id, model in server.config["models"].items()}
    page = browser.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(server.base_url + "/ui")
    try:
        server.write_config({**good, "one": {**good["one"], "max_queue": "lots"}})
        page.locator('button[data-action="reload"]').click()
        expect(page.locator("#reload-errors")).to_contain_text("models.one.max_queue", timeout=10_000)
        expect(page.locator("#last-reload")).to_contain_text("rejected")
        expect(page.locator("#result")).to_contain_text("reload")
        expect(model_row(page, "one").locator("td.state")).to_have_text("idle")  # the last good config serves
    finally:
        server.write_config(good)
    page.locator('button[data-action="reload"]').click()
    expect(page.locator("#last-reload")).to_contain_text("applied", timeout=10_000)
    expect(page.locator("#reload-errors")).to_have_count(0)
    page.close()


def test_with_keys_the_page_shows_nothing_and_refuses_actions_without_an_admin_key(keyed, browser):
    page = browser.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(keyed.base_url + "/")
    assert page.url == keyed.base_url + "/ui"
    expect(page.locator("#needs-key")).to_be_visible()
    assert page.locator("#models").count() == 0
    page.locator('button[data-action="reload"]').click()
    expect(page.locator("#result")).to_contain_text("reload refused: Invalid or missing API key")

    page.fill("#admin-key", USER)  # a key, but not an admin's
    page.click('#key-form button[type="submit"]')
    expect(page.locator("#result")).to_contain_text("may not use the admin routes")
    assert page.locator("#models").count() == 0
    page.locator('button[data-action="reload"]').click()
    expect(page.locator("#result")).to_contain_text("refused")

    page.fill("#admin-key", ADMIN)
    page.click('#key-form button[type="submit"]')
    expect(page.locator("#models tbody th")).to_have_text(["one"], timeout=10_000)
    expect(model_row(page, "one").locator("td.state")).to_have_text("idle")
    assert page.locator("#keys tbody th").all_inner_texts() == ["ops", "dev"]
    # The key lives in the tab's session storage only: not in the page, its URL or its local storage.
    assert ADMIN not in page.content() and ADMIN not in page.url
    assert page.evaluate("JSON.stringify(localStorage)") == "{}"
    assert page.evaluate("sessionStorage.getItem('rapidmlx-admin-key')") == ADMIN
    page.close()


def test_with_keys_the_fragment_and_admin_routes_need_an_admin_key(keyed):
    assert httpx.get(keyed.base_url + "/ui/status").status_code == 401
    assert httpx.get(keyed.base_url + "/ui/status", headers={"authorization": f"Bearer {USER}"}).status_code == 403
    reply = httpx.get(keyed.base_url + "/ui/status", headers={"authorization": f"Bearer {ADMIN}"})
    assert reply.status_code == 200 and "<table" in reply.text
    shell = httpx.get(keyed.base_url + "/ui")
    assert shell.status_code == 200 and "<table" not in shell.text  # the open shell carries no status
    assert "script-src 'self'" in shell.headers["content-security-policy"]
    assert httpx.get(keyed.base_url + "/", headers={"accept": "application/json"}).status_code == 401  # API clients still need a key
