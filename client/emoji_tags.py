"""The emoji short codes a notification's tags may be (``warning`` → ⚠️): one table for both reference
phones, ``webapp/static/emoji-tags.json``, which the web app fetches from the server and this client
reads from the installed package beside it (the ``relaybox`` distribution ships both). Reading a
data file is not importing the web app's code, which the client never does."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "webapp" / "static" / "emoji-tags.json"


@functools.cache
def emoji_table() -> Mapping[str, str]:
    """Short code → emoji; empty when the file is missing or unreadable (tags then show as tags)."""
    try:
        tags = json.loads(TABLE.read_text(encoding="utf-8"))["tags"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(tags, dict):
        return {}
    return {code: emoji for code, emoji in tags.items() if isinstance(code, str) and isinstance(emoji, str)}


def split_tags(tags: Iterable[object]) -> tuple[list[str], list[str]]:
    """The emoji of the tags that are short codes, and the other tags as text, each in order."""
    table = emoji_table()
    emoji: list[str] = []
    others: list[str] = []
    for tag in tags:
        text = str(tag)
        if text in table:
            emoji.append(table[text])
        else:
            others.append(text)
    return emoji, others
