"""Authentication: a bearer credential becomes a Principal, before any body is parsed.

Failures use the flat shape: 401 ``missing_token`` (no ``Authorization: Bearer``) or 401
``invalid_token`` (wrong format, unknown, or revoked). Lookups go by SHA-256 digest and the
stored digest is compared again in constant time; ``authenticated`` goes through the one
verified-credential cache (``core.credentials``).
"""

from __future__ import annotations

import enum
import functools

from sqlalchemy import update
from sqlmodel import col, select

from core.credentials import Verification, device_tag, sender_token_tag, use_due
from core.domain.secrets import digest, digests_match, is_device_credential, is_sender_token
from core.errors import RelayError
from core.principal import Principal, PrincipalKind
from core.runtime.core import Core
from core.runtime.events import Deferred
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.limits import owe_ip_peek, peek_ip, peek_ip_outside_transaction
from core.store.tables import Device, PairingCode, SenderToken


class Accept(enum.Flag):
    SENDER_TOKEN = enum.auto()
    DEVICE = enum.auto()
    PENDING_DEVICE = enum.auto()


def bearer_from_header(header: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header, or ``missing_token``."""
    if not header:
        raise RelayError("missing_token")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise RelayError("missing_token")
    return token.strip()


async def authenticated(
    core: Core, principal: Principal, *, token: str, accept: Accept, limit_ip: bool = False
) -> Principal:
    """``authenticate`` through the verified-credential cache (``CredentialCache.cached``): a
    device credential or sender token verified a moment ago is not read again (revoking or
    unpairing drops it at once, on every replica). ``limit_ip``: the IP's budget is checked before
    the token is looked up in the store; a credential the cache holds is not looked up, and its
    request owes the peek instead (``core.services.limits.settle_ip_peek``): its route (``Endpoint.serve``)
    settles it should the request fail before its send-class charge, which covers the IP layers."""
    ip = principal.label or "unknown"
    owe_ip_peek(ip if limit_ip else None)
    kinds = _kinds(accept)

    async def verify() -> Verification[Principal]:
        if limit_ip:
            owe_ip_peek(None)
            await peek_ip_outside_transaction(core, ip)
        found, used_at = await core.run(_resolve, principal, token=token, accept=accept)  # IP peeked above
        if found.pending:  # a computer still pairing: answered, never kept
            return Verification(found)
        kind, row_id, tag = (
            ("device", found.device_id, device_tag(found.device_id))
            if found.kind is PrincipalKind.DEVICE and found.device_id
            else ("token", found.token_id or "", sender_token_tag(found.token_id or ""))
        )
        return Verification(
            found, tags=(tag,), note_use=functools.partial(note_use, kind, row_id), used_at=used_at
        )

    found = await core.credentials.cached(
        Principal, token, verify, defer=core.defer, accept=lambda cached: cached.kind in kinds
    )
    if found is None:  # never: the store answers a principal or raises
        raise RelayError("invalid_token")
    return found


@functools.cache  # a handful of Accept values; Flag arithmetic costs microseconds a request
def _kinds(accept: Accept) -> frozenset[PrincipalKind]:
    kinds: set[PrincipalKind] = set()
    if Accept.SENDER_TOKEN in accept:
        kinds.add(PrincipalKind.SENDER_TOKEN)
    if (Accept.DEVICE | Accept.PENDING_DEVICE) & accept:
        kinds.add(PrincipalKind.DEVICE)
    return frozenset(kinds)


@read_only
def authenticate(
    tx: Tx, principal: Principal, *, token: str, accept: Accept, limit_ip: bool = False
) -> Principal:
    """Resolve ``token`` to the principal it stands for (``principal`` is the anonymous caller,
    whose label is its IP). ``limit_ip``: refuse an IP over its send-class budget first."""
    return _resolve(tx, principal, token=token, accept=accept, limit_ip=limit_ip)[0]


@read_only
def _resolve(
    tx: Tx, principal: Principal, *, token: str, accept: Accept, limit_ip: bool = False
) -> tuple[Principal, int | None]:
    """``authenticate``, and when the credential's last use is noted as of now."""
    assert principal.kind is PrincipalKind.ANONYMOUS
    if limit_ip:
        peek_ip(tx, principal.label or "unknown")
    if Accept.SENDER_TOKEN in accept and is_sender_token(token):
        return _sender_token(tx, token)
    if (Accept.DEVICE | Accept.PENDING_DEVICE) & accept and is_device_credential(token):
        return _device(tx, token, allow_pending=Accept.PENDING_DEVICE in accept)
    raise RelayError("invalid_token")


def _sender_token(tx: Tx, token: str) -> tuple[Principal, int | None]:
    wanted = digest(token)
    row = tx.session.exec(select(SenderToken).where(col(SenderToken.token_hash) == wanted)).first()
    if row is None or row.revoked_at is not None or not digests_match(row.token_hash, wanted):
        raise RelayError("invalid_token")
    principal = Principal.sender_token(
        account_id=row.account_id,
        token_id=row.token_id,
        label=row.label,
        scope=row.scope,
        priority_cap=row.priority_cap,
    )
    return principal, _note_use(tx, "token", row.token_id, row.last_used_at)


def _device(tx: Tx, token: str, *, allow_pending: bool) -> tuple[Principal, int | None]:
    wanted = digest(token)
    device = tx.session.exec(select(Device).where(col(Device.credential_hash) == wanted)).first()
    if device is not None and digests_match(device.credential_hash, wanted):
        principal = Principal.device(
            account_id=device.account_id, device_id=device.device_id, surface_kind=device.surface_kind
        )
        return principal, _note_use(tx, "device", device.device_id, device.last_seen_at)
    if allow_pending:
        code = tx.session.exec(select(PairingCode).where(col(PairingCode.credential_hash) == wanted)).first()
        if code is not None and digests_match(code.credential_hash, wanted):
            pending = Principal(
                kind=PrincipalKind.DEVICE,
                account_id="",
                device_id=code.device_id,
                surface_kind=code.surface_kind,
                pending=True,
            )
            return pending, None
    raise RelayError("invalid_token")


def _note_use(tx: Tx, kind: str, row_id: str, last: int | None) -> int | None:
    """Ask for the last-used time to be written later, at most once a minute per credential;
    returns the last use as noted now."""
    now = tx.now()
    if use_due(last, now):
        tx.emit(note_use(kind, row_id, now))
        return now
    return last


def note_use(kind: str, row_id: str, at: int) -> Deferred:
    return Deferred(record_use, {"kind": kind, "row_id": row_id, "at": at})


def record_use(tx: Tx, principal: Principal, *, kind: str, row_id: str, at: int) -> None:
    """System bookkeeping: a token's ``last_used_at`` or a device's ``last_seen_at``."""
    if principal.kind is not PrincipalKind.SYSTEM:
        raise RelayError("forbidden")
    if kind == "token":
        tx.session.execute(
            update(SenderToken).where(col(SenderToken.token_id) == row_id).values(last_used_at=at)
        )
    else:
        tx.session.execute(update(Device).where(col(Device.device_id) == row_id).values(last_seen_at=at))
