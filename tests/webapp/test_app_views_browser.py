"""The web app's own views in real Chromium, as a person uses them: the phone's home and the
computer's pairing view read well in light and dark, every control is reached by the keyboard with
a name and a visible focus ring, and a refusal is shown as a sentence, never as JSON."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, Page

from tests.browser import watched
from tests.e2e.web_phone import show_view
from tests.webapp.accessibility import focusable, low_contrast, tab_through


def as_the_phone(context: BrowserContext, server: str, scheme: str) -> Page:
    page = context.new_page()
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    page.goto(f"{server}/app/")
    page.get_by_role("button", name="This is my phone").click()
    page.locator("#stream-state", has_text="connected").wait_for()
    return page


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_phones_home_reads_well_and_works_from_the_keyboard(
    live_server: str, context: BrowserContext, scheme: str
) -> None:
    page = as_the_phone(context, live_server, scheme)
    show_view(page, "Tokens")
    page.get_by_role("button", name="Create token").click()
    page.locator("#new-token").wait_for(state="visible")
    assert low_contrast(page) == []  # with the new token, its copy button and curl line shown
    page = context.new_page()  # the phone's home as it opens from now on, focus from the top
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    watch = watched(page, live_server)
    page.goto(f"{live_server}/app/")
    page.locator("#stream-state", has_text="connected").wait_for()
    assert low_contrast(page) == []
    reached = tab_through(page)
    assert [item["id"] for item in reached] == focusable(page)
    assert all(item["name"] for item in reached), reached
    assert all(item["ring"] for item in reached), reached
    assert watch.problems() == []


def test_a_refused_code_is_a_sentence_on_the_page(live_server: str, context: BrowserContext) -> None:
    page = as_the_phone(context, live_server, "light")
    show_view(page, "Pair")
    page.get_by_label("Six-digit code shown on the computer or the assistant's page").fill("000000")
    page.get_by_role("button", name="Confirm code").click()
    shown = page.get_by_role("alert")
    shown.wait_for()
    text = shown.inner_text()
    assert "pairing code is wrong" in text and "{" not in text, text
    assert (
        page.get_by_label("Six-digit code shown on the computer or the assistant's page").get_attribute(
            "aria-invalid"
        )
        == "true"
    )  # next to its field, which is marked


def test_too_many_wrong_codes_say_how_long_to_wait(live_server: str, context: BrowserContext) -> None:
    page = as_the_phone(context, live_server, "light")
    show_view(page, "Pair")
    field = page.get_by_label("Six-digit code shown on the computer or the assistant's page")
    for _ in range(12):  # past the per-phone limit of wrong codes
        field.fill("000000")
        page.get_by_role("button", name="Confirm code").click()
        shown = page.get_by_role("alert").inner_text()
        if "Try again in" in shown:
            break
    assert re.search(r"Too many wrong codes\. Try again in \d+ s\.", shown), shown
    assert page.get_by_role("button", name="Confirm code").is_disabled()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_computers_pairing_view_reads_well(
    live_server: str, context: BrowserContext, scheme: str
) -> None:
    page = context.new_page()
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    page.goto(f"{live_server}/app/")
    page.get_by_role("button", name="This is a computer").click()
    page.locator("#pair-code").wait_for()
    assert low_contrast(page) == []
