"""How every door runs an operation: ``Core.run(op, principal, **kw)``.

An operation is a function in ``core.services``. ``Core.run`` picks one of four run modes from the
operation itself; each mode is a module here, and its docstring says when it applies:

============================  ============================================================
mode                          used for
============================  ============================================================
async (``core.run`` awaits)   ``async def op(core, principal, …)``: operations that wait
                              (long polls); they compose plain operations through
                              ``core.run`` and hold no transaction while they wait.
worker thread                 ``def op(tx, principal, …)``, the default: one transaction on
(``transaction``)             a worker thread.
quick read (``loop_reader``)  ``@quick_read``: a few rows by index, on the event loop itself
                              when the database is a SQLite file and is not busy.
group commit                  ``@group_commit``: a short write that shares its transaction
(``group_commit``)            with the writes queued beside it (SQLite and PostgreSQL).
============================  ============================================================

Plain operations receive a ``Tx`` (``tx``) and emit events (``events``); after the commit the
Core acts on each through the table in ``after_commit``. ``marks`` holds the decorators.
"""
