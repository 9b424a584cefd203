"""The Core: settings, storage, clock and adapters, and ``Core.run`` — how every door calls an operation.

An operation is either
- a plain function ``op(tx, principal, **kw)``: it runs on a worker thread inside one database
  transaction (``Tx``); events it emits are acted on after the commit. A ``@quick_read`` (a few rows
  by index) runs on the event loop instead when the database is a SQLite file and is not busy; or
- an ``async def op(core, principal, **kw)`` for operations that wait (long polls); it composes
  plain operations through ``core.run`` and never holds a transaction while it waits.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Collection, Coroutine, Hashable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

import anyio
from anyio.abc import TaskGroup
from anyio.lowlevel import EventLoopToken
from sqlalchemy import Connection, Engine, text
from sqlmodel import Session

from core.adapters.fanout.base import Fanout
from core.adapters.limits.base import RateLimiter
from core.adapters.push.base import PushTarget
from core.adapters.push.router import PushRouter
from core.adapters.storage.base import ObjectStore
from core.availability import DOWN_AS_UNAVAILABLE
from core.clock import Clock
from core.credentials import CREDENTIALS_TOPIC, CredentialCache, device_tag, revocation_message
from core.events import (
    CredentialsRevoked,
    Deferred,
    DeviceRevoked,
    EnvelopeQueued,
    Event,
    Published,
    PushRequested,
    TransfersEnded,
    device_topic,
)
from core.group_commit import GroupCommitter, Write, is_group_commit
from core.loop_reader import NOT_KEPT, LoopReader
from core.principal import Principal
from core.server_keys import ServerKeys
from core.settings import Settings
from core.store.database import checkpoint, session_scope
from core.store.savepoint import in_savepoint, in_transaction

log = logging.getLogger("relaybox.core")

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class Tx:
    """One operation's view of the Core: one transaction, plus what it may use."""

    settings: Settings
    clock: Clock
    keys: ServerKeys
    limiter: RateLimiter
    push_available: Callable[[PushTarget], bool]
    objects: ObjectStore
    web_push_enabled: bool = False
    events: list[Event] = field(default_factory=list)
    read_connection: Connection | None = None  # a quick read's connection, in its transaction
    opened_session: Session | None = None  # the ORM session, once there is one

    @property
    def session(self) -> Session:
        """The transaction's ORM session. A quick read gets one only if it asks (most read with
        ``connection()`` alone, and a session costs more than their statement); it joins the
        read's transaction."""
        if self.opened_session is None:
            self.opened_session = Session(bind=self.read_connection, expire_on_commit=False)
        return self.opened_session

    def connection(self) -> Connection:
        """The transaction's connection, for statements run without the ORM."""
        return self.read_connection if self.read_connection is not None else self.session.connection()

    def now(self) -> int:
        return int(self.clock.now())

    def emit(self, event: Event) -> None:
        self.events.append(event)


SyncOp = Callable[Concatenate[Tx, Principal, P], T]
READ_ONLY_MARK = "__relaybox_read_only__"
F = TypeVar("F", bound=Callable[..., Any])


def read_only(op: F) -> F:
    """Mark an operation that only reads: on SQLite it then never waits for the write lock."""
    setattr(op, READ_ONLY_MARK, True)
    return op


QUICK_READ_MARK = "__relaybox_quick_read__"
CHECKPOINT_INTERVAL_S = 1.0


def quick_read(op: F) -> F:
    """Mark a read-only operation that reads a handful of rows by index and does nothing else (no
    waits, no adapters). On a SQLite file it runs on the event loop itself, on a connection kept for
    it: a WAL reader never waits for a writer, and such a read costs less than the hop to a worker
    thread and back. A busy database sends it to a worker thread as usual; PostgreSQL always does."""
    setattr(op, READ_ONLY_MARK, True)
    setattr(op, QUICK_READ_MARK, True)
    return op


REUSABLE_MARK = "__relaybox_reusable__"


