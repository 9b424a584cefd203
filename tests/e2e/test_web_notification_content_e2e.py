"""The web phone shows notification content and sequences, in real Chromium against a real
``relaybox serve``: the open app lists a rich notification (tags as emoji, Markdown rendered as safe
HTML with a sender's script and image left inert, the link, the icon as a link, three buttons), an
http button's tap sends its request (through the service worker) to a far end the test runs, a
notification of the same sequence replaces the entry and leaves one OS notification, and a clear
removes both. Screenshot at a phone's width: test-artifacts/web-phone-rich-notification.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page

from tests.browser import ARTIFACTS, watched
from tests.e2e.conftest import RelayboxServer
from tests.e2e.web_phone import (
    NOTIFICATIONS,
    become_the_phone,
    closed_web_phone,
    create_token,
    eventually,
)
from tests.fakes.far_end import far_end

pytestmark = pytest.mark.e2e

MESSAGE = """Deployed **v2.4** to `prod` in 3 min:

- 12 services restarted
- [the run](https://ci.example/run/42)

<script>window.__pwned = 1</script> <img src="x" onerror="window.__pwned = 2">
[bad](javascript:window.__pwned=3) ![pixel](https://tracker.example/p.png)"""
# A sender's sequence reaches the phone qualified by its sender (``tok_…:deploy-42``, docs/protocol.md
# "Sequences"), and the web app tags it in the senders' namespace (``s:tok_…:deploy-42``): found here
# by the part the sender named.
BY_TAG = (
    f"s => {NOTIFICATIONS}.then(ns => ns.filter(n => n.tag.startsWith('s:') && n.tag.endsWith(':' + s))"
    ".map(n => [n.title, n.body, n.renotify]))"
)


def entry(page: Page, sequence_id: str) -> Any:
    return page.locator(f'#inbox li[data-sequence$=":{sequence_id}"]')


def test_the_open_web_phone_shows_replaces_and_clears_a_rich_notification(
    tmp_path: Path, browser: Browser
) -> None:
    with RelayboxServer(tmp_path / "server") as server, far_end() as (hook, seen):
        url = server.wait_until_ready()
        context = browser.new_context(viewport={"width": 390, "height": 844})  # a phone's size
        context.grant_permissions(["notifications"], origin=url)
        try:
            page = context.new_page()
            watch = watched(page, url)
            become_the_phone(page, url)
            auth = {"Authorization": f"Bearer {create_token(page)}"}
            rich = {
                "title": "Deploy",
                "message": MESSAGE,
                "markdown": True,
                "sequence_id": "deploy-42",
                "tags": ["white_check_mark", "rocket", "prod"],
                "url": "https://ci.example/run/42",
                "url_title": "Run 42",
                "icon": "https://ci.example/icon.png",
                "actions": [
                    {"label": "Open run", "url": "https://ci.example/run/42"},
                    {"action": "http", "label": "Roll back", "url": f"{hook}/rollback", "body": "to=v2.3"},
                    {"action": "http", "label": "Ping", "url": f"{hook}/ping", "method": "GET"},
                ],
            }
            with httpx.Client(base_url=url, timeout=10) as http_client:
                assert http_client.post("/v1/send", json=rich, headers=auth).status_code == 200
                shown = entry(page, "deploy-42")
                shown.wait_for()
                assert shown.locator(".note-title").inner_text() == "✅ 🚀 Deploy"
                markdown = shown.locator(".markdown")
                assert markdown.locator("strong").inner_text() == "v2.4"
                assert markdown.locator("code").inner_text() == "prod"
                assert markdown.locator("li").all_inner_texts() == ["12 services restarted", "the run"]
                assert (
                    markdown.get_by_role("link", name="the run").get_attribute("href")
                    == "https://ci.example/run/42"
                )
                # The sender's HTML stays text, the image a mere link (nothing loads), javascript: no link.
                assert markdown.locator("script, img, [onerror]").count() == 0
                assert "<script>window.__pwned = 1</script>" in markdown.inner_text()
                hrefs = markdown.locator("a").evaluate_all(
                    "links => links.map(a => [a.href, a.rel, a.target])"
                )
                assert hrefs == [
                    ["https://ci.example/run/42", "noopener noreferrer", "_blank"],
                    ["https://tracker.example/p.png", "noopener noreferrer", "_blank"],
                ]
                assert "[bad](javascript:window.__pwned=3)" in markdown.inner_text()
                assert page.evaluate("window.__pwned") is None
                assert shown.locator(".tag").all_inner_texts() == ["prod"]
                assert (
                    shown.get_by_role("link", name="Run 42").get_attribute("href")
                    == "https://ci.example/run/42"
                )
                assert (
                    shown.get_by_role("link", name="Icon image").get_attribute("href")
                    == "https://ci.example/icon.png"
                )
                assert (
                    shown.get_by_role("link", name="Open run").get_attribute("href")
                    == "https://ci.example/run/42"
                )
                [os_note] = eventually(page, lambda: page.evaluate(BY_TAG, "deploy-42"))
                assert os_note[0] == "✅ 🚀 Deploy" and "**v2.4**" in os_note[1]  # plain text there
                shown.scroll_into_view_if_needed()
                page.screenshot(path=ARTIFACTS / "web-phone-rich-notification.png")

                shown.get_by_role("button", name="Roll back").click()
                shown.get_by_role("status").filter(has_text="Sent Roll back.").wait_for()
                shown.get_by_role("button", name="Ping").click()
                shown.get_by_role("status").filter(has_text="Sent Ping.").wait_for()
                assert seen == [("POST", "/rollback", "to=v2.3"), ("GET", "/ping", "")]

                # The same sequence replaces the entry and the OS notification; high priority renotifies.
                update = {
                    "title": "Deploy",
                    "message": "rolled back",
                    "sequence_id": "deploy-42",
                    "priority": "high",
                }
                assert http_client.post("/v1/send", json=update, headers=auth).status_code == 200
                shown.filter(has_text="rolled back").wait_for()
                assert page.locator("#inbox li.kind-notification").count() == 1
                eventually(
                    page, lambda: page.evaluate(BY_TAG, "deploy-42") == [["Deploy", "rolled back", True]]
                )

                cleared = http_client.delete("/v1/notifications/deploy-42", headers=auth)
                assert cleared.status_code == 200, cleared.text
                shown.wait_for(state="detached")
                eventually(page, lambda: page.evaluate(BY_TAG, "deploy-42") == [])
            problems = watch.problems()
        finally:
            context.close()
    assert problems == [], problems


def test_a_closed_web_phone_replaces_by_sequence_and_applies_a_clear_when_the_app_opens(
    tmp_path: Path, browser: Browser
) -> None:
    """The worker shows the server's real pushes (handed over with ServiceWorker.deliverPushMessage):
    two of one sequence leave one OS notification, the second's. The clear is not pushed to a
    browser (a push must show something): the app applies it from its queue when opened."""
    with closed_web_phone(tmp_path, browser) as phone:
        http_client, page, auth, push_service, url = (
            phone.http,
            phone.page,
            phone.auth,
            phone.push_service,
            phone.url,
        )

        def push(fields: dict[str, Any], expected: list[list[Any]]) -> None:
            """Send, then hand the server's push to the worker until its sequence shows ``expected``."""
            before = len(push_service.received)
            assert http_client.post("/v1/send", json=fields, headers=auth).status_code == 200
            message = eventually(page, lambda: push_service.received[before:])[0].json()
            phone.deliver(message, lambda: page.evaluate(BY_TAG, fields["sequence_id"]) == expected)

        step = {"title": "Backup", "sequence_id": "backup-1", "tags": ["hourglass", "nightly"]}
        push(step | {"message": "1/2 copying"}, [["⌛ Backup", "1/2 copying", False]])
        push(step | {"message": "2/2 verifying"}, [["⌛ Backup", "2/2 verifying", False]])
        assert len(page.evaluate(NOTIFICATIONS + ".then(ns => ns.map(n => n.tag))")) == 1
        untitled = {"message": "disk almost full", "sequence_id": "disk", "tags": ["warning"]}
        push(untitled, [["relaybox", "⚠️ disk almost full", False]])
        actions = page.evaluate(f"{NOTIFICATIONS}.then(ns => ns.map(n => n.actions.length))")
        assert actions == [0, 0]

        pushed = len(push_service.received)
        assert http_client.delete("/v1/notifications/backup-1", headers=auth).status_code == 200
        page.wait_for_timeout(500)
        assert len(push_service.received) == pushed  # not pushed to a browser
        assert page.evaluate(BY_TAG, "backup-1") == [["⌛ Backup", "2/2 verifying", False]]
        page.goto(f"{url}/app/")  # the app opens and reads its queue: the clear takes it away
        page.locator("#inbox li.kind-notification", has_text="disk almost full").wait_for()
        eventually(page, lambda: page.evaluate(BY_TAG, "backup-1") == [])
        assert entry(page, "backup-1").count() == 0 and entry(page, "disk").count() == 1
