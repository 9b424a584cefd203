"""A deadline on every PostgreSQL connection in use, so a database that stops answering costs a
request a few seconds and a 503, never a hang.

Timeouts in the connection string do not cover the failure that matters: a server (or a proxy, or
a half-dead network path) that keeps the TCP connection open and acknowledges every byte but never
answers. ``statement_timeout`` is the server's to enforce, and TCP keepalives and
``tcp_user_timeout`` are satisfied by whatever acknowledges the packets. So the bound is kept here,
on the client: each connection checked out of the pool is registered with the time it must be
back, and a watchdog thread shuts the socket of any connection past its deadline. The driver's
blocked read then fails at once, SQLAlchemy invalidates the connection and rolls back, and the
caller gets 503 ``unavailable`` (``core.availability``); nothing half-written can commit later.
A connection whose socket was shut is never handed out again, even when what it was doing
finished just before: its ping answering only after the deadline, or a check-in racing the
watchdog. The pool replaces it with a new one.

The same check-out handler pings a connection that sat in the pool for more than
``PING_AFTER_IDLE_S`` first (SQLAlchemy's pessimistic-disconnect recipe, under a short deadline of
its own, unlike ``pool_pre_ping``): one that went stale or silent while pooled is replaced by a new
one, whose connect has its own timeout. A connection back in use within that time is not pinged: a
ping is a round trip, as costly as a send's statements, and a connection that fails in use is cut
off by its deadline and replaced all the same.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy import exc as sa

log = logging.getLogger("relaybox.database")

WATCH_INTERVAL_S = 0.1
PING_DEADLINE_S = 1.0  # a pooled connection's ping; missing it costs a reconnect, not an error
PING_AFTER_IDLE_S = 2.0  # pooled longer than this: pinged before use
IDLE_EXIT_S = 5.0  # the watchdog thread ends after this long with no connection out; the next starts it


POOLED_SINCE = "relaybox_pooled_since"  # in the pool record's info: when it was last checked in
CONNECTED = "relaybox_connected"  # in the pool record's info: connected under these deadlines, not used yet


SHUT_DOWN = "relaybox_shut_down"  # in the pool record's info: the watchdog shut its socket


@dataclass(slots=True)
class _Lease:
    connection: Any  # the driver's connection (psycopg), whose socket the watchdog may shut
    deadline: float
    info: dict[Any, Any]  # the pool record's: marked ``SHUT_DOWN`` once the socket is shut
    expired: bool = False


class ConnectionDeadlines:
    """Installed on an engine by ``bound_connections``. Its watchdog thread runs only while the
    engine has connections out (and ``IDLE_EXIT_S`` after), so an idle engine costs nothing."""

    def __init__(self, engine: Engine, seconds: float) -> None:
        self.seconds = seconds
        self._ping = engine.dialect.do_ping  # outside any transaction (psycopg: in autocommit)
        self._leases: dict[int, _Lease] = {}  # by id() of the pool's connection record
        self._lock = threading.Lock()
        self._watchdog: threading.Thread | None = None
        event.listen(engine, "connect", self._connected)
        event.listen(engine, "checkout", self._checked_out)
        event.listen(engine, "checkin", self._checked_in)

    def _checked_out(self, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if record.info.pop(SHUT_DOWN, False):
            # Its deadline passed as it was being checked in: never hand out a shut socket.
            raise sa.DisconnectionError("pooled connection was shut past its deadline")
        now = time.monotonic()
        pooled_since: float | None = record.info.pop(POOLED_SINCE, None)
        # Neither stamp: pooled before the deadlines were installed (the migrations' connection),
        # for how long nobody knows, so it is pinged like one that sat idle.
        just_connected = record.info.pop(CONNECTED, False) and pooled_since is None
        if just_connected or (pooled_since is not None and now - pooled_since <= PING_AFTER_IDLE_S):
            with self._lock:
                self._lease(id(record), _Lease(dbapi_connection, now + self.seconds, record.info))
            return
        lease = _Lease(dbapi_connection, now + PING_DEADLINE_S, record.info)
        with self._lock:
            self._lease(id(record), lease)
        try:
            self._ping(dbapi_connection)
        except Exception as error:
            self._checked_in(dbapi_connection, record)
            # The pool replaces it with a new connection, whose connect is bounded by its timeout.
            raise sa.DisconnectionError("pooled connection stale or not answering") from error
        with self._lock:
            late = lease.expired  # the ping answered, but only after the watchdog shut the socket
            lease.deadline = time.monotonic() + self.seconds
        if late:
            self._checked_in(dbapi_connection, record)
            raise sa.DisconnectionError("pooled connection answered its ping too late")

    @staticmethod
    def _connected(_dbapi_connection: Any, record: Any) -> None:
        record.info[CONNECTED] = True  # its first check-out needs no ping

    def _lease(self, key: int, lease: _Lease) -> None:
        """Under the lock: watch ``lease``, starting the watchdog if it is not running."""
        self._leases[key] = lease
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch, name="db-deadlines", daemon=True)
            self._watchdog.start()

    def _checked_in(self, _dbapi_connection: Any, record: Any) -> None:
        record.info[POOLED_SINCE] = time.monotonic()
        with self._lock:
            self._leases.pop(id(record), None)

    def _watch(self) -> None:
        idle_since = time.monotonic()
        while True:
            time.sleep(WATCH_INTERVAL_S)
            now = time.monotonic()
            with self._lock:
                if self._leases:
                    idle_since = now
                elif now - idle_since >= IDLE_EXIT_S:
                    self._watchdog = None
                    return
                # Shut under the lock: a connection checked in meanwhile is no longer leased, so a
                # socket the driver has closed (its descriptor maybe reused) is never touched.
                for lease in self._leases.values():
                    if not lease.expired and lease.deadline <= now:
                        lease.expired = True
                        lease.info[SHUT_DOWN] = True
                        _shut(lease.connection)


def _shut(dbapi_connection: Any) -> None:
    """Shut the connection's socket down under whatever thread is blocked on it (a duplicate of its
    descriptor is used, so the driver still owns and closes the original)."""
    try:
        with socket.socket(fileno=os.dup(dbapi_connection.fileno())) as duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)
    except Exception:  # the driver's own error (psycopg: the connection is closed), OSError
        return  # closed already
    log.warning("database connection past its deadline: closed")


def bound_connections(engine: Engine, seconds: float) -> ConnectionDeadlines:
    """Bound every checked-out connection of a PostgreSQL ``engine`` to ``seconds``."""
    return ConnectionDeadlines(engine, seconds)
