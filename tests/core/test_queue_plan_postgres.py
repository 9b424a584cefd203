"""The PostgreSQL queue write is planned once per connection, not once per send: its statement runs
a generic plan once the driver has prepared it (the recipients and blobs are hidden from the
planner, which would otherwise find a custom plan for each send's arrays cheaper every time); and
that plan, and the trim a transaction makes before it commits, read each queue in the recipient
index, whatever the table's statistics say."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, text
from starlette.testclient import TestClient

from core.queue import QUEUE_CAP
from core.queue._pg_sql import QUEUE_ALL, TRIM_OVER_CAP
from core.runtime.core import Core
from core.store.prepared import PreparedStatement
from tests.helpers import register_phone

_SHARED = {"sender": "server", "type": "push", "created_at": 1, "expires_at": 2, "tag": None}


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_the_queue_write_runs_a_generic_plan_after_a_few_sends(client: TestClient, core: Core) -> None:
    devices = [register_phone(client).device_id for _ in range(2)]
    with core.engine.connect() as connection:
        for n in range(12):  # the driver prepares it at the 5th; the server may choose after 5 more
            QUEUE_ALL.rows(connection, recipients=devices, blobs=[b"a%d" % n, b"b%d" % n], **_SHARED)
        plans = connection.execute(
            text(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'WITH %' AND statement LIKE '%INSERT INTO queued_envelopes%'"
            )
        ).one()
        connection.rollback()
    generic, custom = plans
    assert generic >= 1 and custom <= 5, plans


def _explained(connection: Connection, statement: PreparedStatement, args: dict[str, str]) -> Any:
    """The generic plan PostgreSQL keeps for ``statement`` (prepared by name, as the driver does),
    run once with ``args`` (SQL literals by bind name; a bind that holds its value, such as a
    LIMIT, with it), as EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)."""
    compiled = statement.statement.compile(dialect=connection.dialect)
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", compiled.string)))
    numbered = re.sub(r"%\((\w+)\)s", lambda bind: f"${names.index(bind.group(1)) + 1}", compiled.string)
    connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
    connection.exec_driver_sql(f"PREPARE explained AS {numbered}")
    literals = ", ".join(args.get(name) or str(compiled.binds[name].effective_value) for name in names)
    explained = connection.exec_driver_sql(
        f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE explained({literals})"
    ).scalar()
    connection.exec_driver_sql("DEALLOCATE explained")
    return explained


def _scans(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if node.get("Relation Name") == "queued_envelopes" and "Scan" in node["Node Type"]:
        yield node
    for child in node.get("Plans", []):
        yield from _scans(child)


def _write_args(devices: list[str]) -> dict[str, str]:
    """``_explained``'s args for one unpinned write of a byte to each of ``devices``."""
    ids = ", ".join(f"'{device}'" for device in devices)
    blobs = ", ".join(f"'\\x{n:02x}'::bytea" for n in range(len(devices)))
    shared = {"sender": "'server'", "type": "'push'", "created_at": "3", "expires_at": "4", "tag": "NULL"}
    return {"recipients": f"ARRAY[{ids}]::varchar[]", "blobs": f"ARRAY[{blobs}]"} | shared


def _trim_args(devices: list[str]) -> dict[str, str]:
    """``_explained``'s args for the trim after one unpinned write to each of ``devices``."""
    return {"written": "ARRAY[" + ", ".join(f"'{device}'" for device in devices) + "]::varchar[]"}


def _fill(connection: Connection, devices: list[str], writes: int) -> None:
    """``writes`` writes to ``devices``, each trimmed as a transaction of one write is."""
    for n in range(writes):
        blobs = [b"%06d" % n * 200] * len(devices)  # 1,200 bytes each, whatever n
        QUEUE_ALL.rows(connection, recipients=devices, blobs=blobs, **_SHARED)
        TRIM_OVER_CAP.rows(connection, written=devices)
    connection.commit()


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_on_a_small_analyzed_table_each_queue_is_read_in_the_recipient_index(
    client: TestClient, core: Core
) -> None:
    """A few devices, their queues at the cap, the table analyzed (as autovacuum does): the
    statistics make a walk of the primary key (every queue's newest entries, filtered by recipient)
    or a sequential scan look cheapest; the queue write reads each recipient's newest entry in
    ``ix_queued_envelopes_recipient_seq`` all the same, and the trim deletes the entries over the
    cap by their addresses."""
    devices = [register_phone(client).device_id for _ in range(4)]
    with core.engine.connect() as connection:
        _fill(connection, devices, QUEUE_CAP + 20)
        connection.exec_driver_sql("ANALYZE queued_envelopes")
        _, trimmed = _write_and_trim(connection, devices[:2])
        connection.rollback()
    assert trimmed == 2  # one a queue


def _write_and_trim(connection: Connection, devices: list[str]) -> tuple[int, int]:
    """One write to each of ``devices`` and its trim, each plan checked: each recipient's newest seq
    is read in the recipient index alone; the walk to the cap runs in
    ``relaybox_queue_entries_over_cap`` (migration 0018), whose plan EXPLAIN does not show
    (``test_a_write_reads_no_more_for_the_entries_trimmed_before_it`` counts what it reads), and
    the entries over it are deleted by their addresses. The blocks both read (hit or read in), the
    function's included, and how many entries the trim deleted."""
    [write] = _explained(connection, QUEUE_ALL, _write_args(devices))
    scans = list(_scans(write["Plan"]))
    assert [(scan["Node Type"], scan.get("Index Name")) for scan in scans] == [
        ("Index Only Scan", "ix_queued_envelopes_recipient_seq")
    ], scans
    [trim] = _explained(connection, TRIM_OVER_CAP, _trim_args(devices))
    scans = list(_scans(trim["Plan"]))
    assert [scan["Node Type"] for scan in scans] == ["Tid Scan"], scans
    blocks = sum(
        int(plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]) for plan in (write["Plan"], trim["Plan"])
    )
    return blocks, sum(scan["Actual Rows"] * scan["Actual Loops"] for scan in scans)


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
@pytest.mark.parametrize(("writes", "analyzed"), [(600, False), (3000, True)])
def test_a_write_reads_no_more_for_the_entries_trimmed_before_it(
    client: TestClient, core: Core, writes: int, analyzed: bool
) -> None:
    """Every write to a full queue drops an entry, which stays in the recipient index, marked dead, until
    a vacuum (a default server's comes once a fifth of the table is dead; this machine's never). The trim
    finds the entries over the cap from the newest end, so what it reads does not grow with them. Earlier
    forms of this test caught the two ways it did: a scan from the oldest end stepped over each (~170 ->
    ~690 blocks after 600 more writes), and, once analyzed, the walk inline in the statement was planned
    as a bitmap scan of every entry of the recipient (~3,000 blocks after 3,000): docs/scaling.md."""
    devices = [register_phone(client).device_id for _ in range(2)]
    with core.engine.connect() as connection:
        _fill(connection, devices, QUEUE_CAP + 20)
        before, _ = _write_and_trim(connection, devices)
        connection.rollback()
        _fill(connection, devices, writes)
        if analyzed:
            connection.exec_driver_sql("ANALYZE queued_envelopes")  # as autovacuum does between vacuums
            connection.commit()
            _fill(connection, devices, 1)  # the plans made again with the statistics, as the next write does
        after, _ = _write_and_trim(connection, devices)
        connection.rollback()
    assert after <= before * 1.2 + 10, (before, after)
