"""Pushover's ``html=1`` message as relaybox's Markdown (pure; no I/O).

Pushover renders a subset of HTML: ``<b>``, ``<i>``, ``<u>``, ``<font color>`` and ``<a href>``.
relaybox's phones render Markdown with raw HTML off (``docs/protocol.md``), so the subset becomes
Markdown: bold and italic as ``**``/``*``, a link to an http(s) URL as ``[text](url)``, underline
and colours as their text (Markdown has neither), ``<br>`` as a line break. Every other tag is
dropped with its text kept (``<script>`` and ``<style>`` with their content), entities are decoded,
and text that Markdown would read as markup is escaped, so the result says what the HTML showed
and nothing more.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_MARKERS = {"b": "**", "strong": "**", "i": "*", "em": "*"}
_HIDDEN = ("script", "style")
_INLINE_SPECIALS = re.compile(r"([\\`*_\[\]])")
_LINE_START_SPECIALS = re.compile(r"(?m)^(\s*)([#>+\-]|\d+[.)])")


def html_to_markdown(html: str) -> str:
    converter = _Converter()
    converter.feed(html)
    converter.close()
    return "".join(converter.out).strip()


def escape_markdown(text: str, *, at_line_start: bool = True) -> str:
    """Plain text that Markdown shows as it is (``at_line_start``: the text begins a line, so a
    ``#`` or ``-`` opening it would be markup)."""
    first, newline, rest = _INLINE_SPECIALS.sub(r"\\\1", text).partition("\n")
    if at_line_start:
        first = _line_start(first)
    return first + newline + _line_start(rest)


def _line_start(text: str) -> str:
    return _LINE_START_SPECIALS.sub(lambda m: m[1] + "\\" + m[2], text)


class _Converter(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.hidden = 0
        self.links: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self.hidden += 1
        elif tag in _MARKERS:
            self.out.append(_MARKERS[tag])
        elif tag == "br":
            self.out.append("  \n")
        elif tag == "a":
            href = dict(attrs).get("href") or ""
            target = href.strip() if href.strip().lower().startswith(("http://", "https://")) else None
            self.links.append(target)
            if target is not None:
                self.out.append("[")

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in _MARKERS:
            self.out.append(_MARKERS[tag])
        elif tag == "a" and self.links:
            target = self.links.pop()
            if target is not None:
                self.out.append(f"]({target.replace(' ', '%20').replace(')', '%29')})")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            at_line_start = not self.out or self.out[-1].endswith("\n")
            self.out.append(escape_markdown(data, at_line_start=at_line_start))
