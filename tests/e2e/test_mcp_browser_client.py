"""An MCP client running in a browser page on another loopback origin (as the MCP Inspector's direct
mode does: its page on localhost, the server on 127.0.0.1) connects with nothing but ``fetch``:
discovery from the 401's WWW-Authenticate, dynamic registration, the authorization code with PKCE
(the consent approved on the phone, as a person does), the token, then initialize and tools/list
with the session id read from a response header. Real Chromium enforces CORS at every step."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import httpx2
import pytest
from playwright.sync_api import Browser

from demo.oauth_client import CALLBACK, ConsentBrowser
from tests.browser import watched
from tests.e2e.conftest import RelayboxServer
from tests.helpers import FakeDevice, register_phone
from tests.reliability.instances import free_port

pytestmark = pytest.mark.e2e


class BlankPage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>an MCP client page</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        return


@contextmanager
def page_origin() -> Iterator[str]:
    """A page of its own on loopback, named ``localhost`` (the server is ``127.0.0.1``): another
    origin, in the same (loopback) address space, as the Inspector's page is."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BlankPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://localhost:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


START = """
async ({server, redirectUri}) => {
  const b64url = (bytes) => btoa(String.fromCharCode(...bytes))
    .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
  const json = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"};
  const hello = {jsonrpc: "2.0", id: 1, method: "initialize",
    params: {protocolVersion: "2025-06-18", capabilities: {}, clientInfo: {name: "page", version: "1"}}};
  const refused = await fetch(server + "/mcp", {method: "POST", headers: json, body: JSON.stringify(hello)});
  const challenge = refused.headers.get("WWW-Authenticate") || "";
  const prmUrl = /resource_metadata="([^"]+)"/.exec(challenge)[1];
  const prm = await (await fetch(prmUrl)).json();
  const issuer = prm.authorization_servers[0].replace(/\\/$/, "");
  const meta = await (await fetch(issuer + "/.well-known/oauth-authorization-server")).json();
  const registered = await fetch(meta.registration_endpoint, {method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({client_name: "Browser page", redirect_uris: [redirectUri],
                          token_endpoint_auth_method: "none"})});
  const client = await registered.json();
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  const query = new URLSearchParams({response_type: "code", client_id: client.client_id,
    redirect_uri: redirectUri, code_challenge: b64url(new Uint8Array(digest)),
    code_challenge_method: "S256", state: "page-1", resource: prm.resource,
    scope: prm.scopes_supported.filter((s) => s !== "files:send").join(" ")});
  window.__flow = {server, redirectUri, verifier, client: client.client_id,
                   token: meta.token_endpoint, resource: prm.resource, hello};
  return {status: refused.status, challenge, registered: registered.status,
          authorize: meta.authorization_endpoint + "?" + query};
}
"""

FINISH = """
async ({code}) => {
  const f = window.__flow;
  const issued = await fetch(f.token, {method: "POST",
    headers: {"Content-Type": "application/x-www-form-urlencoded"},
    body: new URLSearchParams({grant_type: "authorization_code", code, redirect_uri: f.redirectUri,
                               client_id: f.client, code_verifier: f.verifier, resource: f.resource})});
  const tokens = await issued.json();
  const headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "Authorization": "Bearer " + tokens.access_token};
  const post = (body, more) => fetch(f.server + "/mcp",
    {method: "POST", headers: {...headers, ...more}, body: JSON.stringify(body)});
  const opened = await post(f.hello, {});
  await opened.text();
  const session = opened.headers.get("Mcp-Session-Id");
  const version = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"};
  const ready = await post({jsonrpc: "2.0", method: "notifications/initialized"}, version);
  const listed = await post({jsonrpc: "2.0", id: 2, method: "tools/list"}, version);
  return {token: issued.status, opened: opened.status, session, ready: ready.status,
          listed: listed.status, tools: await listed.text()};
}
"""


def approve_on_phone(server: str, phone: FakeDevice, authorize_url: str) -> str:
    """The person's part: open the consent page, confirm its code on the phone, Allow. Returns the
    authorization code the page redirects with."""

    async def confirm(code: str) -> str:
        body = {"code": code, "public_key": phone.public_b64, "intent": "connector"}
        async with httpx2.AsyncClient(base_url=server) as http:
            answer = await http.post("/v1/pair/confirm", json=body, headers=phone.auth)
        assert answer.status_code == 200, answer.text
        return answer.text

    async def approve() -> str:
        async with httpx2.AsyncClient(timeout=30) as person:
            consent = ConsentBrowser(server, person, confirm)
            await consent.open(authorize_url)
            return consent.locations[-1]

    with ThreadPoolExecutor(1) as aside:  # away from the sync Playwright API's event loop
        location = aside.submit(anyio.run, approve).result(60)
    assert location.startswith(CALLBACK), location
    return parse_qs(urlsplit(location).query)["code"][0]


def test_a_browser_page_on_another_loopback_origin_connects_through_cors(
    tmp_path: Path, browser: Browser
) -> None:
    server = RelayboxServer(tmp_path, port=free_port())  # its public URL is the one it listens on
    live_server = server.wait_until_ready()
    with httpx.Client(base_url=live_server, timeout=10) as http:
        phone = register_phone(http)
    context = browser.new_context()
    try:
        with server, page_origin() as origin:
            page = context.new_page()
            watch = watched(page, origin)
            page.goto(f"{origin}/")
            started = page.evaluate(START, {"server": live_server, "redirectUri": CALLBACK})
            assert started["status"] == 401 and "resource_metadata=" in started["challenge"], started
            assert started["registered"] == 201, started
            code = approve_on_phone(live_server, phone, started["authorize"])
            finished = page.evaluate(FINISH, {"code": code})
            problems = [p for p in watch.console_problems if "CORS" in p or "address space" in p]
    finally:
        context.close()
    assert finished["token"] == 200 and finished["opened"] == 200, finished
    assert finished["session"], "the page could not read Mcp-Session-Id"
    assert finished["ready"] == 202 and finished["listed"] == 200, finished
    tools = set(re.findall(r'"name":\s*"([a-z_]+)"', finished["tools"]))
    assert {"send_notification", "request_approval", "list_devices"} <= tools, finished["tools"]
    assert not problems, problems
