"""POST /v1/envelopes: paired devices only, opaque envelope v1 blobs, a capped 24-hour queue."""

from __future__ import annotations

import base64

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.domain.envelope import seal
from core.principal import Principal
from core.runtime.core import Core
from core.services.relay import read_queue
from core.store.tables import QueuedEnvelope
from tests.helpers import FakeDevice, error_code, pair_computer, queued_rows, register_phone


def envelope(sender: FakeDevice, recipient: FakeDevice, text: bytes = b'{"type":"clipboard"}') -> str:
    return base64.b64encode(seal(text, sender.secret_key, recipient.public_key)).decode()


def post(client: TestClient, sender: FakeDevice, recipient: FakeDevice, **fields: object) -> object:
    body = {"to": recipient.device_id, "type": "clipboard", "blob": envelope(sender, recipient), **fields}
    return client.post("/v1/envelopes", json=body, headers=sender.auth)


def test_a_paired_device_relays_an_envelope_into_the_recipients_queue(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    response = post(client, phone, computer)
    assert response.status_code == 202  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["msg_id"].startswith("msg_")
    [row] = queued_rows(core.engine, computer.device_id)
    assert (row.seq, row.sender, row.type) == (body["seq"], phone.device_id, "clipboard")


def test_the_computer_can_relay_to_the_phone(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    assert post(client, computer, phone, type="reply").status_code == 202  # type: ignore[attr-defined]
    assert [row.type for row in queued_rows(core.engine, phone.device_id)] == ["reply"]


@pytest.mark.parametrize(
    ("blob", "code"),
    [
        ("%%% not base64", "invalid_blob"),
        (base64.b64encode(b"\x01" + bytes(39)).decode(), "invalid_blob"),
        (base64.b64encode(b"\x02" + bytes(60)).decode(), "invalid_blob"),
        (base64.b64encode(b"\x01" + bytes(64 * 1024)).decode(), "envelope_too_large"),
    ],
)
def test_a_blob_that_is_not_an_envelope_is_refused(
    client: TestClient, core: Core, blob: str, code: str
) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    response = post(client, phone, computer, blob=blob)
    assert error_code(response) == code
    assert queued_rows(core.engine, computer.device_id) == []


def test_an_unpaired_foreign_or_unknown_recipient_is_404(client: TestClient) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    other_computer = pair_computer(client, phone)
    stranger = register_phone(client)
    for sender, recipient in ((computer, other_computer), (phone, stranger), (stranger, phone)):
        response = post(client, sender, recipient)
        assert response.status_code == 404 and error_code(response) == "not_found"  # type: ignore[attr-defined]
    unknown = post(client, phone, computer, to="00000000-0000-0000-0000-000000000000")
    assert error_code(unknown) == "not_found"


def test_unknown_types_are_refused_and_sms_needs_the_flag(client: TestClient) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    assert error_code(post(client, computer, phone, type="launch_missiles")) == "invalid_envelope_type"
    disabled = post(client, computer, phone, type="sms_send")
    assert disabled.status_code == 403 and error_code(disabled) == "feature_disabled"  # type: ignore[attr-defined]


def test_sms_is_relayed_when_enabled(client: TestClient, core: Core) -> None:
    core.settings = core.settings.model_copy(update={"sms_enabled": True})
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    assert post(client, computer, phone, type="sms_send").status_code == 202  # type: ignore[attr-defined]


def test_the_queue_keeps_the_newest_200(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    seqs = [post(client, phone, computer).json()["seq"] for _ in range(205)]  # type: ignore[attr-defined]
    assert [row.seq for row in queued_rows(core.engine, computer.device_id)] == seqs[-200:]


def test_a_deleted_newest_entry_never_gives_its_seq_to_the_next_one(client: TestClient, core: Core) -> None:
    """SQLite handed the largest rowid + 1 to a new row: once the newest entry was deleted (expired
    and swept, say), the next one got its seq, and a device that had seen the first skipped it."""
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    first = post(client, phone, computer).json()["seq"]  # type: ignore[attr-defined]
    with Session(core.engine) as session:
        session.exec(select(QueuedEnvelope)).all()
        session.delete(session.get(QueuedEnvelope, first))
        session.commit()
    second = post(client, phone, computer).json()["seq"]  # type: ignore[attr-defined]
    assert second > first


def test_queued_items_expire_after_their_ttl(client: TestClient, core: Core, clock: ManualClock) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    post(client, phone, computer, ttl=60)
    post(client, phone, computer)
    principal = Principal.device(
        account_id=phone.account_id, device_id=computer.device_id, surface_kind="cli"
    )
    assert len(core.run_sync(read_queue, principal, after=0).items) == 2
    clock.advance(60)
    assert len(core.run_sync(read_queue, principal, after=0).items) == 1
    clock.advance(86_400)
    assert core.run_sync(read_queue, principal, after=0).items == []


@pytest.mark.parametrize("ttl", [True, "60", 60.5])
def test_ttl_is_a_json_integer(client: TestClient, ttl: object) -> None:
    """Found by fuzzing for other integers: the document says integer, so true and "60" are refused."""
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    assert error_code(post(client, computer, phone, ttl=ttl)) == "invalid_body"
    assert post(client, computer, phone, ttl=60.0).status_code == 202  # type: ignore[attr-defined]


def test_a_since_id_that_is_not_a_number_is_400(client: TestClient) -> None:
    phone = register_phone(client)
    response = client.get("/v1/sync?since_id=abc", headers=phone.auth)
    assert response.status_code == 400 and error_code(response) == "invalid_since_id"
    response = client.get("/v1/sync", headers={**phone.auth, "Last-Event-ID": "-3"})
    assert error_code(response) == "invalid_since_id"


@pytest.mark.parametrize("since_id", ["9223372036854775808", "9999999999999999999", "\u00b2", "\u0661\u0662"])
def test_a_since_id_beyond_the_seq_column_or_in_other_digits_is_400(
    client: TestClient, since_id: str
) -> None:
    """Found by fuzzing: 2**63 passed the 19-digit check and broke the stream it had already begun
    (the database refuses the integer); "²" is a digit to str.isdigit, not to int()."""
    phone = register_phone(client)
    response = client.get("/v1/sync", params={"since_id": since_id}, headers=phone.auth)
    assert response.status_code == 400 and error_code(response) == "invalid_since_id"
