"""``queue.enqueue_all``: one queue write for several devices, on each backend (PostgreSQL in one
statement, SQLite in two to four), as if each device's entry had been queued alone: each names its
recipient's previous seq, and each queue keeps its newest 200 unpinned entries beside its pinned
ones."""

from __future__ import annotations

import base64
import json

import pytest
from sqlalchemy import Connection, delete
from sqlmodel import col
from starlette.testclient import TestClient

from core.principal import Principal
from core.queue import CARRIED_MAX_CHARS, QUEUE_CAP, WakeUps, enqueue_all
from core.queue._pg_sql import TRIM_OVER_CAP
from core.queue._sqlite_sql import ROWS_PER_INSERT
from core.runtime.core import Core
from core.runtime.events import EnvelopesQueued, device_topic
from core.runtime.tx import Tx
from core.services.delivery import Addressee, send_server_messages
from core.store.tables import Device, QueuedEnvelope
from tests.helpers import queue_entries, register_phone


def put_all(
    tx: Tx, _principal: Principal, *, blobs: dict[str, bytes], tag: str | None = None
) -> tuple[list[int], list[tuple[str, str]]]:
    """The seqs, and the wake-ups of the write's one event: (topic, message) a device."""
    seqs = enqueue_all(tx, blobs, sender="server", type="push", ttl_s=3600, tag=tag)
    events = [event for event in tx.events if isinstance(event, EnvelopesQueued)]
    assert len(events) == (1 if blobs else 0)
    return seqs, [wake_up for event in events for wake_up in event.wake_ups()]


def stored(core: Core, device_id: str) -> list[tuple[int, bytes, str | None]]:
    return queue_entries(core.engine, device_id)


def test_each_device_gets_its_blob_and_a_wake_up_naming_its_previous_entry(
    client: TestClient, core: Core
) -> None:
    a, b, c = (register_phone(client).device_id for _ in range(3))
    system = Principal.system()
    [first], _ = core.run_sync(put_all, system, blobs={b: b'{"n":0}'})
    blobs = {a: b'{"to":"a"}', b: b'{"to":"b"}', c: b'{"to":"c"}'}
    seqs, events = core.run_sync(put_all, system, blobs=blobs)
    assert len(set(seqs)) == 3 and min(seqs) > first
    for device_id, seq in zip(blobs, seqs, strict=True):
        assert stored(core, device_id)[-1] == (seq, blobs[device_id], None)
    previous = {a: 0, b: first, c: 0}
    assert [topic for topic, _ in events] == [device_topic(device_id) for device_id in blobs]
    for (_, message), device_id, seq in zip(events, blobs, seqs, strict=True):
        entry = {"from": "server", "type": "push", "blob": blobs[device_id].decode()}
        assert json.loads(message) == {"seq": seq, "prev": previous[device_id], "entry": entry}


def test_every_queue_keeps_its_newest_200_unpinned_entries_and_its_pinned_ones(
    client: TestClient, core: Core
) -> None:
    full, short, empty = (register_phone(client).device_id for _ in range(3))
    system = Principal.system()
    for n in range(QUEUE_CAP + 2):  # full: over the cap, one entry pinned; short: 10 entries
        blobs = {full: b"{}", short: b"{}"} if n < 10 else {full: b"{}"}
        core.run_sync(put_all, system, blobs=blobs, tag="pin-early" if n == 1 else None)
    before_full = stored(core, full)
    assert len(before_full) == QUEUE_CAP + 1  # 200 unpinned (trimmed by each write) + 1 pinned
    [pinned, _], _ = core.run_sync(put_all, system, blobs={full: b"{}", short: b"{}"}, tag="pin-late")
    seqs, _ = core.run_sync(put_all, system, blobs={full: b"{}", short: b"{}", empty: b"{}"})
    unpinned = [seq for seq, _, tag in stored(core, full) if tag is None]
    older = [seq for seq, _, tag in before_full if tag is None][-(QUEUE_CAP - 1) :]
    assert unpinned == [*older, seqs[0]]  # the oldest went, onto a queue holding pinned entries
    assert [tag for _, _, tag in stored(core, full) if tag is not None] == ["pin-early", "pin-late"]
    assert pinned in [seq for seq, _, _ in stored(core, full)]
    assert len(stored(core, short)) == 12 and stored(core, empty) == [(seqs[2], b"{}", None)]


