"""The web phone answers with typed replies, in real Chromium against a real ``relaybox serve``: a
question that allows text shows a text box under its buttons, whose words go with the tapped
choice; a question without choices is answered by the text box alone; the caller's long poll gets
the text (sealed in the browser to the server's key with the vendored wire code) once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page

from tests.browser import ARTIFACTS, watched
from tests.e2e.conftest import RelayboxServer
from tests.e2e.web_phone import become_the_phone, create_token

pytestmark = pytest.mark.e2e

REASON = "not before the backup — ü"


def ask_and_wait(
    http: httpx.Client, auth: dict[str, str], **fields: Any
) -> tuple[str, threading.Thread, list[Any]]:
    """Ask, then long-poll for the answer in a thread: the id, the thread, and where the poll's body goes."""
    asked = http.post("/v1/interactions", json=fields, headers=auth)
    assert asked.status_code == 201, asked.text
    interaction_id = str(asked.json()["id"])
    polled: list[Any] = []
    poll = threading.Thread(
        target=lambda: polled.append(
            http.get(f"/v1/interactions/{interaction_id}", params={"wait": 20}, headers=auth).json()
        )
    )
    poll.start()
    return interaction_id, poll, polled


def answered(poll: threading.Thread, polled: list[Any]) -> dict[str, Any]:
    poll.join(25)
    assert polled, "the long poll did not return"
    return dict(polled[0])


def question_entry(page: Page, question: str) -> Any:
    return page.locator("li.kind-question", has_text=question)


def test_the_web_phone_types_a_reason_and_a_reply_alone(tmp_path: Path, browser: Browser) -> None:
    with RelayboxServer(tmp_path / "server") as server:
        url = server.wait_until_ready()
        context = browser.new_context(viewport={"width": 390, "height": 844})  # a phone's width
        try:
            page = context.new_page()
            watch = watched(page, url)
            become_the_phone(page, url)
            auth = {"Authorization": f"Bearer {create_token(page)}"}
            with httpx.Client(base_url=url, timeout=30) as http:
                # A plain question has no text box.
                _, poll, polled = ask_and_wait(http, auth, question="Restart?", choices=["Yes", "No"])
                entry = question_entry(page, "Restart?")
                entry.get_by_role("button", name="No").wait_for()
                assert entry.locator("textarea").count() == 0
                entry.get_by_role("button", name="No").click()
                assert "text" not in answered(poll, polled)

                # Choices and a text box: the words go with the tapped choice.
                _, poll, polled = ask_and_wait(
                    http,
                    auth,
                    question="Deploy now?",
                    choices=["Ship it", "Wait"],
                    allow_text=True,
                    text_max_chars=80,
                )
                entry = question_entry(page, "Deploy now?")
                box = entry.get_by_label("Add a reply (optional)")
                assert box.get_attribute("maxlength") == "80"
                box.fill(REASON)
                entry.scroll_into_view_if_needed()
                page.screenshot(path=ARTIFACTS / "web-phone-typed-reply.png")
                entry.get_by_role("button", name="Wait").click()
                entry.locator(".closed-line", has_text="Answered: Wait, with your reply.").wait_for()
                reply = answered(poll, polled)
                assert (reply["status"], reply["choice_index"], reply["text"]) == ("answered", 1, REASON)

                # No choices: the text box and its own button are the answer.
                branch, poll, polled = ask_and_wait(
                    http, auth, question="Which branch?", choices=[], allow_text=True
                )
                entry = question_entry(page, "Which branch?")
                entry.get_by_role("button", name="Send reply").click()
                entry.get_by_role("alert").filter(has_text="Type a reply first.").wait_for()  # by its field
                assert entry.get_by_label("Your reply").get_attribute("aria-invalid") == "true"
                entry.get_by_label("Your reply").fill("release/2.4")
                entry.get_by_role("button", name="Send reply").click()
                entry.locator(".closed-line", has_text="Answered with your reply.").wait_for()
                reply = answered(poll, polled)
                assert (reply["status"], reply.get("choice_index"), reply["text"]) == (
                    "answered",
                    None,
                    "release/2.4",
                )

                again = http.get(f"/v1/interactions/{branch}", params={"wait": 0}, headers=auth).json()
                assert "text" not in again and again["text_already_read"] is True
            problems = watch.problems()
        finally:
            context.close()
    assert problems == [], problems
    assert REASON not in server.stdout() + server.stderr()
