"""Run mode "group commit", for a ``@group_commit`` operation while the Core runs: hot writes
submitted while another group is being written share the next transaction.

What each write pays on top of its own statements — a worker-thread hop, a session, BEGIN and
COMMIT (on PostgreSQL two round trips, on SQLite the write lock) — is paid once per group
instead. On SQLite, with one writer at a time, every write waits for the lock anyway. On
PostgreSQL the writes of one account (a send, a relay) lock the same device rows
(``core.services.delivery.lock_recipients``): apart, each waits for the one before it to commit,
holding a worker thread and a pooled connection; together, they take the locks once. A writer
(one task) writes its groups one after another: every write queued while a group is in the database
goes into the next one (at most ``MAX_GROUP``, on PostgreSQL ``MAX_GROUP_POSTGRES``). A write that
arrives while nothing is being written goes at once, in a group of one, as a worker-thread
transaction would, so nothing waits for company.

Each caller gets exactly its own result or error: one bad request never fails another, and a
write that fails is undone alone (``core.runtime.group_transaction`` writes a group, first without a
savepoint a write, again in savepoints only when a write failed after changing rows). Every write's
effects are committed once, and what it does outside its transaction before it returns (charging
rate limits) is done once; when the transaction itself fails (its commit, or the database ending it
under a write), every operation in it fails with that error, as a lone one would. Side effects that
must wait for the commit (push, fan-out) are events, acted on after it.

On PostgreSQL a group of several first locks every device of the accounts its writes act for, in
one statement, in the order ``lock_recipients`` uses: a group then takes its row locks as one send
does, all at once and in order, so two groups (two replicas) or a group and a lone send cannot
deadlock, which locking send after send in one transaction could. The same statement reads what a
send reads of those devices and their push registrations, for every send of the group: so no write
of a group may change a device or a push registration (``group_transaction`` refuses one that does).

An operation whose ORM flush may fail (a unique constraint used as a check) must not be marked:
the ORM rolls back the whole transaction on a failed flush, failing the group. The marked ones
write with prepared statements.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import anyio
from sqlalchemy import bindparam, func, select
from sqlmodel import Session

from core.principal import Principal
from core.runtime.events import Event
from core.runtime.tx import GROUP_WRITES_TO, LOCKED_DEVICES
from core.store.postgres_arrays import VARCHAR_ARRAY
from core.store.prepared import PreparedStatement
from core.store.tables import Device, PushRegistration

MAX_GROUP = 64  # operations in one transaction: bounds the time the others in it wait
# PostgreSQL gives each savepoint that writes a subtransaction (a group written again in savepoints,
# ``core.runtime.group_transaction``); past 64 in one transaction, every other session's snapshots
# take a slower path (the backend's subtransaction cache overflows).
MAX_GROUP_POSTGRES = 32


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

    def succeeded(self, result: Any, events: list[Event]) -> None:
        self.result, self.events, self.settled = result, events, True

    def failed(self, error: BaseException) -> None:
        self.error, self.settled = error, True


class CoreStoppedError(RuntimeError):
    """The Core stopped before a submitted write was written (it was not: nothing to undo)."""


# Runs on a worker thread: writes the group and records each write's outcome on it.
WriteGroup = Callable[[list[Write]], None]


class GroupCommitter:
    def __init__(self, write_group: WriteGroup, *, max_group: int = MAX_GROUP) -> None:
        self._write_group = write_group
        self._max_group = max_group
        self._queued: list[Write] = []
        self._writing: list[Write] = []
        self._work = anyio.Event()
        # Set once a group's outcomes are recorded, then replaced: every write waits on the one of
        # the moment until it is settled (one event a group, not one a write: an anyio event
        # costs microseconds to make).
        self._written = anyio.Event()
        self.running = False
        # When the group in the database began (``time.monotonic()``), or None while none is.
        self.writing_since: float | None = None

    async def submit(self, write: Write) -> tuple[Any, list[Event]]:
        """Queue ``write`` for the next group and wait until it is written. Once queued it is
        written whatever happens to the caller (as a worker-thread transaction would be)."""
        self._queued.append(write)
        self._work.set()
        with anyio.CancelScope(shield=True):
            while not write.settled:
                await self._written.wait()
        if write.error is not None:
            raise write.error
        return write.result, write.events

    async def write_forever(self) -> None:
        """The task that writes this writer's groups (``core.runtime.group_writers`` runs each)."""
        self.running = True
        try:
            while True:
                await self._work.wait()
                self._work = anyio.Event()
                while self._queued:
                    self._writing = self._queued[: self._max_group]
                    del self._queued[: self._max_group]
                    self.writing_since = time.monotonic()
                    try:
                        await anyio.to_thread.run_sync(self._write_group, self._writing)
                    except Exception as error:  # not expected: each outcome is recorded on its write
                        self._settle(self._writing, error)
                    finally:
                        self.writing_since = None
                    self._settle(self._writing, RuntimeError("the group writer recorded no outcome"))
                    self._writing = []
        finally:
            self.running = False
            stopped = CoreStoppedError("the server stopped before this write was made")
            self._settle([*self._writing, *self._queued], stopped)
            self._queued, self._writing = [], []

    def _settle(self, writes: list[Write], error: BaseException) -> None:
        """Wake the writers' callers; one without an outcome fails with ``error``."""
        for write in writes:
            if not write.settled:
                write.failed(error)
        written, self._written = self._written, anyio.Event()
        written.set()


