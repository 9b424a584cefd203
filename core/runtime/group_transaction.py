"""A group of writes in one transaction (``core.runtime.group_commit``), each caller getting exactly
its own outcome, and a write's changes undone alone when it fails.

A group is written first without savepoints: on PostgreSQL a savepoint is one more round trip a
write and a subtransaction in the server, about 7% of a send. A write that fails before changing
anything simply fails alone: there is nothing of it to undo, which ``change_mark`` tells without a
round trip (on PostgreSQL by its statements: one that ran none, as a refused send in a group does,
its validation, limits and devices all checked before its first, changed nothing). One that fails
after changing rows (or whose statement the database refused) cannot be undone alone: the
transaction is rolled back and written again, this time each write in a savepoint of its own
(``core.store.savepoint``), the failed one failing with its first error without running again. The
writes before it run a second time: what they did outside the transaction on their first run,
charging rate limits, is not done again, as a ``ReplayingLimiter`` answers their limiter calls with
the first run's decisions; so are the writes after it already charged with it
(``core.runtime.ahead``: sends planned ahead are charged together before the first of them is
finished). A transaction is written again at most once, however many of its writes fail after that
one (they are in savepoints by then), and the savepoints' cost is paid only by a transaction that
needs them.

When the transaction itself fails (its commit, or the database ending it under a write), every write
in it fails with that error, as a lone one would, and none runs again.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlmodel import Session

from core.adapters.limits.recorded import LimiterCall, RecordingLimiter, ReplayingLimiter
from core.runtime.ahead import Ahead, charge_together, planned
from core.runtime.group_commit import Write, lock_devices_of
from core.runtime.tally import Tally
from core.runtime.transaction import run_in_transaction
from core.runtime.tx import MakeTx, Outcome, Tx
from core.store.change_marks import change_mark
from core.store.database import session_scope
from core.store.savepoint import in_failed_transaction, in_savepoint, in_transaction
from core.store.tables import Device, PushRegistration

# A transaction open this long takes no further write: the rest of the group goes in the next one,
# so that a group under slow writes (a slow Redis, say) stays far within the connection deadline
# (``core.store.deadline``), each transaction holding its locks no longer than this and one write.
GROUP_BUDGET_S = 0.25

Results = list[Outcome[Any] | Exception]  # one a write taken, in the group's order


def write_group(
    engine: Engine,
    sqlite_writer: threading.Lock | None,
    make_tx: MakeTx,
    rewrites: Tally,  # counts the transactions written again in savepoints (``/metrics``)
    writes: list[Write],
) -> None:
    """On a worker thread: the group in one transaction (or, should it run long, several one after
    another: ``GROUP_BUDGET_S``), each write's outcome recorded on it. Each write's effects are
    committed once; a write that fails is undone alone (see the module)."""
    if len(writes) == 1:
        [write] = writes
        try:
            write.succeeded(
                *run_in_transaction(
                    engine, sqlite_writer, make_tx, write.op, write.principal, write.args, write.kw
                )
            )
        except Exception as error:
            write.failed(error)
        return
    while writes:
        writes = writes[_write_in_one_transaction(engine, sqlite_writer, make_tx, rewrites, writes) :]


class _ChangedThenFailedError(Exception):
    """Raised out of a transaction written without savepoints, to roll it back: ``writes[index]``
    failed with ``error`` after changing rows."""

    def __init__(self, index: int, error: Exception, limiter_calls: list[list[LimiterCall]]) -> None:
        super().__init__(index)
        self.index = index
        self.error = error
        self.limiter_calls = limiter_calls  # of each write taken on the first run (charged or not)


def _write_in_one_transaction(
    engine: Engine,
    sqlite_writer: threading.Lock | None,
    make_tx: MakeTx,
    rewrites: Tally,  # counts the transactions written again in savepoints (``/metrics``)
    writes: list[Write],
) -> int:
    """The first of ``writes`` in one transaction, and those after it while the transaction has
    been open less than ``GROUP_BUDGET_S``; records their outcomes and returns how many it took."""
    try:
        results = _in_transaction(
            engine, sqlite_writer, writes, functools.partial(_without_savepoints, make_tx, writes)
        )
    except _ChangedThenFailedError as failed:  # rolled back: written again, in savepoints
        rewrites.counted()
        results = _in_transaction(
            engine, sqlite_writer, writes, functools.partial(_with_savepoints, make_tx, writes, failed)
        )
    for write, outcome in zip(writes, results, strict=False):
        if isinstance(outcome, Exception):
            write.failed(outcome)
        else:
            write.succeeded(*outcome)
    return len(results)


def _in_transaction(
    engine: Engine,
    sqlite_writer: threading.Lock | None,
    writes: list[Write],
    write_all: Callable[[Session, Results], None],
) -> Results:
    """``write_all(session, results)`` in one transaction, committed after it. When the transaction
    fails, every write it held fails with its error (a write that failed alone keeps its own), and
    so does every write after them: the outcome of each of ``writes`` up to the last taken."""
    results: Results = []
    try:
        with sqlite_writer or nullcontext(), session_scope(engine) as session:
            session.info[_GROUP] = True
            if sqlite_writer is None:
                accounts = Counter(write.principal.account_id for write in writes)
                lock_devices_of(session, accounts, accounts)
            write_all(session, results)
    except _ChangedThenFailedError:
        raise
    except Exception as error:  # rolled back
        results[:] = [r if isinstance(r, Exception) else error for r in results]
        results += [error] * (len(writes) - len(results))
    return results


def _without_savepoints(make_tx: MakeTx, writes: list[Write], session: Session, results: Results) -> None:
    """Each write as it comes, its limiter calls recorded: a write planned ahead of its charge
    (``core.runtime.ahead``) waits for the next write not planned, or the group's end, to be
    charged with the planned ones before it, then finished in order. Raises
    ``_ChangedThenFailedError`` (and so rolls the transaction back) at the first that fails after
    changing rows."""
    started = time.monotonic()
    connection = session.connection()
    limiter_calls: list[list[LimiterCall]] = []  # of each write taken, in the group's order
    ahead: list[Ahead] = []
    for index, write in enumerate(writes):
        if (results or ahead) and time.monotonic() - started > GROUP_BUDGET_S:
            break
        tx = make_tx(session)
        calls: list[LimiterCall] = []
        limiter_calls.append(calls)
        mark = change_mark(connection)
        plan = planned(write.op, tx, write.principal, write.args, write.kw)
        if plan is not None:
            if isinstance(plan, Exception):
                plan = _failed_alone(index, plan, session, connection, mark, limiter_calls)
            ahead.append(Ahead(index, tx, calls, plan))
            continue
        _finish(ahead, session, connection, results, limiter_calls)
        ahead = []
        tx.limiter = RecordingLimiter(tx.limiter, calls)
        results.append(_outcome(index, _bound(write, tx), tx, session, connection, limiter_calls))
    _finish(ahead, session, connection, results, limiter_calls)


def _finish(
    ahead: list[Ahead],
    session: Session,
    connection: Connection,
    results: Results,
    limiter_calls: list[list[LimiterCall]],
) -> None:
    """The planned writes of ``ahead`` charged together, then each finished, in order."""
    charge_together(ahead)
    for write in ahead:
        if isinstance(write.planned, Exception):
            results.append(write.planned)
        else:
            finish = functools.partial(write.planned.finish, write.tx)
            results.append(_outcome(write.index, finish, write.tx, session, connection, limiter_calls))


def _outcome(
    index: int,
    run: Callable[[], Any],
    tx: Tx,
    session: Session,
    connection: Connection,
    limiter_calls: list[list[LimiterCall]],
) -> Outcome[Any] | Exception:
    """``run()``'s result and events, or the error it failed with alone."""
    mark = change_mark(connection)
    try:
        result = run()
        session.flush()
    except Exception as error:
        return _failed_alone(index, error, session, connection, mark, limiter_calls)
    return result, tx.events


