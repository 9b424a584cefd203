"""The PostgreSQL queue write is planned once per connection, not once per send: its statement runs
a generic plan once the driver has prepared it (the recipients and blobs are hidden from the
planner, which would otherwise find a custom plan for each send's arrays cheaper every time)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from core.runtime.core import Core
from core.services.queue import _QUEUE_ALL
from tests.helpers import register_phone


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_the_queue_write_runs_a_generic_plan_after_a_few_sends(client: TestClient, core: Core) -> None:
    devices = [register_phone(client).device_id for _ in range(2)]
    queue_write = _QUEUE_ALL[False]
    shared = {"sender": "server", "type": "push", "created_at": 1, "expires_at": 2, "tag": None}
    with core.engine.connect() as connection:
        for n in range(12):  # the driver prepares it at the 5th; the server may choose after 5 more
            queue_write.rows(connection, recipients=devices, blobs=[b"a%d" % n, b"b%d" % n], **shared)
        plans = connection.execute(
            text(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'WITH before AS%' AND statement LIKE '%INSERT INTO queued_envelopes%'"
            )
        ).one()
        connection.rollback()
    generic, custom = plans
    assert generic >= 1 and custom <= 5, plans