_DEVICES = Device.__table__  # type: ignore[attr-defined]
_REGISTRATIONS = PushRegistration.__table__  # type: ignore[attr-defined]
# What a send reads of each device of its account (``core.services.send``), in this order, then
# one of the device's push registrations (service, registration) or two NULLs.
ACCOUNT_DEVICE_COLUMNS = (
    "device_id",
    "surface_kind",
    "device_type",
    "name",
    "public_key",
    "fcm_token",
    "fcm_token_kind",
)
# In a group's session ``info``: by account id, the rows of ``ACCOUNT_DEVICE_COLUMNS`` (and a
# registration) of every device the group locked, in the order the devices were created.
ACCOUNT_DEVICE_ROWS = "relaybox_account_device_rows"
_LOCK_ACCOUNTS_DEVICES = PreparedStatement(  # PostgreSQL only, as ``lock_recipients``: by id
    select(
        _DEVICES.c.account_id,
        _DEVICES.c.created_at,
        *(_DEVICES.c[name] for name in ACCOUNT_DEVICE_COLUMNS),
        _REGISTRATIONS.c.service,
        _REGISTRATIONS.c.registration,
    )
    .select_from(_DEVICES.outerjoin(_REGISTRATIONS, _REGISTRATIONS.c.device_id == _DEVICES.c.device_id))
    .where(_DEVICES.c.account_id == func.any(bindparam("accounts", type_=VARCHAR_ARRAY)))
    .order_by(_DEVICES.c.device_id)
    .with_for_update(of=_DEVICES)
)


def lock_devices_of(
    session: Session, account_ids: Collection[str], writes: Counter[str] | None = None
) -> None:
    """PostgreSQL: lock every device of these accounts, before any write of the group locks some.
    The ids go into the session's ``LOCKED_DEVICES``: before any savepoint, so no rollback to one
    releases them, and a write's ``lock_recipients`` among them has nothing left to lock. ``writes``
    (a group's: how many of its writes act for each account) goes into ``GROUP_WRITES_TO``.

    The same statement reads what a send reads of them (``ACCOUNT_DEVICE_ROWS``), so that the sends
    of the group need not each read their account's devices again: locked, the devices cannot change
    until the group commits, and every write of the group was submitted before this read (what it
    sees of the account is the account during each of those requests)."""
    accounts = sorted(account for account in account_ids if account)
    if accounts:
        rows = _LOCK_ACCOUNTS_DEVICES.rows(session.connection(), accounts=accounts)
        by_account: dict[str, list[tuple[Any, ...]]] = {account: [] for account in accounts}
        for row in sorted(rows, key=_created):
            by_account[row[0]].append(row[2:])
        session.info[LOCKED_DEVICES] = frozenset(row[2] for row in rows)
        session.info[ACCOUNT_DEVICE_ROWS] = by_account
        if writes is not None:
            session.info[GROUP_WRITES_TO] = {row[2]: writes[row[0]] for row in rows}


def _created(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """As a send's own read orders devices: by creation, then (paired within the same second as the
    phone) the phone first, then by id."""
    return row[1], row[3] != "phone", row[2]  # created_at, surface_kind, device_id
