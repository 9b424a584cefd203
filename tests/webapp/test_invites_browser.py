"""Sign-up by invite in the web app, in real Chromium at a phone's size against a real server over
a socket: a second phone is refused and asked for an invite, which the first phone makes under
Settings (shown as a code, a link and its expiry, with a working Copy); the invite lets one phone
in, typed or through its link, and never a second; a closed server says no phone can join, and
Settings says why no invite is made (server closed, too many waiting); a server that refuses this
browser's push service is named in the push status line. The views checked by axe-core and for
contrast, light and dark."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Literal

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from app.assembly import create_app
from core.bootstrap import build_core
from core.clock import ManualClock
from core.services.signup import MAX_LIVE_INVITES
from core.settings import Settings
from tests.browser import watched
from tests.e2e.web_phone import (
    EXPORT_IDENTITY,
    IDENTITY,
    IMPORT_IDENTITY,
    PHONE_SCREEN,
    become_the_phone,
    show_view,
)
from tests.live import serve_in_thread
from tests.webapp.accessibility import axe_violations, low_contrast, with_axe

INVITE = re.compile(r"rbi_[A-Za-z0-9_-]{43}")
WRONG = "This invite is wrong, already used or expired. Ask for a new one."


def server_where(settings: Settings, clock: ManualClock, mode: Literal["invite", "closed"]) -> Iterator[str]:
    core = build_core(settings.model_copy(update={"registration": mode}), clock=clock)
    try:
        with serve_in_thread(create_app(core=core)) as url:
            yield url
    finally:
        core.engine.dispose()


@pytest.fixture
def by_invite(settings: Settings, clock: ManualClock) -> Iterator[str]:
    """A server whose registration is by invite (as any off loopback), over a real socket."""
    yield from server_where(settings, clock, "invite")


@pytest.fixture
def closed(settings: Settings, clock: ManualClock) -> Iterator[str]:
    yield from server_where(settings, clock, "closed")


@pytest.fixture
def phones(browser: Browser) -> Iterator[list[BrowserContext]]:
    """Three phones' browsers (each its own profile), with axe ready on every page."""
    made = [with_axe(browser.new_context(**PHONE_SCREEN)) for _ in range(3)]
    try:
        yield made
    finally:
        for context in made:
            context.close()


def checked(page: Page) -> list[str]:
    """axe-core's serious violations and low contrast, in light and in dark."""
    found = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        found += [f"{scheme}: {v}" for v in axe_violations(page) + low_contrast(page)]
    return found


def make_invite(page: Page) -> tuple[str, str, str]:
    """Make an invite under Settings: its code, its link and its expiry as shown."""
    show_view(page, "Settings")
    page.get_by_role("button", name=re.compile(r"^Make (an|another) invite$")).click()
    page.locator("#new-invite").wait_for(state="visible")
    code = page.locator("#invite-code").inner_text()
    page.get_by_role("button", name="Make another invite").wait_for()
    return code, page.locator("#invite-link").inner_text(), page.locator("#invite-expires").inner_text()


def refused_without_invite(context: BrowserContext, url: str) -> Page:
    page = context.new_page()
    page.goto(f"{url}/app/")
    page.get_by_role("button", name="This is my phone").click()
    page.get_by_label("Invite", exact=True).wait_for()
    return page


def test_a_second_phone_joins_with_the_invite_the_first_made_once_typed_or_by_link(
    by_invite: str, phones: list[BrowserContext]
) -> None:
    first, second, third = phones
    owner = first.new_page()
    become_the_phone(owner, by_invite)  # the first phone claims the server

    newcomer = refused_without_invite(second, by_invite)
    watch = watched(newcomer, by_invite)
    field = newcomer.get_by_label("Invite", exact=True)
    assert newcomer.evaluate("() => document.activeElement.id") == "invite"  # focus moved to it
    help_text = newcomer.locator("#invite-box").inner_text()
    assert "by invite only" in help_text and "Invite someone" in help_text, help_text
    assert "relaybox phone invite" in help_text and "relaybox invite" in help_text, help_text
    assert newcomer.locator("#phone").is_hidden()
    assert checked(newcomer) == []  # set-up asking for an invite

    first.grant_permissions(["clipboard-read", "clipboard-write"], origin=by_invite)
    code, link, expires = make_invite(owner)
    assert INVITE.fullmatch(code), code
    assert link == f"{by_invite}/app/#invite={code}"
    assert expires.endswith("(single use)") and expires != "(single use)", expires
    assert owner.locator("#invite-cli").inner_text() == (
        f"relaybox phone register --server {by_invite} --invite {code}"
    )
    owner.get_by_role("button", name="Copy link").click()
    owner.locator("#invite-copy-status", has_text="Copied.").wait_for()
    assert owner.evaluate("() => navigator.clipboard.readText()") == link
    assert checked(owner) == []  # Settings showing an invite

    field.fill(code)
    newcomer.get_by_role("button", name="This is my phone").click()
    newcomer.locator("#stream-state", has_text="connected").wait_for()
    assert newcomer.evaluate(IDENTITY)[0] != owner.evaluate(IDENTITY)[0]
    assert watch.page_errors == []

    again = refused_without_invite(third, by_invite)
    again.get_by_label("Invite", exact=True).fill(f"  {link}  ")  # a pasted link counts as its invite
    again.get_by_role("button", name="This is my phone").click()
    again.get_by_role("alert").filter(has_text=WRONG).wait_for()  # announced, next to the field
    assert again.get_by_label("Invite", exact=True).get_attribute("aria-invalid") == "true"
    assert again.locator("#invite-how").is_visible()  # where a new one comes from
    assert again.locator("#phone").is_hidden()
    assert checked(again) == []  # the wrong invite's error

    _, fresh_link, _ = make_invite(owner)
    by_link = third.new_page()
    by_link.goto(fresh_link)
    invite_field = by_link.get_by_label("Invite", exact=True)
    invite_field.wait_for()
    assert by_link.locator("#invite-why").inner_text() == "Your invite link filled in the invite."
    assert by_link.locator("#invite-how").is_hidden()  # no need to say how to get one
    assert INVITE.fullmatch(invite_field.input_value())
    assert "invite" not in by_link.url  # taken out of the address, so not kept in its history
    by_link.get_by_role("button", name="This is my phone").click()
    by_link.locator("#stream-state", has_text="connected").wait_for()


