"""SQLite: a send to several devices written as one queue row, not one row a device.

Each row of a device dirties its own leaf of the recipient index, and the pages a commit writes
were most of what a device added to a send (``bench/CHANGELOG.md``). A packed row is keyed by the
devices' account (``recipient_device_id`` holds the account id, which no device has), names each
recipient and its seq in ``recipients`` (a JSON object, in the order of the blobs) and holds their
blobs in ``blob``, each behind its length. The seqs are consecutive and the row's own seq is the
last of them, so rows (a device's own and packed ones) sort as their entries do.

A device's packed entries below its ``floor`` (``_counts``) are trimmed: a full queue's write
moves the floor past the device's oldest entry when that entry is packed, as it deletes an own
row. A packed row goes once no device it lists still has it: every listed device's floor is past
it, or the device is gone (its count's row goes with it). The sweep deletes expired rows whole.
Pinned entries and writes to one device keep a row each; PostgreSQL never packs (it writes a
send's rows in one statement and trims them before commit).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    Select,
    String,
    bindparam,
    delete,
    exists,
    func,
    insert,
    literal,
    select,
    union_all,
    update,
)
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import NullType

from core.queue._contract import StoredEntry
from core.store.prepared import PreparedStatement, json_rows
from core.store.tables import Device, QueueCount, QueuedEnvelope

_QUEUE = QueuedEnvelope.__table__  # type: ignore[attr-defined]
_COUNTS = QueueCount.__table__  # type: ignore[attr-defined]
_DEVICES = Device.__table__  # type: ignore[attr-defined]
_LENGTH_BYTES = 4

Entry = tuple[str, int, bytes]  # a recipient device, its seq, its blob


def pack(entries: Iterable[Entry]) -> tuple[str, bytearray]:
    """The ``recipients`` and ``blob`` of a packed row. The blob is a ``bytearray``, which the
    driver binds without an adapter lookup (``_sqlite_sql.insert_rows``)."""
    recipients: dict[str, int] = {}
    blob = bytearray()
    for device, seq, sealed in entries:
        recipients[device] = seq
        blob += len(sealed).to_bytes(_LENGTH_BYTES, "big")
        blob += sealed
    return json.dumps(recipients, separators=(",", ":")), blob


def unpack(recipients: str, blob: bytes) -> Iterator[Entry]:
    """Each recipient's entry of a packed row, in order."""
    offset = 0
    for device, seq in json.loads(recipients).items():
        length = int.from_bytes(blob[offset : offset + _LENGTH_BYTES], "big")
        offset += _LENGTH_BYTES
        yield device, int(seq), bytes(blob[offset : offset + length])
        offset += length


def entry_of(recipients: str, blob: bytes, device: str) -> tuple[int, bytes]:
    """The seq and blob of ``device``'s entry in a packed row that lists it."""
    for listed, seq, sealed in unpack(recipients, blob):
        if listed == device:
            return seq, sealed
    raise LookupError("the packed row does not list the device")


def lists(recipients: ColumnElement[Any], device: ColumnElement[str]) -> ColumnElement[bool]:
    """Whether a packed row's ``recipients`` names ``device`` (a key of its JSON object)."""
    return func.instr(recipients, literal('"') + device + literal('"')) > 0


def packed_rows(device: ColumnElement[str], account: ColumnElement[str], floor: Any) -> Select[int]:
    """The seqs of ``device``'s packed rows at or above ``floor``, oldest first: the account's rows
    walked from the floor in the recipient index, each one's ``recipients`` read (when its sends go
    to all of its account's devices, the first lists the device)."""
    return (
        select(_QUEUE.c.seq)
        .where(
            _QUEUE.c.recipient_device_id == account, _QUEUE.c.seq >= floor, lists(_QUEUE.c.recipients, device)
        )
        .order_by(_QUEUE.c.seq)
    )


# The account's first packed row at or above a floor, with its recipients; and a device's oldest
# packed row at or above its floor, walked for in its account's rows.
FIRST_AT_FLOOR = PreparedStatement(
    select(_QUEUE.c.seq, _QUEUE.c.recipients)
    .where(
        _QUEUE.c.recipient_device_id == bindparam("account", type_=String),
        _QUEUE.c.seq >= bindparam("floor", type_=Integer),
    )
    .order_by(_QUEUE.c.seq)
    .limit(1)
)
OLDEST_LISTING = PreparedStatement(
    packed_rows(
        bindparam("device", type_=String),
        bindparam("account", type_=String),
        bindparam("floor", type_=Integer),
    ).limit(1)
)


def oldest_packed(connection: Connection, account_id: str, floors: dict[str, int]) -> dict[str, int | None]:
    """Each device's oldest packed row at or above its floor (``floors``: by device), None when it
    has none. The devices of one floor share one read of the account's first row there (its
    ``recipients`` parsed once), and only those it does not list walk on (each device of a full
    queue whose oldest entry was packed moved its floor past the same row: a send to all of an
    account's devices lists each of them)."""
    by_floor: dict[int, list[str]] = {}
    for device, floor in floors.items():
        by_floor.setdefault(floor, []).append(device)
    oldest: dict[str, int | None] = {}
    for floor, devices in by_floor.items():
        first = FIRST_AT_FLOOR.rows(connection, account=account_id, floor=floor)
        listed = json.loads(first[0][1]) if first else {}  # its recipients, parsed once for all
        for device in devices:
            if not first:  # the account has no packed row from there on
                oldest[device] = None
            elif device in listed:
                oldest[device] = first[0][0]
            else:
                oldest[device] = OLDEST_LISTING.scalar(
                    connection, device=device, account=account_id, floor=floor
                )
    return oldest