def put_several(tx: Tx, _principal: Principal, *, writes: list[dict[str, bytes]]) -> list[dict[str, int]]:
    """Several queue writes in one transaction: each one's seqs by device."""
    return [
        dict(zip(blobs, enqueue_all(tx, blobs, sender="server", type="push", ttl_s=3600), strict=True))
        for blobs in writes
    ]


def test_a_transaction_of_several_writes_commits_each_queue_at_its_cap(
    client: TestClient, core: Core, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    """Writes in one transaction (a group of sends) keep each queue's newest 200 unpinned entries
    when it commits. PostgreSQL trims every queue the transaction wrote once, before it commits
    (a walk of each queue's newest entries: not one a write); SQLite drops each write's oldest at once."""
    full, other = (register_phone(client).device_id for _ in range(2))
    system = Principal.system()
    for _ in range(QUEUE_CAP):
        core.run_sync(put_all, system, blobs={full: b"{}"})
    before = [seq for seq, _, _ in stored(core, full)]
    trims: list[list[str]] = []
    trim = TRIM_OVER_CAP.rows

    def counted_trim(connection: Connection, written: list[str]) -> list[tuple[object, ...]]:
        trims.append(written)
        return trim(connection, written=written)

    monkeypatch.setattr(TRIM_OVER_CAP, "rows", counted_trim)
    writes = [{full: b"1", other: b"1"}, {full: b"2"}, {other: b"3", full: b"3"}, {full: b"4"}, {full: b"5"}]
    written = core.run_sync(put_several, system, writes=writes)
    kept = [seq for seq, _, _ in stored(core, full)]
    assert kept == before[len(writes) :] + [seqs[full] for seqs in written] and len(kept) == QUEUE_CAP
    assert len(stored(core, other)) == 2
    if database_url.startswith("postgres"):
        assert trims == [[full, other, full, other, full, full, full]]  # one trim: of both queues
    else:
        assert trims == []


def test_a_write_to_more_devices_than_one_insert_takes_and_to_none(core: Core) -> None:
    system = Principal.system()
    blobs = {f"dev_{n:03d}": f'{{"n":{n}}}'.encode() for n in range(ROWS_PER_INSERT + 2)}
    core.run_sync(put_all, system, blobs={"dev_001": b"{}"})
    seqs, events = core.run_sync(put_all, system, blobs=blobs)
    assert len(set(seqs)) == len(blobs)
    for device_id, seq in zip(blobs, seqs, strict=True):
        assert stored(core, device_id)[-1] == (seq, blobs[device_id], None)
    assert [json.loads(message)["prev"] > 0 for _, message in events] == [n == 1 for n in range(len(blobs))]
    assert core.run_sync(put_all, system, blobs={}) == ([], [])


@pytest.mark.parametrize("type", ["push", "notification", "é"])
def test_a_wake_up_is_the_json_of_its_fields(type: str) -> None:
    small = b'{"t":"caf\xc3\xa9 \\"x\\""}' if type == "push" else bytes(range(256))
    for blob in (small, b"x" * CARRIED_MAX_CHARS):
        message = WakeUps("dev_é", type).message(seq=7, prev=3, blob=blob)
        fields: dict[str, object] = {"seq": 7, "prev": 3}
        if blob is small:
            text = blob.decode() if type == "push" else base64.b64encode(blob).decode()
            fields["entry"] = {"from": "dev_é", "type": type, "blob": text}
        assert message == json.dumps(fields, separators=(",", ":"))


def send_twice(tx: Tx, _principal: Principal, *, device_id: str) -> None:
    phone = tx.session.get(Device, device_id)
    assert phone is not None
    addressees = [Addressee(phone, "msg_1"), Addressee(phone, "msg_2")]
    payload = {"type": "notification"}
    send_server_messages(tx, addressees, payload, push_type=None, ttl_s=60, high_priority=False)


def test_a_server_message_goes_to_each_device_once(client: TestClient, core: Core) -> None:
    device_id = register_phone(client).device_id
    with pytest.raises(ValueError, match="each device once"):
        core.run_sync(send_twice, Principal.system(), device_id=device_id)
    assert stored(core, device_id) == []


def test_a_seq_is_never_handed_out_twice(core: Core) -> None:
    """SQLite numbers a write's entries itself, after the last seq handed out: a seq whose entry
    is gone (the newest one deleted, then the whole queue) is not handed out again."""
    system = Principal.system()
    [first], _ = core.run_sync(put_all, system, blobs={"dev_a": b"{}"})
    seqs, _ = core.run_sync(put_all, system, blobs={"dev_a": b"1", "dev_b": b"2"})
    assert seqs == [first + 1, first + 2]
    with core.engine.begin() as connection:
        connection.execute(delete(QueuedEnvelope).where(col(QueuedEnvelope.seq) == seqs[1]))
    [after_newest], _ = core.run_sync(put_all, system, blobs={"dev_b": b"3"})
    with core.engine.begin() as connection:
        connection.execute(delete(QueuedEnvelope))
    later, wake_ups = core.run_sync(put_all, system, blobs={"dev_b": b"4", "dev_a": b"5"})
    assert after_newest == seqs[1] + 1 and later == [after_newest + 1, after_newest + 2]
    # ``prev``: on SQLite the newest seq each device was handed, gone or not (its count keeps it;
    # a stream that delivered it writes the carried entry, any other reads the store); PostgreSQL
    # reads the newest entry there is.
    sqlite = core.engine.dialect.name == "sqlite"
    assert [json.loads(message)["prev"] for _, message in wake_ups] == (
        [after_newest, seqs[0]] if sqlite else [0, 0]
    )
    assert stored(core, "dev_b") == [(later[0], b"4", None)] and stored(core, "dev_a") == [
        (later[1], b"5", None)
    ]


def test_seqs_go_past_32_bits(client: TestClient, core: Core) -> None:
    """One sequence numbers every device's entries: past 2**31 (months of a busy install) they go
    on, on both backends (PostgreSQL's column and sequence are bigint, SQLite's rowid is 64 bits)."""
    a = register_phone(client).device_id
    past_32_bits = 2**31 + 5
    with core.engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT setval('queued_envelopes_seq_seq', {past_32_bits})")
        else:
            connection.exec_driver_sql(
                "UPDATE sqlite_sequence SET seq = ? WHERE name = 'queued_envelopes'", (past_32_bits,)
            )
    seqs, events = core.run_sync(put_all, Principal.system(), blobs={a: b"x"})
    assert seqs == [past_32_bits + 1]
    assert json.loads(events[0][1])["seq"] == past_32_bits + 1
    assert stored(core, a)[-1] == (past_32_bits + 1, b"x", None)


class CountingWakeUps(WakeUps):
    """``WakeUps`` that note the seq of every message they make."""

    __slots__ = ("made",)

    def __init__(self, sender: str, type: str) -> None:
        super().__init__(sender, type)
        self.made: list[int] = []

    def message(self, seq: int, prev: int, blob: bytes) -> str:
        self.made.append(seq)
        return super().message(seq, prev, blob)


def test_a_wake_up_is_made_only_for_a_device_the_fanout_may_deliver_to() -> None:
    counting = CountingWakeUps("server", "push")
    event = EnvelopesQueued(counting, (("dev_a", 5, 0, b"{}"), ("dev_b", 6, 2, b"{}")))
    heard = event.wake_ups(lambda topic: topic == device_topic("dev_b"))
    assert heard == ((device_topic("dev_b"), WakeUps("server", "push").message(6, 2, b"{}")),)
    assert counting.made == [6]  # dev_a's was never made
    assert [topic for topic, _ in event.wake_ups()] == [device_topic("dev_a"), device_topic("dev_b")]
