"""SQLite's queue: a row a device's entry, like PostgreSQL's, beside each device's count of
unpinned entries and its newest seq (``QueueCount``), so that a write learns from one row whether
it takes a queue over its cap and what its wake-up's ``prev`` is. A statement costs no round trip
here and the writer is serial, so a write reads what each queue holds first (``BEFORE``), numbers
its entries itself, inserts them (``insert_rows``), sets the counts and drops what the cap pushed
out. What else moves a count: the expiry sweep (``RECOUNT_EXPIRING``, before its delete), a
device's removal (``forget_device``), and trigger ``queue_counts_update`` of migration 0016 (an
entry's pin or recipient changed: no code does either).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    String,
    bindparam,
    case,
    column,
    delete,
    func,
    select,
    table,
    true,
    update,
    values,
)
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.types import NullType

from core.queue._contract import QUEUE_CAP, QUEUE_LIFETIME_S, Appended, expires_at
from core.queue._stored import QUEUE, StoredQueue, entries_from
from core.runtime.tx import Tx
from core.store.prepared import PreparedStatement, json_rows
from core.store.tables import QueueCount

_COUNTS = QueueCount.__table__  # type: ignore[attr-defined]
_OLDER = QUEUE.alias("older")
# By whether the write pins: how many older unpinned entries a queue keeps beside the new one.
KEPT = {False: QUEUE_CAP - 1, True: QUEUE_CAP}


def _oldest_unpinned(recipient: Any, limit: Any) -> Any:
    """The seqs of the recipient's oldest unpinned entries, read in the recipient index alone (it
    holds the tag)."""
    return (
        select(_OLDER.c.seq)
        .where(_OLDER.c.recipient_device_id == recipient, _OLDER.c.tag.is_(None))
        .order_by(_OLDER.c.seq)
        .limit(limit)
    )


# The recipients as a JSON array, one read of what each queue holds: its newest seq (NULL: none),
# its oldest unpinned entry when the write takes it one over what it keeps (every write to a full
# queue), its count (NULL: no row yet), and the last seq handed out (the same on every row: the
# larger of ``sqlite_sequence``'s and the table's largest, as ``AUTOINCREMENT`` would go on).
_RECIPIENTS = json_rows("recipients", "value")
_SEQUENCE = table("sqlite_sequence", column("name", String), column("seq", Integer))
_LAST = func.max(
    func.coalesce(select(_SEQUENCE.c.seq).where(_SEQUENCE.c.name == QUEUE.name).scalar_subquery(), 0),
    func.coalesce(select(func.max(QUEUE.c.seq)).scalar_subquery(), 0),
)
BEFORE = {
    pinned: PreparedStatement(
        select(
            _RECIPIENTS.c.value,
            _COUNTS.c.newest,
            case(
                (
                    _COUNTS.c.unpinned == KEPT[pinned] + 1,
                    _oldest_unpinned(_RECIPIENTS.c.value, 1).scalar_subquery(),
                )
            ),
            _COUNTS.c.unpinned,
            _LAST,
        ).select_from(_RECIPIENTS.outerjoin(_COUNTS, _COUNTS.c.device_id == _RECIPIENTS.c.value))
    )
    for pinned in (False, True)
}
_SEQS = json_rows("seqs", "value")
_DROP = PreparedStatement(delete(QUEUE).where(QUEUE.c.seq.in_(select(_SEQS.c.value))))
# The counts to set, a JSON object of device id to [count, newest]; a device without a row gets one.
_JSON_COUNTS = json_rows("counts", "key", "value")
_SET = insert(_COUNTS).from_select(
    ["device_id", "unpinned", "newest"],
    select(
        _JSON_COUNTS.c.key,
        func.json_extract(_JSON_COUNTS.c.value, "$[0]"),
        func.json_extract(_JSON_COUNTS.c.value, "$[1]"),
    ).where(true()),
)  # the WHERE keeps SQLite from reading the upsert's ON as the SELECT's join
_SET_COUNTS = PreparedStatement(
    _SET.on_conflict_do_update(
        index_elements=["device_id"],
        set_={"unpinned": _SET.excluded.unpinned, "newest": _SET.excluded.newest},
    )
)
# Before the sweep deletes the entries expired at ``now``: each count of a device that has some
# becomes the number of its unpinned entries that stay.
_NOW = bindparam("now", type_=Integer)
RECOUNT_EXPIRING = (
    update(_COUNTS)
    .where(
        _COUNTS.c.device_id.in_(
            select(QUEUE.c.recipient_device_id).where(QUEUE.c.expires_at <= _NOW, QUEUE.c.tag.is_(None))
        )
    )
    .values(
        unpinned=select(func.count())
        .where(
            QUEUE.c.recipient_device_id == _COUNTS.c.device_id,
            QUEUE.c.tag.is_(None),
            QUEUE.c.expires_at > _NOW,
        )
        .scalar_subquery()
    )
)
_FORGET_COUNT = delete(_COUNTS).where(_COUNTS.c.device_id == bindparam("device", type_=String))

ROWS_PER_INSERT = 100  # 305 parameters: below the 999 an older SQLite allows a statement
# Row n's parameters: its seq, recipient and blob.
ROW_BINDS = tuple((f"seq_{n}", f"recipient_{n}", f"blob_{n}") for n in range(ROWS_PER_INSERT))


@lru_cache(maxsize=ROWS_PER_INSERT)
def insert_rows(count: int) -> PreparedStatement:
    """One INSERT of ``count`` entries from a list of (seq, recipient, blob) rows, each with the
    seq the caller gave it (no ``RETURNING``, whose rows cost more to hand back than the seqs cost
    to bind). A blob is bound as it is given: a ``bytearray``, which the driver binds without the
    adapter lookup it makes for ``bytes``, a third of the cost of binding a blob."""
    binds: list[tuple[object, ...]] = [
        (bindparam(seq), bindparam(recipient), bindparam(blob, type_=NullType()))
        for seq, recipient, blob in ROW_BINDS[:count]
    ]
    entries = values(
        column("seq", Integer), column("recipient", String), column("blob", NullType()), name="entries"
    ).data(binds)
    rows = entries.cte("entries").c
    return PreparedStatement(
        entries_from({"seq": rows.seq, "recipient_device_id": rows.recipient, "blob": rows.blob})
    )


class SqliteQueue(StoredQueue):
    def append(
        self,
        tx: Tx,
        blobs: Mapping[str, bytes],
        *,
        sender: str,
        type: str,
        ttl_s: int,
        max_lifetime_s: int = QUEUE_LIFETIME_S,
        pin: str | None = None,
        may_hold: bool = True,
    ) -> Appended:
        connection = tx.connection()
        now = tx.now()
        shared = {
            "sender": sender,
            "type": type,
            "created_at": now,
            "expires_at": expires_at(now, ttl_s, max_lifetime_s),
            "tag": pin,
        }
        kept = KEPT[pin is not None]
        before = BEFORE[pin is not None].rows(connection, recipients=json.dumps(list(blobs)))
        first = before[0][4] + 1  # the entries take the seqs after the last one handed out, in order
        newest = {row[0]: row[1] or 0 for row in before}
        appended = {recipient: (first + n, newest[recipient]) for n, recipient in enumerate(blobs)}
        _insert_rows(connection, blobs, appended, shared)
        dropped: list[int] = []
        counts: dict[str, tuple[int, int]] = {}
        for recipient, _newest, oldest, count, _last in before:
            if count is not None and count > kept + 1:  # further over: a cap lowered since it filled
                excess = _oldest_unpinned(recipient, count - kept)
                dropped += connection.execute(excess).scalars()
            elif oldest is not None:
                dropped.append(oldest)
            added = 0 if pin is not None else 1
            counts[recipient] = (min((count or 0) + added, QUEUE_CAP), appended[recipient][0])
        _SET_COUNTS.rows(connection, counts=json.dumps(counts))
        if dropped:
            _DROP.rows(connection, seqs=json.dumps(dropped))
        return appended

    def forget_device(self, tx: Tx, device: str) -> None:
        super().forget_device(tx, device)
        tx.session.execute(_FORGET_COUNT, {"device": device})

    def expire(self, tx: Tx, now: int) -> int:
        tx.session.execute(RECOUNT_EXPIRING, {"now": now})
        return super().expire(tx, now)


def _insert_rows(
    connection: Connection, blobs: Mapping[str, bytes], appended: Appended, shared: dict[str, Any]
) -> None:
    """A row a recipient, ``ROWS_PER_INSERT`` to a statement."""
    entries = list(blobs.items())
    for start in range(0, len(entries), ROWS_PER_INSERT):
        chunk = entries[start : start + ROWS_PER_INSERT]
        rows: dict[str, object] = dict(shared)
        for (seq_bind, recipient_bind, blob_bind), (recipient, blob) in zip(ROW_BINDS, chunk, strict=False):
            rows[seq_bind] = appended[recipient][0]
            rows[recipient_bind] = recipient
            rows[blob_bind] = bytearray(blob)
        insert_rows(len(chunk)).rows(connection, **rows)
