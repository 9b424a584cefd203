"""Writes the committed screenshots in docs/screenshots/: the landing page and the API docs, and the
web app as the phone (set-up, the inbox, a question, an attachment, an urgent alert, the Pair,
Tokens, Assistants and Settings views, an invite made, and set-up asking for an invite or opened by
an invite link), at a phone's size (390 x 844 CSS pixels, 2x, touch), light and dark, from a
relaybox on loopback whose registration is by invite.

    .venv/bin/python -m tests.webapp.screenshots

(The tests keep their own screenshots in test-artifacts/; these change only when this is run.)
"""

from __future__ import annotations

import struct
import tempfile
import zlib
from pathlib import Path

import httpx
from playwright.sync_api import Browser, Page, sync_playwright

from app.assembly import create_app
from core.settings import explicit_settings
from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.helpers import start_pairing
from tests.live import serve_in_thread

TARGET = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SHOTS = {"landing": ("/", True), "docs": ("/docs", False)}  # name → (path, whole page)
SCREEN = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "has_touch": True,
    "is_mobile": True,
}


def main() -> None:
    TARGET.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for scheme in ("light", "dark"):
                with tempfile.TemporaryDirectory() as data:
                    settings = explicit_settings(data_dir=Path(data), registration="invite")
                    app = create_app(settings)  # by invite, as a server on the internet
                    with serve_in_thread(app) as url:
                        pages(browser, url, scheme)
                        phone_shots(browser, url, scheme)
        finally:
            browser.close()


def pages(browser: Browser, url: str, scheme: str) -> None:
    context = browser.new_context(**SCREEN, color_scheme=scheme)  # type: ignore[arg-type]
    for name, (path, whole) in SHOTS.items():
        page = context.new_page()
        page.goto(url + path)
        page.wait_for_load_state("networkidle")
        shoot(page, f"{name}-{scheme}", whole=whole)
    context.close()


