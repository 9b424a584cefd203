"""Devices: a phone registers (creating its account), devices update themselves, report status,
prove FCM registrations, and disconnect. How a device's push route is registered and proved is
``core.services.push_registration``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt
from sqlalchemy import delete, or_
from sqlmodel import col, select

from core.adapters.limits.base import LimitCheck
from core.adapters.push.base import PushMessage, WebPushSubscription
from core.domain.keys import PUBLIC_KEY_SCHEMA, InvalidPublicKey, decode_public_key
from core.domain.secrets import digest, new_device_credential, new_uuid
from core.errors import RelayError
from core.principal import Principal
from core.queue import queue
from core.runtime.events import DeviceRevoked
from core.runtime.group_commit import lock_devices_of
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.delivery import push_target, request_push
from core.services.limits import address_key
from core.services.push_registration import (
    PushRegistrations,
    RegistrationProof,
    apply_push_settings,
    checked_registrations,
    prove_push_registration,
    push_route,
)
from core.services.signup import admit_phone
from core.store.tables import (
    Account,
    Device,
    Pair,
    PushRegistration,
    RegistrationChallenge,
    ScheduledWakeUp,
)

DeviceType = Literal["extension", "android", "web"]  # web: a browser (the web app) as the phone or a computer
Name = Field(default="", max_length=64)
Registrations = Field(default=None, description='By push service, as each takes it: {"web_push": {...}, ...}')


class DeviceCreate(BaseModel):
    """A phone registering itself; this creates its account."""

    model_config = ConfigDict(extra="forbid")
    public_key: str = Field(max_length=128, json_schema_extra=PUBLIC_KEY_SCHEMA)
    device_type: DeviceType = "android"
    surface_kind: Literal["phone"] = "phone"
    name: str = Name
    fcm_token: str | None = Field(default=None, min_length=1, max_length=4096)
    fcm_token_kind: Literal["token", "fid"] = "token"
    web_push: WebPushSubscription | None = None
    push_registrations: PushRegistrations | None = Registrations
    app_build: StrictInt | None = Field(default=None, ge=0, le=2**31 - 1)
    invite: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="An invite (POST /v1/invites): needed once the server is claimed, where registration "
        "is by invite",
    )


class DeviceRegistered(BaseModel):
    device_id: str
    device_token: str
    account_id: str
    server_public_key: str
    registration_id: str | None = Field(
        default=None, description="Set when an FCM token awaits its reg_challenge echo"
    )


class DevicePatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, max_length=64)
    fcm_token: str | None = Field(default=None, min_length=1, max_length=4096)
    fcm_token_kind: Literal["token", "fid"] = "token"
    web_push: WebPushSubscription | None = None
    push_registrations: PushRegistrations | None = Registrations
    app_build: StrictInt | None = Field(default=None, ge=0, le=2**31 - 1)


class DeviceOut(BaseModel):
    device_id: str
    device_type: str
    surface_kind: str
    name: str
    public_key: str
    app_build: int | None = None  # omitted when None, like every None in a response
    push: str = Field(description="The push service its pushes go through (fcm, web_push, ...) or stream")
    registration_id: str | None = None


class StatusReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    battery_percent: StrictInt | None = Field(default=None, ge=0, le=100)
    charging: StrictBool | None = None
    ringer: Literal["normal", "vibrate", "silent"] | None = None
    network: Literal["wifi", "cellular", "ethernet", "none", "other"] | None = None


class StatusAccepted(BaseModel):
    accepted: bool
    status_reported_at: int | None


def checked_public_key(text: str) -> str:
    try:
        decode_public_key(text)
    except InvalidPublicKey as exc:
        raise RelayError("invalid_public_key") from exc
    return text


def register_phone(tx: Tx, principal: Principal, *, body: DeviceCreate) -> DeviceRegistered:
    """Register a phone: creates the account whose root device it is. Per-IP limited, and only as
    the server's registration mode lets it (``core.services.signup``: an invite, the first phone)."""
    charge_ip(tx, principal, "register_ip_minute", tx.settings.register_per_ip_per_minute)
    public_key = checked_public_key(body.public_key)
    registrations = checked_registrations(tx, body.push_registrations, body.web_push)
    device_id = new_uuid()
    admit_phone(tx, device_id=device_id, invite=body.invite)
    now = tx.now()
    account = Account(account_id=new_uuid(), created_at=now)
    credential = new_device_credential()
    device = Device(
        device_id=device_id,
        account_id=account.account_id,
        device_type=body.device_type,
        surface_kind="phone",
        public_key=public_key,
        name=body.name,
        credential_hash=digest(credential),
        created_at=now,
        last_seen_at=now,
        app_build=body.app_build,
    )
    tx.session.add(account)
    tx.session.flush()
    tx.session.add(device)
    tx.session.flush()
    registration_id = apply_push_settings(tx, device, body.fcm_token, body.fcm_token_kind, registrations)
    return DeviceRegistered(
        device_id=device.device_id,
        device_token=credential,
        account_id=account.account_id,
        server_public_key=tx.keys.public_key_b64,
        registration_id=registration_id,
    )


