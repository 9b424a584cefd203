"""The landing page, the API docs, the web app shell and the not-found answers in real Chromium,
served by a live relaybox: each loads with no console error, no CSP violation and no request to
another origin; landmarks, labels, keyboard focus and contrast in light and dark; the docs render
every operation of the served OpenAPI document and fail readably; the shell is installable."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import BrowserContext, BrowserType, Page, Response, ViewportSize

from tests.browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, watched
from tests.webapp.accessibility import focusable, low_contrast, tab_through
from webapp.assets import CONTENT_SECURITY_POLICY, IMMUTABLE, REVALIDATE, WORKER_CONTENT_SECURITY_POLICY

PHONE: ViewportSize = {"width": 390, "height": 844}
PAGES = ["/", "/docs", "/app/", "/app/no-such-page"]


def open_page(context: BrowserContext, url: str) -> Page:
    page = context.new_page()
    page.set_viewport_size(PHONE)
    page.goto(url)
    page.wait_for_load_state("networkidle")
    return page


def test_the_landing_page_loads_clean_and_names_this_server(
    live_server: str, context: BrowserContext
) -> None:
    page = context.new_page()
    watch = watched(page, live_server)
    page.goto(live_server + "/")
    page.wait_for_load_state("networkidle")
    assert page.locator("html").get_attribute("lang") == "en"
    assert "phone" in page.get_by_role("heading", level=1).inner_text()
    example = page.locator("#curl-example").inner_text()
    assert f"{live_server}/v1/send" in example and "Authorization: Bearer $TOKEN" in example
    assert page.get_by_role("link", name="Open the web app").first.get_attribute("href") == "/app/"
    assert page.get_by_role("link", name="The OpenAPI 3.1 document").get_attribute("href") == "/openapi.json"
    assert page.get_by_role("link", name="API documentation").get_attribute("href") == "/docs"
    assert watch.problems() == []
    assert len(watch.requests) >= 4  # the page, its stylesheet, script and icon: all recorded
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "landing.png", full_page=True)


def test_the_landing_page_has_landmarks_labels_and_works_from_the_keyboard(
    live_server: str, context: BrowserContext
) -> None:
    page = open_page(context, live_server + "/")
    for role in ("banner", "main", "contentinfo"):
        assert page.get_by_role(role).count() == 1, role
    assert page.get_by_role("navigation", name="Site").count() == 1
    assert page.get_by_role("button", name="Copy").is_visible()
    assert all(alt == "" for alt in page.locator("img").evaluate_all("(images) => images.map((i) => i.alt)"))

    reached = tab_through(page)
    assert [item["id"] for item in reached] == focusable(page)  # all of them, in document order
    assert reached[0]["label"] == "a[#main]"  # the skip link first
    assert all(item["name"] for item in reached), reached  # every stop has an accessible name
    assert all(item["ring"] for item in reached), reached  # and a visible focus ring

    page.reload()
    page.keyboard.press("Tab")
    assert page.locator(".skip-link").bounding_box()["y"] >= 0  # type: ignore[index]  # shown when focused
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


def test_the_copy_button_copies_the_curl_example(live_server: str, context: BrowserContext) -> None:
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server)
    page = open_page(context, live_server + "/")
    page.get_by_role("button", name="Copy").click()
    page.get_by_role("status").filter(has_text="Copied").wait_for(timeout=5_000)
    assert page.evaluate("navigator.clipboard.readText()") == page.locator("#curl-example").inner_text()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("path", PAGES)
def test_every_page_has_readable_contrast(
    live_server: str, context: BrowserContext, path: str, scheme: str
) -> None:
    page = context.new_page()
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    page.goto(live_server + path)
    page.wait_for_load_state("networkidle")
    if path == "/docs":
        page.locator(".operation").first.wait_for()
    assert low_contrast(page) == []
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.get_by_role("main").count() == 1


def test_every_file_a_page_loads_arrives_with_its_cache_policy_and_the_policy(
    live_server: str, context: BrowserContext
) -> None:
    page = context.new_page()
    arrived: dict[str, dict[str, str]] = {}

    def note(response: Response) -> None:
        arrived[response.url] = response.headers

    page.on("response", note)
    page.goto(live_server + "/app/")
    page.evaluate("async () => { await import('/static/relaybox-wire.js'); }")
    page.wait_for_load_state("networkidle")
    kinds = {url.rsplit(".", 1)[-1] if "." in url.rsplit("/", 1)[-1] else "page" for url in arrived}
    assert {"page", "css", "js", "svg"} <= kinds, kinds
    assert any("/static/vendor/" in url for url in arrived)
    for url, headers in arrived.items():
        expected = WORKER_CONTENT_SECURITY_POLICY if url.endswith("/app/sw.js") else CONTENT_SECURITY_POLICY
        assert headers["content-security-policy"] == expected, url
        assert headers["x-content-type-options"] == "nosniff", url
        assert headers["cache-control"] == (IMMUTABLE if "/static/vendor/" in url else REVALIDATE), url


def test_the_docs_render_every_operation_of_the_served_document(
    live_server: str, context: BrowserContext
) -> None:
    document = httpx.get(live_server + "/openapi.json", timeout=10).json()
    operations = [op for item in document["paths"].values() for op in item.values() if "operationId" in op]
    page = context.new_page()
    watch = watched(page, live_server)
    page.goto(live_server + "/docs")
    page.locator(".operation").first.wait_for(timeout=10_000)
    assert page.locator(".operation").count() == len(operations)
    for operation in operations:
        assert page.locator(f"[id='{operation['operationId']}']").count() == 1, operation["operationId"]
    send = page.locator("#send")
    assert "POST" in send.inner_text() and "/v1/send" in send.inner_text()
    assert "message_too_long" in send.inner_text()  # error codes are listed
    assert page.locator("#schema-SendRequest").count() == 1
    rendered = page.get_by_role("main").inner_text()
    assert "[object" not in rendered and "undefined" not in rendered
    assert "at most 64 characters" in page.locator("#register_device").inner_text()
    assert f"{len(operations)} routes" in page.get_by_role("status").inner_text()
    assert watch.problems() == []

    page.get_by_label("Filter routes").fill("revoke token")
    visible = page.locator(".operation:visible")
    assert visible.count() >= 1
    assert all("revoke" in text.lower() for text in visible.all_inner_texts())
    assert page.locator("#send").is_hidden()
    page.get_by_label("Filter routes").fill("")
    assert page.locator(".operation:visible").count() == len(operations)


def test_the_docs_say_readably_when_the_document_cannot_be_loaded(
    live_server: str, context: BrowserContext
) -> None:
    page = context.new_page()
    page.route("**/openapi.json", lambda route: route.fulfill(status=503, body="down"))
    page.goto(live_server + "/docs")
    error = page.locator("#docs-error")
    error.wait_for(timeout=10_000)
    text = error.inner_text()
    assert "could not be loaded" in text and "503" in text
    assert "{" not in text and "error" not in text.split("\n", 1)[1].lower()


def test_an_unknown_page_under_the_app_is_readable_and_an_unknown_path_is_json(
    live_server: str, context: BrowserContext
) -> None:
    page = context.new_page()
    watch = watched(page, live_server)
    response = page.goto(live_server + "/app/no-such-page")
    assert response is not None and response.status == 404
    assert page.get_by_role("heading", level=1).inner_text() == "Page not found"
    assert page.get_by_role("link", name="Open the web app").get_attribute("href") == "/app/"
    assert watch.csp_violations() == [] and watch.foreign_requests() == [] and watch.page_errors == []

    response = page.goto(live_server + "/no-such-page")
    assert response is not None and response.status == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}


def test_the_web_app_shell_is_installable(live_server: str, chromium: BrowserType, tmp_path: Path) -> None:
    # A persistent profile: Chromium does not offer installation in a private (incognito) one.
    profile = chromium.launch_persistent_context(
        str(tmp_path / "profile"), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
    )
    try:
        page = profile.new_page()
        watch = watched(page, live_server)
        page.goto(live_server + "/app/")
        page.evaluate("navigator.serviceWorker.ready")
        devtools = profile.new_cdp_session(page)
        manifest = devtools.send("Page.getAppManifest")
        assert manifest["url"] == live_server + "/app/manifest.webmanifest"
        assert manifest["errors"] == []
        assert devtools.send("Page.getInstallabilityErrors")["installabilityErrors"] == []
        page.get_by_role("status").filter(has_text="everything the web app needs").wait_for(timeout=5_000)
        for icon in ("icon-192.png", "icon-512.png", "maskable-512.png"):
            assert (
                httpx.get(f"{live_server}/app/icons/{icon}", timeout=10).headers["content-type"]
                == "image/png"
            )
        assert watch.problems() == []
    finally:
        profile.close()
