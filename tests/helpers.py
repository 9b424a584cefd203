"""Playing devices against the in-process app: a phone, a paired computer, their keys."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import Engine, MetaData, select
from sqlmodel import Session, col
from sqlmodel import select as select_rows
from starlette.testclient import TestClient

from core.domain.envelope import open_envelope
from core.domain.keys import generate_keypair
from core.queue._packed import entry_of
from core.runtime.core import Core
from core.store.tables import Device, QueueCount, QueuedEnvelope

# Starlette's TestClient (in process) or an httpx client of a live server.
Http = TestClient | httpx.Client


@dataclass
class FakeDevice:
    device_id: str
    token: str
    secret_key: bytes
    public_key: bytes
    account_id: str = ""
    peers: dict[str, bytes] = field(default_factory=dict)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def public_b64(self) -> str:
        return base64.b64encode(self.public_key).decode()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def register_phone(
    client: Http, *, name: str = "Pixel", headers: dict[str, str] | None = None, **extra: object
) -> FakeDevice:
    secret, public = generate_keypair()
    body = {"public_key": b64(public), "name": name, **extra}
    response = client.post("/v1/devices", json=body, headers=headers)
    assert response.status_code == 201, response.text
    body = response.json()
    return FakeDevice(body["device_id"], body["device_token"], secret, public, body["account_id"])


def start_pairing(client: Http, *, surface_kind: str = "cli", name: str = "laptop") -> tuple[FakeDevice, str]:
    secret, public = generate_keypair()
    response = client.post(
        "/v1/pair/init", json={"public_key": b64(public), "surface_kind": surface_kind, "name": name}
    )
    assert response.status_code == 201, response.text
    body = response.json()
    return FakeDevice(body["device_id"], body["device_token"], secret, public), body["code"]


def pair_computer(
    client: Http, phone: FakeDevice, *, surface_kind: str = "cli", name: str = "laptop"
) -> FakeDevice:
    computer, code = start_pairing(client, surface_kind=surface_kind, name=name)
    response = client.post(
        "/v1/pair/confirm", json={"code": code, "public_key": phone.public_b64}, headers=phone.auth
    )
    assert response.status_code == 200, response.text
    computer.account_id = phone.account_id
    computer.peers[phone.device_id] = phone.public_key
    phone.peers[computer.device_id] = computer.public_key
    return computer


def create_token(client: Http, phone: FakeDevice, **fields: object) -> dict[str, object]:
    response = client.post("/v1/tokens", json={"label": "script", **fields}, headers=phone.auth)
    assert response.status_code == 201, response.text
    body: dict[str, object] = response.json()
    return body


def error_code(response: object) -> str:
    """The stable code of either error shape."""
    body = response.json()  # type: ignore[attr-defined]
    error = body["error"]
    return error if isinstance(error, str) else error["code"]


def tables_containing(engine: Engine, marker: str) -> list[str]:
    """Every table in which some row holds ``marker`` in any column (text or bytes)."""
    metadata = MetaData()
    metadata.reflect(engine)
    found = []
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            for row in connection.execute(select(table)):
                if any(_holds(value, marker) for value in row):
                    found.append(table.name)
                    break
    return found


def _holds(value: object, marker: str) -> bool:
    if isinstance(value, bytes | bytearray | memoryview):
        return marker.encode() in bytes(value)
    return marker in str(value)


def queued_rows(engine: Engine, device_id: str, type: str | None = None) -> list[QueuedEnvelope]:
    """A device's queue entries as stored, oldest first; only those of ``type`` when given. An entry
    in a packed row (SQLite, ``core.queue._packed``) comes as a row of its own, with its seq
    and blob; packed entries below the device's floor (trimmed) are left out."""
    with Session(engine) as session:
        own = select_rows(QueuedEnvelope).where(col(QueuedEnvelope.recipient_device_id) == device_id)
        rows = list(session.exec(own).all())
        device = session.get(Device, device_id)
        count = session.get(QueueCount, device_id) if device is not None else None
        if device is not None:
            packed = select_rows(QueuedEnvelope).where(
                col(QueuedEnvelope.recipient_device_id) == device.account_id,
                col(QueuedEnvelope.seq) >= (count.floor if count is not None else 0),
                col(QueuedEnvelope.recipients).contains(f'"{device_id}"'),
            )
            for row in session.exec(packed).all():
                assert row.recipients is not None
                seq, blob = entry_of(row.recipients, row.blob, device_id)
                entry = row.model_copy(update={"seq": seq, "blob": blob, "recipient_device_id": device_id})
                rows.append(entry)
    rows.sort(key=lambda row: row.seq or 0)
    return [row for row in rows if type is None or row.type == type]


def queue_entries(engine: Engine, device_id: str) -> list[tuple[int, bytes, str | None]]:
    """A device's queue as stored, oldest first: (seq, blob, tag) of each entry."""
    return [(row.seq or 0, row.blob, row.tag) for row in queued_rows(engine, device_id)]


def queued_payloads(core: Core, device: FakeDevice, type: str = "notification") -> list[dict[str, Any]]:
    """The payloads of ``type`` the server queued for ``device``, opened with its key, oldest first."""
    rows = queued_rows(core.engine, device.device_id, type)
    return [json.loads(open_envelope(row.blob, device.secret_key, core.keys.public_key)) for row in rows]
