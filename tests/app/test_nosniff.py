"""Every response says ``X-Content-Type-Options: nosniff``, once: so no browser reads an error, a
page, a stream or an object the embedded store serves (bytes an uploader chose, declared
``application/octet-stream``) as anything but its declared type. Over a real socket (uvicorn), on
each kind of path ``app.front`` serves, errors and preflights included."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.assembly import create_app
from core.runtime.core import Core
from tests.helpers import create_token, pair_computer, register_phone
from tests.live import serve_in_thread

HTML = b"<!doctype html><script>alert(document.cookie)</script>"


async def broken(_request: Request) -> Response:
    raise RuntimeError("the handler broke")


@pytest.fixture
def http(core: Core) -> Iterator[httpx.Client]:
    app = create_app(core=core)
    app.router.routes.append(Route("/v1/test-broken", broken, methods=["GET"]))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def local(url: str) -> str:
    """The path and query of an embedded-store URL (named for the configured public URL)."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def nosniff(response: httpx.Response) -> bool:
    return response.headers.get_list("x-content-type-options") == ["nosniff"]


def test_every_kind_of_response_carries_nosniff_once(http: httpx.Client) -> None:
    phone = register_phone(http)
    computer = pair_computer(http, phone)
    token = create_token(http, phone)["token"]
    responses = {
        "json": http.get("/healthz"),
        "openapi": http.get("/openapi.json"),
        "page": http.get("/"),
        "static": http.get("/app/"),
        "401 flat": http.post("/v1/send", json={"message": "m"}),
        "400": http.post("/v1/send", json={}, headers={"Authorization": f"Bearer {token}"}),
        "404": http.get("/no/such/path"),
        "405": http.delete("/healthz"),
        "413": http.post("/v1/devices", content=b"x" * 200_000, headers={"Content-Type": "application/json"}),
        "500": http.get("/v1/test-broken"),
        "oauth metadata": http.get("/.well-known/oauth-authorization-server"),
        "mcp 401": http.post("/mcp", json={}),
        "mcp preflight": http.options(
            "/mcp",
            headers={"Origin": "https://claude.ai", "Access-Control-Request-Method": "POST"},
        ),
        "metrics": http.get("/metrics"),
    }
    with http.stream("GET", "/v1/sync", headers=computer.auth) as stream:
        responses["sse"] = stream
    for name, response in responses.items():
        assert nosniff(response), (name, response.status_code, response.headers)


def test_an_object_the_embedded_store_serves_is_not_sniffed(http: httpx.Client) -> None:
    phone = register_phone(http)
    computer = pair_computer(http, phone)
    opened = http.post(
        "/v1/transfers",
        json={"to": phone.device_id, "size": len(HTML), "chunk_size": len(HTML)},
        headers=computer.auth,
    )
    assert opened.status_code == 201, opened.text
    transfer = opened.json()["transfer_id"]
    up = http.post(f"/v1/transfers/{transfer}/upload-urls", json={"indexes": [0]}, headers=computer.auth)
    put = http.put(local(up.json()["urls"][0]["url"]), content=HTML)
    assert put.status_code == 200 and nosniff(put)
    down = http.post(f"/v1/transfers/{transfer}/download-urls", json={"indexes": [0]}, headers=phone.auth)
    got = http.get(local(down.json()["urls"][0]["url"]))
    assert got.content == HTML
    assert got.headers["content-type"] == "application/octet-stream" and nosniff(got)
    forged = http.get(local(down.json()["urls"][0]["url"]) + "0")
    assert forged.status_code == 403 and nosniff(forged)