def reusable(op: F) -> F:
    """Mark a ``@quick_read`` whose result depends on nothing but the database, the principal and
    the arguments (not the clock) and is never changed by its callers: on a SQLite file, the same
    call is answered with the result kept from the last one while the database is unchanged (the
    loop's connection asks SQLite whether anything was committed since, which costs less than the
    read). Nothing is kept for a call whose arguments cannot be hashed."""
    setattr(op, REUSABLE_MARK, True)
    return op


def _reuse_key(
    op: Callable[..., Any], principal: Principal, args: tuple[Any, ...], kw: dict[str, Any]
) -> Hashable | None:
    if not getattr(op, REUSABLE_MARK, False):
        return None
    key = (op, principal, args, tuple(sorted(kw.items())) if kw else ())
    try:
        hash(key)
    except TypeError:
        return None
    return key


AsyncOp = Callable[Concatenate["Core", Principal, P], Awaitable[T]]
ReadinessProbe = Callable[[], Awaitable[None]]  # returns when the dependency answers, raises when not


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
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.clock = clock
        self.keys = keys
        self.limiter = limiter
        self.fanout = fanout
        self.push = push
        self.objects = objects
        self.credentials = CredentialCache(clock)  # verified credentials; serves while running
        self._tasks: TaskGroup | None = None
        self._open_streams: dict[str, int] = {}
        self._sqlite_writer = threading.Lock() if engine.dialect.name == "sqlite" else None
        # SQLite writes one transaction at a time: hot writes there share transactions.
        self._group = GroupCommitter(self._write_group) if self._sqlite_writer is not None else None
        self.waiting_polls = 0  # long polls waiting for an answer on this process
        # What /readyz checks, by name; bootstrap adds one per external service (Redis).
        self.readiness_probes: dict[str, ReadinessProbe] = {"database": self._database_ready}
        self._database_probe = threading.Lock()
        self._stopping = False
        self._stop_scopes: set[anyio.CancelScope] = set()
        self._loop: tuple[int, EventLoopToken] | None = None  # (thread id, token) while running
        # Quick reads on the event loop: only a SQLite file (an in-memory database shares its one
        # connection with the worker threads).
        on_file = engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:")
        self.loop_reader = LoopReader(engine) if on_file else None

    # -- lifecycle -------------------------------------------------------------------------
    async def __aenter__(self) -> Core:
        self._stopping = False
        self._loop = (threading.get_ident(), anyio.lowlevel.current_token())
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self.credentials.follow, self.fanout)
        if self._group is not None:
            self._tasks.start_soon(self._group.write_forever)
        if self.loop_reader is not None:  # a SQLite file
            self._tasks.start_soon(self._checkpoint_forever)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.begin_shutdown()
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
        self._loop = None

    # -- shutdown: waits end early so responses finish cleanly ----------------------------
    def begin_shutdown(self) -> None:
        """The server is stopping: open streams end and long polls answer with what they have now,
        instead of being cut when the server's grace period runs out. Callable from any thread."""
        self._stopping = True
        if self._loop is not None and self._loop[0] != threading.get_ident():
            anyio.from_thread.run_sync(self._end_waits, token=self._loop[1])
        else:
            self._end_waits()

    def _end_waits(self) -> None:
        for scope in tuple(self._stop_scopes):
            scope.cancel()

    @property
    def shutting_down(self) -> bool:
        return self._stopping

    @contextmanager
    def until_shutdown(self) -> Iterator[anyio.CancelScope]:
        """A scope around a wait that ends (without error) when shutdown begins; wrap only a wait,
        never a ``yield`` of an async generator."""
        scope = anyio.CancelScope()
        if self._stopping:
            scope.cancel()
        self._stop_scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._stop_scopes.discard(scope)

    @contextmanager
    def long_poll(self) -> Iterator[None]:
        """Around a long poll's wait: counted in ``waiting_polls`` and ended when shutdown begins."""
        self.waiting_polls += 1
        try:
            with self.until_shutdown():
                yield
        finally:
            self.waiting_polls -= 1

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

    # -- presence: open streams (counted on this process for /metrics; asked of the fan-out) --
    def stream_opened(self, device_id: str) -> None:
        self._open_streams[device_id] = self._open_streams.get(device_id, 0) + 1

    def stream_closed(self, device_id: str) -> None:
        remaining = self._open_streams.get(device_id, 0) - 1
        if remaining > 0:
            self._open_streams[device_id] = remaining
        else:
            self._open_streams.pop(device_id, None)

    async def streaming(self, device_ids: Collection[str]) -> set[str]:
        """Which of ``device_ids`` have a ``/v1/sync`` stream open on any replica: an open stream is
        subscribed to its device's fan-out topic, and nothing else is."""
        topics = {device_topic(device_id): device_id for device_id in device_ids}
        return {topics[topic] for topic in await self.fanout.listened(topics)}

    @property
    def open_stream_count(self) -> int:
        return sum(self._open_streams.values())

    # -- running operations ----------------------------------------------------------------
    @overload
    async def run(self, op: AsyncOp[P, T], principal: Principal, /, *args: P.args, **kw: P.kwargs) -> T: ...

    @overload
    async def run(self, op: SyncOp[P, T], principal: Principal, /, *args: P.args, **kw: P.kwargs) -> T: ...

    async def run(self, op: Any, principal: Principal, /, *args: Any, **kw: Any) -> Any:
        """Run ``op``; a dependency that does not answer becomes 503 ``unavailable`` for every door."""
        with DOWN_AS_UNAVAILABLE:
            if inspect.iscoroutinefunction(op):
                return await op(self, principal, *args, **kw)
            read = await self._quick_read_on_loop(op, principal, args, kw) if self._on_loop(op) else None
            if read is not None:
                result, events = read
            elif self._group is not None and self._group.running and is_group_commit(op) and self._in_loop():
                result, events = await self._group.submit(Write(op, principal, args, kw))
            else:
                result, events = await anyio.to_thread.run_sync(
                    functools.partial(self._run_in_transaction, op, principal, args, kw)
                )
        await self._after_commit(events)
        return result

    def _on_loop(self, op: Callable[..., Any]) -> bool:
        return self.loop_reader is not None and getattr(op, QUICK_READ_MARK, False) and self._in_loop()

    def _in_loop(self) -> bool:
        """Called from the event loop the Core runs in (not another loop, not a worker thread)."""
        return self._loop is not None and self._loop[0] == threading.get_ident()

    async def _quick_read_on_loop(
        self, op: Callable[..., T], principal: Principal, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> tuple[T, list[Event]] | None:
        """Run a quick read on the loop's own connection; ``None`` when the database is busy (the
        caller then runs it on a worker thread) or the Core stopped while the connection opened."""
        assert self.loop_reader is not None
        connection = self.loop_reader.opened or await self.loop_reader.connection()
        if self._loop is None:
            self.loop_reader.close()
            return None
        key = _reuse_key(op, principal, args, kw)
        if key is not None:
            kept = self.loop_reader.kept(connection, key)
            if kept is not NOT_KEPT:
                return kept, []
        tx = self._tx(read_connection=connection)

        def run() -> T:
            try:
                result = op(tx, principal, *args, **kw)
                session = tx.opened_session
                if session is not None and (session.new or session.dirty or session.deleted):
                    raise RuntimeError("a read-only operation changed rows")
                return result
            finally:
                if tx.opened_session is not None:
                    tx.opened_session.close()

        done, result = self.loop_reader.read(connection, run)
        if not done:
            return None
        if key is not None and not tx.events:
            self.loop_reader.keep(key, result)
        return result, tx.events

    def _tx(self, session: Session | None = None, read_connection: Connection | None = None) -> Tx:
        return Tx(
            self.settings,
            self.clock,
            self.keys,
            self.limiter,
            self.push.can_reach,
            self.objects,
            web_push_enabled=self.push.web_push_enabled,
            read_connection=read_connection,
            opened_session=session,
        )

    def run_sync(self, op: SyncOp[P, T], principal: Principal, /, *args: P.args, **kw: P.kwargs) -> T:
        """Run a plain operation from synchronous code (CLI, maintenance); events are only published
        when the Core is running inside an event loop, which synchronous callers are not."""
        result, _events = self._run_in_transaction(op, principal, args, kw)
        return result

    def _run_in_transaction(
        self, op: Callable[..., T], principal: Principal, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> tuple[T, list[Event]]:
        read_only_op = getattr(op, READ_ONLY_MARK, False)
        # SQLite has one writer at a time: queue this process's writers on a lock rather than in
        # SQLite's busy handler, which sleeps (up to 100 ms a try) while the lock sits free.
        writer_turn = (
            self._sqlite_writer if self._sqlite_writer is not None and not read_only_op else nullcontext()
        )
        with writer_turn, session_scope(self.engine, read_only=read_only_op) as session:
            tx = self._tx(session)
            result = op(tx, principal, *args, **kw)
        return result, tx.events

    def _write_group(self, writes: list[Write]) -> None:
        """On a worker thread: the group in one transaction, each write in a savepoint of its own,
        so that one that raises is rolled back alone and the others are still written. Each write
        runs exactly once (what it did outside the transaction, such as charging rate limits, is
        not repeated): when the transaction itself fails, so does every write it held."""
        if len(writes) == 1:
            [write] = writes
            try:
                write.succeeded(*self._run_in_transaction(write.op, write.principal, write.args, write.kw))
            except Exception as error:
                write.failed(error)
            return
        assert self._sqlite_writer is not None  # groups are for SQLite
        outcomes: list[tuple[Any, list[Event]] | Exception] = []
        try:
            with self._sqlite_writer, session_scope(self.engine) as session:
                for write in writes:
                    outcome = self._write_in_savepoint(session, write)
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

    def _write_in_savepoint(self, session: Session, write: Write) -> tuple[Any, list[Event]] | Exception:
        tx = self._tx(session)
        try:
            result = in_savepoint(
                session, functools.partial(write.op, tx, write.principal, *write.args, **write.kw)
            )
        except Exception as error:
            return error
        return result, tx.events

    # -- after commit ----------------------------------------------------------------------
    async def _after_commit(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, EnvelopeQueued):
                await self.fanout.publish(device_topic(event.recipient_device_id), event.message)
            elif isinstance(event, DeviceRevoked):
                await self._revoke_credentials((device_tag(event.device_id),))
                await self.fanout.publish(device_topic(event.device_id), json.dumps({"revoked": True}))
            elif isinstance(event, CredentialsRevoked):
                await self._revoke_credentials(event.tags)
            elif isinstance(event, Published):
                await self.fanout.publish(event.topic, event.message)
            elif isinstance(event, PushRequested):
                self.spawn(self._push, event)
            elif isinstance(event, Deferred):
                self.spawn(self._deferred, event)
            elif isinstance(event, TransfersEnded):
                await self._delete_objects(event)  # inline: once a transfer is ended, its objects are gone

    async def _revoke_credentials(self, tags: tuple[str, ...]) -> None:
        """Forget revoked credentials here before the revoking request is answered, and tell the
        other replicas."""
        self.credentials.drop(tags)
        await self.fanout.publish(CREDENTIALS_TOPIC, revocation_message(tags))

    def defer(self, event: Deferred) -> None:
        """Run bookkeeping in the background, as an operation's ``Deferred`` event would."""
        self.spawn(self._deferred, event)

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run ``fn`` in the background, off the request path; without a running Core it runs inline."""
        if self._tasks is None:
            log.warning("core not started; background work dropped")
            return
        self._tasks.start_soon(fn, *args)

    async def _deferred(self, event: Deferred) -> None:
        try:
            await self.run(event.op, Principal.system(), **event.kwargs)
        except Exception:
            log.exception("deferred bookkeeping failed", extra={"op": getattr(event.op, "__name__", "?")})

    async def _delete_objects(self, event: TransfersEnded) -> None:
        for transfer_id in event.transfer_ids:
            try:
                await anyio.to_thread.run_sync(self.objects.delete_transfer, transfer_id)
            except Exception:
                log.exception("deleting a transfer's objects failed", extra={"transfer_id": transfer_id})

    async def _push(self, event: PushRequested) -> None:
        try:
            await self.push.send(event.target, event.message)
        except Exception:
            log.exception("push failed unexpectedly", extra={"push_type": event.message.type})
