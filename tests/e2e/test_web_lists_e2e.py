"""The web phone's lists (sender tokens, assistants) in real Chromium against a real ``relaybox
serve``: a list is read again when its view opens and after every Revoke, and a read that answers
late — the view's, slow on a phone's network — must not draw over the newer list the Revoke read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import APIResponse, Browser, Route

from tests.browser import watched
from tests.e2e.conftest import RelayboxServer
from tests.e2e.web_phone import become_the_phone, create_token, show_view

pytestmark = pytest.mark.e2e


def test_a_token_list_read_that_answers_late_does_not_bring_a_revoked_token_back(
    tmp_path: Path, browser: Browser
) -> None:
    with RelayboxServer(tmp_path / "server") as server:
        url = server.wait_until_ready()
        context = browser.new_context()
        try:
            page = context.new_page()
            watch = watched(page, url)
            become_the_phone(page, url)
            create_token(page)  # the Tokens view now lists "cron"

            held: list[tuple[Route, APIResponse]] = []

            def hold_the_first_read(route: Route) -> None:
                if route.request.method == "GET" and not held:
                    held.append((route, route.fetch()))  # the server's answer, still listing "cron"
                else:
                    route.continue_()

            page.route(f"{url}/v1/tokens", hold_the_first_read)
            show_view(page, "Tokens")  # its read is held
            page.get_by_role("button", name="Revoke cron").click()
            empty = page.locator("#token-list li", has_text="No sender tokens yet.")
            empty.wait_for()

            assert len(held) == 1
            route, stale = held[0]
            with page.expect_request_finished(lambda request: request.url == f"{url}/v1/tokens"):
                route.fulfill(response=stale)
            page.evaluate("() => new Promise((settled) => setTimeout(settled, 200))")  # drawn, if it would
            assert empty.count() == 1
            assert page.get_by_role("button", name="Revoke cron").count() == 0
            problems: list[Any] = watch.problems()
        finally:
            context.close()
    assert problems == [], problems