def picture(width: int, height: int) -> bytes:
    """A PNG a camera might send: a sky over a lawn, with a door."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    def pixel(x: int, y: int) -> bytes:
        if width * 0.42 < x < width * 0.58 and height * 0.35 < y < height * 0.8:
            return b"\x8b\x4a\x2b"  # the door
        return b"\x87\xce\xeb" if y < height * 0.6 else b"\x3c\x8d\x3c"

    rows = b"".join(b"\x00" + b"".join(pixel(x, y) for x in range(width)) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def view(page: Page, name: str) -> None:
    page.get_by_role("navigation", name="Views").get_by_role("link", name=name).click()
    page.locator(f"#view-{name.lower()}").wait_for(state="visible")
    page.evaluate("window.scrollTo(0, 0)")


def phone_shots(browser: Browser, url: str, scheme: str) -> None:
    context = browser.new_context(**SCREEN, color_scheme=scheme)  # type: ignore[arg-type]
    context.grant_permissions(["notifications", "clipboard-read", "clipboard-write"], origin=url)
    page = context.new_page()
    page.goto(url + "/app/")
    page.locator("#setup").wait_for(state="visible")
    page.get_by_label("Name this device").fill("Pixel")
    shoot(page, f"app-setup-{scheme}")
    page.get_by_role("button", name="This is my phone").click()
    page.locator("#stream-state", has_text="connected").wait_for()
    shoot(page, f"app-empty-{scheme}")
    with httpx.Client(base_url=url) as http:
        view(page, "Pair")
        _, code = start_pairing(http, name="laptop")
        page.get_by_label("Six-digit code shown on the computer or the assistant's page").fill(code)
        page.get_by_role("button", name="Confirm code").click()
        page.locator("#safety-number").wait_for()
        shoot(page, f"app-pair-{scheme}")
        view(page, "Tokens")
        page.get_by_label("Label").fill("backup script")
        page.get_by_role("button", name="Create token").click()
        page.locator("#new-token").wait_for(state="visible")
        page.get_by_role("button", name="Copy token").click()
        page.locator("#copy-status").filter(has_text="co").wait_for()
        token = page.locator("#new-token-value").inner_text()
        shoot(page, f"app-tokens-{scheme}")
        auth = {"Authorization": f"Bearer {token}"}
        backup = {
            "title": "Backup",
            "message": "**Done** in 3 min: 12 GB to the NAS.",
            "markdown": True,
            "tags": ["white_check_mark", "nightly"],
            "url": "https://backup.example/runs/42",
            "url_title": "Run 42",
            "actions": [{"label": "Open log", "url": "https://backup.example/runs/42/log"}],
        }
        http.post("/v1/send", json=backup, headers=auth)
        disk = {
            "title": "Disk almost full",
            "message": "/var is at 91%.",
            "priority": "high",
            "tags": ["warning"],
        }
        http.post("/v1/send", json=disk, headers=auth)
        door = {
            "token": token,
            "user": "u" * 30,
            "title": "Front door",
            "message": "Motion at the front door",
        }
        http.post(
            "/v1/messages.json", data=door, files={"attachment": ("door.png", picture(320, 200), "image/png")}
        )
        question = {
            "question": "Deploy v2.4 to production?",
            "choices": ["Ship it", "Wait"],
            "allow_text": True,
            "text_max_chars": 200,
        }
        http.post("/v1/interactions", json=question, headers=auth)
        urgent = {"title": "PagerDuty", "message": "prod is down", "priority": "urgent", "repeat": 60}
        http.post("/v1/send", json=urgent, headers=auth)
    view(page, "Inbox")
    page.locator("li.kind-urgent .alert-status").wait_for()
    page.locator("img.attachment-image").wait_for()
    page.evaluate("window.scrollTo(0, 0)")
    shoot(page, f"app-inbox-{scheme}")
    shoot(page, f"app-urgent-{scheme}")
    question_card = page.locator("li.kind-question")
    question_card.get_by_label("Add a reply (optional)").fill("after the backup, please")
    question_card.evaluate("card => card.scrollIntoView({ block: 'center' })")
    shoot(page, f"app-question-{scheme}")
    attachment = page.locator("li.entry", has_text="Motion at the front door")
    attachment.evaluate("card => card.scrollIntoView({ block: 'center' })")
    shoot(page, f"app-attachment-{scheme}")
    for name in ("Assistants", "Settings"):
        view(page, name)
        shoot(page, f"app-{name.lower()}-{scheme}")
    page.get_by_role("button", name="Make an invite").click()
    page.get_by_role("button", name="Copy link").click()
    page.locator("#invite-copy-status").filter(has_text="co").wait_for()
    page.locator("#new-invite").evaluate("box => box.scrollIntoView({ block: 'center' })")
    shoot(page, f"app-invite-{scheme}")
    link = page.locator("#invite-link").inner_text()
    context.close()
    invited_phone_shot(browser, link, scheme)


def invited_phone_shot(browser: Browser, link: str, scheme: str) -> None:
    """Set-up on a new phone: refused without an invite, then opened by an invite link."""
    context = browser.new_context(**SCREEN, color_scheme=scheme)  # type: ignore[arg-type]
    page = context.new_page()
    page.goto(link.split("#")[0])
    page.get_by_label("Name this device").fill("Sam's phone")
    page.get_by_role("button", name="This is my phone").click()
    page.get_by_label("Invite", exact=True).wait_for()
    shoot(page, f"app-setup-refused-{scheme}")
    page = context.new_page()
    page.goto(link)
    page.get_by_label("Invite", exact=True).wait_for()
    page.get_by_label("Name this device").fill("Sam's phone")
    shoot(page, f"app-setup-invite-{scheme}")
    context.close()


def shoot(page: Page, name: str, *, whole: bool = False) -> None:
    target = TARGET / f"{name}.png"
    page.screenshot(path=target, full_page=whole)
    print(f"wrote {target.relative_to(TARGET.parents[1])}")


if __name__ == "__main__":
    main()
