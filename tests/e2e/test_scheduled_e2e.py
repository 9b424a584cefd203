"""Acceptance: scheduled delivery against running servers (``relaybox serve``, real HTTP over a socket).

- On SQLite, the reference virtual phone (``relaybox phone run``) gets nothing before the time of an
  ntfy ``Delay`` publish (the real ``curl``) and of a ``/v1/send`` with ``delay``, and each after it;
  one cancelled with ``DELETE /v1/notifications/{sequence_id}`` never arrives; one scheduled just
  before the server is stopped, and due while it is down, arrives once it is back.
- On PostgreSQL, two replicas sharing the database and Redis are both stopped between scheduling
  and the due time, and both started again after it: each send is queued exactly once, sealed to
  the phone.

The shortest delay is lowered to 1 s for these tests only (``RELAYBOX_DELAY_MIN_S``; 10 s otherwise).
"""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine

from core.domain.envelope import open_envelope
from core.domain.keys import generate_keypair
from tests.e2e.conftest import TRACEBACK, BackgroundCli, Cli, RelayboxServer, free_port
from tests.e2e.test_ntfy_gotify_clients_e2e import curl
from tests.e2e.test_pushover_clients_e2e import ok
from tests.helpers import create_token, queued_rows, register_phone
from tests.services import REDIS_URL, fresh_postgres_database, require_redis

pytestmark = pytest.mark.e2e

DELAY_S = 4
LATE_S = 25.0  # a phone reconnecting after a restart backs off up to 10 s, the waker looks at once
FAST = {"RELAYBOX_DELAY_MIN_S": "1"}
START_TIMEOUT_S = 60.0  # two cores shared with other test runs: a start can take a while


def notifications_until(run: BackgroundCli, deadline: float) -> list[str]:
    """The messages of the notifications the phone printed until ``deadline`` (or it exited)."""
    messages: list[str] = []
    while True:
        try:
            line = run._stdout.next_line(deadline)
        except TimeoutError:
            return messages
        if line is None:
            return messages
        if re.match(r"^\{.*\}$", line.strip()):
            record: dict[str, Any] = json.loads(line)
            if record.get("type") == "notification":
                messages.append(record["payload"]["message"])


def test_the_virtual_phone_gets_scheduled_sends_at_their_time_across_a_restart(tmp_path: Path) -> None:
    workdir, port = tmp_path / "server", free_port()
    server = RelayboxServer(workdir, FAST, port=port)
    url = server.wait_until_ready(START_TIMEOUT_S)
    cli = Cli(url, tmp_path / "cli")
    try:
        state = tmp_path / "phone.json"
        ok(cli.run("phone", "register", "--name", "Pixel", "--state", state))
        token = ok(cli.run("phone", "tokens", "create", "--label", "cron", "--state", state)).stdout.strip()
        run = cli.start("phone", "run", "--json", "--downloads", tmp_path / "downloads", "--state", state)
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, timeout=10, trust_env=False) as http:
            started = time.time()
            by_ntfy = curl(
                cli,
                "-H",
                f"Authorization: Bearer {token}",
                "-H",
                f"Delay: {DELAY_S}s",
                "-d",
                "ntfy later",
                f"{url}/backups",
            )
            assert by_ntfy["_status"] == 200 and by_ntfy["relaybox"]["scheduled"] is True, by_ntfy
            assert by_ntfy["time"] == by_ntfy["relaybox"]["deliver_at"] >= started + DELAY_S - 1
            by_send = http.post("/v1/send", json={"message": "send later", "delay": DELAY_S}, headers=auth)
            assert by_send.status_code == 202 and by_send.json()["scheduled"] is True, by_send.text
            doomed = {"message": "never shown", "delay": DELAY_S, "sequence_id": "doomed"}
            assert http.post("/v1/send", json=doomed, headers=auth).status_code == 202
            cancel = http.delete("/v1/notifications/doomed", headers=auth)
            assert cancel.status_code == 200 and len(cancel.json()["cancelled"]) == 1, cancel.text

            assert notifications_until(run, time.monotonic() + DELAY_S - 2) == []  # nothing before
            arrived = notifications_until(run, time.monotonic() + 2 + LATE_S / 2)
            assert sorted(arrived) == ["ntfy later", "send later"]  # and the cancelled one never

            restart = http.post("/v1/send", json={"message": "after restart", "delay": 2}, headers=auth)
            assert restart.status_code == 202, restart.text
        server.stop()  # down before its time, up again only after it
        time.sleep(4)
        assert TRACEBACK not in server.stderr(), server.stderr()
        server = RelayboxServer(workdir, FAST, port=port)
        server.wait_until_ready(START_TIMEOUT_S)
        assert notifications_until(run, time.monotonic() + LATE_S) == ["after restart"]  # late, once
    finally:
        cli.close()
        server.stop()
    assert TRACEBACK not in server.stderr(), server.stderr()


@pytest.mark.postgres
@pytest.mark.redis
def test_two_replicas_restarted_past_the_time_deliver_each_scheduled_send_once(tmp_path: Path) -> None:
    require_redis()
    server_secret, server_public = generate_keypair()
    with fresh_postgres_database() as database_url:
        env = FAST | {
            "RELAYBOX_DATABASE_URL": database_url,
            "RELAYBOX_REDIS_URL": REDIS_URL,
            "RELAYBOX_REDIS_NAMESPACE": f"relaybox-e2e-sched-{tmp_path.name[-8:]}",
            "RELAYBOX_SERVER_SECRET_KEY": base64.b64encode(server_secret).decode(),
            "RELAYBOX_FILE_STORE_DIR": str(tmp_path / "objects"),
            "RELAYBOX_LIMIT_IP_MINUTE": "10000",
        }
        ports = [free_port(), free_port()]

        def start() -> list[RelayboxServer]:
            servers = [
                RelayboxServer(tmp_path / f"replica-{n}", env, port=port) for n, port in enumerate(ports)
            ]
            try:
                for server in servers:
                    server.wait_until_ready(START_TIMEOUT_S)
            except BaseException:
                for server in servers:
                    server.stop()
                raise
            return servers

        servers = start()
        try:
            with httpx.Client(base_url=servers[0].url, timeout=10, trust_env=False) as http:
                phone = register_phone(http)
                auth = {"Authorization": f"Bearer {create_token(http, phone)['token']}"}
                sent = []
                for n in range(6):
                    answer = http.post("/v1/send", json={"message": f"#{n}", "delay": 3}, headers=auth)
                    assert answer.status_code == 202, answer.text
                    sent.append(answer.json()["id"])
            for server in servers:
                server.stop()
            time.sleep(4)  # every one is due now, and no replica is running
            servers = start()  # both look for what is due as they start, racing each other
            engine = create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
            try:
                deadline = time.monotonic() + LATE_S
                while len(queued_rows(engine, phone.device_id, "notification")) < len(sent):
                    assert time.monotonic() < deadline, "the scheduled sends were not delivered"
                    time.sleep(0.2)
                time.sleep(2)  # a second delivery, if there were one, would be queued by now
                rows = queued_rows(engine, phone.device_id, "notification")
            finally:
                engine.dispose()
        finally:
            for server in servers:
                server.stop()
        for server in servers:
            assert TRACEBACK not in server.stderr(), server.stderr()
    opened = [json.loads(open_envelope(row.blob, phone.secret_key, server_public)) for row in rows]
    assert sorted(payload["id"] for payload in opened) == sorted(sent)  # each exactly once
    assert sorted(payload["message"] for payload in opened) == [f"#{n}" for n in range(6)]
