"""A web phone whose app is closed, in real Chromium: its service worker shows what the server pushes
— a reminder (pushed, sealed, at its time and never when it is set), a question, a ring — each the
server's real RFC 8291 push (pywebpush to a fake push service) handed to the worker with the
DevTools protocol's ServiceWorker.deliverPushMessage."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from tests.e2e.web_phone import (
    NOTIFICATIONS,
    SHOWN,
    closed_web_phone,
    eventually,
)

pytestmark = pytest.mark.e2e

LEAD_S = 3
TAP_ANSWER = """([id, index]) => import('/app/store.js')
  .then(() => import('/app/answer.js')).then(() => relayboxAnswer(id, index))"""


def actions_of(page: Page, title: str) -> list[str]:
    """The action buttons' titles of the worker's notification titled ``title``."""
    script = f"t => {NOTIFICATIONS}.then(ns => ns.filter(n => n.title === t)[0].actions.map(a => a.title))"
    titles: list[str] = page.evaluate(script, title)
    return titles


def test_a_closed_web_phone_shows_reminders_questions_and_rings(tmp_path: Path, browser: Browser) -> None:
    env = {"RELAYBOX_REMINDER_MIN_LEAD_S": "2"}
    with closed_web_phone(tmp_path, browser, env=env, may_ring=True) as phone:
        http, page, auth, push_service = phone.http, phone.page, phone.auth, phone.push_service
        at = int(time.time()) + LEAD_S
        set_up = http.post("/v1/reminders", json={"message": "Stretch", "at": at}, headers=auth)
        assert set_up.status_code == 201, set_up.text
        pushed = eventually(page, lambda: push_service.received, timeout=LEAD_S + 10)[0]
        assert time.time() >= at, "pushed before its time"
        assert push_service.received == [pushed]  # nothing when it was set
        message = pushed.json()
        assert message["type"] == "reminder" and "Stretch" not in pushed.payload.decode()

        def of_type(kind: str) -> list[Any]:
            return [pushed for pushed in push_service.received if pushed.json()["type"] == kind]

        def shown_by_worker(message: dict[str, object], title: str, body: str) -> None:
            phone.deliver(message, lambda: [title, body] in page.evaluate(SHOWN))

        shown_by_worker(message, "Reminder", "Stretch")

        question = {"question": "Deploy now?", "choices": ["Ship it", "Wait"]}
        posed = http.post("/v1/interactions", json=question, headers=auth)
        assert posed.status_code == 201, posed.text
        asked = eventually(page, lambda: push_service.received[1:])[0].json()
        assert asked["type"] == "interaction_request" and "Deploy" not in json.dumps(asked)
        shown_by_worker(asked, "Question", "Deploy now? (Ship it / Wait)")
        question_actions = f"{NOTIFICATIONS}.then(ns => ns.filter(n => n.title === 'Question')[0].actions)"
        assert [action["title"] for action in page.evaluate(question_actions)] == ["Ship it", "Wait"]
        # What its "Wait" button runs in the worker (headless Chromium cannot tap a notification):
        interaction_id = posed.json()["id"]
        tapped = page.evaluate(TAP_ANSWER, [interaction_id, 1])
        assert tapped["status"] == 200, tapped
        state = http.get(f"/v1/interactions/{interaction_id}", headers=auth).json()
        assert state["status"] == "answered" and state["choice_index"] == 1, state
        # Every device hears it closed, this one too: the question's notification says so, quietly.
        closing = eventually(page, lambda: of_type("interaction_closed"))[0].json()
        shown_by_worker(closing, "Question answered", "Answered on Web Phone.")
        assert [n[0] for n in page.evaluate(SHOWN)].count("Question") == 0  # replaced, same tag

        assert http.post(f"/v1/devices/{phone.phone_id}/ring", headers=auth).status_code == 202
        rung = eventually(page, lambda: of_type("ring"))[0].json()
        shown_by_worker(rung, "Ring", "Someone is looking for this phone.")

        buttons = [
            {"label": "Open CI", "url": "https://ci.example/1"},
            {"label": "Logs", "url": "https://ci.example/l"},
        ]
        note = {"title": "Build", "message": "red", "url": "https://ci.example", "actions": buttons}
        assert http.post("/v1/send", json=note, headers=auth).status_code == 200
        built = eventually(page, lambda: of_type("notification"))[0].json()
        shown_by_worker(built, "Build", "red")
        actions = page.evaluate(f"{NOTIFICATIONS}.then(ns => ns.filter(n => n.title === 'Build')[0].actions)")
        assert [action["title"] for action in actions] == ["Open CI", "Logs"]
