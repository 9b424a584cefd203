"""The Core: settings, storage, clock and adapters, and ``Core.run`` — how every door calls an
operation (the run modes are described in ``core.runtime``)."""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from inspect import CO_COROUTINE
from types import FunctionType
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

import anyio
from anyio.abc import TaskGroup
from sqlalchemy import Connection, Engine, text
from sqlmodel import Session

from core.adapters.fanout.base import Fanout
from core.adapters.limits.base import RateLimiter
from core.adapters.push.router import PushRouter
from core.adapters.storage.base import ObjectStore
from core.adapters.webhooks.poster import WebhookPoster
from core.availability import DOWN_AS_UNAVAILABLE
from core.clock import Clock
from core.credentials import CredentialCache
from core.principal import Principal
from core.runtime.after_commit import AfterCommit
from core.runtime.events import Deferred
from core.runtime.group_commit import MAX_GROUP, MAX_GROUP_POSTGRES, Write
from core.runtime.group_transaction import write_group
from core.runtime.group_writers import WRITERS_POSTGRES, GroupWriters
from core.runtime.loop_reader import LoopReader, read_on_loop
from core.runtime.marks import is_group_commit, is_quick_read
from core.runtime.presence import Presence
from core.runtime.tally import Tally
from core.runtime.transaction import run_in_transaction
from core.runtime.tx import SyncOp, Tx
from core.runtime.waits import Waits
from core.server_keys import ServerKeys
from core.settings import Settings
from core.store.database import checkpoint, session_scope

log = logging.getLogger("relaybox.core")

P = ParamSpec("P")
T = TypeVar("T")
AsyncOp = Callable[Concatenate["Core", Principal, P], Awaitable[T]]
ReadinessProbe = Callable[[], Awaitable[None]]  # returns when the dependency answers, raises when not
CHECKPOINT_INTERVAL_S = 1.0


