"""Run mode "group commit", for a ``@group_commit`` operation on SQLite while the Core runs: hot
writes submitted while another group is being written share the next transaction.

SQLite has one writer at a time, so under load every write waits for the lock anyway; what each
pays on top of its own statements — a worker-thread hop, a session, BEGIN IMMEDIATE and COMMIT —
is paid once per group instead. One task writes the groups, one after another: every write
queued while a group is in the database goes into the next one (at most ``MAX_GROUP``). A write
that arrives while nothing is being written goes at once, in a group of one, so nothing waits
for company.

Each operation of a group runs in a savepoint of its own (``core.store.savepoint``): one that
raises is rolled back to it and fails alone, the others are written, so one bad request never
fails another and each caller gets exactly its own result or error. Every operation runs exactly
once, so what it does outside its transaction before it returns (charging rate limits) is not
repeated; when the transaction itself fails (its commit, or SQLite ending it under a write),
every operation in it fails with that error, as a lone one would. Side effects that must wait
for the commit (push, fan-out) are events, acted on after it.

An operation whose ORM flush may fail (a unique constraint used as a check) must not be marked:
the ORM rolls back the whole transaction on a failed flush, failing the group. The marked ones
write with prepared statements.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from sqlalchemy import Engine
from sqlmodel import Session

from core.principal import Principal
from core.runtime.events import Event
from core.runtime.transaction import run_in_transaction
from core.runtime.tx import MakeTx, Outcome
from core.store.database import session_scope
from core.store.savepoint import in_savepoint, in_transaction

MAX_GROUP = 64  # operations in one transaction: bounds the time the others in it wait


@dataclass(eq=False)
class Write:
    """One submitted operation and, once its group is written, what came of it."""

    op: Callable[..., Any]
    principal: Principal
    args: tuple[Any, ...]
    kw: dict[str, Any]
    result: Any = None
    events: list[Event] = field(default_factory=list)
    error: BaseException | None = None
    settled: bool = False  # written (or refused) with this outcome
    done: anyio.Event = field(default_factory=anyio.Event)

    def succeeded(self, result: Any, events: list[Event]) -> None:
        self.result, self.events, self.settled = result, events, True

    def failed(self, error: BaseException) -> None:
        self.error, self.settled = error, True


class CoreStoppedError(RuntimeError):
    """The Core stopped before a submitted write was written (it was not: nothing to undo)."""


# Runs on a worker thread: writes the group and records each write's outcome on it.
WriteGroup = Callable[[list[Write]], None]


class GroupCommitter:
    def __init__(self, write_group: WriteGroup) -> None:
        self._write_group = write_group
        self._queued: list[Write] = []
        self._writing: list[Write] = []
        self._work = anyio.Event()
        self.running = False

    async def submit(self, write: Write) -> tuple[Any, list[Event]]:
        """Queue ``write`` for the next group and wait until it is written. Once queued it is
        written whatever happens to the caller (as a worker-thread transaction would be)."""
        self._queued.append(write)
        self._work.set()
        with anyio.CancelScope(shield=True):
            await write.done.wait()
        if write.error is not None:
            raise write.error
        return write.result, write.events

    async def write_forever(self) -> None:
        """The one task that writes the groups; runs inside the Core's task group."""
        self.running = True
        try:
            while True:
                await self._work.wait()
                self._work = anyio.Event()
                while self._queued:
                    self._writing = self._queued[:MAX_GROUP]
                    del self._queued[:MAX_GROUP]
                    try:
                        await anyio.to_thread.run_sync(self._write_group, self._writing)
                    except Exception as error:  # not expected: each outcome is recorded on its write
                        self._settle(self._writing, error)
                    self._settle(self._writing, RuntimeError("the group writer recorded no outcome"))
                    self._writing = []
        finally:
            self.running = False
            stopped = CoreStoppedError("the server stopped before this write was made")
            self._settle([*self._writing, *self._queued], stopped)
            self._queued, self._writing = [], []

    @staticmethod
    def _settle(writes: list[Write], error: BaseException) -> None:
        """Wake the writers' callers; one without an outcome fails with ``error``."""
        for write in writes:
            if not write.settled:
                write.failed(error)
            write.done.set()


def write_group(engine: Engine, sqlite_writer: threading.Lock, make_tx: MakeTx, writes: list[Write]) -> None:
    """On a worker thread: the group in one transaction, each write in a savepoint of its own,
    so that one that raises is rolled back alone and the others are still written. Each write
    runs exactly once (what it did outside the transaction, such as charging rate limits, is
    not repeated): when the transaction itself fails, so does every write it held."""
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
    outcomes: list[Outcome[Any] | Exception] = []
    try:
        with sqlite_writer, session_scope(engine) as session:
            for write in writes:
                outcome = _write_in_savepoint(session, make_tx, write)
                outcomes.append(outcome)
                if isinstance(outcome, Exception) and not in_transaction(session):
                    raise outcome  # it ended the whole transaction (a failed ORM flush, disk full)
    except Exception as error:  # rolled back: what failed alone keeps its own error
        outcomes = [o if isinstance(o, Exception) else error for o in outcomes]
        outcomes += [error] * (len(writes) - len(outcomes))
    for write, outcome in zip(writes, outcomes, strict=True):
        if isinstance(outcome, Exception):
            write.failed(outcome)
        else:
            write.succeeded(*outcome)


def _write_in_savepoint(session: Session, make_tx: MakeTx, write: Write) -> Outcome[Any] | Exception:
    tx = make_tx(session)
    try:
        result = in_savepoint(
            session, functools.partial(write.op, tx, write.principal, *write.args, **write.kw)
        )
    except Exception as error:
        return error
    return result, tx.events
