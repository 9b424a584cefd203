"""Consent for a connector client: a six-digit code on the consent page, confirmed by the phone.

The authorization server opens a session for an authorization request it has validated
(``start_consent``); the page shows the session's code. The person types it into the phone, whose
``/v1/pair/confirm`` lands in ``confirm_consent_code``: the code is spent, the phone's account is
bound to the session and a fan-out event wakes the page, which long-polls ``wait_for_consent``
(never the database in a loop). The page then offers the scopes with Allow / Deny, and
``take_consent_decision`` spends the session exactly once.

Codes share the pairing-code digest and namespace: a new consent code is never one that is live
as a pairing code or as another consent code, and ``init_pairing`` checks the other way round.
"""

from __future__ import annotations

import secrets
from typing import Literal

import anyio
from pydantic import BaseModel, Field
from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from core.domain.secrets import digest, digests_match, new_pairing_code, new_prefixed_id, pairing_code_digest
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.events import Published
from core.runtime.tx import Tx
from core.services.devices import charge_ip
from core.store.tables import ConsentSession, Device, PairingCode

CODE_ATTEMPTS = 8
WAIT_MAX_S = 30

ConsentStatus = Literal["pending", "confirmed", "decided", "expired"]


class ConsentStart(BaseModel):
    client_id: str = Field(max_length=512)
    client_name: str = Field(max_length=128)
    request_params: str = Field(max_length=8192, description="The authorization request, opaque here")


class ConsentStarted(BaseModel):
    session_id: str
    code: str
    browser_key: str = Field(description="Binds the session to the browser (a cookie)")
    csrf_token: str = Field(description="Must come back with the decision")
    expires_at: int


class ConsentState(BaseModel):
    status: ConsentStatus
    expires_at: int
    client_name: str
    phone_name: str | None = None


class ConsentConfirmed(BaseModel):
    session_id: str
    client_name: str


class ConsentDecision(BaseModel):
    session_id: str
    account_id: str
    client_id: str
    request_params: str


def consent_topic(session_id: str) -> str:
    return f"consent:{session_id}"


def start_consent(tx: Tx, principal: Principal, *, body: ConsentStart) -> ConsentStarted:
    """Open a consent session with a fresh code, valid ``oauth_consent_ttl_s``. Per-IP limited."""
    charge_ip(tx, principal, "oauth_consent_ip_minute", tx.settings.oauth_consent_per_ip_per_minute)
    now = tx.now()
    key = tx.keys.derived_key("pairing-code")
    browser_key = secrets.token_urlsafe(32)
    csrf_token = secrets.token_urlsafe(32)
    for _ in range(CODE_ATTEMPTS):
        code = new_pairing_code()
        code_digest = pairing_code_digest(code, key)
        if tx.session.get(PairingCode, code_digest) is not None or consent_code_is_live(tx, code_digest, now):
            continue
        # An expired session may still hold this digest: release it.
        tx.session.execute(
            update(ConsentSession)
            .where(col(ConsentSession.code_digest) == code_digest, col(ConsentSession.expires_at) <= now)
            .values(code_digest=None)
        )
        row = ConsentSession(
            session_id=new_prefixed_id("cns"),
            code_digest=code_digest,
            client_id=body.client_id,
            client_name=body.client_name,
            request_params=body.request_params,
            browser_digest=digest(browser_key),
            csrf_digest=digest(csrf_token),
            created_at=now,
            expires_at=now + tx.settings.oauth_consent_ttl_s,
        )
        try:
            with tx.session.begin_nested():
                tx.session.add(row)
        except IntegrityError:
            continue  # drawn concurrently by someone else
        return ConsentStarted(
            session_id=row.session_id,
            code=code,
            browser_key=browser_key,
            csrf_token=csrf_token,
            expires_at=row.expires_at,
        )
    raise RelayError("rate_limit_exceeded", "Too many live codes; try again shortly.")


def consent_code_is_live(tx: Tx, code_digest: str, now: int) -> bool:
    """Whether ``code_digest`` is the digest of an unconfirmed, unexpired consent code."""
    row = tx.session.exec(
        select(ConsentSession).where(
            col(ConsentSession.code_digest) == code_digest, col(ConsentSession.expires_at) > now
        )
    ).first()
    return row is not None