def update_device(tx: Tx, principal: Principal, *, body: DevicePatch) -> DeviceOut:
    """Change the calling device's name, app build or push registration."""
    device = own_device(tx, principal)
    registrations = checked_registrations(tx, body.push_registrations, body.web_push)
    if body.name is not None:
        device.name = body.name
    if body.app_build is not None:
        device.app_build = body.app_build
    tx.session.add(device)
    registration_id = apply_push_settings(tx, device, body.fcm_token, body.fcm_token_kind, registrations)
    return describe_device(tx, device, registration_id)


@read_only
def get_own_device(tx: Tx, principal: Principal) -> DeviceOut:
    return describe_device(tx, own_device(tx, principal), None)


def describe_device(tx: Tx, device: Device, registration_id: str | None) -> DeviceOut:
    return DeviceOut(
        device_id=device.device_id,
        device_type=device.device_type,
        surface_kind=device.surface_kind,
        name=device.name,
        public_key=device.public_key,
        app_build=device.app_build,
        push=push_route(tx, device),
        registration_id=registration_id,
    )


def verify_push_registration(tx: Tx, principal: Principal, *, body: RegistrationProof) -> DeviceOut:
    """The calling phone echoes a ``reg_challenge`` (``prove_push_registration``)."""
    device = own_device(tx, principal)
    prove_push_registration(tx, device, body)
    return describe_device(tx, device, None)


def report_status(tx: Tx, principal: Principal, *, body: StatusReport) -> StatusAccepted:
    """Battery, charging, ringer, network: at most one report accepted per 60 s; extras are dropped."""
    device = own_device(tx, principal)
    now = tx.now()
    last = device.status_reported_at
    if last is not None and now - last < tx.settings.status_report_interval_s:
        return StatusAccepted(accepted=False, status_reported_at=last)
    device.battery_percent = body.battery_percent
    device.charging = body.charging
    device.ringer = body.ringer
    device.network = body.network
    device.status_reported_at = now
    tx.session.add(device)
    return StatusAccepted(accepted=True, status_reported_at=now)


def disconnect_device(tx: Tx, principal: Principal) -> None:
    """Unpair the calling device and drop its keys, credential, registration and queue."""
    device = own_device(tx, principal)
    _lock_account_devices(tx, device.account_id)
    pairs = tx.session.exec(
        select(Pair).where(
            or_(col(Pair.device_id) == device.device_id, col(Pair.phone_device_id) == device.device_id)
        )
    ).all()
    for pair in pairs:
        other_id = pair.device_id if pair.phone_device_id == device.device_id else pair.phone_device_id
        other = tx.session.get(Device, other_id)
        if other is not None and other.surface_kind == "phone":
            wake = PushMessage("disconnect", {"deviceId": device.device_id}, high_priority=True)
            request_push(tx, push_target(tx, other), wake)
        tx.session.delete(pair)
    for table in (RegistrationChallenge, PushRegistration, ScheduledWakeUp):
        tx.session.execute(delete(table).where(col(table.device_id) == device.device_id))
    queue(tx).forget_device(tx, device.device_id)
    tx.session.flush()
    tx.session.delete(device)
    tx.emit(DeviceRevoked(device.device_id))


def _lock_account_devices(tx: Tx, account_id: str) -> None:
    """PostgreSQL: lock the account's devices in id order, as a group of its sends does
    (``lock_devices_of``, the group's own statement), before a removal writes to any of them (the
    phone's queue, telling it; the device's queue and row): taken in another order, a group holding
    some of them and waiting for the others would deadlock with it
    (``tests/core/test_device_removal_locks.py``). The phone's queue write then has nothing left
    to lock."""
    if tx.connection().dialect.name == "postgresql":
        lock_devices_of(tx.session, {account_id})


def own_device(tx: Tx, principal: Principal) -> Device:
    device_id = principal.require_device()
    device = tx.session.get(Device, device_id)
    if device is None:
        raise RelayError("invalid_token")
    return device


def charge_ip(tx: Tx, principal: Principal, resource: str, per_minute: int) -> None:
    """Per-IP limit for unauthenticated routes (the principal's label carries the IP; an IPv6
    address counts by its network, ``address_key``)."""
    key = address_key(tx.settings, principal.label or "unknown")
    decision = tx.limiter.acquire([LimitCheck(resource, key, per_minute, 60)], tx.clock.now())
    if not decision.allowed:
        raise RelayError(
            "rate_limit_exceeded",
            details={"resource": resource},
            headers={"Retry-After": str(decision.retry_after)},
        )
