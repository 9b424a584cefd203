"""Writes the committed screenshots in docs/screenshots/: the landing page and the API docs at a
phone's size (390 x 844 CSS pixels, 2x), light and dark, from a relaybox served on loopback.

    .venv/bin/python -m tests.webapp.screenshots

(The tests keep their own screenshots in test-artifacts/; these change only when this is run.)
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from connector.app import create_app
from core.settings import explicit_settings
from tests.browser import CHROMIUM, CHROMIUM_ARGS
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
            finally:
                browser.close()


if __name__ == "__main__":
    main()
