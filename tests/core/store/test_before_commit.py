"""``before_commit``: what a transaction owes is done in it, in order, once its work is done and
just before it commits (on PostgreSQL sent in one pipeline with the COMMIT); when that fails, the
transaction fails and nothing of it is committed."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, exc, insert

from core.store.database import before_commit, session_scope
from core.store.prepared import PreparedStatement
from core.store.tables import QueuedEnvelope
from tests.helpers import queue_entries

_QUEUE = QueuedEnvelope.__table__  # type: ignore[attr-defined]
_ENTRY = {"sender": "server", "type": "push", "created_at": 1, "expires_at": 2}
# A write that answers no rows: on PostgreSQL it is not waited for until the COMMIT.
_OWED_ENTRY = PreparedStatement(insert(_QUEUE).values(recipient_device_id="dev_owed", blob=b"owed", **_ENTRY))
_BROKEN_ENTRY = PreparedStatement(insert(_QUEUE).values(recipient_device_id="dev_owed", blob=None, **_ENTRY))


def _entry(device_id: str, blob: bytes) -> QueuedEnvelope:
    return QueuedEnvelope(
        recipient_device_id=device_id, blob=blob, sender="server", type="push", created_at=1, expires_at=2
    )


def test_what_a_transaction_owes_is_done_in_order_before_it_commits(engine: Engine) -> None:
    done: list[str] = []
    with session_scope(engine) as session:
        session.add(_entry("dev_work", b"work"))
        before_commit(session, lambda: done.append("first"))
        before_commit(session, lambda: _OWED_ENTRY.rows(session.connection()))
        before_commit(session, lambda: done.append("last"))
        assert done == []  # not while the transaction's work goes on
    assert done == ["first", "last"]
    assert [blob for _, blob, _ in queue_entries(engine, "dev_work")] == [b"work"]
    assert [blob for _, blob, _ in queue_entries(engine, "dev_owed")] == [b"owed"]


def test_when_what_it_owes_fails_nothing_of_the_transaction_commits(engine: Engine) -> None:
    def work() -> None:
        with session_scope(engine) as session:
            session.add(_entry("dev_work", b"work"))
            before_commit(session, lambda: _BROKEN_ENTRY.rows(session.connection()))  # a NULL blob

    with pytest.raises(exc.IntegrityError):
        work()
    assert queue_entries(engine, "dev_work") == [] and queue_entries(engine, "dev_owed") == []
    with session_scope(engine) as session:  # the engine's connections are fine afterwards
        session.add(_entry("dev_work", b"again"))
    assert [blob for _, blob, _ in queue_entries(engine, "dev_work")] == [b"again"]


def test_a_transaction_rolled_back_owes_nothing(engine: Engine) -> None:
    done: list[str] = []

    def failed_work() -> None:
        with session_scope(engine) as session:
            before_commit(session, lambda: done.append("owed"))
            raise RuntimeError("the work failed")

    with pytest.raises(RuntimeError, match="the work failed"):
        failed_work()
    assert done == []
