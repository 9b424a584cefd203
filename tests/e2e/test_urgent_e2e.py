"""Acceptance: the virtual phone (``relaybox phone run``) repeats an urgent notification through a
real ``relaybox serve`` until ``relaybox phone ack`` acknowledges it, and stops when its sender
cancels one; the receipt says who acknowledged. The server allows a 1 s repeat here
(``RELAYBOX_URGENT_MIN_REPEAT_S``, 30 s by default)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import TRACEBACK, BackgroundCli, Cli, RelayboxServer
from tests.e2e.test_phone_ops_e2e import HTTP_TIMEOUT_S, Phone, ok, stop, wait_for_record

pytestmark = pytest.mark.e2e

SERVER_ENV = {"RELAYBOX_URGENT_MIN_REPEAT_S": "1"}
URGENT = {"message": "prod is down — ü", "title": "PagerDuty", "priority": "urgent", "repeat": 1}


@pytest.fixture
def relaybox_server(tmp_path: Path) -> Iterator[str]:
    """Overrides the conftest server: the same, started with ``SERVER_ENV``."""
    with RelayboxServer(tmp_path / "server", env=SERVER_ENV) as server:
        yield server.wait_until_ready()
    log = server.stderr()
    if TRACEBACK in log:
        pytest.fail(f"the server wrote a traceback to stderr:\n{log}")


@pytest.fixture
def phone(cli: Cli, tmp_path: Path) -> Iterator[Phone]:
    state = tmp_path / "phone.json"
    ok(cli.run("phone", "register", "--name", "Pixel", "--state", state))
    token = ok(cli.run("phone", "tokens", "create", "--label", "pager", "--state", state)).stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(
        base_url=cli.server_url, headers=headers, timeout=HTTP_TIMEOUT_S, trust_env=False
    ) as http:
        yield Phone(state, json.loads(state.read_text())["device_id"], token, http)


def urgent_records(run: BackgroundCli, receipt: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in run.stdout_so_far().splitlines() if line.startswith("{")]
    return [r for r in records if r.get("type") == "urgent" and r.get("receipt") == receipt]


def test_the_phone_repeats_until_phone_ack_acknowledges_it(cli: Cli, phone: Phone) -> None:
    run = cli.start("phone", "run", "--json", "--state", phone.state)
    sent = phone.post("/v1/send", URGENT | {"expire": 600})
    assert sent.status_code == 200, sent.text
    receipt = sent.json()["receipt"]
    first = wait_for_record(run, lambda r: r.get("type") == "urgent")
    assert (first["receipt"], first["repeat"], first["message"], first["repeat_s"]) == (
        receipt,
        0,
        URGENT["message"],
        1,
    )
    for count in (1, 2):
        again = wait_for_record(run, lambda r: r.get("type") == "urgent", timeout=5)
        assert (again["receipt"], again["repeat"]) == (receipt, count)
    assert phone.http.get(f"/v1/receipts/{receipt}").json()["status"] == "pending"

    acked = ok(cli.run("phone", "ack", receipt, "--state", phone.state))
    assert acked.stdout == f"acknowledged {receipt} (acknowledged)\n"
    stopped = wait_for_record(run, lambda r: r.get("type") == "urgent_stopped")
    assert stopped == {"type": "urgent_stopped", "receipt": receipt, "reason": "acknowledged"}
    state = phone.http.get(f"/v1/receipts/{receipt}").json()
    assert state["status"] == "acknowledged"
    assert state["acknowledged_by"] == {"device_id": phone.device_id, "name": "Pixel"}
    repeats = len(urgent_records(run, receipt))
    time.sleep(2.5)  # 1 s repeats: a phone that went on would have printed two more by now
    assert len(urgent_records(run, receipt)) == repeats
    twice = ok(cli.run("phone", "ack", receipt, "--state", phone.state))  # idempotent
    assert twice.stdout == f"acknowledged {receipt} (acknowledged)\n"
    stop(run)


def test_the_senders_cancel_stops_the_phone_and_unknown_receipts_are_refused(cli: Cli, phone: Phone) -> None:
    run = cli.start("phone", "run", "--json", "--state", phone.state)
    receipt = phone.post("/v1/send", URGENT).json()["receipt"]
    wait_for_record(run, lambda r: r.get("type") == "urgent" and r.get("repeat") == 1, timeout=10)
    cancelled = phone.post(f"/v1/receipts/{receipt}/cancel")
    assert cancelled.json()["status"] == "cancelled", cancelled.text
    stopped = wait_for_record(run, lambda r: r.get("type") == "urgent_stopped")
    assert (stopped["receipt"], stopped["reason"]) == (receipt, "cancelled")
    late = ok(cli.run("phone", "ack", receipt, "--state", phone.state))
    assert late.stdout == f"acknowledged {receipt} (cancelled)\n"  # the server's answer, as it is
    unknown = cli.run("phone", "ack", "rcp_" + "0" * 32, "--state", phone.state)
    assert unknown.returncode == 1 and unknown.stderr.startswith("error: receipt_not_found: "), unknown
    stop(run)
