"""What the web phone keeps for a payload (webapp/app/items.js), run in real Chromium: urgent fields
count only from the server and are held to its bounds; a sender's sequence can never take an app
tag; a question closed elsewhere learns who answered, and this browser's own answer stays its own."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import BrowserContext

LOAD = "import('/app/items.js').then(() => true)"
URGENCY = "([note, from]) => globalThis.relayboxItems.urgency(note, from)"
KEYS = """() => { const i = globalThis.relayboxItems;
  return [i.senderKey({ sequence_id: 'ring' }), i.senderKey({ id: 'msg_1' }),
          i.appKey('ring'), i.appKey('question', 'int_1')]; }"""
CLOSE = """(steps) => { const i = globalThis.relayboxItems;
  let entry = { key: 'app:question:int_1', kind: 'question', state: 'open', waiting: true, payload: {} };
  for (const closed of steps) entry = i.closeQuestion('int_1', closed).apply(entry);
  return entry; }"""


def test_urgent_fields_count_only_from_the_server_and_within_its_bounds(
    live_server: str, context: BrowserContext
) -> None:
    page = context.new_page()
    page.goto(f"{live_server}/app/")
    assert page.evaluate(LOAD)
    note: dict[str, Any] = {"receipt": "rcp_" + "a" * 32, "repeat": 0.001, "expire_at": 4_000_000_000}
    held = page.evaluate(URGENCY, [note, "server"])
    now = page.evaluate("Date.now() / 1000")
    assert held["repeat"] == 1 and now < held["expireAt"] <= now + 3 * 3600 + 61
    assert page.evaluate(URGENCY, [note, "dev_laptop"]) is None  # a paired computer's: not urgent
    assert page.evaluate(URGENCY, [note | {"receipt": "rcp_x"}, "server"]) is None
    assert page.evaluate(URGENCY, [note | {"repeat": "soon"}, "server"]) is None
    assert page.evaluate(KEYS) == ["s:ring", "s:msg_1", "app:ring", "app:question:int_1"]


def test_a_closed_question_learns_who_answered_and_keeps_its_own_answer(
    live_server: str, context: BrowserContext
) -> None:
    page = context.new_page()
    page.goto(f"{live_server}/app/")
    page.evaluate(LOAD)
    by = {"device_id": "d", "name": "Pixel"}
    after_409 = page.evaluate(CLOSE, [{"state": "answered"}, {"state": "answered", "by": by, "choice": 1}])
    assert (after_409["state"], after_409["by"], after_409["choice"], after_409["waiting"]) == (
        "answered",
        by,
        1,
        False,
    )
    news_first = page.evaluate(
        CLOSE,
        [
            {"state": "answered", "by": by, "choice": 0},
            {"state": "answered", "by": by, "choice": 0, "mine": True},
        ],
    )
    assert news_first["mine"] is True
    expired_then_news = page.evaluate(CLOSE, [{"state": "expired"}, {"state": "expired"}])
    assert expired_then_news["state"] == "expired"
