"""``Tx``: what a plain operation receives — its transaction, and the parts of the Core it may use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy import Connection
from sqlmodel import Session

from core.adapters.limits.base import RateLimiter
from core.adapters.push.base import PushRoutes
from core.adapters.storage.base import ObjectStore
from core.clock import Clock
from core.principal import Principal
from core.runtime.events import Event
from core.server_keys import ServerKeys
from core.settings import Settings

P = ParamSpec("P")
T = TypeVar("T")


# In a session's ``info``: the device ids whose rows the transaction locked up front (a PostgreSQL
# group, ``core.runtime.group_commit``); a write among them need not lock them again.
LOCKED_DEVICES = "relaybox_locked_devices"
# In a group's session ``info``, beside ``LOCKED_DEVICES``: by locked device id, how many writes of
# the group act for its account, so the most entries the group's sends queue to it
# (``core.queue._held``).
GROUP_WRITES_TO = "relaybox_group_writes_to"


@dataclass
class Tx:
    """One operation's view of the Core: one transaction, plus what it may use."""

    settings: Settings
    clock: Clock
    keys: ServerKeys
    limiter: RateLimiter
    push: PushRoutes  # which sender would serve a device, and what it takes; sending is after commit
    objects: ObjectStore
    events: list[Event] = field(default_factory=list)
    read_connection: Connection | None = None  # a quick read's connection, in its transaction
    opened_session: Session | None = None  # the ORM session, once there is one
    _connection: Connection | None = field(default=None, init=False, repr=False)  # the session's, once asked

    @property
    def session(self) -> Session:
        """The transaction's ORM session. A quick read gets one only if it asks (most read with
        ``connection()`` alone, and a session costs more than their statement); it joins the
        read's transaction."""
        if self.opened_session is None:
            self.opened_session = Session(bind=self.read_connection, expire_on_commit=False)
        return self.opened_session

    def connection(self) -> Connection:
        """The transaction's connection, for statements run without the ORM (a send asks for it
        several times; the session would look it up again each time)."""
        if self.read_connection is not None:
            return self.read_connection
        if self._connection is None:
            self._connection = self.session.connection()
        return self._connection

    def now(self) -> int:
        return int(self.clock.now())

    def emit(self, event: Event) -> None:
        self.events.append(event)


SyncOp = Callable[Concatenate[Tx, Principal, P], T]


class MakeTx(Protocol):
    """The Core's ``Tx`` factory, for a session (worker thread, group) or a quick read's connection."""

    def __call__(self, session: Session | None = None, read_connection: Connection | None = None) -> Tx: ...


Outcome = tuple[T, list[Event]]  # an operation's result and the events it emitted
