"""Text as the terminal shows it."""

from __future__ import annotations


def one_line(text: object) -> str:
    """Control characters (newlines, terminal escapes) shown as escapes, so one event is one line."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in str(text))