class Core:
    def __init__(
        self,
        *,
        settings: Settings,
        engine: Engine,
        clock: Clock,
        keys: ServerKeys,
        limiter: RateLimiter,
        fanout: Fanout,
        push: PushRouter,
        objects: ObjectStore,
        webhooks: WebhookPoster,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.clock = clock
        self.keys = keys
        self.limiter = limiter
        self.fanout = fanout
        self.push = push
        self.objects = objects
        self.webhooks = webhooks  # answer callbacks' POSTs (core.services.callback_delivery)
        self.credentials = CredentialCache(clock)  # verified credentials; serves while running
        self.presence = Presence(fanout)
        self.waits = Waits()
        self.after_commit = AfterCommit(self)
        self._tasks: TaskGroup | None = None
        self._sqlite_writer = threading.Lock() if engine.dialect.name == "sqlite" else None
        # Hot writes under load share transactions (``core.runtime.group_commit``); on PostgreSQL
        # spare writers for when a group is held up (``core.runtime.group_writers``).
        on_sqlite = self._sqlite_writer is not None
        self.group_rewrites = Tally()  # group transactions written again in savepoints (``/metrics``)
        self.group_writers = GroupWriters(
            functools.partial(write_group, engine, self._sqlite_writer, self._tx, self.group_rewrites),
            writers=1 if on_sqlite else WRITERS_POSTGRES,
            max_group=MAX_GROUP if on_sqlite else MAX_GROUP_POSTGRES,
        )
        # What /readyz checks, by name; bootstrap adds one per external service (Redis).
        self.readiness_probes: dict[str, ReadinessProbe] = {"database": self._database_ready}
        self._database_probe = threading.Lock()
        # Quick reads on the event loop: only a SQLite file (an in-memory database shares its one
        # connection with the worker threads).
        on_file = engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:")
        self.loop_reader = LoopReader(engine) if on_file else None
        self._running = lambda: self.waits.running  # made once: every quick read is handed it

    # -- lifecycle -------------------------------------------------------------------------
    async def __aenter__(self) -> Core:
        self.waits.started()
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self.credentials.follow, self.fanout)
        self._tasks.start_soon(self.group_writers.write_forever)
        if self.loop_reader is not None:  # a SQLite file
            self._tasks.start_soon(self._checkpoint_forever)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.waits.begin_shutdown()
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()
        await self._tasks.__aexit__(None, None, None)
        self._tasks = None
        await self.push.aclose()
        await self.fanout.aclose()
        self.limiter.close()
        if self.loop_reader is not None:
            self.loop_reader.close()
        self.engine.dispose()
        self.waits.stopped()

    async def _checkpoint_forever(self) -> None:
        """Keep a SQLite file's WAL short, off the write path (commits do not checkpoint)."""
        while True:
            await anyio.sleep(CHECKPOINT_INTERVAL_S)
            try:
                await anyio.to_thread.run_sync(checkpoint, self.engine)
            except Exception:
                log.warning("WAL checkpoint failed; retrying next interval", exc_info=True)

    # -- readiness -------------------------------------------------------------------------
    async def _database_ready(self) -> None:
        # Abandoned on timeout (/readyz answers at once); the lock keeps a hung connect from
        # piling up a worker thread per probe.
        await anyio.to_thread.run_sync(self._select_one, abandon_on_cancel=True)

    def _select_one(self) -> None:
        if not self._database_probe.acquire(blocking=False):
            raise TimeoutError("the previous database check has not returned")
        try:
            with session_scope(self.engine, read_only=True) as session:
                session.connection().execute(text("SELECT 1"))
        finally:
            self._database_probe.release()

    # -- running operations ----------------------------------------------------------------
    @overload
    async def run(self, op: AsyncOp[P, T], principal: Principal, /, *args: P.args, **kw: P.kwargs) -> T: ...

    @overload
    async def run(self, op: SyncOp[P, T], principal: Principal, /, *args: P.args, **kw: P.kwargs) -> T: ...

    async def run(self, op: Any, principal: Principal, /, *args: Any, **kw: Any) -> Any:
        """Run ``op`` in its mode; a dependency that does not answer becomes 503 ``unavailable``
        for every door."""
        with DOWN_AS_UNAVAILABLE:
            if _is_async(op):
                return await op(self, principal, *args, **kw)
            read = None
            if self.loop_reader is not None and is_quick_read(op) and self.waits.in_loop():
                read = await read_on_loop(self.loop_reader, self._tx, self._running, op, principal, args, kw)
            if read is not None:
                result, events = read
            elif self.group_writers.running and is_group_commit(op) and self.waits.in_loop():
                result, events = await self.group_writers.submit(Write(op, principal, args, kw))
            else:
                result, events = await anyio.to_thread.run_sync(
                    run_in_transaction, self.engine, self._sqlite_writer, self._tx, op, principal, args, kw
                )
        if events:  # most reads have none: no coroutine to make and await for nothing
            await self.after_commit(events)
        return result

    def run_sync(self, op: SyncOp[P, T], principal: Principal, /, *args: P.args, **kw: P.kwargs) -> T:
        """Run a plain operation from synchronous code (CLI, maintenance); its events are dropped:
        nothing is published unless the Core runs inside an event loop, which synchronous callers
        are not."""
        result, _events = run_in_transaction(
            self.engine, self._sqlite_writer, self._tx, op, principal, args, kw
        )
        return result

    def _tx(self, session: Session | None = None, read_connection: Connection | None = None) -> Tx:
        return Tx(
            self.settings,
            self.clock,
            self.keys,
            self.limiter,
            self.push,
            self.objects,
            read_connection=read_connection,
            opened_session=session,
        )

    # -- background work -------------------------------------------------------------------
    def defer(self, event: Deferred) -> None:
        """Run bookkeeping in the background, as an operation's ``Deferred`` event would."""
        self.spawn(self.after_commit.run_deferred, event)

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run ``fn`` in the background, off the request path; while the Core is not running the
        work is dropped, with a warning."""
        if self._tasks is None:
            log.warning("core not started; background work dropped")
            return
        self._tasks.start_soon(fn, *args)


def _is_async(op: Callable[..., Any]) -> bool:
    """``inspect.iscoroutinefunction(op)``, with a plain function (every operation but a few)
    answered from its code flags directly: the same test, without unwrapping methods and partials
    first, on the path of every call."""
    if type(op) is FunctionType:
        return bool(op.__code__.co_flags & CO_COROUTINE)
    return inspect.iscoroutinefunction(op)