def _failed_alone(
    index: int,
    error: Exception,
    session: Session,
    connection: Connection,
    mark: int,
    limiter_calls: list[list[LimiterCall]],
) -> Exception:
    """``error``, when the write failed before changing anything: nothing of it to undo. Else the
    transaction must be rolled back: ``_ChangedThenFailedError``, or ``error`` itself when it
    ended the whole transaction (a failed ORM flush, disk full)."""
    if not in_transaction(session):
        raise error
    if change_mark(connection) != mark or in_failed_transaction(session):
        raise _ChangedThenFailedError(index, error, limiter_calls) from error
    session.expunge_all()  # what it added to the session and never flushed
    return error


def _with_savepoints(
    make_tx: MakeTx, writes: list[Write], failed: _ChangedThenFailedError, session: Session, results: Results
) -> None:
    """Again from the first write, each in a savepoint: those taken on the first run with their
    limiter calls replayed (those before the failed one, and those after it charged with it), the
    failed one failing as it did, those after them as they come."""
    started = time.monotonic()
    taken = len(failed.limiter_calls)
    for index, write in enumerate(writes):
        if index == failed.index:
            results.append(failed.error)
            continue
        if index >= taken and time.monotonic() - started > GROUP_BUDGET_S:
            return
        tx = make_tx(session)
        if index < taken:
            tx.limiter = ReplayingLimiter(tx.limiter, failed.limiter_calls[index])
        try:
            result = in_savepoint(session, _bound(write, tx))
        except Exception as error:
            results.append(error)
            if not in_transaction(session):
                raise  # it ended the whole transaction (a failed ORM flush, disk full)
        else:
            results.append((result, tx.events))


def _bound(write: Write, tx: Tx) -> Callable[[], Any]:
    """The write's operation with everything it is called with."""
    return functools.partial(write.op, tx, write.principal, *write.args, **write.kw)


_GROUP = "relaybox_group"  # in a group transaction's session ``info``


class GroupRuleBrokenError(RuntimeError):
    """A ``@group_commit`` write broke the group writer's rule (``core.runtime.group_commit``)."""


@event.listens_for(Session, "before_flush")
def _no_device_changes_in_a_group(session: Session, _context: object, _instances: object) -> None:
    """The group writer's rule, checked: no write of a group changes a device or a push
    registration, which the group read once for all of its sends while locking them."""
    if session.info.get(_GROUP):
        for row in (*session.new, *session.dirty, *session.deleted):
            if isinstance(row, Device | PushRegistration):
                raise GroupRuleBrokenError(f"a @group_commit write changed a {type(row).__name__}")
