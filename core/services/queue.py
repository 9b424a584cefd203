"""Each device's queue: appending blobs, for all of a send's devices in one write, and keeping it
to its cap. Operations call these inside their transaction; the wake-ups leave after commit.

The newest ``QUEUE_CAP`` untagged entries of a device are kept; a tagged (pinned) entry is never
trimmed, only expired (``core.services.reminders`` bounds how many a device may have).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache

from sqlalchemy import (
    FromClause,
    Integer,
    LargeBinary,
    Select,
    String,
    bindparam,
    case,
    column,
    delete,
    func,
    insert,
    select,
    values,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.dml import ReturningInsert
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import NullType

from core.runtime.events import EnvelopesQueued, device_topic
from core.runtime.tx import LOCKED_DEVICES, Tx
from core.services.queue_wake import WakeUps
from core.store.prepared import PreparedStatement
from core.store.tables import Device, QueueCount, QueuedEnvelope

QUEUE_CAP = 200
QUEUE_LIFETIME_S = 86_400  # device-to-device envelopes
NOTIFICATION_LIFETIME_S = 259_200  # server-composed notifications may wait up to their 72 h ttl
LIVE_GRACE_S = 30  # a ttl of 0 still gives open streams this long to read the entry (decisions.md)


def enqueue_all(
    tx: Tx,
    blobs: Mapping[str, bytes],
    *,
    sender: str,
    type: str,
    ttl_s: int,
    max_lifetime_s: int = QUEUE_LIFETIME_S,
    tag: str | None = None,
) -> list[int]:
    """Append one blob to each device's queue (``blobs``: by recipient device id; ``ttl_s`` up to
    ``max_lifetime_s``; ``tag`` pins the entries), trim each queue to its cap and wake the
    recipients' streams. The seqs, in the order of ``blobs``. Takes the recipients' locks
    (``lock_recipients``), once for all."""
    if not blobs:  # e.g. an urgent stop whose recipients were all removed
        return []
    recipients = list(blobs)
    lock_recipients(tx, recipients)
    now = tx.now()
    connection = tx.connection()
    shared = {
        "sender": sender,
        "type": type,
        "created_at": now,
        "expires_at": now + (min(ttl_s, max_lifetime_s) if ttl_s > 0 else LIVE_GRACE_S),
        "tag": tag,
    }
    pinned = tag is not None
    if connection.dialect.name == "postgresql":  # one round trip for every device
        written = _QUEUE_ALL[pinned].rows(
            connection, recipients=recipients, blobs=list(blobs.values()), **shared
        )
        seqs = {recipient: (seq, prev or 0) for recipient, seq, prev in written}
    else:  # SQLite: no data-modifying CTEs, and a statement costs no round trip
        before = _BEFORE[pinned].rows(connection, recipients=json.dumps(recipients))
        inserted: dict[str, int] = {}
        entries = list(blobs.items())
        for start in range(0, len(entries), _ROWS_PER_INSERT):
            chunk = entries[start : start + _ROWS_PER_INSERT]
            rows: dict[str, object] = dict(shared)
            for (recipient_bind, blob_bind), (recipient, blob) in zip(_ROW_BINDS, chunk, strict=False):
                rows[recipient_bind] = recipient  # chunk is no longer than _ROW_BINDS
                rows[blob_bind] = bytearray(blob)  # see _insert_rows
            inserted.update(_insert_rows(len(chunk)).rows(connection, **rows))
        seqs = {recipient: (inserted[recipient], prev or 0) for recipient, prev, _ in before}
        cutoffs = {recipient: dropped for recipient, _, dropped in before if dropped is not None}
        if cutoffs:  # only queues at their cap: below it there is nothing to trim
            _TRIM.rows(connection, cutoffs=json.dumps(cutoffs))
    message = WakeUps(sender, type).message
    wake_ups = [
        (device_topic(recipient), message(*seqs[recipient], blob)) for recipient, blob in blobs.items()
    ]
    tx.emit(EnvelopesQueued(tuple(wake_ups)))  # one event for every device: one handler after commit
    return [seqs[recipient][0] for recipient in recipients]


def enqueue(
    tx: Tx,
    recipient_device_id: str,
    *,
    sender: str,
    type: str,
    blob: bytes,
    ttl_s: int,
    max_lifetime_s: int = QUEUE_LIFETIME_S,
    tag: str | None = None,
) -> int:
    """``enqueue_all`` for one device: its entry's seq."""
    [seq] = enqueue_all(
        tx,
        {recipient_device_id: blob},
        sender=sender,
        type=type,
        ttl_s=ttl_s,
        max_lifetime_s=max_lifetime_s,
        tag=tag,
    )
    return seq


