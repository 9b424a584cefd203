"""The web app as one of the person's computers, in real Chromium against a real ``relaybox serve``
and the CLI's virtual phone: it shows a code, the phone confirms it (``relaybox phone pair``) and
both show the same safety number; then a text the phone sends (``relaybox phone send``) and a
token change arrive on the page, opened with the browser's key."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser

from tests.browser import watched
from tests.e2e.conftest import Cli

pytestmark = pytest.mark.e2e

SAFETY_LINE = re.compile(r"^safety number: ((?:[0-9]{5} ){11}[0-9]{5})$", re.MULTILINE)


def test_a_browser_pairs_as_a_computer_and_receives_the_phones_text(cli: Cli, browser: Browser) -> None:
    registered = cli.run("phone", "register", "--name", "Test Phone")
    assert registered.returncode == 0, registered
    context = browser.new_context()
    try:
        page = context.new_page()
        watch = watched(page, cli.server_url)
        page.goto(f"{cli.server_url}/app/")
        page.get_by_label("Name this device").fill("Work browser")
        page.get_by_role("button", name="This is a computer").click()
        code_shown = page.locator("#pair-code")
        code_shown.wait_for()
        code = code_shown.inner_text()
        assert re.fullmatch(r"[0-9]{6}", code), code

        confirmed = cli.run("phone", "pair", code)
        assert confirmed.returncode == 0, confirmed
        assert "paired with Work browser (pwa)" in confirmed.stdout
        on_phone = SAFETY_LINE.search(confirmed.stdout)
        assert on_phone, confirmed.stdout
        page.locator("#paired").wait_for(state="visible")
        assert page.locator("#computer-safety").inner_text() == on_phone[1]
        assert page.locator("#phone-of-computer").inner_text() == "Test Phone"
        page.locator("#computer-stream", has_text="connected").wait_for()

        sent = cli.run("phone", "send", "hello laptop")
        assert sent.returncode == 0, sent
        page.locator("#received li", has_text="From Test Phone: hello laptop").wait_for()
        minted = cli.run("phone", "tokens", "create", "--label", "cron")
        assert minted.returncode == 0, minted
        page.locator("#received li", has_text="Sender tokens changed: 1 active.").wait_for()

        problems = watch.problems()  # before the reload, which cuts the open stream short
        page.reload()  # the pairing is kept: the page comes back as this computer
        page.locator("#paired").wait_for(state="visible")
        assert page.locator("#computer-safety").inner_text() == on_phone[1]
    finally:
        context.close()
    assert problems == [], problems
