"""The device routes of a relaybox server: registering a phone, pairing and sender tokens."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

from client.api import ApiError, RelayboxApi, without_none
from client.api_fields import Fields
from client.state import ClientError


@dataclass(frozen=True)
class Registration:
    device_id: str
    device_token: str = field(repr=False)
    account_id: str
    server_public_key: str


@dataclass(frozen=True)
class Invite:
    invite: str = field(repr=False)
    expires_at: int


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


class DeviceApi(RelayboxApi):
    """The device routes (registration, pairing, sender tokens)."""

    # Phone registration.

    def register_phone(
        self, *, public_key: str, name: str, app_build: int | None = None, invite: str | None = None
    ) -> Registration:
        """``POST /v1/devices``; ``invite``: what a server that takes phones by invite needs (403
        ``registration_closed`` without one, ``invalid_invite`` for a used or expired one)."""
        body = {
            "public_key": public_key,
            "device_type": "android",
            "surface_kind": "phone",
            "name": name,
            **without_none(app_build=app_build, invite=invite),
        }
        data = Fields(self._call("POST", "/v1/devices", body=body, auth=False, expect=201))
        return Registration(
            device_id=data.text("device_id"),
            device_token=data.text("device_token"),
            account_id=data.text("account_id"),
            server_public_key=data.text("server_public_key"),
        )

    def create_invite(self) -> Invite:
        """``POST /v1/invites`` (a phone's credential): a single-use invite for one more phone."""
        data = Fields(self._call("POST", "/v1/invites", expect=201))
        return Invite(invite=data.text("invite"), expires_at=data.integer("expires_at"))

    # Pairing.

    def pair_init(
        self, *, public_key: str, surface_kind: str, name: str = "", intent: str | None = None
    ) -> PairingStarted:
        body = {
            "public_key": public_key,
            "surface_kind": surface_kind,
            "name": name,
            **without_none(intent=intent),
        }
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
        self,
        *,
        label: str,
        scope: str | None = None,
        priority_cap: str | None = None,
        token_format: str | None = None,
    ) -> CreatedToken:
        body = {"label": label, **without_none(scope=scope, priority_cap=priority_cap, format=token_format)}
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
