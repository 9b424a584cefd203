"""The account's devices as a caller may see them (``list_devices`` tool, ``GET /v1/devices``)."""

from __future__ import annotations

from pydantic import BaseModel, Field
from sqlmodel import col, select

from core.context import Core, Tx, read_only
from core.principal import SCOPE_DEVICES_READ, Principal, PrincipalKind
from core.store.tables import Device, WebPushSubscriptionRow

HOUR = 3600


class DeviceSummary(BaseModel):
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
    rows = await core.run(account_devices, principal)
    streaming = await core.streaming([summary.device_id for summary in rows])
    return DeviceList(
        devices=[
            summary.model_copy(update={"reachable": summary.reachable or summary.device_id in streaming})
            for summary in rows
        ]
    )


@read_only
def account_devices(tx: Tx, principal: Principal) -> list[DeviceSummary]:
    if principal.kind is not PrincipalKind.DEVICE:
        principal.require_scope(SCOPE_DEVICES_READ)
    devices = tx.session.exec(
        select(Device).where(col(Device.account_id) == principal.account_id).order_by(col(Device.created_at))
    ).all()
    with_web_push = set(
        tx.session.exec(
            select(WebPushSubscriptionRow.device_id).where(
                col(WebPushSubscriptionRow.device_id).in_([d.device_id for d in devices])
            )
        ).all()
    )
    return [
        DeviceSummary(
            device_id=d.device_id,
            name=d.name,
            surface_kind=d.surface_kind,
            reachable=bool(d.fcm_token) or d.device_id in with_web_push,
            status_reported_at=d.status_reported_at,
            last_seen_at=_coarse(d) if d.last_seen_at is not None else None,
            battery_percent=d.battery_percent,
            charging=d.charging,
        )
        for d in devices
    ]


def _coarse(device: Device) -> int | None:
    if device.last_seen_at is None:
        return None
    if device.surface_kind == "phone":
        return device.last_seen_at - device.last_seen_at % HOUR
    return device.last_seen_at
