"""Who is calling: a sender token, a connector grant, or a device. Every core operation takes one."""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

from core.errors import RelayError


class PrincipalKind(enum.Enum):
    SENDER_TOKEN = "sender_token"
    CONNECTOR_GRANT = "connector_grant"
    DEVICE = "device"
    SYSTEM = "system"  # the server acting on its own behalf (clean-ups, push bookkeeping)
    ANONYMOUS = "anonymous"  # an unauthenticated caller; ``label`` holds its IP


# Scopes named by the spec and decisions.md.
SCOPE_NOTIFICATIONS_SEND = "notifications:send"
SCOPE_DEVICES_READ = "devices:read"
SCOPE_REMINDERS_WRITE = "reminders:write"
SCOPE_APPROVALS_WRITE = "approvals:write"
SCOPE_PHONE_CONTROL = "phone:control"
SCOPE_FILES_SEND = "files:send"

CONNECTOR_SCOPES = (
    SCOPE_NOTIFICATIONS_SEND,
    SCOPE_DEVICES_READ,
    SCOPE_REMINDERS_WRITE,
    SCOPE_APPROVALS_WRITE,
    SCOPE_PHONE_CONTROL,
    SCOPE_FILES_SEND,
)
# The only scope a sender token may hold; files:send is connector-only.
SENDER_TOKEN_SCOPES = (SCOPE_PHONE_CONTROL,)
# What a sender token can do without any optional scope.
SENDER_TOKEN_BASE_SCOPES = (
    SCOPE_NOTIFICATIONS_SEND,
    SCOPE_DEVICES_READ,
    SCOPE_REMINDERS_WRITE,
    SCOPE_APPROVALS_WRITE,
)


@dataclass(frozen=True, slots=True)
class Principal:
    kind: PrincipalKind
    account_id: str
    scopes: frozenset[str] = frozenset()
    token_id: str | None = None  # sender token
    label: str | None = None  # sender token label
    priority_cap: str | None = None  # sender token
    client_id: str | None = None  # connector grant
    grant_id: str | None = None  # connector grant
    device_id: str | None = None  # device
    surface_kind: str | None = None  # device
    pending: bool = False  # a computer whose pairing code the phone has not confirmed yet

    @classmethod
    def sender_token(
        cls, *, account_id: str, token_id: str, label: str, scope: str | None, priority_cap: str
    ) -> Principal:
        scopes = set(SENDER_TOKEN_BASE_SCOPES)
        if scope:
            scopes.add(scope)
        return cls(
            kind=PrincipalKind.SENDER_TOKEN,
            account_id=account_id,
            scopes=frozenset(scopes),
            token_id=token_id,
            label=label,
            priority_cap=priority_cap,
        )

    @classmethod
    def connector_grant(
        cls, *, account_id: str, client_id: str, grant_id: str, scopes: frozenset[str]
    ) -> Principal:
        return cls(
            kind=PrincipalKind.CONNECTOR_GRANT,
            account_id=account_id,
            scopes=scopes,
            client_id=client_id,
            grant_id=grant_id,
        )

    @classmethod
    def device(cls, *, account_id: str, device_id: str, surface_kind: str) -> Principal:
        return cls(
            kind=PrincipalKind.DEVICE,
            account_id=account_id,
            device_id=device_id,
            surface_kind=surface_kind,
        )

    @classmethod
    def system(cls) -> Principal:
        return cls(kind=PrincipalKind.SYSTEM, account_id="")

    @staticmethod
    def anonymous(ip: str) -> Principal:
        """An unauthenticated caller of a public route (pair/init, phone registration); every
        request starts as one, so the few addresses seen lately share theirs (it is immutable)."""
        return _anonymous(ip)

    @property
    def owner_key(self) -> str:
        """Who owns what this principal creates (interactions): one token, one grant or one device."""
        if self.kind is PrincipalKind.SENDER_TOKEN:
            return f"token:{self.token_id}"
        if self.kind is PrincipalKind.CONNECTOR_GRANT:
            return f"grant:{self.grant_id}"
        return f"device:{self.device_id}"

    @property
    def sender_id(self) -> str:
        """The id that names this sender to the devices: its token's (``tok_…``), its connector
        grant's (``grt_…``) or its device's; a notification's sequence is qualified by it."""
        if self.kind is PrincipalKind.SENDER_TOKEN:
            return self.token_id or ""
        if self.kind is PrincipalKind.CONNECTOR_GRANT:
            return self.grant_id or ""
        return self.device_id or ""

    @property
    def is_phone(self) -> bool:
        return self.kind is PrincipalKind.DEVICE and self.surface_kind == "phone"

    def require_scope(self, scope: str) -> None:
        """403 ``insufficient_scope`` unless this principal holds ``scope``."""
        if scope not in self.scopes:
            raise RelayError("insufficient_scope", details={"required_scope": scope})

    def require_device(self, *, allow_pending: bool = False) -> str:
        if self.kind is not PrincipalKind.DEVICE or self.device_id is None:
            raise RelayError("forbidden", "Only a device credential can use this route.")
        if self.pending and not allow_pending:
            raise RelayError("forbidden", "Finish pairing before using this route.")
        return self.device_id

    def require_phone(self) -> str:
        device_id = self.require_device()
        if not self.is_phone:
            raise RelayError("not_a_phone")
        return device_id


@functools.lru_cache(maxsize=1024)
def _anonymous(ip: str) -> Principal:
    return Principal(kind=PrincipalKind.ANONYMOUS, account_id="", label=ip)
