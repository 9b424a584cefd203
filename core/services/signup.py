"""Who may register a phone, and so start an account on this server (``RELAYBOX_REGISTRATION``).

- ``open``: anyone, at most ``open_registrations_per_hour`` phones an hour server-wide (429
  ``rate_limit_exceeded`` beyond, unless the phone brings a valid invite). The default when the
  public URL is on loopback: development and tests.
- ``invite``: the first phone ever registered claims the server (one ``server_claims`` row, whose
  primary key lets only one of two racing first phones have it); after that a phone needs an
  invite: 403 ``registration_closed`` without one, 403 ``invalid_invite`` for one that is wrong,
  used or expired. The default for any other public URL.
- ``closed``: no new phones (403 ``registration_closed``), invites or not.

``registration_closed`` names the mode (``details.registration``: ``invite`` or ``closed``), so a
new phone can ask for an invite, or say that none would help.

Invites are single use, live ``INVITE_TTL_S`` and are kept as SHA-256 digests only. A phone mints
them with its device credential (``POST /v1/invites``, at most ``MAX_LIVE_INVITES`` live per
account); the operator with ``relaybox invite``, on the server's database, for a server whose
phones are lost. Computers and AI assistants never register here: they join an account through its
phone (pairing and consent codes), so where registration is not open a stranger holds no
credential to guess those codes with.
"""

from __future__ import annotations

import secrets

from pydantic import BaseModel, Field
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from core.adapters.limits.base import LimitCheck
from core.domain.secrets import digest
from core.errors import RelayError
from core.principal import Principal, PrincipalKind
from core.runtime.tx import Tx
from core.services.limits import limit_error
from core.store.signup_tables import SERVER_CLAIM, Invite, ServerClaim

INVITE_TTL_S = 86_400
MAX_LIVE_INVITES = 20  # per account
INVITE_PREFIX = "rbi_"
INVITE_PATTERN = r"^rbi_[A-Za-z0-9_-]{43}$"


class InviteOut(BaseModel):
    invite: str = Field(description="Single use: the new phone's POST /v1/devices takes it as invite")
    expires_at: int = Field(description="Epoch seconds; 24 hours after it was made")


def create_invite(tx: Tx, principal: Principal) -> InviteOut:
    """A phone invites one more phone onto this server (its device credential only): 403
    ``not_a_phone`` for any other device, 403 ``registration_closed`` where registration is
    closed, 409 ``limit_reached`` with ``MAX_LIVE_INVITES`` of its account's still live."""
    principal.require_phone()
    return _mint(tx, principal.account_id)


def operator_invite(tx: Tx, principal: Principal) -> InviteOut:
    """The operator's invite (``relaybox invite``, on the server's own database): no account."""
    if principal.kind is not PrincipalKind.SYSTEM:
        raise RelayError("forbidden")
    return _mint(tx, None)


def admit_phone(tx: Tx, *, device_id: str, invite: str | None) -> None:
    """Let the phone ``device_id`` register, in its registration's transaction, or refuse it (see
    the module): an invite it brings is used up, the first phone claims the server."""
    mode = tx.settings.effective_registration
    if mode == "closed":
        raise _closed(mode)
    if invite is not None:
        if _redeem(tx, invite):
            _claim(tx, device_id)
            return
        if mode == "invite":
            raise RelayError("invalid_invite")  # where registration is open, no worse than none
    if mode == "open":
        _charge_open_registration(tx)
        _claim(tx, device_id)
        return
    if not _claim(tx, device_id):
        raise _closed(mode)


def _closed(mode: str) -> RelayError:
    return RelayError("registration_closed", details={"registration": mode})


def _mint(tx: Tx, account_id: str | None) -> InviteOut:
    if tx.settings.effective_registration == "closed":
        raise _closed("closed")
    now = tx.now()
    if account_id is not None:
        live = tx.session.execute(
            select(func.count())
            .select_from(Invite)
            .where(col(Invite.account_id) == account_id, col(Invite.expires_at) > now)
        ).scalar_one()
        if live >= MAX_LIVE_INVITES:
            raise RelayError("limit_reached", details={"max": MAX_LIVE_INVITES})
    invite = INVITE_PREFIX + secrets.token_urlsafe(32)
    expires_at = now + INVITE_TTL_S
    tx.session.add(
        Invite(invite_hash=digest(invite), account_id=account_id, created_at=now, expires_at=expires_at)
    )
    return InviteOut(invite=invite, expires_at=expires_at)


def _redeem(tx: Tx, invite: str) -> bool:
    """Use the invite up if it is live: one statement, so only one of two racing phones does."""
    used = tx.session.execute(
        delete(Invite).where(col(Invite.invite_hash) == digest(invite), col(Invite.expires_at) > tx.now())
    )
    return bool(getattr(used, "rowcount", 0) == 1)


def _claim(tx: Tx, device_id: str) -> bool:
    """Claim the server for the phone ``device_id`` if no phone ever did; whether it now has."""
    if tx.session.get(ServerClaim, SERVER_CLAIM) is not None:
        return False
    try:
        with tx.session.begin_nested():  # a racing first phone's row, once committed, fails this one
            tx.session.add(ServerClaim(claim_id=SERVER_CLAIM, device_id=device_id, claimed_at=tx.now()))
    except IntegrityError:
        return False
    return True


def _charge_open_registration(tx: Tx) -> None:
    check = LimitCheck("open_registrations", "server", tx.settings.open_registrations_per_hour, 3600)
    decision = tx.limiter.acquire([check], tx.clock.now())
    if not decision.allowed:
        raise limit_error(decision)