def lock_recipients(tx: Tx, device_ids: list[str]) -> None:
    """Serialise enqueues per recipient (row locks on PostgreSQL) so that, for each device, sequence
    order is commit order and a stream reading "seq > last" can never step over a late commit. One
    statement for all of a send's devices, in one order (by id) so two sends cannot deadlock. None
    in a group that locked them all up front (``LOCKED_DEVICES``: the devices of its accounts)."""
    connection = tx.connection()
    if connection.dialect.name == "sqlite":  # SQLite writers are serial already
        return
    held = tx.opened_session.info.get(LOCKED_DEVICES) if tx.opened_session is not None else None
    if held is not None and held.issuperset(device_ids):
        return
    _LOCK_DEVICES.rows(connection, ids=sorted(device_ids))


_DEVICES = Device.__table__  # type: ignore[attr-defined]
_LOCK_DEVICES = PreparedStatement(  # PostgreSQL only: one array parameter for any number of devices
    select(_DEVICES.c.device_id)
    .where(_DEVICES.c.device_id == func.any(bindparam("ids", type_=postgresql.ARRAY(String))))
    .order_by(_DEVICES.c.device_id)
    .with_for_update()
)

# Built once and run on the driver's cursor: the queue is the hot path, and building statements
# and SQLAlchemy's per-execution work cost more than running them.
_QUEUE = QueuedEnvelope.__table__  # type: ignore[attr-defined]
_OLDER = _QUEUE.alias("older")
_COUNTS = QueueCount.__table__  # type: ignore[attr-defined]
_SHARED_COLUMNS = ("sender", "type", "created_at", "expires_at", "tag")
# By whether the write pins: how many older unpinned entries a queue keeps beside the new one.
_KEPT = {False: QUEUE_CAP - 1, True: QUEUE_CAP}


def _latest_seq(recipient: ColumnElement[str]) -> ColumnElement[int]:
    """The recipient's newest entry before this write: its streams know whether they missed any."""
    return select(func.max(_QUEUE.c.seq)).where(_QUEUE.c.recipient_device_id == recipient).scalar_subquery()


def _unpinned(recipient: ColumnElement[str]) -> Select[int]:
    """The seqs of the recipient's unpinned entries, read in ``ix_queued_envelopes_recipient_seq``
    alone (it holds the tag)."""
    return select(_OLDER.c.seq).where(_OLDER.c.recipient_device_id == recipient, _OLDER.c.tag.is_(None))


def _first_dropped(recipient: ColumnElement[str], *, pinned: bool) -> ColumnElement[int]:
    """Before this write, the newest of the recipient's unpinned entries that the write pushes over
    the cap (NULL: none is), walked to from the newest."""
    return _unpinned(recipient).order_by(_OLDER.c.seq.desc()).offset(_KEPT[pinned]).limit(1).scalar_subquery()


def _counted_first_dropped(recipient: ColumnElement[str], *, pinned: bool) -> ColumnElement[int]:
    """SQLite: ``_first_dropped`` told by the recipient's count (``QueueCount``) when to look. A
    queue one over what the write keeps (every write to a full queue) drops its oldest unpinned
    entry, the first one at the start of the recipient's index; only a queue further over (a cap
    lowered) walks; one below drops none."""
    count, kept = _COUNTS.c.unpinned, _KEPT[pinned]
    oldest = _unpinned(recipient).order_by(_OLDER.c.seq).limit(1).scalar_subquery()
    return case((count == kept + 1, oldest), (count > kept + 1, _first_dropped(recipient, pinned=pinned)))


def _before(recipients: ColumnElement[str], first_dropped: ColumnElement[int]) -> Select[str, int, int]:
    """Per recipient: its newest seq and its first dropped one, before this write."""
    return select(
        recipients.label("recipient"),
        _latest_seq(recipients).label("prev"),
        first_dropped.label("first_dropped"),
    )


# SQLite: the recipients as a JSON array, one read of what each queue holds before the write.
_JSON_RECIPIENTS = func.json_each(bindparam("recipients", type_=String)).table_valued("value")
_COUNTED = _JSON_RECIPIENTS.outerjoin(_COUNTS, _COUNTS.c.device_id == _JSON_RECIPIENTS.c.value)
_BEFORE = {
    pinned: PreparedStatement(
        _before(
            _JSON_RECIPIENTS.c.value, _counted_first_dropped(_JSON_RECIPIENTS.c.value, pinned=pinned)
        ).select_from(_COUNTED)
    )
    for pinned in (False, True)
}
# Then every queue at its cap trimmed by one DELETE: the JSON object maps each recipient to its
# first dropped seq; it and its recipient's older unpinned entries go.
_JSON_CUTOFFS = func.json_each(bindparam("cutoffs", type_=String)).table_valued("key", "value")
_TRIM = PreparedStatement(
    delete(_QUEUE).where(
        _QUEUE.c.seq.in_(_unpinned(_JSON_CUTOFFS.c.key).where(_OLDER.c.seq <= _JSON_CUTOFFS.c.value))
    )
)


_ROWS_PER_INSERT = 100  # 205 parameters: below the 999 an older SQLite allows a statement
_ROW_BINDS = tuple((f"recipient_{n}", f"blob_{n}") for n in range(_ROWS_PER_INSERT))  # row n's parameters


def _insert_entries(entries: FromClause) -> ReturningInsert[str, int]:
    """Insert one entry a row of ``entries`` (its recipient and blob), with what they share bound
    once; returning (recipient, seq) of each."""
    return (
        insert(_QUEUE)
        .from_select(
            ["recipient_device_id", "blob", *_SHARED_COLUMNS],
            select(
                entries.c.recipient,
                entries.c.blob,
                bindparam("sender", type_=String),
                bindparam("type", type_=String),
                bindparam("created_at", type_=Integer),
                bindparam("expires_at", type_=Integer),
                bindparam("tag", type_=String),
            ),
        )
        .returning(_QUEUE.c.recipient_device_id, _QUEUE.c.seq)
    )


@lru_cache(maxsize=_ROWS_PER_INSERT)
def _insert_rows(count: int) -> PreparedStatement:
    """SQLite: one INSERT of ``count`` entries from a list of (recipient, blob) rows, returning
    (recipient, seq) in no promised order (entries are inserted in the order of their rows). A
    blob is bound as it is given, with no type's processing: a ``bytearray``, which the driver
    binds without the adapter lookup it makes for ``bytes`` (and ``memoryview``, what
    ``LargeBinary`` would pass), a third of the cost of binding a blob."""
    binds: list[tuple[object, object]] = [
        (bindparam(name), bindparam(blob, type_=NullType())) for name, blob in _ROW_BINDS[:count]
    ]
    entries = values(column("recipient", String), column("blob", NullType()), name="entries").data(binds)
    return PreparedStatement(_insert_entries(entries.cte("entries")))


def _queue_in_one_statement(*, pinned: bool) -> PreparedStatement:
    """PostgreSQL: every device's insert, its newest seq before it and its trim as one statement,
    in data-modifying CTEs over the recipients and blobs as arrays. All parts read the snapshot
    from before the insert (hence ``_first_dropped`` leaves room for the new entry); the
    recipients are locked already (``lock_recipients``).

    The arrays are read through scalar subqueries so the planner never sees their length: with
    them in plain sight every execution was planned afresh (a custom plan for 2 rows always costs
    less than the generic one for unknown arrays), about 0.2 ms of PostgreSQL CPU a send; hidden,
    the server-side prepared statement runs its one generic plan, the same plan."""
    entries = (
        func.unnest(
            select(bindparam("recipients", type_=postgresql.ARRAY(String))).scalar_subquery(),
            select(bindparam("blobs", type_=postgresql.ARRAY(LargeBinary))).scalar_subquery(),
        )
        .table_valued("recipient", "blob")
        .render_derived()
    )
    recipient = entries.c.recipient
    before = _before(recipient, _first_dropped(recipient, pinned=pinned)).cte("before")
    inserted = _insert_entries(entries).cte("inserted")
    trimmed = (
        delete(_QUEUE)
        .where(
            _QUEUE.c.recipient_device_id == before.c.recipient,
            _QUEUE.c.tag.is_(None),
            _QUEUE.c.seq <= before.c.first_dropped,
        )
        .returning(_QUEUE.c.seq)
        .cte("trimmed")
    )
    return PreparedStatement(
        select(inserted.c.recipient_device_id, inserted.c.seq, before.c.prev)
        .join_from(inserted, before, inserted.c.recipient_device_id == before.c.recipient)
        .add_cte(trimmed)
    )


_QUEUE_ALL = {pinned: _queue_in_one_statement(pinned=pinned) for pinned in (False, True)}
