"""PostgreSQL's queue statements, built once and run on the driver's cursor (``PreparedStatement``):
the queue is the hot path, and building statements and SQLAlchemy's per-execution work cost more
than running them. A send's entries go in one statement, a data-modifying CTE (``QUEUE_ALL``), and
the queues a transaction wrote are trimmed once, before it commits (``TRIM_OVER_CAP``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import FromClause, Integer, bindparam, delete, func, literal, literal_column, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import UserDefinedType

from core.queue._contract import QUEUE_CAP
from core.queue._stored import QUEUE, entries_from
from core.store.postgres_arrays import BYTEA_ARRAY, VARCHAR_ARRAY
from core.store.prepared import PreparedStatement
from core.store.tables import Device


class _RowAddress(UserDefinedType[str]):
    """PostgreSQL's ``tid``: a row's address in its table (``ctid``)."""

    cache_ok = True

    def get_col_spec(self, **_kw: Any) -> str:
        return "TID"


def queue_of(table: FromClause, recipient: ColumnElement[str]) -> ColumnElement[bool]:
    """``table``'s entries of ``recipient``, as a range of one value, with the scans below ordered
    by (recipient, seq) as the recipient index is. With an equality the planner folds the
    recipient out of the order and may walk the primary key by seq instead, filtering by
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
    """An array parameter read through a scalar subquery, so the planner never sees its length and
    the prepared statement keeps one generic plan: with the arrays in plain sight every execution
    was planned afresh (a custom plan for 2 rows always costs less than the generic one for unknown
    arrays), about 0.2 ms of PostgreSQL CPU a send."""
    return select(bindparam(name, type_=array_type)).scalar_subquery()


def _queue_in_one_statement() -> PreparedStatement:
    """Every device's insert and its newest seq before it as one statement, a data-modifying CTE
    over the recipients and blobs as arrays. The newest seq is read in the recipient index alone
    (``queue_of``), from the snapshot before the insert; the recipients are locked already."""
    entries = (
        func.unnest(hidden_array("recipients", VARCHAR_ARRAY), hidden_array("blobs", BYTEA_ARRAY))
        .table_valued("recipient", "blob")
        .render_derived()
    )
    recipient = entries.c.recipient
    prev = select(QUEUE.c.seq).where(queue_of(QUEUE, recipient)).order_by(*newest_first(QUEUE)).limit(1)
    before = select(recipient.label("recipient"), prev.scalar_subquery().label("prev")).cte("before")
    inserted = (
        entries_from({"recipient_device_id": entries.c.recipient, "blob": entries.c.blob})
        .returning(QUEUE.c.recipient_device_id, QUEUE.c.seq)
        .cte("inserted")
    )
    return PreparedStatement(
        select(inserted.c.recipient_device_id, inserted.c.seq, before.c.prev).join_from(
            inserted, before, inserted.c.recipient_device_id == before.c.recipient
        )
    )


QUEUE_ALL = _queue_in_one_statement()

# The entries a transaction pushed over the cap, deleted before it commits. ``written`` names the
# recipient of each unpinned entry it wrote; ``relaybox_queue_entries_over_cap`` (migration 0018,
# which says why a function) walks each of those queues from its newest entry once, whatever the
# number of writes, and answers the addresses of the entries past the cap, as many as were written
# to it: a queue kept within the cap loses its oldest ones, one further over (entries written
# before a lower cap) keeps its excess until it expires (docs/protocol.md).
TRIM_OVER_CAP = PreparedStatement(
    delete(QUEUE).where(
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

_DEVICES = Device.__table__  # type: ignore[attr-defined]
# One array parameter for any number of devices, locked in one order (by id): no deadlock.
LOCK_DEVICES = PreparedStatement(
    select(_DEVICES.c.device_id)
    .where(_DEVICES.c.device_id == func.any(bindparam("ids", type_=VARCHAR_ARRAY)))
    .order_by(_DEVICES.c.device_id)
    .with_for_update()
)
