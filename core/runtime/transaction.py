"""Run mode "worker thread", the default for a plain operation ``op(tx, principal, …)``: one
transaction on a worker thread, so that blocking database calls never stall the event loop.

On SQLite this process's writers take turns on a lock (``sqlite_writer``) before they begin, rather
than in SQLite's busy handler, which sleeps (up to 100 ms a try) while the lock sits free. Read-only
operations (``@read_only``) never take it: a WAL reader does not wait for a writer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, TypeVar

from sqlalchemy import Engine

from core.principal import Principal
from core.runtime.marks import is_read_only
from core.runtime.tx import MakeTx, Outcome
from core.store.database import session_scope

T = TypeVar("T")


def run_in_transaction(
    engine: Engine,
    sqlite_writer: threading.Lock | None,
    make_tx: MakeTx,
    op: Callable[..., T],
    principal: Principal,
    args: tuple[Any, ...],
    kw: dict[str, Any],
) -> Outcome[T]:
    """On the calling (worker) thread: ``op`` in one transaction, committed before this returns."""
    read_only_op = is_read_only(op)
    writer_turn = sqlite_writer if sqlite_writer is not None and not read_only_op else nullcontext()
    with writer_turn, session_scope(engine, read_only=read_only_op) as session:
        tx = make_tx(session)
        result = op(tx, principal, *args, **kw)
    return result, tx.events
