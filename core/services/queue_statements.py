"""The queue's statements, built once and run on the driver's cursor (``PreparedStatement``): the
queue is the hot path, and building statements and SQLAlchemy's per-execution work cost more than
running them. ``core.services.queue`` says when each runs.

SQLite reads what each queue holds and the last seq handed out (``BEFORE``), then inserts the
entries with their seqs (``insert_rows``; a send to several devices is one packed row instead,
``core.services.queue_packed``) and trims and counts (``core.services.queue_sqlite``); a statement
costs no round trip there. PostgreSQL writes them in one, a data-modifying CTE,
and trims the queues a transaction wrote once, before it commits (a walk of each queue's newest
entries that every write made on its own until then).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import (
    FromClause,
    Integer,
    Select,
    String,
    bindparam,
    case,
    column,
    delete,
    func,
    insert,
    literal,
    literal_column,
    select,
    table,
    values,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.dml import Insert, ReturningInsert
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import NullType, UserDefinedType

from core.store.postgres_arrays import BYTEA_ARRAY, VARCHAR_ARRAY
from core.store.prepared import PreparedStatement, json_rows
from core.store.tables import QueueCount, QueuedEnvelope

QUEUE_CAP = 200  # the newest unpinned entries a device's queue keeps

_QUEUE = QueuedEnvelope.__table__  # type: ignore[attr-defined]
_OLDER = _QUEUE.alias("older")
_COUNTS = QueueCount.__table__  # type: ignore[attr-defined]
_SHARED_COLUMNS = ("sender", "type", "created_at", "expires_at", "tag")
# By whether the write pins: how many older unpinned entries a queue keeps beside the new one.
KEPT = {False: QUEUE_CAP - 1, True: QUEUE_CAP}


def _unpinned(recipient: ColumnElement[str]) -> Select[int]:
    """The seqs of the recipient's unpinned entries, read in ``ix_queued_envelopes_recipient_seq``
    alone (it holds the tag)."""
    return select(_OLDER.c.seq).where(_OLDER.c.recipient_device_id == recipient, _OLDER.c.tag.is_(None))


def _counted_first_dropped(recipient: ColumnElement[str], *, pinned: bool) -> ColumnElement[int]:
    """SQLite: the recipient's oldest unpinned own row when its count (``QueueCount``) says the
    write takes the queue one over what it keeps (every write to a full queue), found at the start
    of the recipient's index (NULL otherwise). Its oldest packed row is the other candidate
    (``core.services.queue_packed.oldest_packed``)."""
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
# ``core.services.queue_sqlite`` trims by them.
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


def _entries_from(columns: dict[str, ColumnElement[Any]]) -> Insert:
    """Insert one entry a row of what ``columns`` (by the queue's column each fills) select, with
    what the entries share bound once."""
    return insert(_QUEUE).from_select(
        [*columns, *_SHARED_COLUMNS],
        select(
            *columns.values(),
            bindparam("sender", type_=String),
            bindparam("type", type_=String),
            bindparam("created_at", type_=Integer),
            bindparam("expires_at", type_=Integer),
            bindparam("tag", type_=String),
        ),
    )


def _insert_entries(entries: FromClause) -> ReturningInsert[str, int]:
    """PostgreSQL: ``_entries_from`` the (recipient, blob) of each row of ``entries``, returning
    (recipient, seq) of each."""
    inserted = _entries_from({"recipient_device_id": entries.c.recipient, "blob": entries.c.blob})
    return inserted.returning(_QUEUE.c.recipient_device_id, _QUEUE.c.seq)


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
        _entries_from({"seq": rows.seq, "recipient_device_id": rows.recipient, "blob": rows.blob})
    )


class _RowAddress(UserDefinedType[str]):
    """PostgreSQL's ``tid``: a row's address in its table (``ctid``)."""

    cache_ok = True

    def get_col_spec(self, **_kw: Any) -> str:
        return "TID"


def queue_of(table: FromClause, recipient: ColumnElement[str]) -> ColumnElement[bool]:
    """PostgreSQL: ``table``'s entries of ``recipient``, as a range of one value, with the scans
    below ordered by (recipient, seq) as the recipient index is. With an equality the planner folds
    the recipient out of the order and may walk the primary key by seq instead, filtering by
    recipient: what its statistics make cheapest on a small table (an install with a few devices),
    where each step then reads every other queue's newest entries and, between two vacuums, their
    dead versions (a send's queue write read ~1,000 buffers instead of ~100 on an analyzed database
    of four queues at their cap). A range cannot be folded, so only the recipient index serves it,
    whatever the statistics say (``tests/core/test_queue_plan_postgres.py``; migration 0018's
    function walks the same range)."""
    return table.c.recipient_device_id.between(recipient, recipient)


def newest_first(table: FromClause) -> tuple[ColumnElement[str], ColumnElement[int]]:
    return table.c.recipient_device_id.desc(), table.c.seq.desc()


def hidden_array(name: str, array_type: Any) -> Any:
    """PostgreSQL: an array parameter read through a scalar subquery, so the planner never sees
    its length and the prepared statement keeps one generic plan (``_queue_in_one_statement``
    says why)."""
    return select(bindparam(name, type_=array_type)).scalar_subquery()


def _queue_in_one_statement() -> PreparedStatement:
    """PostgreSQL: every device's insert and its newest seq before it as one statement, a
    data-modifying CTE over the recipients and blobs as arrays. The newest seq is read in the
    recipient index alone (``queue_of``), from the snapshot before the insert; the recipients are
    locked already (``lock_recipients``). The queues are trimmed to their cap once the
    transaction's writes are done (``TRIM_OVER_CAP``), not here.

    The arrays are read through scalar subqueries so the planner never sees their length: with
    them in plain sight every execution was planned afresh (a custom plan for 2 rows always costs
    less than the generic one for unknown arrays), about 0.2 ms of PostgreSQL CPU a send; hidden,
    the server-side prepared statement runs its one generic plan, the same plan."""
    entries = (
        func.unnest(
            hidden_array("recipients", VARCHAR_ARRAY),
            hidden_array("blobs", BYTEA_ARRAY),
        )
        .table_valued("recipient", "blob")
        .render_derived()
    )
    recipient = entries.c.recipient
    prev = select(_QUEUE.c.seq).where(queue_of(_QUEUE, recipient)).order_by(*newest_first(_QUEUE)).limit(1)
    before = select(recipient.label("recipient"), prev.scalar_subquery().label("prev")).cte("before")
    inserted = _insert_entries(entries).cte("inserted")
    return PreparedStatement(
        select(inserted.c.recipient_device_id, inserted.c.seq, before.c.prev).join_from(
            inserted, before, inserted.c.recipient_device_id == before.c.recipient
        )
    )


QUEUE_ALL = _queue_in_one_statement()

# PostgreSQL: the entries a transaction pushed over the cap, deleted before it commits. ``written``
# names the recipient of each unpinned entry it wrote; ``relaybox_queue_entries_over_cap``
# (migration 0018, which says why a function) walks each of those queues from its newest entry
# once, whatever the number of writes, and answers the addresses of the entries past the cap, as
# many as were written to it: a queue kept within the cap loses its oldest ones, one further over
# (entries written before a lower cap) keeps its excess until it expires (docs/protocol.md).
TRIM_OVER_CAP = PreparedStatement(
    delete(_QUEUE).where(
        literal_column("queued_envelopes.ctid")
        == func.any(
            func.relaybox_queue_entries_over_cap(
                bindparam("written", type_=VARCHAR_ARRAY),
                literal(QUEUE_CAP, Integer),
                type_=postgresql.ARRAY(_RowAddress()),
            )
        )
    )
)
