"""A small typed HTTP client for the device routes of a relaybox server.

Every request has a timeout. Errors of either server shape (``{"error": {"code", "message"}}`` and
the flat ``{"error": "invalid_token"}``) and transport failures become ``ApiError``. Device
credentials travel only in the ``Authorization`` header; they are never logged, printed or put
into an exception or a ``repr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import quote

import httpx

from client.lifecycle import Closing
from client.state import ClientError

DEFAULT_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 5.0
USER_AGENT = "relaybox-client/0.1"

_FLAT_MESSAGES = {
    "missing_token": "the request carried no device credential",
    "invalid_token": "the server did not accept this device's credential (was the device removed?)",
}


class ApiError(ClientError):
    """The server answered with an error, or could not be reached (``status`` 0)."""

    def __init__(
        self, status: int, code: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(code, message)
        self.status = status
        self.details: dict[str, Any] = dict(details or {})


@dataclass(frozen=True)
class Registration:
    device_id: str
    device_token: str = field(repr=False)
    account_id: str
    server_public_key: str


@dataclass(frozen=True)
class PairingStarted:
    code: str
    expires_at: int
    device_id: str
    device_token: str = field(repr=False)
    server_public_key: str


@dataclass(frozen=True)
class PairingConfirmed:
    pair_id: str
    intent: str
    device_id: str
    name: str
    surface_kind: str
    public_key: str


@dataclass(frozen=True)
class PairingResult:
    """``pending`` (with ``expires_at``) or ``paired`` (with the phone's id, name and key)."""

    status: str
    expires_at: int | None
    phone_device_id: str | None
    phone_name: str | None
    phone_public_key: str | None
    pair_id: str | None


@dataclass(frozen=True)
class TokenInfo:
    id: str
    label: str
    scope: str | None
    priority_cap: str
    created_at: int
    last_used_at: int | None
    revoked_at: int | None


@dataclass(frozen=True)
class CreatedToken:
    info: TokenInfo
    token: str = field(repr=False)


@dataclass(frozen=True)
class DeviceInfo:
    device_id: str
    device_type: str
    surface_kind: str
    name: str
    public_key: str
    app_build: int | None
    push: str


def normalise_server(url: str) -> str:
    """Check that ``url`` is an http(s) origin (optionally with a path) and drop a trailing slash."""
    text = url.strip().rstrip("/")
    try:
        parsed = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ClientError("invalid_server", f"{url!r} is not a URL") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ClientError("invalid_server", f"{url!r} is not an http:// or https:// URL")
    if parsed.query or parsed.fragment or parsed.userinfo:
        raise ClientError("invalid_server", f"{url!r} must not carry credentials, a query or a fragment")
    return text


class RelayboxApi(Closing):
    """The device routes, over one ``httpx.Client``. Use as a context manager, or call ``close()``."""

    def __init__(
        self,
        server: str,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.server = normalise_server(server)
        self._token = token
        self._http = httpx.Client(
            base_url=self.server,
            timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_S)),
            transport=transport,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"RelayboxApi({self.server!r}, token={'set' if self._token else 'none'})"

    def close(self) -> None:
        self._http.close()

    # Phone registration and the device itself.

    def register_phone(self, *, public_key: str, name: str, app_build: int | None = None) -> Registration:
        body: dict[str, Any] = {
            "public_key": public_key,
            "device_type": "android",
            "surface_kind": "phone",
            "name": name,
        }
        if app_build is not None:
            body["app_build"] = app_build
        data = Fields(self._call("POST", "/v1/devices", body=body, auth=False, expect=201))
        return Registration(
            device_id=data.text("device_id"),
            device_token=data.text("device_token"),
            account_id=data.text("account_id"),
            server_public_key=data.text("server_public_key"),
        )

    def get_me(self) -> DeviceInfo:
        return _device(self._call("GET", "/v1/devices/me"))

    def update_me(self, *, name: str | None = None, app_build: int | None = None) -> DeviceInfo:
        body: dict[str, Any] = {}
        if name is not None:
            body["name"] = name
        if app_build is not None:
            body["app_build"] = app_build
        return _device(self._call("PATCH", "/v1/devices/me", body=body))

    def delete_me(self) -> None:
        self._call("DELETE", "/v1/devices/me", expect=204)

    # Pairing.

    def pair_init(
        self, *, public_key: str, surface_kind: str, name: str = "", intent: str | None = None
    ) -> PairingStarted:
        body: dict[str, Any] = {"public_key": public_key, "surface_kind": surface_kind, "name": name}
        if intent is not None:
            body["intent"] = intent
        data = Fields(self._call("POST", "/v1/pair/init", body=body, auth=False, expect=201))
        return PairingStarted(
            code=data.text("code"),
            expires_at=data.integer("expires_at"),
            device_id=data.text("device_id"),
            device_token=data.text("device_token"),
            server_public_key=data.text("server_public_key"),
        )

    def pair_confirm(self, *, code: str, public_key: str) -> PairingConfirmed:
        data = Fields(self._call("POST", "/v1/pair/confirm", body={"code": code, "public_key": public_key}))
        device = Fields(data.mapping("device"), "device")
        return PairingConfirmed(
            pair_id=data.text("pair_id"),
            intent=data.text("intent"),
            device_id=device.text("device_id"),
            name=device.text("name", allow_empty=True),
            surface_kind=device.text("surface_kind"),
            public_key=device.text("public_key"),
        )

    def pair_result(self) -> PairingResult:
        data = Fields(self._call("GET", "/v1/pair/result"))
        status = data.text("status")
        if status not in ("pending", "paired"):
            raise ApiError(200, "invalid_response", f"unknown pairing status {status!r}")
        paired = status == "paired"
        return PairingResult(
            status=status,
            expires_at=data.optional_integer("expires_at"),
            phone_device_id=data.text("phone_device_id") if paired else None,
            phone_name=data.text("phone_name", allow_empty=True) if paired else None,
            phone_public_key=data.text("phone_public_key") if paired else None,
            pair_id=data.text("pair_id") if paired else None,
        )

    # Sender tokens.

    def create_token(
        self, *, label: str, scope: str | None = None, priority_cap: str | None = None
    ) -> CreatedToken:
        body: dict[str, Any] = {"label": label}
        if scope is not None:
            body["scope"] = scope
        if priority_cap is not None:
            body["priority_cap"] = priority_cap
        raw = self._call("POST", "/v1/tokens", body=body, expect=201)
        return CreatedToken(info=_token(raw), token=Fields(raw).text("token"))

    def list_tokens(self) -> list[TokenInfo]:
        data = Fields(self._call("GET", "/v1/tokens"))
        items = data.value("tokens")
        if not isinstance(items, list):
            raise ApiError(200, "invalid_response", "tokens must be a list")
        return [_token(item) for item in items]

    def revoke_token(self, token_id: str) -> TokenInfo:
        if not token_id or token_id in (".", ".."):
            raise ClientError("invalid_token_id", f"{token_id!r} is not a token id")
        return _token(self._call("DELETE", f"/v1/tokens/{quote(token_id, safe='')}"))

    # Transport.

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        auth: bool = True,
        expect: int = 200,
    ) -> Any:
        headers: dict[str, str] = {}
        if auth:
            if not self._token:
                raise ClientError("missing_token", "this device has no credential; register or pair it first")
            headers["Authorization"] = f"Bearer {self._token}"
        try:
            response = self._http.request(method, path, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise ApiError(0, "timeout", f"{self.server} did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise ApiError(0, "connection_failed", f"cannot reach {self.server}: {exc}") from exc
        if response.status_code != expect:
            raise error_from_response(response)
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise ApiError(
                response.status_code, "invalid_response", "the server answered without JSON"
            ) from exc


def error_from_response(response: httpx.Response) -> ApiError:
    """Read either error shape; anything else becomes ``http_<status>`` with the reason phrase."""
    status = response.status_code
    code = f"http_{status}"
    message = response.reason_phrase or "request failed"
    details: Mapping[str, Any] | None = None
    try:
        body: object = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            code = _string_or(error.get("code"), code)
            message = _string_or(error.get("message"), message)
            raw_details = error.get("details")
            details = cast(Mapping[str, Any], raw_details) if isinstance(raw_details, dict) else None
        elif isinstance(error, str) and error:
            code = error
            message = _string_or(body.get("message"), _FLAT_MESSAGES.get(error, message))
    return ApiError(status, code, message, details)


def _string_or(value: object, fallback: str) -> str:
    return value if isinstance(value, str) and value else fallback


class Fields:
    """Typed reads from a JSON object of a response; a wrong shape is ``invalid_response``."""

    def __init__(self, raw: object, where: str = "response") -> None:
        if not isinstance(raw, dict):
            raise ApiError(200, "invalid_response", f"{where} is not a JSON object")
        self._raw = cast(dict[str, object], raw)
        self._where = where

    def value(self, key: str) -> object:
        return self._raw.get(key)

    def mapping(self, key: str) -> dict[str, object]:
        value = self._raw.get(key)
        if not isinstance(value, dict):
            raise self._bad(key, "an object")
        return cast(dict[str, object], value)

    def text(self, key: str, *, allow_empty: bool = False) -> str:
        value = self._raw.get(key)
        if not isinstance(value, str) or (not value and not allow_empty):
            raise self._bad(key, "a string")
        return value

    def optional_text(self, key: str) -> str | None:
        value = self._raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._bad(key, "a string or null")
        return value

    def integer(self, key: str) -> int:
        value = self._raw.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._bad(key, "an integer")
        return value

    def optional_integer(self, key: str) -> int | None:
        if self._raw.get(key) is None:
            return None
        return self.integer(key)

    def _bad(self, key: str, kind: str) -> ApiError:
        return ApiError(200, "invalid_response", f"{self._where}.{key} is not {kind}")


def _token(raw: object) -> TokenInfo:
    data = Fields(raw, "token")
    return TokenInfo(
        id=data.text("id"),
        label=data.text("label"),
        scope=data.optional_text("scope"),
        priority_cap=data.text("priority_cap"),
        created_at=data.integer("created_at"),
        last_used_at=data.optional_integer("last_used_at"),
        revoked_at=data.optional_integer("revoked_at"),
    )


def _device(raw: object) -> DeviceInfo:
    data = Fields(raw, "device")
    return DeviceInfo(
        device_id=data.text("device_id"),
        device_type=data.text("device_type"),
        surface_kind=data.text("surface_kind"),
        name=data.text("name", allow_empty=True),
        public_key=data.text("public_key"),
        app_build=data.optional_integer("app_build"),
        push=data.text("push"),
    )
