"""The marks an operation carries to choose its run mode (``core.runtime``)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from core.principal import Principal

F = TypeVar("F", bound=Callable[..., Any])

READ_ONLY_MARK = "__relaybox_read_only__"
QUICK_READ_MARK = "__relaybox_quick_read__"
REUSABLE_MARK = "__relaybox_reusable__"
GROUP_COMMIT_MARK = "__relaybox_group_commit__"


def read_only(op: F) -> F:
    """Mark an operation that only reads: on SQLite it then never waits for the write lock."""
    setattr(op, READ_ONLY_MARK, True)
    return op


def quick_read(op: F) -> F:
    """Mark a read-only operation that reads a handful of rows by index and does nothing else (no
    waits, no adapters). On a SQLite file it runs on the event loop itself, on a connection kept for
    it: a WAL reader never waits for a writer, and such a read costs less than the hop to a worker
    thread and back. A busy database sends it to a worker thread as usual; PostgreSQL always does."""
    setattr(op, READ_ONLY_MARK, True)
    setattr(op, QUICK_READ_MARK, True)
    return op


def reusable(op: F) -> F:
    """Mark a ``@quick_read`` whose result depends on nothing but the database, the principal and
    the arguments (not the clock) and is never changed by its callers: on a SQLite file, the same
    call is answered with the result kept from the last one while the database is unchanged (after
    any commit of this process, and every few ms for other processes', the loop's connection asks
    SQLite whether anything was committed since: ``core.runtime.loop_reader``). Nothing is kept for
    a call whose arguments cannot be hashed."""
    setattr(op, REUSABLE_MARK, True)
    return op


def group_commit(op: F) -> F:
    """Mark a short write that may share its transaction with others (``core.runtime.group_commit``)."""
    setattr(op, GROUP_COMMIT_MARK, True)
    return op


def is_read_only(op: Callable[..., Any]) -> bool:
    return bool(getattr(op, READ_ONLY_MARK, False))


def is_quick_read(op: Callable[..., Any]) -> bool:
    return bool(getattr(op, QUICK_READ_MARK, False))


def is_group_commit(op: Callable[..., Any]) -> bool:
    return bool(getattr(op, GROUP_COMMIT_MARK, False))


def reuse_key(
    op: Callable[..., Any], principal: Principal, args: tuple[Any, ...], kw: dict[str, Any]
) -> Hashable | None:
    """What a ``@reusable`` call's kept result is filed under; ``None`` when it is not kept. The key
    is not hashed here (its principal's hash is not cheap, and the reader's look-up hashes it): one
    whose arguments do not hash finds nothing kept and keeps nothing (``LoopReader``)."""
    if not getattr(op, REUSABLE_MARK, False):
        return None
    return (op, principal, args, tuple(sorted(kw.items())) if kw else ())