def account_of(device: ColumnElement[str]) -> Any:
    """The account of ``device`` (NULL: no such device)."""
    return (
        select(_DEVICES.c.account_id)
        .where(_DEVICES.c.device_id == device)
        .correlate_except(_DEVICES)
        .scalar_subquery()
    )


ACCOUNT_OF = PreparedStatement(select(account_of(bindparam("device_id", type_=String))))


INSERT_PACKED = PreparedStatement(
    insert(_QUEUE).values(
        seq=bindparam("seq", type_=Integer),
        recipient_device_id=bindparam("account", type_=String),
        recipients=bindparam("recipients", type_=String),
        blob=bindparam("blob", type_=NullType()),
        sender=bindparam("sender", type_=String),
        type=bindparam("type", type_=String),
        created_at=bindparam("created_at", type_=Integer),
        expires_at=bindparam("expires_at", type_=Integer),
    )
)

# The packed rows a write's floors passed (a JSON array of seqs) that no device still has: each
# device a row lists has its floor past it, or is gone (its count's row went with it).
# The devices a packed row lists, as rows (``key``: each one's id), beside the row in a FROM.
LISTED = func.json_each(_QUEUE.c.recipients).table_valued("key").alias("listed")
_STILL_HELD = exists().select_from(LISTED.join(_COUNTS, _COUNTS.c.device_id == LISTED.c.key))
_JSON_SEQS = json_rows("seqs", "value")
DROP_UNNEEDED = PreparedStatement(
    delete(_QUEUE).where(
        _QUEUE.c.seq.in_(select(_JSON_SEQS.c.value)), ~_STILL_HELD.where(_COUNTS.c.floor <= _QUEUE.c.seq)
    )
)


def oldest_entries(
    connection: Connection, device_id: str, account_id: str, floor: int, limit: int
) -> tuple[list[int], list[int]]:
    """The seqs of ``device_id``'s oldest unpinned own rows and oldest packed rows at or above
    ``floor``, up to ``limit`` of each, oldest first."""
    own = (
        select(_QUEUE.c.seq)
        .where(_QUEUE.c.recipient_device_id == device_id, _QUEUE.c.tag.is_(None))
        .order_by(_QUEUE.c.seq)
        .limit(limit)
    )
    packed = packed_rows(literal(device_id), literal(account_id), floor).limit(limit)
    return list(connection.scalars(own)), list(connection.scalars(packed))


def read_entries(
    connection: Connection, device_id: str, *, after: int, now: int, limit: int
) -> list[StoredEntry]:
    """``device_id``'s unexpired entries with a seq above ``after``, oldest first, up to ``limit``:
    its own rows and its entries in its account's packed rows at or above its floor."""
    columns = (_QUEUE.c.seq, _QUEUE.c.sender, _QUEUE.c.type, _QUEUE.c.blob, _QUEUE.c.recipients)
    live = (_QUEUE.c.seq > after, _QUEUE.c.expires_at > now)
    own = select(*columns).where(_QUEUE.c.recipient_device_id == device_id, *live)
    floor = select(_COUNTS.c.floor).where(_COUNTS.c.device_id == device_id).scalar_subquery()
    packed = select(*columns).where(
        _QUEUE.c.recipient_device_id == account_of(literal(device_id)),
        _QUEUE.c.seq >= func.coalesce(floor, 0),
        lists(_QUEUE.c.recipients, literal(device_id)),
        func.json_extract(_QUEUE.c.recipients, f'$."{device_id}"') > after,  # its seq, not the row's
        *live,
    )
    entries = []
    for seq, sender, type, blob, recipients in connection.execute(
        union_all(own, packed).order_by("seq").limit(limit)
    ):
        if recipients is not None:
            seq, blob = entry_of(recipients, blob, device_id)
        entries.append(StoredEntry(seq, sender, type, bytes(blob)))
    return entries


def unlist_device(connection: Connection, device_id: str, account_id: str) -> None:
    """SQLite: a device being removed taken out of its account's packed rows (its blob with it); a
    row it was the last device of, or whose other devices have all passed it, goes."""
    listing = select(_QUEUE.c.seq, _QUEUE.c.recipients, _QUEUE.c.blob).where(
        _QUEUE.c.recipient_device_id == account_id, lists(_QUEUE.c.recipients, literal(device_id))
    )
    rewritten: list[int] = []
    for seq, recipients, blob in connection.execute(listing).all():
        others = [entry for entry in unpack(recipients, blob) if entry[0] != device_id]
        if not others:
            connection.execute(delete(_QUEUE).where(_QUEUE.c.seq == seq))
            continue
        left, packed = pack(others)
        connection.execute(
            update(_QUEUE).where(_QUEUE.c.seq == seq).values(recipients=left, blob=bytes(packed))
        )
        rewritten.append(seq)
    if rewritten:
        DROP_UNNEEDED.rows(connection, seqs=json.dumps(rewritten))
