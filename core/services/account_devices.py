"""An account's devices as a send reads them (``AccountDevice``: with their push registrations):
as its group read them while locking them (PostgreSQL, ``ACCOUNT_DEVICE_ROWS``), or read now, in
one statement. (Keeping them between sends behind version triggers, migration 0022, saved 2.6 µs
a device in-process and nothing measurable served: migration 0027 took it out.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, sql

from core.adapters.push.base import PushTarget
from core.runtime.group_commit import ACCOUNT_DEVICE_COLUMNS, ACCOUNT_DEVICE_ROWS
from core.runtime.tx import Tx
from core.store.prepared import PreparedStatement
from core.store.tables import Device, PushRegistration


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs 3x (object.__setattr__)
class AccountDevice:
    """One of the account's devices, as much of it as a send reads: with its push registrations,
    read in the same statement (a send then asks nothing more per device)."""

    device_id: str
    surface_kind: str
    device_type: str
    name: str
    public_key: str
    fcm_token: str | None
    fcm_token_kind: str | None
    # By service, as push_registrations holds them.
    registrations: dict[str, Mapping[str, str]] = field(default_factory=dict)

    def push_target(self) -> PushTarget:
        return PushTarget(self.device_id, self.fcm_token, self.fcm_token_kind or "token", self.registrations)


# Built once and run on the driver's cursor: the account's devices (unless its group read them
# already), in the order they were created (within one second, the phone first: it was paired
# before its computers), then by id.
_DEVICES = Device.__table__  # type: ignore[attr-defined]
_REGISTRATIONS = PushRegistration.__table__  # type: ignore[attr-defined]
_ACCOUNT_DEVICES = PreparedStatement(
    sql.select(
        *(_DEVICES.c[name] for name in ACCOUNT_DEVICE_COLUMNS),
        _REGISTRATIONS.c.service,
        _REGISTRATIONS.c.registration,
    )
    .select_from(_DEVICES.outerjoin(_REGISTRATIONS, _REGISTRATIONS.c.device_id == _DEVICES.c.device_id))
    .where(_DEVICES.c.account_id == bindparam("account"))
    .order_by(_DEVICES.c.created_at, _DEVICES.c.surface_kind != "phone", _DEVICES.c.device_id)
)


def account_devices(tx: Tx, account_id: str) -> Sequence[AccountDevice]:
    """The account's devices, in the order they were created: as its group read them while locking
    them, or read now."""
    session = tx.opened_session
    group_read = session.info.get(ACCOUNT_DEVICE_ROWS) if session is not None else None
    if group_read is not None and account_id in group_read:
        return _built(group_read[account_id])
    return _built(_ACCOUNT_DEVICES.rows(tx.connection(), account=account_id))


def _built(rows: Iterable[tuple[Any, ...]]) -> tuple[AccountDevice, ...]:
    """One per device, in the rows' order: a device with several registrations is on several rows."""
    devices: dict[str, AccountDevice] = {}
    for row in rows:  # the device's columns, then one of its registrations (or none)
        device = devices.get(row[0])
        if device is None:
            device = devices[row[0]] = AccountDevice(*row[: len(ACCOUNT_DEVICE_COLUMNS)])
        service, registration = row[len(ACCOUNT_DEVICE_COLUMNS) :]
        if service is not None:
            device.registrations[service] = json.loads(registration)
    return tuple(devices.values())
