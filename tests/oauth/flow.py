"""Driving the authorization server the way a client and a browser do, over HTTP in process.

``connect`` runs the whole flow: register a client, open the consent page, confirm its code with
the phone, tick scopes, Allow, follow the redirect and exchange the code for tokens.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.helpers import FakeDevice, Http

ISSUER = "http://127.0.0.1:8787"  # the test settings' base URL
RESOURCE = f"{ISSUER}/mcp"
REDIRECT_URI = "http://127.0.0.1:3030/callback"
ALL_SCOPES = [
    "notifications:send",
    "devices:read",
    "reminders:write",
    "approvals:write",
    "phone:control",
    "files:send",
]


@dataclass
class Pkce:
    verifier: str = field(default_factory=lambda: secrets.token_urlsafe(48))

    @property
    def challenge(self) -> str:
        digest = hashlib.sha256(self.verifier.encode()).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


@dataclass(frozen=True)
class ConsentPage:
    session_id: str
    code: str
    csrf_token: str
    html: str

    @property
    def status_url(self) -> str:
        return f"/oauth/consent/{self.session_id}/status"

    @property
    def decision_url(self) -> str:
        return f"/oauth/consent/{self.session_id}/decision"


@dataclass
class Authorization:
    """One authorization request in the making."""

    client_id: str
    pkce: Pkce = field(default_factory=Pkce)
    state: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    redirect_uri: str = REDIRECT_URI
    scope: str | None = " ".join(ALL_SCOPES)
    resource: str | None = RESOURCE
    extra: dict[str, str] = field(default_factory=dict)

    def params(self, **overrides: str | None) -> dict[str, str]:
        values: dict[str, str | None] = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "state": self.state,
            "code_challenge": self.pkce.challenge,
            "code_challenge_method": "S256",
            "scope": self.scope,
            "resource": self.resource,
            **self.extra,
            **overrides,
        }
        return {key: value for key, value in values.items() if value is not None}

    def url(self, **overrides: str | None) -> str:
        return "/oauth/authorize?" + urlencode(self.params(**overrides))


def register_client(http: Http, **metadata: Any) -> dict[str, Any]:
    document = {
        "client_name": "Test Assistant",
        "redirect_uris": [REDIRECT_URI],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        **metadata,
    }
    response = http.post("/oauth/register", json=document)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def open_consent(http: Http, url: str) -> ConsentPage:
    response = http.get(url, follow_redirects=False)
    assert response.status_code == 200, response.text
    return parse_consent_page(response.text)


def parse_consent_page(html: str) -> ConsentPage:
    session = re.search(r'data-status-url="/oauth/consent/([^/"]+)/status"', html)
    code = re.search(r'<output id="code">(\d{3}) (\d{3})</output>', html)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert session and code and csrf, html
    return ConsentPage(session[1], code[1] + code[2], csrf[1], html)


def confirm_on_phone(http: Http, phone: FakeDevice, code: str, **extra: Any) -> Any:
    body = {"code": code, "public_key": phone.public_b64, **extra}
    return http.post("/v1/pair/confirm", json=body, headers=phone.auth)


def decide(http: Http, page: ConsentPage, decision: str = "allow", scopes: list[str] | None = None) -> Any:
    fields: list[tuple[str, str]] = [("csrf_token", page.csrf_token), ("decision", decision)]
    fields += [("scope", scope) for scope in (ALL_SCOPES if scopes is None else scopes)]
    return http.post(
        page.decision_url,
        content=urlencode(fields),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )


def redirect_params(response: Any) -> dict[str, str]:
    """The query of a redirect's Location, one value per name."""
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


def approve(
    http: Http, phone: FakeDevice, request: Authorization, scopes: list[str] | None = None
) -> dict[str, str]:
    """Consent page, phone confirmation, Allow: the redirect's parameters (code, state, iss)."""
    page = open_consent(http, request.url())
    confirmed = confirm_on_phone(http, phone, page.code)
    assert confirmed.status_code == 200, confirmed.text
    return redirect_params(decide(http, page, scopes=scopes))


def exchange(http: Http, request: Authorization, code: str, /, **overrides: str | None) -> Any:
    fields: dict[str, str | None] = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": request.redirect_uri,
        "client_id": request.client_id,
        "code_verifier": request.pkce.verifier,
        "resource": RESOURCE,
        **overrides,
    }
    return token_request(http, {key: value for key, value in fields.items() if value is not None})


def refresh(http: Http, client_id: str, refresh_token: str, /, **overrides: str | None) -> Any:
    fields: dict[str, str | None] = {
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        "client_id": client_id,
        **overrides,
    }
    return token_request(http, {key: value for key, value in fields.items() if value is not None})


def token_request(http: Http, fields: dict[str, str] | list[tuple[str, str]]) -> Any:
    return http.post(
        "/oauth/token",
        content=urlencode(fields),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )


def connect(
    http: Http, phone: FakeDevice, *, scopes: list[str] | None = None, **metadata: Any
) -> tuple[Authorization, dict[str, Any]]:
    """Register a client and complete the whole flow: the request and the token response."""
    client = register_client(http, **metadata)
    request = Authorization(client["client_id"])
    params = approve(http, phone, request, scopes=scopes)
    response = exchange(http, request, params["code"])
    assert response.status_code == 200, response.text
    tokens: dict[str, Any] = response.json()
    return request, tokens
