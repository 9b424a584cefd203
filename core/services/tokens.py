"""Sender tokens: minted, listed and revoked from the phone; only their SHA-256 is stored.

Create and revoke send a ``token_update`` envelope from ``server`` to every other device of the
account. A revoked row stays as the revocation audit until ``sweep_expired`` removes it (30 days).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import col, func, select

from core.credentials import sender_token_tag
from core.domain import payloads
from core.domain.notification import PRIORITIES
from core.domain.secrets import digest, new_prefixed_id, new_sender_token
from core.errors import RelayError
from core.principal import SENDER_TOKEN_SCOPES, Principal
from core.runtime.events import CredentialsRevoked
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.delivery import send_server_message
from core.services.devices import own_device
from core.store.tables import Device, SenderToken


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str = Field(min_length=1, max_length=64)
    scope: str | None = Field(
        default=None, max_length=32, json_schema_extra={"enum": [*sorted(SENDER_TOKEN_SCOPES), None]}
    )
    priority_cap: str = Field(default="urgent", max_length=16, json_schema_extra={"enum": list(PRIORITIES)})
    format: Literal["relaybox", "pushover"] = Field(
        default="relaybox",
        description="relaybox: rfk_live_ + 32 characters (secret scanners know it); pushover: 30 "
        "letters and digits, the shape Pushover client libraries that check tokens insist on",
    )


class TokenOut(BaseModel):
    id: str
    label: str
    scope: str | None = None  # omitted when None, like every None in a response
    priority_cap: str
    created_at: int
    last_used_at: int | None = None
    revoked_at: int | None = None


class TokenCreated(TokenOut):
    token: str = Field(description="The plaintext token; shown once, never again")


class TokenList(BaseModel):
    tokens: list[TokenOut]


def create_sender_token(tx: Tx, principal: Principal, *, body: TokenCreate) -> TokenCreated:
    """Mint a sender token (phone only): ``rfk_live_`` + 32 characters, or in the Pushover shape.
    ``phone:control`` is the only scope a token may hold."""
    phone = own_device(tx, principal)
    principal.require_phone()
    if body.scope is not None and body.scope not in SENDER_TOKEN_SCOPES:
        raise RelayError("invalid_scope", details={"allowed": list(SENDER_TOKEN_SCOPES)})
    if body.priority_cap not in PRIORITIES:
        raise RelayError("invalid_priority")
    active = tx.session.exec(
        select(func.count())
        .select_from(SenderToken)
        .where(col(SenderToken.account_id) == phone.account_id, col(SenderToken.revoked_at).is_(None))
    ).one()
    if active >= tx.settings.max_tokens_per_account:
        raise RelayError("limit_reached", details={"max": tx.settings.max_tokens_per_account})
    plaintext = new_sender_token(pushover_shape=body.format == "pushover")
    row = SenderToken(
        token_id=new_prefixed_id("tok"),
        account_id=phone.account_id,
        token_hash=digest(plaintext),
        label=body.label,
        scope=body.scope,
        priority_cap=body.priority_cap,
        created_at=tx.now(),
        created_by_device_id=phone.device_id,
    )
    tx.session.add(row)
    tx.session.flush()
    _announce(tx, phone)
    return TokenCreated(**_out(row).model_dump(), token=plaintext)


@read_only
def list_sender_tokens(tx: Tx, principal: Principal) -> TokenList:
    """The account's active tokens, for any of its devices; never a plaintext."""
    device = own_device(tx, principal)
    return TokenList(tokens=[_out(row) for row in _active(tx, device.account_id)])


def revoke_sender_token(tx: Tx, principal: Principal, *, token_id: str) -> TokenOut:
    """Revoke a token (phone only); later requests with it get 401 ``invalid_token``. Idempotent."""
    phone = own_device(tx, principal)
    principal.require_phone()
    row = tx.session.get(SenderToken, token_id)
    if row is None or row.account_id != phone.account_id:
        raise RelayError("not_found")
    if row.revoked_at is None:
        row.revoked_at = tx.now()
        row.revoked_by_device_id = phone.device_id
        tx.session.add(row)
        tx.emit(CredentialsRevoked((sender_token_tag(row.token_id),)))  # every replica forgets it
        tx.session.flush()
        _announce(tx, phone)
    return _out(row)


def _active(tx: Tx, account_id: str) -> list[SenderToken]:
    return list(
        tx.session.exec(
            select(SenderToken)
            .where(col(SenderToken.account_id) == account_id, col(SenderToken.revoked_at).is_(None))
            .order_by(col(SenderToken.created_at), col(SenderToken.token_id))
        ).all()
    )


def _announce(tx: Tx, actor: Device) -> None:
    """``token_update`` to every other device of the account, encrypted to each."""
    summaries = [
        payloads.TokenSummary(t.token_id, t.label, t.scope, t.priority_cap, t.created_at)
        for t in _active(tx, actor.account_id)
    ]
    payload = payloads.token_update(summaries, at=tx.now())
    devices = tx.session.exec(
        select(Device).where(
            col(Device.account_id) == actor.account_id, col(Device.device_id) != actor.device_id
        )
    ).all()
    for device in devices:
        send_server_message(
            tx,
            device,
            payload,
            msg_id=new_prefixed_id("msg"),
            push_type=None,
            ttl_s=86_400,
            high_priority=False,
        )


def _out(row: SenderToken) -> TokenOut:
    return TokenOut(
        id=row.token_id,
        label=row.label,
        scope=row.scope,
        priority_cap=row.priority_cap,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )
