"""SQLite's queue statements, built once and run on the driver's cursor (``PreparedStatement``):
what each queue holds before a write (``BEFORE``), the rows it pushes out (``DROP``) and its rows'
insert (``insert_rows``). ``core.queue._sqlite`` says when each runs."""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import Integer, Select, String, bindparam, case, column, delete, func, select, table, values
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import NullType

from core.queue._contract import QUEUE_CAP
from core.queue._stored import QUEUE as _QUEUE
from core.queue._stored import entries_from
from core.store.prepared import PreparedStatement, json_rows
from core.store.tables import QueueCount

_OLDER = _QUEUE.alias("older")
_COUNTS = QueueCount.__table__  # type: ignore[attr-defined]
KEPT = {False: QUEUE_CAP - 1, True: QUEUE_CAP}


def _unpinned(recipient: ColumnElement[str]) -> Select[int]:
    """The seqs of the recipient's unpinned entries, read in ``ix_queued_envelopes_recipient_seq``
    alone (it holds the tag)."""
    return select(_OLDER.c.seq).where(_OLDER.c.recipient_device_id == recipient, _OLDER.c.tag.is_(None))


def _counted_first_dropped(recipient: ColumnElement[str], *, pinned: bool) -> ColumnElement[int]:
    """SQLite: the recipient's oldest unpinned own row when its count (``QueueCount``) says the
    write takes the queue one over what it keeps (every write to a full queue), found at the start
    of the recipient's index (NULL otherwise). Its oldest packed row is the other candidate
    (``core.queue._packed.oldest_packed``)."""
    oldest = _unpinned(recipient).order_by(_OLDER.c.seq).limit(1).scalar_subquery()
    return case((_COUNTS.c.unpinned == KEPT[pinned] + 1, oldest))


def _last_seq() -> ColumnElement[int]:
    """SQLite: the last seq handed out (0: none yet), the one ``AUTOINCREMENT`` would go on from:
    the larger of the table's ``sqlite_sequence`` entry and its largest seq."""
    handed_out = select(_SEQUENCE.c.seq).where(_SEQUENCE.c.name == _QUEUE.name).scalar_subquery()
    largest = select(func.max(_QUEUE.c.seq)).scalar_subquery()
    return func.max(func.coalesce(handed_out, 0), func.coalesce(largest, 0))


# SQLite: the recipients as a JSON array, one read of what each queue holds before the write: per
# recipient the newest seq it was handed (``QueueCount.newest``; NULL: none), its oldest own row
# when the write pushes one out, its count and floor (NULL: no row yet), and the last seq handed
# out (the same on every row, read once), from which the write numbers its entries itself.
# ``core.queue._sqlite`` trims by them.
_JSON_RECIPIENTS = json_rows("recipients", "value")
_COUNTED = _JSON_RECIPIENTS.outerjoin(_COUNTS, _COUNTS.c.device_id == _JSON_RECIPIENTS.c.value)
_SEQUENCE = table("sqlite_sequence", column("name", String), column("seq", Integer))
BEFORE = {
    pinned: PreparedStatement(
        select(
            _JSON_RECIPIENTS.c.value.label("recipient"),
            _COUNTS.c.newest,
            _counted_first_dropped(_JSON_RECIPIENTS.c.value, pinned=pinned).label("oldest_own"),
            _COUNTS.c.unpinned,
            _COUNTS.c.floor,
            _last_seq().label("last"),
        ).select_from(_COUNTED)
    )
    for pinned in (False, True)
}
# Then the own rows the write pushes out of their queues, by seq (``DROP``: a JSON array of them).
_JSON_SEQS = json_rows("seqs", "value")
DROP = PreparedStatement(delete(_QUEUE).where(_QUEUE.c.seq.in_(select(_JSON_SEQS.c.value))))

ROWS_PER_INSERT = 100  # 305 parameters: below the 999 an older SQLite allows a statement
# Row n's parameters: its seq, recipient and blob.
ROW_BINDS = tuple((f"seq_{n}", f"recipient_{n}", f"blob_{n}") for n in range(ROWS_PER_INSERT))


@lru_cache(maxsize=ROWS_PER_INSERT)
def insert_rows(count: int) -> PreparedStatement:
    """SQLite: one INSERT of ``count`` entries from a list of (seq, recipient, blob) rows, each with
    the seq the caller gave it (``BEFORE``'s last seq and on: no ``RETURNING``, whose rows cost
    more to hand back than the seqs cost to bind). A blob is bound as it is given, with no type's
    processing: a ``bytearray``, which the driver binds without the adapter lookup it makes for
    ``bytes`` (and ``memoryview``, what ``LargeBinary`` would pass), a third of the cost of
    binding a blob."""
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
