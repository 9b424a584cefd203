"""When a service relaybox depends on (the database, Redis) does not answer.

Such a failure is not a bug: the caller gets 503 ``unavailable`` with ``Retry-After`` and may try
again, the log gets one warning line naming the service (no traceback, no address), and nothing
the service had accepted before is affected. Pools reconnect by themselves once it is back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import exc as sa

from core.errors import RelayError

log = logging.getLogger("relaybox.availability")

RETRY_AFTER_S = 2
BREAKER_COOLDOWN_S = 5.0


class DependencyUnavailableError(ConnectionError):
    """Raised by an adapter whose external service did not answer (connection refused, reset, timeout)."""

    def __init__(self, service: str) -> None:
        super().__init__(f"{service} is not answering")
        self.service = service


def unavailable_service(error: BaseException) -> str | None:
    """The name of the dependency ``error`` says is down, or ``None`` when it is some other failure."""
    if isinstance(error, DependencyUnavailableError):
        return error.service
    if isinstance(error, sa.DBAPIError) and error.connection_invalidated:
        return "database"
    if isinstance(error, sa.OperationalError | sa.InterfaceError | sa.TimeoutError):
        return "database"  # refused, reset, terminated by the administrator, pool exhausted
    if isinstance(error, ConnectionError | TimeoutError):
        return "a dependency"  # e.g. the fan-out could not subscribe in time
    return None


def failure_kind(error: BaseException) -> str:
    """What failed, for the log, without the error's text (a driver's message can quote a URL or
    a statement's values): the class, and for a database error the driver's class and SQLSTATE
    (``OperationalError (psycopg.OperationalError, 53300)``: too many connections)."""
    kind = type(error).__name__
    cause = getattr(error, "orig", None) if isinstance(error, sa.DBAPIError) else None
    if cause is None:
        return kind
    driver = f"{type(cause).__module__.split('.')[0]}.{type(cause).__name__}"
    sqlstate = getattr(cause, "sqlstate", None) or getattr(cause, "sqlite_errorname", None)
    return f"{kind} ({driver}, {sqlstate})" if sqlstate else f"{kind} ({driver})"


def as_unavailable(error: BaseException) -> RelayError | None:
    """``error`` as a 503 ``unavailable`` (logged once, as a warning), when it means a dependency is down."""
    service = unavailable_service(error)
    if service is None:
        return None
    log.warning("%s unavailable: %s", service, failure_kind(error), extra={"service": service})
    return RelayError("unavailable", headers={"Retry-After": str(RETRY_AFTER_S)})


class _DownAsUnavailable:
    """``with DOWN_AS_UNAVAILABLE:`` raises an error that says a dependency is down as 503
    ``unavailable`` instead (any other passes as it is). One reusable instance: ``Core.run`` is on
    every hot path."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: object) -> None:
        if isinstance(error, Exception):
            unavailable = as_unavailable(error)
            if unavailable is not None:
                raise unavailable from error


DOWN_AS_UNAVAILABLE = _DownAsUnavailable()


class CircuitBreaker:
    """Fail fast while a dependency is known to be down, instead of making every request wait out
    its timeout: after a failure, calls are refused at once for ``cooldown_s``; then one call tries
    again (others are still refused meanwhile), and its success closes the breaker. Thread-safe:
    the rate limiter calls it from worker threads, the fan-out from the event loop."""

    def __init__(
        self,
        service: str,
        cooldown_s: float = BREAKER_COOLDOWN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = service
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._tripped = False
        self._refuse_until = 0.0

    @property
    def tripped(self) -> bool:
        return self._tripped

    def allow(self) -> bool:
        """Whether a call may go ahead now (a trial call, when the breaker is tripped)."""
        now = self._clock()
        with self._lock:
            if not self._tripped:
                return True
            if now < self._refuse_until:
                return False
            self._refuse_until = now + self.cooldown_s  # this caller is the trial
            return True

    def check(self) -> None:
        """``allow`` or raise ``DependencyUnavailableError`` (503 ``unavailable``)."""
        if not self.allow():
            raise DependencyUnavailableError(self.service)

    def succeeded(self) -> None:
        if self._tripped:
            with self._lock:
                self._tripped = False
            log.warning("%s answers again", self.service, extra={"service": self.service})

    def failed(self) -> None:
        with self._lock:
            newly = not self._tripped
            self._tripped = True
            self._refuse_until = self._clock() + self.cooldown_s
        if newly:
            log.warning(
                "%s not answering: failing fast for %.0f s between tries",
                self.service,
                self.cooldown_s,
                extra={"service": self.service},
            )
