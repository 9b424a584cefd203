"""How the reference phone shows notifications as text, without a server: a title with its tags'
emoji (from the one table both phones read), the markdown source marked as such, the other tags, the
link, the icon and every button; a replacement names the sequence it replaces, a clear takes it away."""

from __future__ import annotations

import json
from typing import Any

from client.dispatch import default_dispatcher
from client.emoji_tags import TABLE, emoji_table, split_tags
from client.notifications import MAX_REMEMBERED, NotificationBoard
from client.opener import Received

NOTE: dict[str, Any] = {
    "type": "notification",
    "id": "msg_1",
    "sent_at": 1,
    "message": "m",
    "priority": "default",
}


def received(payload: dict[str, Any], seq: int = 1) -> Received:
    return Received(seq, "envelope", "server", "server", str(payload["type"]), payload)


def test_the_one_table_is_the_web_apps_file_and_maps_common_codes() -> None:
    assert TABLE.parts[-3:] == ("webapp", "static", "emoji-tags.json")
    assert dict(emoji_table()) == json.loads(TABLE.read_text(encoding="utf-8"))["tags"]
    assert 40 <= len(emoji_table()) <= 60
    table = emoji_table()
    assert (table["warning"], table["white_check_mark"], table["rotating_light"], table["tada"]) == (
        "⚠️",
        "✅",
        "🚨",
        "🎉",
    )
    assert split_tags(["warning", "db", "x", "Warning"]) == (["⚠️", "❌"], ["db", "Warning"])


def test_a_rich_notification_shows_every_part_on_its_own_line() -> None:
    note = NOTE | {
        "sequence_id": "deploy-42",
        "title": "Deploy",
        "message": "**done**\nin 3 min",
        "tags": ["white_check_mark", "prod", "tada"],
        "url": "https://ci.example/run/7",
        "url_title": "Run 7",
        "icon": "https://ci.example/icon.png",
        "actions": [
            {"action": "view", "label": "Open", "url": "https://ci.example/run/7"},
            {"action": "http", "label": "Roll back", "url": "https://hooks.example/rb", "method": "PUT"},
            {"label": "Old style", "url": "https://x.example"},
        ],
        "markdown": True,
    }
    shown = default_dispatcher().describe(received(note, seq=12))
    assert shown.splitlines() == [
        "[seq 12] notification (sequence deploy-42): ✅ 🎉 Deploy — **done**\\nin 3 min (markdown)",
        "  tags: prod",
        "  link: Run 7 → https://ci.example/run/7",
        "  icon: https://ci.example/icon.png",
        "  [1] Open → https://ci.example/run/7 (view)",
        "  [2] Roll back → https://hooks.example/rb (http PUT)",
        "  [3] Old style → https://x.example (view)",
    ]


def test_a_plain_notification_is_one_line_and_emoji_lead_a_message_without_title() -> None:
    dispatcher = default_dispatcher()
    assert dispatcher.describe(received(NOTE | {"message": "disk full"})) == "[seq 1] notification: disk full"
    warned = dispatcher.describe(
        received(NOTE | {"id": "msg_2", "message": "disk full", "tags": ["warning"]})
    )
    assert warned == "[seq 1] notification: ⚠️ disk full"


def test_a_replacement_names_its_sequence_and_a_clear_forgets_it() -> None:
    dispatcher = default_dispatcher()
    lines = [
        dispatcher.describe(received(NOTE | {"id": "msg_1", "sequence_id": "job", "message": "1/2"}, 1)),
        dispatcher.describe(received(NOTE | {"id": "msg_2", "sequence_id": "job", "message": "2/2"}, 2)),
        dispatcher.describe(received({"type": "notification_clear", "sequence_id": "job", "at": 3}, 3)),
        dispatcher.describe(received(NOTE | {"id": "msg_3", "sequence_id": "job", "message": "again"}, 4)),
        dispatcher.describe(received(NOTE | {"id": "msg_9", "message": "plain"}, 5)),
        dispatcher.describe(received(NOTE | {"id": "msg_10", "sequence_id": "msg_9", "message": "by id"}, 6)),
    ]
    assert lines == [
        "[seq 1] notification (sequence job): 1/2",
        "[seq 2] notification (replaces job): 2/2",
        "[seq 3] notification cleared: job",
        "[seq 4] notification (sequence job): again",
        "[seq 5] notification: plain",
        "[seq 6] notification (replaces msg_9): by id",
    ]


def test_the_board_keeps_the_latest_of_each_sequence_and_a_bounded_number() -> None:
    board = NotificationBoard()
    board.on_notification(received(NOTE | {"sequence_id": "job", "message": "1/2"}))
    board.on_notification(received(NOTE | {"sequence_id": "job", "message": "2/2"}))
    assert list(board.shown) == ["job"] and board.shown["job"]["message"] == "2/2"
    for n in range(MAX_REMEMBERED + 5):
        board.on_notification(received(NOTE | {"id": f"msg_{n}"}))
    assert len(board.shown) == MAX_REMEMBERED and "job" not in board.shown


def test_what_a_sender_wrote_cannot_break_the_lines() -> None:
    note = NOTE | {
        "title": "a\x1b[2Jb",
        "tags": ["x\ny"],
        "actions": [{"action": "http", "label": "l\nm", "url": "https://x.example", "method": "P\nOST"}],
    }
    shown = default_dispatcher().describe(received(note))
    assert "\x1b" not in shown and len(shown.splitlines()) == 3
    assert shown.splitlines()[2] == "  [1] l\\nm → https://x.example (http POST)"


def test_each_sender_keeps_its_own_sequences_and_a_paired_device_names_none_of_theirs() -> None:
    """The server qualifies a sender's sequence (``tok_a:deploy-42``); a notification a paired
    device sealed itself is qualified here by that device, whatever it claims."""
    board = NotificationBoard()
    by_a = received(NOTE | {"id": "msg_a", "sequence_id": "tok_a:deploy-42"})
    by_b = received(NOTE | {"id": "msg_b", "sequence_id": "tok_b:deploy-42"})
    forged = NOTE | {"id": "msg_c", "sequence_id": "tok_a:deploy-42"}
    by_laptop = Received(3, "envelope", "laptop-id", "laptop", "notification", forged)
    assert "replaces" not in board.on_notification(by_a)
    assert "replaces" not in board.on_notification(by_b)
    assert "replaces" not in board.on_notification(by_laptop)
    clear = {"type": "notification_clear", "sequence_id": "tok_a:deploy-42", "at": 2}
    board.on_clear(Received(4, "envelope", "laptop-id", "laptop", "notification_clear", clear))
    assert list(board.shown) == ["tok_a:deploy-42", "tok_b:deploy-42"]
    board.on_clear(received({"type": "notification_clear", "sequence_id": "tok_b:deploy-42", "at": 3}))
    assert list(board.shown) == ["tok_a:deploy-42"]
