"""The account's devices as a caller may see them (``list_devices`` tool, ``GET /v1/devices``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import bindparam, exists, select

from core.principal import SCOPE_DEVICES_READ, Principal, PrincipalKind
from core.runtime.core import Core
from core.runtime.marks import quick_read, reusable
from core.runtime.tx import Tx
from core.store.prepared import PreparedStatement
from core.store.tables import Device, PushRegistration

HOUR = 3600


class DeviceSummary(BaseModel):
    model_config = ConfigDict(frozen=True)  # a kept read is shared by its callers

    device_id: str
    name: str
    surface_kind: str
    reachable: bool = Field(description="Has a live push path: a push registration or an open stream")
    status_reported_at: int | None = None
    last_seen_at: int | None = Field(default=None, description="Hour granularity for phones")
    battery_percent: int | None = None
    charging: bool | None = None


class DeviceList(BaseModel):
    devices: list[DeviceSummary]


async def list_devices(core: Core, principal: Principal) -> DeviceList:
    """The account's devices with reachability; needs ``devices:read`` (or a device credential)."""
    return DeviceList(devices=await device_summaries(core, principal))


async def device_summaries(core: Core, principal: Principal) -> list[DeviceSummary]:
    """What ``list_devices`` lists, without the model around it (the ``list_devices`` tool makes
    its own view of the summaries)."""
    rows = await core.run(account_devices, principal)
    # Only a device without a push path can be made reachable by an open stream: the others are
    # not asked about (with Redis, a listing whose devices all have one asks nothing of it).
    unreachable = [summary.device_id for summary in rows if not summary.reachable]
    streaming = await core.presence.streaming(unreachable) if unreachable else set()
    return [
        summary.model_copy(update={"reachable": True}) if summary.device_id in streaming else summary
        for summary in rows
    ]


@reusable
@quick_read
def account_devices(tx: Tx, principal: Principal) -> tuple[DeviceSummary, ...]:
    if principal.kind is not PrincipalKind.DEVICE:
        principal.require_scope(SCOPE_DEVICES_READ)
    return tuple(
        DeviceSummary(
            device_id=device_id,
            name=name,
            surface_kind=surface_kind,
            reachable=bool(fcm_token) or registered,
            status_reported_at=status_reported_at,
            last_seen_at=_coarse(surface_kind, last_seen_at),
            battery_percent=battery_percent,
            charging=charging,
        )
        for (
            device_id,
            name,
            surface_kind,
            fcm_token,
            status_reported_at,
            last_seen_at,
            battery_percent,
            charging,
            registered,
        ) in _ACCOUNT_DEVICES.rows(tx.connection(), account_id=principal.account_id)
    )


# Built once and run on the driver's cursor: this read is what every list_devices call costs, and
# building a statement, or executing it through the engine, costs more than running it. One
# statement: the devices, each with whether it has a push registration (FCM's is on its row).
_DEVICE = Device.__table__  # type: ignore[attr-defined]
_REGISTRATIONS = PushRegistration.__table__  # type: ignore[attr-defined]
_ACCOUNT_DEVICES = PreparedStatement(
    select(
        _DEVICE.c.device_id,
        _DEVICE.c.name,
        _DEVICE.c.surface_kind,
        _DEVICE.c.fcm_token,
        _DEVICE.c.status_reported_at,
        _DEVICE.c.last_seen_at,
        _DEVICE.c.battery_percent,
        _DEVICE.c.charging,
        exists().where(_REGISTRATIONS.c.device_id == _DEVICE.c.device_id).label("registered"),
    )
    .where(_DEVICE.c.account_id == bindparam("account_id"))
    .order_by(_DEVICE.c.created_at)
)


def _coarse(surface_kind: str, last_seen_at: int | None) -> int | None:
    """Phones are shown to the hour (where the phone is, roughly, is not every caller's business)."""
    if last_seen_at is None or surface_kind != "phone":
        return last_seen_at
    return last_seen_at - last_seen_at % HOUR