def confirm_consent_code(tx: Tx, phone: Device, code_digest: str) -> ConsentConfirmed | None:
    """The phone typed a live consent code: spend it and bind the session to the phone's account.

    ``None`` when the digest names no live consent code; the caller counts that as a wrong code.
    The session then has ``oauth_consent_ttl_s`` more for the person to decide on the page.
    """
    now = tx.now()
    row = tx.session.exec(
        select(ConsentSession).where(
            col(ConsentSession.code_digest) == code_digest,
            col(ConsentSession.confirmed_at).is_(None),
            col(ConsentSession.expires_at) > now,
        )
    ).first()
    if row is None:
        return None
    spent = tx.session.execute(
        update(ConsentSession)
        .where(
            col(ConsentSession.session_id) == row.session_id,
            col(ConsentSession.confirmed_at).is_(None),
            col(ConsentSession.expires_at) > now,
        )
        .values(
            code_digest=None,
            confirmed_at=now,
            account_id=phone.account_id,
            phone_device_id=phone.device_id,
            expires_at=now + tx.settings.oauth_consent_ttl_s,
        )
    )
    if getattr(spent, "rowcount", 0) != 1:
        return None
    tx.emit(Published(consent_topic(row.session_id), "confirmed"))
    return ConsentConfirmed(session_id=row.session_id, client_name=row.client_name)


def get_consent_state(tx: Tx, principal: Principal, *, session_id: str, browser_key: str) -> ConsentState:
    """Where the session stands; 404 ``not_found`` unless the caller holds its browser key."""
    row = _own_session(tx, session_id, browser_key)
    status: ConsentStatus = "pending"
    if row.decided_at is not None:
        status = "decided"
    elif row.expires_at <= tx.now():
        status = "expired"
    elif row.confirmed_at is not None:
        status = "confirmed"
    phone = tx.session.get(Device, row.phone_device_id) if row.phone_device_id else None
    return ConsentState(
        status=status,
        expires_at=row.expires_at,
        client_name=row.client_name,
        phone_name=phone.name if phone is not None and status == "confirmed" else None,
    )


async def wait_for_consent(
    core: Core, principal: Principal, *, session_id: str, browser_key: str, wait: int
) -> ConsentState:
    """The session's state, waiting up to ``wait`` seconds (clamped to 0-30) while it is pending.

    Woken by the confirmation's fan-out event (which may come from another replica); no
    transaction is held and the database is not polled while waiting.
    """
    wait = max(0, min(wait, WAIT_MAX_S))
    async with core.fanout.subscribe(consent_topic(session_id)) as confirmed:
        current = await core.run(get_consent_state, principal, session_id=session_id, browser_key=browser_key)
        remaining = min(float(wait), current.expires_at - core.clock.now())
        if current.status != "pending" or remaining <= 0:
            return current
        with core.waits.long_poll(), anyio.move_on_after(remaining):  # shutdown ends the wait too
            await confirmed.receive()
    return await core.run(get_consent_state, principal, session_id=session_id, browser_key=browser_key)


def take_consent_decision(
    tx: Tx, principal: Principal, *, session_id: str, browser_key: str, csrf_token: str
) -> ConsentDecision:
    """Spend a confirmed session once, for the page's Allow or Deny. Both the browser key and the
    CSRF token handed out with the page must match; a second decision is ``consent_decided``."""
    row = _own_session(tx, session_id, browser_key)
    if not digests_match(row.csrf_digest, digest(csrf_token)):
        raise RelayError("forbidden", "The form's CSRF token does not match this consent page.")
    now = tx.now()
    if row.decided_at is not None:
        raise RelayError("consent_decided")
    if row.expires_at <= now:
        raise RelayError("consent_expired")
    if row.confirmed_at is None or row.account_id is None:
        raise RelayError("consent_not_confirmed")
    spent = tx.session.execute(
        update(ConsentSession)
        .where(
            col(ConsentSession.session_id) == session_id,
            col(ConsentSession.decided_at).is_(None),
            col(ConsentSession.expires_at) > now,
        )
        .values(decided_at=now)
    )
    if getattr(spent, "rowcount", 0) != 1:
        raise RelayError("consent_decided")
    return ConsentDecision(
        session_id=row.session_id,
        account_id=row.account_id,
        client_id=row.client_id,
        request_params=row.request_params,
    )


def _own_session(tx: Tx, session_id: str, browser_key: str) -> ConsentSession:
    row = tx.session.get(ConsentSession, session_id) if len(session_id) <= 40 else None
    if row is None or not digests_match(row.browser_digest, digest(browser_key)):
        raise RelayError("not_found")
    return row
