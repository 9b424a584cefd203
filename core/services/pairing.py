"""Pairing a computer with the phone through a six-digit code.

The computer calls ``init_pairing`` (unauthenticated, per-IP limited) and gets a code plus its own
device id and credential; the phone confirms the code with its credential; the computer collects
the phone's key with ``get_pairing_result``. Wrong codes are limited per address (an IPv6 /64 as
one) and per phone (the guesser waits), and per code: a live code dies after a few wrong guesses
that could have been aimed at it (``core.services.code_guesses``, which also says what a stranger
can and cannot do to someone else's code). No guess is refused for what others did, so no stranger
can lock pairing or consent for everyone.

The phone confirms the connector's consent codes (``core.services.consent``) through the same
route and the same limits: a live consent code is confirmed as intent ``connector``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from core.adapters.limits.base import LimitCheck
from core.domain.keys import PUBLIC_KEY_SCHEMA
from core.domain.secrets import (
    PAIRING_CODE_PATTERN,
    digest,
    new_device_credential,
    new_pairing_code,
    new_prefixed_id,
    new_uuid,
    pairing_code_digest,
)
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.code_guesses import charge_wrong_code
from core.services.consent import confirm_consent_code, consent_code_is_live
from core.services.devices import DeviceType, charge_ip, checked_public_key, own_device
from core.services.limits import address_key
from core.store.tables import Device, Pair, PairingCode, PairResult

ComputerSurface = Literal["extension", "pwa", "cli", "desktop"]
CODE_ATTEMPTS = 8  # retries when a fresh code collides with a live one


class PairInit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    public_key: str = Field(max_length=128, json_schema_extra=PUBLIC_KEY_SCHEMA)
    surface_kind: ComputerSurface
    device_type: DeviceType = "extension"
    name: str = Field(default="", max_length=64)
    intent: str = Field(default="pair", pattern=r"^[a-z_]{1,32}$")


class PairInitOut(BaseModel):
    code: str
    expires_at: int
    device_id: str
    device_token: str
    server_public_key: str


class PairConfirm(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str = Field(max_length=16)
    public_key: str = Field(max_length=128, json_schema_extra=PUBLIC_KEY_SCHEMA)
    intent: Literal["pair", "connector"] | None = Field(
        default=None, description="Only a code of this kind matches (default: either kind)"
    )


class PairedDevice(BaseModel):
    device_id: str
    name: str
    surface_kind: str
    public_key: str


class PairConfirmOut(BaseModel):
    intent: str
    pair_id: str | None = Field(default=None, description="Pairing codes only")
    device: PairedDevice | None = Field(default=None, description="Pairing codes only: the new computer")
    client_name: str | None = Field(
        default=None, description="Connector codes only: the client to approve on the consent page"
    )


class PairResultOut(BaseModel):
    status: Literal["pending", "paired"]
    expires_at: int | None = None
    phone_device_id: str | None = None
    phone_name: str | None = None
    phone_public_key: str | None = None
    pair_id: str | None = None


def init_pairing(tx: Tx, principal: Principal, *, body: PairInit) -> PairInitOut:
    """Mint a code for a computer and reserve its device id and credential for 300 s."""
    charge_ip(tx, principal, "pair_init_ip_minute", tx.settings.pair_init_per_ip_per_minute)
    public_key = checked_public_key(body.public_key)
    now = tx.now()
    credential = new_device_credential()
    key = tx.keys.derived_key("pairing-code")
    expires_at = now + tx.settings.pairing_code_ttl_s
    for _ in range(CODE_ATTEMPTS):
        code = new_pairing_code()
        code_digest = pairing_code_digest(code, key)
        if consent_code_is_live(tx, code_digest, now):
            continue  # live as a connector consent code
        # An expired row keeps its computer's credential answering "pairing_expired" until the
        # sweep removes it; only the one this draw would collide with goes now.
        tx.session.execute(
            delete(PairingCode).where(
                col(PairingCode.code_digest) == code_digest, col(PairingCode.expires_at) <= now
            )
        )
        row = PairingCode(
            code_digest=code_digest,
            expires_at=expires_at,
            created_at=now,
            intent=body.intent,
            device_id=new_uuid(),
            credential_hash=digest(credential),
            public_key=public_key,
            surface_kind=body.surface_kind,
            device_type=body.device_type,
            name=body.name,
        )
        try:
            with tx.session.begin_nested():
                tx.session.add(row)
        except IntegrityError:
            continue  # the code is live for someone else; draw again
        return PairInitOut(
            code=code,
            expires_at=expires_at,
            device_id=row.device_id,
            device_token=credential,
            server_public_key=tx.keys.public_key_b64,
        )
    raise RelayError("rate_limit_exceeded", "Too many live pairing codes; try again shortly.")


async def confirm_pairing(core: Core, principal: Principal, *, body: PairConfirm, ip: str) -> PairConfirmOut:
    """The phone redeems a code (``redeem_code``); a wrong one is 400 ``invalid_code`` once the
    code deaths it caused are committed."""
    confirmed = await core.run(redeem_code, principal, body=body, ip=ip)
    if confirmed is None:
        raise RelayError("invalid_code")
    return confirmed


def redeem_code(tx: Tx, principal: Principal, *, body: PairConfirm, ip: str) -> PairConfirmOut | None:
    """The phone redeems a code: the computer's device row and the pair row are written, the code
    is deleted (single use) and a result is kept 24 h for the computer to collect. A live connector
    consent code is confirmed instead (intent ``connector``): it binds the consent page to this
    phone's account and creates no device.

    A wrong code returns ``None`` rather than raising, so that what it cost (the guesser's budgets,
    and the live codes it killed) is committed with the transaction."""
    phone_id = principal.require_phone()
    phone = own_device(tx, principal)
    checks = _failure_checks(tx, ip, phone_id)
    now_f = tx.clock.now()
    decision = tx.limiter.peek(checks, now_f)
    if not decision.allowed:
        raise RelayError("too_many_attempts", headers={"Retry-After": str(decision.retry_after)})
    if checked_public_key(body.public_key) != phone.public_key:
        raise RelayError("invalid_public_key", "public_key is not the key this phone registered.")
    now = tx.now()
    code_row = None
    digest_value = None
    if PAIRING_CODE_PATTERN.fullmatch(body.code):
        digest_value = pairing_code_digest(body.code, tx.keys.derived_key("pairing-code"))
        if body.intent != "connector":
            code_row = tx.session.get(PairingCode, digest_value)
        if (code_row is None or code_row.expires_at <= now) and body.intent != "pair":
            connector = confirm_consent_code(tx, phone, digest_value)
            if connector is not None:
                return PairConfirmOut(intent="connector", client_name=connector.client_name)
    if code_row is None or code_row.expires_at <= now or not _redeem(tx, code_row.code_digest):
        tx.limiter.acquire(checks, now_f)
        if digest_value is not None:
            charge_wrong_code(tx, digest_value)
        return None

    computer = Device(
        device_id=code_row.device_id,
        account_id=phone.account_id,
        device_type=code_row.device_type,
        surface_kind=code_row.surface_kind,
        public_key=code_row.public_key,
        name=code_row.name,
        credential_hash=code_row.credential_hash,
        created_at=now,
        last_seen_at=now,
        ever_paired=1,
    )
    phone.ever_paired = 1
    pair = Pair(
        pair_id=new_prefixed_id("pair"),
        account_id=phone.account_id,
        phone_device_id=phone.device_id,
        device_id=computer.device_id,
        created_at=now,
        updated_at=now,
    )
    tx.session.add_all([computer, phone])
    tx.session.flush()
    tx.session.add(pair)
    tx.session.add(
        PairResult(
            device_id=computer.device_id,
            pair_id=pair.pair_id,
            phone_device_id=phone.device_id,
            phone_name=phone.name,
            phone_public_key=phone.public_key,
            expires_at=now + tx.settings.pairing_result_ttl_s,
        )
    )
    return PairConfirmOut(
        pair_id=pair.pair_id,
        intent=code_row.intent,
        device=PairedDevice(
            device_id=computer.device_id,
            name=computer.name,
            surface_kind=computer.surface_kind,
            public_key=computer.public_key,
        ),
    )


@read_only
def get_pairing_result(tx: Tx, principal: Principal) -> PairResultOut:
    """The computer asks whether its code was confirmed (``pending``) and, once it was, gets the
    phone's id, name and public key."""
    device_id = principal.require_device(allow_pending=True)
    now = tx.now()
    result = tx.session.get(PairResult, device_id)
    if result is not None and result.expires_at > now:
        return PairResultOut(
            status="paired",
            expires_at=result.expires_at,
            phone_device_id=result.phone_device_id,
            phone_name=result.phone_name,
            phone_public_key=result.phone_public_key,
            pair_id=result.pair_id,
        )
    code = _live_code_for(tx, device_id, now)
    if code is not None:
        return PairResultOut(status="pending", expires_at=code.expires_at)
    raise RelayError("pairing_expired")


def _live_code_for(tx: Tx, device_id: str, now: int) -> PairingCode | None:
    return tx.session.exec(
        select(PairingCode).where(col(PairingCode.device_id) == device_id, col(PairingCode.expires_at) > now)
    ).first()


def _redeem(tx: Tx, code_digest: str) -> bool:
    """Delete the code if it is still there; only one concurrent redeemer sees a row deleted."""
    result = tx.session.execute(delete(PairingCode).where(col(PairingCode.code_digest) == code_digest))
    return bool(getattr(result, "rowcount", 0) == 1)


def _failure_checks(tx: Tx, ip: str, phone_id: str) -> list[LimitCheck]:
    """The guesser's own wrong-code budgets: per address (an IPv6 /64 as one) and per phone. What
    bounds the guesses any one live code can receive, whatever number of addresses or phones an
    attacker uses, is the code's own death (``core.services.code_guesses``)."""
    window = tx.settings.pairing_failure_window_s
    key = address_key(tx.settings, ip)
    return [
        LimitCheck("pairing_failures_ip", key, tx.settings.pairing_failures_per_ip, window),
        LimitCheck("pairing_failures_device", phone_id, tx.settings.pairing_failures_per_device, window),
    ]