def test_an_invite_link_opened_where_a_phone_is_set_up_is_not_used(
    by_invite: str, phones: list[BrowserContext]
) -> None:
    become_the_phone(phones[0].new_page(), by_invite)
    page = phones[0].new_page()  # as a link opens, from a message
    page.goto(f"{by_invite}/app/#invite=rbi_{'A' * 43}")
    page.get_by_role("alert").filter(has_text="the invite link was not used").wait_for()
    assert "invite" not in page.url
    page.locator("#stream-state", has_text="connected").wait_for()


def test_settings_says_when_this_phone_has_too_many_invites_waiting(
    by_invite: str, phones: list[BrowserContext]
) -> None:
    page = phones[0].new_page()
    become_the_phone(page, by_invite)
    _, device_token = page.evaluate(IDENTITY)
    with httpx.Client(base_url=by_invite, timeout=10) as http:
        for _ in range(MAX_LIVE_INVITES):
            made = http.post("/v1/invites", headers={"Authorization": f"Bearer {device_token}"})
            assert made.status_code == 201, made.text
    show_view(page, "Settings")
    page.get_by_role("button", name="Make an invite").click()
    shown = page.get_by_role("alert").filter(has_text=f"already has {MAX_LIVE_INVITES} invites waiting")
    shown.wait_for()
    assert "{" not in shown.inner_text()
    assert page.locator("#new-invite").is_hidden()
    assert checked(page) == []


def test_a_closed_server_says_no_new_phone_can_join(closed: str, phones: list[BrowserContext]) -> None:
    page = phones[0].new_page()
    page.goto(f"{closed}/app/#invite=rbi_{'A' * 43}")  # even with an invite
    page.get_by_label("Invite", exact=True).wait_for()
    page.get_by_role("button", name="This is my phone").click()
    note = page.get_by_role("alert").filter(has_text="This server takes no new phones")
    note.wait_for()
    assert "no invite changes that" in note.inner_text()
    assert page.get_by_label("Invite", exact=True).is_hidden()  # no invite would help
    assert page.get_by_role("button", name="This is my phone").is_disabled()
    assert page.get_by_role("button", name="This is a computer").is_enabled()
    assert checked(page) == []


# This browser's push service, as headless Chromium reaches none: a subscription on a host that is
# not one the server sends to. Only the browser's part is stood in for; the refusal is the server's.
FOREIGN_PUSH_SERVICE = """(() => {
  let current = null;
  const subscription = {
    endpoint: "https://push.example.net/wp/abc123",
    keys: { p256dh: "B" + "A".repeat(86), auth: "A".repeat(22) },
    toJSON: () => ({ endpoint: subscription.endpoint, keys: subscription.keys }),
    unsubscribe: async () => { current = null; window.__unsubscribed = true; return true; },
  };
  PushManager.prototype.subscribe = async function () { current = subscription; return subscription; };
  PushManager.prototype.getSubscription = async function () { return current; };
})();"""


def test_a_push_service_the_server_does_not_send_to_is_named_in_settings(
    live_server: str, phones: list[BrowserContext]
) -> None:
    context = phones[0]
    context.grant_permissions(["notifications"], origin=live_server)
    context.add_init_script(FOREIGN_PUSH_SERVICE)
    page = context.new_page()
    become_the_phone(page, live_server)
    show_view(page, "Settings")
    page.get_by_role("button", name="Turn on notifications").click()
    state = page.locator("#push-state", has_text="push.example.net")
    state.wait_for()
    text = state.inner_text()
    assert "is not one this server sends to" in text and "RELAYBOX_WEB_PUSH_HOSTS" in text, text
    assert page.evaluate("() => window.__unsubscribed") is True  # nothing left subscribed in vain
    assert page.locator("#problem").is_hidden()  # said in the status line, not as a failure
    assert checked(page) == []
    show_view(page, "Inbox")
    show_view(page, "Settings")  # the view read again still says why
    page.locator("#push-state", has_text="push.example.net").wait_for()
    page.reload()  # and so does the app started again
    show_view(page, "Settings")
    page.locator("#push-state", has_text="push.example.net").wait_for()


def test_settings_says_a_closed_server_takes_no_invites(
    by_invite: str, closed: str, phones: list[BrowserContext]
) -> None:
    """The same phone (its identity carried over) on the same database, served closed."""
    before = phones[0].new_page()
    become_the_phone(before, by_invite)
    identity = before.evaluate(EXPORT_IDENTITY)
    page = phones[0].new_page()
    page.goto(f"{closed}/app/no-such-page")  # the closed server's origin, before the app starts
    page.evaluate(IMPORT_IDENTITY, identity)
    page.goto(f"{closed}/app/")
    page.locator("#stream-state", has_text="connected").wait_for()
    show_view(page, "Settings")
    page.get_by_role("button", name="Make an invite").click()
    shown = page.get_by_role("alert").filter(has_text="takes no new phones at all")
    shown.wait_for()
    assert "an invite would let no one in" in shown.inner_text()
    assert page.locator("#new-invite").is_hidden()
