"""The documentation stays true to itself: every relative link in README.md, docs/ and bench/ reaches
a file that exists (and, with a #fragment, a heading there); the README stays a ten-minute read
that keeps the two set-up commands CI runs and links every docs/ page; every page says first who it
is for."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = sorted([README, *(ROOT / "docs").glob("*.md"), *(ROOT / "bench").glob("*.md")])
DOCS = [page for page in PAGES if page != README]  # the README is for everyone
README_MAX_LINES = 250

FENCE = re.compile(r"^ *(```|~~~).*?^ *\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]+)\"", re.IGNORECASE)
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # https:, mailto:, …


def prose(text: str) -> str:
    """The text without code blocks and code spans, where a [x](y) is an example, not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def link_targets(text: str) -> list[str]:
    body = prose(text)
    return [*MARKDOWN_LINK.findall(body), *HTML_LINK.findall(body)]


def anchors(page: Path) -> set[str]:
    """The fragments GitHub gives the page's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated one numbered -1, -2, …"""
    seen: dict[str, int] = {}
    found = set()
    for title in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        plain = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", title).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in link_targets(page.read_text(encoding="utf-8")):
        if EXTERNAL.match(target):
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no heading #{fragment} in {shown(resolved)}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_of_the_docs_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_check_finds_what_is_broken(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A title, with `code`\n\n## Again\n## Again\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md) [ok](other.md#a-title-with-code) [ok](other.md#again-1) [ok](#mine)\n"
        '<img src="other.md"> [web](https://example.com/x) `[not a link](nowhere.md)`\n\n'
        "```\n[not a link](nowhere.md)\n```\n\n## Mine\n\n"
        '[gone](missing.md) [gone](other.md#nope) [gone](#nothing) <img src="img/none.png">\n'
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nope: no heading #nope in other.md",
        "#nothing: no heading #nothing in page.md",
        "img/none.png: no such file",
    ]


def test_the_readme_is_a_ten_minute_read() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES


def test_the_readme_keeps_the_two_commands_and_ci_runs_its_test_command() -> None:
    readme = README.read_text(encoding="utf-8")
    block = readme.split("## Two commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert commands == ["python3 dev.py serve", "python3 dev.py test"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert shlex.split(ci[-1]) == shlex.split("python3 dev.py test")


def test_the_readme_links_every_docs_page() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve()
        for target in link_targets(README.read_text(encoding="utf-8"))
        if not EXTERNAL.match(target)
    }
    assert sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in linked) == []


@pytest.mark.parametrize("page", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_docs_pages_say_first_who_they_are_for(page: Path) -> None:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    first_paragraph = text.split("\n", 1)[1].strip().split("\n\n", 1)[0]
    assert first_paragraph.startswith("For"), f"{page.name} starts: {first_paragraph[:80]!r}"
