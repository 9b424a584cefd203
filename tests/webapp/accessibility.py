"""Accessibility checks run inside a page: axe-core's rules (the vendored, pinned copy, injected by
the test as an init script: no page links it and the server does not serve it), text contrast
(WCAG AA) and what keyboard focus reaches."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import BrowserContext, Page

from webapp.vendor.update import PINS

AXE = next(
    Path(__file__).resolve().parents[2] / "webapp" / "vendor" / pin.directory / "axe.min.js"
    for pin in PINS
    if pin.name == "axe-core"
)
SERIOUS = ("serious", "critical")


def with_axe(context: BrowserContext) -> BrowserContext:
    """Every page ``context`` opens from now on has ``axe`` (before its own scripts run)."""
    context.add_init_script(path=AXE)
    return context


def axe_violations(page: Page, impacts: tuple[str, ...] = SERIOUS) -> list[str]:
    """axe-core's violations of ``impacts`` on the page as it is now: rule, impact and where."""
    results = page.evaluate("() => axe.run(document, { resultTypes: ['violations'] })")
    return [
        f"{violation['id']} ({violation['impact']}): {', '.join(map(str, node['target']))}: "
        f"{violation['help']}"
        for violation in results["violations"]
        if violation["impact"] in impacts
        for node in violation["nodes"]
    ]


# Every visible element with its own text: its colour against the first opaque background behind it.
# AA asks 4.5:1, or 3:1 for large text (24 px, or 18.66 px bold).
LOW_CONTRAST = """() => {
  const rgba = (text) => {
    const inside = (text.match(/rgba?\\(([^)]+)\\)/) || [null, ""])[1];
    const [r, g, b, a] = inside.split(/[\\s,/]+/).filter(Boolean).map(Number);
    return b === undefined ? null : { r, g, b, a: a === undefined ? 1 : a };
  };
  const channel = (v) => ((v /= 255) <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
  const luminance = (c) => 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b);
  const backgroundOf = (element) => {
    for (let e = element; e; e = e.parentElement) {
      const colour = rgba(getComputedStyle(e).backgroundColor);
      if (colour && colour.a > 0) return colour;
    }
    return { r: 255, g: 255, b: 255, a: 1 };
  };
  const failures = [];
  for (const element of document.body.querySelectorAll("*")) {
    const ownText = Array.from(element.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!ownText || element.getClientRects().length === 0) continue;
    const style = getComputedStyle(element);
    if (style.visibility === "hidden") continue;
    const [fg, bg] = [rgba(style.color), backgroundOf(element)];
    const [a, b] = [luminance(fg), luminance(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    const size = parseFloat(style.fontSize), bold = Number(style.fontWeight) >= 700;
    const needed = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    const text = element.textContent.trim().slice(0, 40);
    if (ratio < needed) failures.push(`${element.tagName} "${text}" ${ratio.toFixed(2)}`);
  }
  return failures;
}"""

# The element keyboard focus is on: a description, its accessible name and whether a ring shows.
FOCUSED = """() => {
  const e = document.activeElement;
  const labelled = e.labels && e.labels.length ? e.labels[0].innerText : "";  // <label for=…> or around it
  const shown = e.innerText || e.value || e.placeholder || "";
  const name = (e.getAttribute("aria-label") || labelled || shown).trim();
  const style = getComputedStyle(e);
  return {
    id: Array.from(document.querySelectorAll("*")).indexOf(e),
    label: `${e.tagName.toLowerCase()}[${e.getAttribute("href") || e.textContent.trim().slice(0, 30)}]`,
    name,
    ring: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2,
  };
}"""

FOCUSABLE = """() => Array.from(document.querySelectorAll("a[href], button, input, select, textarea"))
  .filter((e) => !e.disabled && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden")
  .map((e) => Array.from(document.querySelectorAll("*")).indexOf(e))"""


def low_contrast(page: Page) -> list[str]:
    failures: list[str] = page.evaluate(LOW_CONTRAST)
    return failures


def tab_through(page: Page, limit: int = 60) -> list[dict[str, object]]:
    """Press Tab (on a page just loaded: from its top) until focus leaves the page or comes round
    again; what each press focused (``id``: its place in the document, as ``focusable`` gives)."""
    reached: list[dict[str, object]] = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement === document.body"):
            break
        focused: dict[str, object] = page.evaluate(FOCUSED)
        if reached and focused["id"] == reached[0]["id"]:
            break
        reached.append(focused)
    return reached


def focusable(page: Page) -> list[int]:
    """Every visible element keyboard focus should reach, by its place in the document."""
    found: list[int] = page.evaluate(FOCUSABLE)
    return found
