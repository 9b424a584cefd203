"""Writes the committed screenshots in docs/screenshots/: the landing page and the API docs at a
phone's size (390 x 844 CSS pixels, 2x), light and dark, and the web app as the phone (set-up, the
safety number after pairing a computer, a received notification), from a relaybox on loopback.

    .venv/bin/python -m tests.webapp.screenshots

(The tests keep their own screenshots in test-artifacts/; these change only when this is run.)
"""

from __future__ import annotations

import tempfile
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


def main() -> None:
    TARGET.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as data:
        app = create_app(explicit_settings(data_dir=Path(data)))
        with serve_in_thread(app) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                for scheme in ("light", "dark"):
                    context = browser.new_context(
                        viewport={"width": 390, "height": 844}, device_scale_factor=2, color_scheme=scheme
                    )
                    for name, (path, whole) in SHOTS.items():
                        page = context.new_page()
                        page.goto(url + path)
                        page.wait_for_load_state("networkidle")
                        target = TARGET / f"{name}-{scheme}.png"
                        page.screenshot(path=target, full_page=whole)
                        print(f"wrote {target.relative_to(TARGET.parents[1])}")
                    context.close()
                phone_shots(browser, url)
            finally:
                browser.close()


def phone_shots(browser: Browser, url: str) -> None:
    """The web app as the phone: set-up, pairing (the safety number), a notification received."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    page = context.new_page()
    page.goto(url + "/app/")
    page.locator("#setup").wait_for(state="visible")
    shoot(page, "app-setup")
    page.get_by_role("button", name="This is my phone").click()
    page.locator("#stream-state", has_text="connected").wait_for()
    with httpx.Client(base_url=url) as http:
        _, code = start_pairing(http, name="laptop")
        page.get_by_label("Six-digit code shown on the computer or the assistant's page").fill(code)
        page.get_by_role("button", name="Confirm code").click()
        page.locator("#safety-number").wait_for()
        page.locator("#code-result").scroll_into_view_if_needed()
        shoot(page, "app-safety-number")
        page.get_by_role("button", name="Create token").click()
        page.locator("#new-token").wait_for(state="visible")
        token = page.locator("#new-token-value").inner_text()
        headers = {"Authorization": f"Bearer {token}"}
        backup = {
            "title": "Backup",
            "message": "**Done** in 3 min: 12 GB to the NAS.",
            "markdown": True,
            "tags": ["white_check_mark", "nightly"],
            "url": "https://backup.example/runs/42",
            "url_title": "Run 42",
            "actions": [{"label": "Open log", "url": "https://backup.example/runs/42/log"}],
        }
        http.post("/v1/send", json=backup, headers=headers)
    page.locator("#inbox li").first.wait_for()
    page.locator("#notify-title").scroll_into_view_if_needed()
    shoot(page, "app-notification")
    context.close()


def shoot(page: Page, name: str) -> None:
    target = TARGET / f"{name}.png"
    page.screenshot(path=target)
    print(f"wrote {target.relative_to(TARGET.parents[1])}")


if __name__ == "__main__":
    main()
