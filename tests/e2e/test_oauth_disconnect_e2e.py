"""A browser or client that leaves in the middle of the OAuth flow (a consent page closed while its
status poll waits or its decision is being sent, a token or registration request cut mid-body)
is an ordinary event: the real server logs no ERROR and no traceback, and serves the next caller."""

from __future__ import annotations

import base64
import hashlib
import socket
import time
from pathlib import Path

import httpx
import pytest

from demo.oauth_client import CALLBACK, ConsentPage, parse_consent_page
from tests.e2e.conftest import TRACEBACK, RelayboxServer
from tests.reliability.instances import free_port

pytestmark = pytest.mark.e2e


def open_consent_page(http: httpx.Client, url: str) -> ConsentPage:
    """Register a client ("Leaver") and open its consent page in ``http`` (its cookie kept there)."""
    client = http.post("/oauth/register", json={"client_name": "Leaver", "redirect_uris": [CALLBACK]}).json()
    scopes = http.get("/.well-known/oauth-protected-resource/mcp").json()["scopes_supported"]
    verifier = "v" * 50
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    params = {
        "response_type": "code",
        "client_id": client["client_id"],
        "redirect_uri": CALLBACK,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": " ".join(scope for scope in scopes if scope != "files:send"),
        "resource": f"{url}/mcp",
    }
    page = http.get("/oauth/authorize", params=params)
    assert page.status_code == 200, page.text
    return parse_consent_page(page.text)


def leave_after_sending(port: int, request: bytes, linger_s: float = 0.3) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        time.sleep(linger_s)


def test_leaving_mid_consent_logs_no_error_and_the_next_caller_is_served(tmp_path: Path) -> None:
    port = free_port()
    with RelayboxServer(tmp_path, port=port) as server:
        url = server.wait_until_ready()
        with httpx.Client(base_url=url, timeout=10) as http:
            session_id = open_consent_page(http, url).session_id
            cookie = "; ".join(f"{name}={value}" for name, value in http.cookies.items())
            head = f"Host: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n"
            form = "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 500\r\n\r\n"
            consent = f"/oauth/consent/{session_id}"
            leave_after_sending(port, f"GET {consent}/status?wait=10 HTTP/1.1\r\n{head}\r\n".encode())
            leave_after_sending(port, f"POST {consent}/decision HTTP/1.1\r\n{head}{form}csrf=x".encode())
            leave_after_sending(port, f"POST /oauth/token HTTP/1.1\r\n{head}{form}grant_type=x".encode())
            json_head = "Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{"
            leave_after_sending(port, f"POST /oauth/register HTTP/1.1\r\n{head}{json_head}".encode())
            time.sleep(1.0)
            assert http.get(f"/oauth/consent/{session_id}/status", params={"wait": 0}).status_code == 200
        server.stop()
    stderr = server.stderr()
    assert TRACEBACK not in stderr and "ERROR" not in stderr, stderr
