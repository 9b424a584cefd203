"""How the web pages' files are served: content types, cache policy, security headers, ETag
revalidation, and the not-found answers (JSON for unknown paths, HTML under /app/, the plain 404s
whose contracts say so)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.helpers import error_code
from webapp.assets import CONTENT_SECURITY_POLICY, IMMUTABLE, REVALIDATE, WORKER_CONTENT_SECURITY_POLICY

CSP_DIRECTIVES = [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "worker-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
]

# One file of each kind: path → (content type, cache policy)
KINDS = {
    "/": ("text/html; charset=utf-8", REVALIDATE),
    "/docs": ("text/html; charset=utf-8", REVALIDATE),
    "/app/": ("text/html; charset=utf-8", REVALIDATE),
    "/app/manifest.webmanifest": ("application/manifest+json", REVALIDATE),
    "/app/sw.js": ("text/javascript; charset=utf-8", REVALIDATE),
    "/app/app.js": ("text/javascript; charset=utf-8", REVALIDATE),
    "/app/icons/icon-192.png": ("image/png", REVALIDATE),
    "/static/site.css": ("text/css; charset=utf-8", REVALIDATE),
    "/static/relaybox-wire.js": ("text/javascript; charset=utf-8", REVALIDATE),
    "/static/icon.svg": ("image/svg+xml", REVALIDATE),
    "/static/vendor/tweetnacl-1.0.3/nacl-fast.js": ("text/javascript; charset=utf-8", IMMUTABLE),
    "/static/vendor/noble-ciphers-2.4.0/chacha.js": ("text/javascript; charset=utf-8", IMMUTABLE),
    "/static/vendor/noble-hashes-2.4.0/LICENSE": ("text/plain; charset=utf-8", IMMUTABLE),
}


@pytest.mark.parametrize("path", list(KINDS))
def test_each_kind_of_file_has_its_type_cache_policy_and_the_security_headers(
    client: TestClient, path: str
) -> None:
    response = client.get(path)
    content_type, cache_control = KINDS[path]
    assert response.status_code == 200
    assert response.headers["content-type"] == content_type
    assert response.headers["cache-control"] == cache_control
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-frame-options"] == "DENY"
    if path == "/app/sw.js":
        assert response.headers["content-security-policy"] == WORKER_CONTENT_SECURITY_POLICY
        return
    policy = [part.strip() for part in response.headers["content-security-policy"].split(";")]
    assert all(directive in policy for directive in CSP_DIRECTIVES), policy
    assert not any("unsafe" in part or "http" in part for part in policy), policy


def test_only_the_service_worker_may_connect_elsewhere_and_in_nothing_else_does_it_differ() -> None:
    """The worker makes the request of a notification button the person tapped (docs/protocol.md);
    a page's policy keeps every connection to its own origin."""
    page = CONTENT_SECURITY_POLICY.split("; ")
    worker = WORKER_CONTENT_SECURITY_POLICY.split("; ")
    assert [a for a, b in zip(page, worker, strict=True) if a != b] == ["connect-src 'self'"]
    assert [b for a, b in zip(page, worker, strict=True) if a != b] == ["connect-src 'self' http: https:"]


def test_the_policy_allows_nothing_inline_and_no_other_origin() -> None:
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert "'unsafe-eval'" not in CONTENT_SECURITY_POLICY
    assert "*" not in CONTENT_SECURITY_POLICY and "data:" not in CONTENT_SECURITY_POLICY


def test_a_current_copy_is_revalidated_with_its_etag(client: TestClient) -> None:
    first = client.get("/app/sw.js")
    etag = first.headers["etag"]
    again = client.get("/app/sw.js", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag and again.headers["cache-control"] == REVALIDATE
    stale = client.get("/app/sw.js", headers={"If-None-Match": '"something-else"'})
    assert stale.status_code == 200 and stale.content == first.content


def test_head_answers_the_headers_without_the_body(client: TestClient) -> None:
    head = client.head("/static/site.css")
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == len(client.get("/static/site.css").content)


UNKNOWN_PATHS = ["/nowhere", "/static/nowhere.js", "/oauth/nowhere", "/docs/x", "/v1"]


@pytest.mark.parametrize("path", UNKNOWN_PATHS)
def test_an_unknown_path_is_a_json_404_in_the_standard_shape(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}


@pytest.mark.parametrize("path", ["/v1/nowhere", "/v1/documents", "/v1/devices/me/nowhere"])
def test_an_unknown_api_route_is_a_bodiless_404_like_the_disabled_documents_route(
    client: TestClient, path: str
) -> None:
    for method in ("GET", "POST", "DELETE"):
        response = client.request(method, path)
        assert (response.status_code, response.content) == (404, b"")


def test_an_unknown_page_under_the_app_is_a_readable_html_404(client: TestClient) -> None:
    response = client.get("/app/settings/nowhere")
    assert response.status_code == 404
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert "Page not found" in response.text and "{" not in response.text
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


def test_the_app_without_its_slash_redirects_to_it(client: TestClient) -> None:
    response = client.get("/app", follow_redirects=False)
    assert response.status_code in (307, 308)
    assert response.headers["location"].endswith("/app/")


def test_a_method_the_files_do_not_take_is_a_json_405(client: TestClient) -> None:
    # POST and PUT at "/" are ntfy's JSON publish (core/api/ntfy.py): PATCH stands for them there.
    for method, path in (("PATCH", "/"), ("POST", "/static/site.css"), ("POST", "/app/sw.js")):
        response = client.request(method, path)
        assert response.status_code == 405 and error_code(response) == "method_not_allowed"
