"""Answer callbacks across two real replicas (``relaybox serve`` processes sharing one PostgreSQL and
one Redis): every answer wakes both replicas' senders through the fan-out, and each attempt still
reaches the real HTTPS receiver once — a failed one is retried once, after its backoff, under the
same webhook-id — whichever replica took the answer."""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core.adapters.limits.redis import RedisRateLimiter
from core.domain.keys import generate_keypair
from core.services.callback_delivery import RETRY_AFTER_S
from tests.e2e.conftest import TRACEBACK, RelayboxServer, free_port
from tests.fakes.webhook_receiver import Reply, WebhookReceiver, wait_until
from tests.helpers import create_token, register_phone
from tests.services import REDIS_URL, fresh_postgres_database, require_redis

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.redis]

QUESTIONS = 6
SETTLE_S = 2.0  # after the expected POSTs: long enough for a duplicate from the other replica to show


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookReceiver]:
    with WebhookReceiver(tmp_path_factory.mktemp("receiver")) as running:
        yield running


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory, receiver: WebhookReceiver) -> Iterator[list[str]]:
    namespace = f"relaybox-callbacks-{secrets.token_hex(6)}"
    require_redis()
    root: Path = tmp_path_factory.mktemp("replicas")
    with fresh_postgres_database() as database_url:
        env = {
            "RELAYBOX_DATABASE_URL": database_url,
            "RELAYBOX_REDIS_URL": REDIS_URL,
            "RELAYBOX_REDIS_NAMESPACE": namespace,
            "RELAYBOX_SERVER_SECRET_KEY": base64.b64encode(generate_keypair()[0]).decode(),
            "RELAYBOX_CALLBACKS_ALLOW_PRIVATE": "true",  # the receiver is on loopback
            "RELAYBOX_CALLBACKS_CA_FILE": str(receiver.ca_file),
            "RELAYBOX_LIMIT_IP_MINUTE": "10000",
            "RELAYBOX_LIMIT_IP_HOUR": "10000",
            "RELAYBOX_FILE_STORE_DIR": str(root / "objects"),  # one object store for both
        }
        servers = [RelayboxServer(root / f"replica-{n}", env, port=free_port()) for n in range(2)]
        try:
            yield [server.wait_until_ready() for server in servers]
        finally:
            for server in servers:
                server.stop()
            limits = RedisRateLimiter(REDIS_URL, namespace=namespace)
            limits.reset()
            limits.close()
    for server in servers:
        assert TRACEBACK not in server.stderr(), server.stderr()


@pytest.fixture
def clients(replicas: list[str]) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    with (
        httpx.Client(base_url=replicas[0], timeout=30, trust_env=False) as one,
        httpx.Client(base_url=replicas[1], timeout=30, trust_env=False) as other,
    ):
        yield one, other


def test_each_attempt_reaches_the_receiver_once_whichever_replica_took_the_answer(
    clients: tuple[httpx.Client, httpx.Client], receiver: WebhookReceiver
) -> None:
    one, other = clients
    phone = register_phone(one)
    caller = {"Authorization": f"Bearer {create_token(other, phone)['token']}"}
    receiver.script("/flaky", Reply(500))
    asked = []
    for n in range(QUESTIONS):
        path = "/flaky" if n == 0 else f"/hook-{n}"
        body = {"question": f"Deploy {n}?", "callback_url": receiver.url(path, host="127.0.0.1")}
        created = other.post("/v1/interactions", json=body, headers=caller)
        assert created.status_code == 201, created.text
        asked.append((path, created.json()))
    for n, (_path, question) in enumerate(asked):  # answered through both replicas in turn
        through = (one, other)[n % 2]
        answered = through.post(
            f"/v1/interactions/{question['id']}/answer", json={"choice_index": 1}, headers=phone.auth
        )
        assert answered.status_code == 200, answered.text

    for path, question in asked[1:]:
        (delivery,) = receiver.wait_for(path, 1)
        assert delivery.verified(question["callback_secret"])["data"]["id"] == question["id"]
    first = receiver.wait_for("/flaky", 1)[0]
    retried = receiver.wait_for("/flaky", 2, timeout=RETRY_AFTER_S[0] + 10)[1]
    time.sleep(SETTLE_S)
    assert len(receiver.to("/flaky")) == 2
    assert all(len(receiver.to(path)) == 1 for path, _question in asked[1:])
    assert first.headers["webhook-id"] == retried.headers["webhook-id"]
    waited = int(retried.headers["webhook-timestamp"]) - int(first.headers["webhook-timestamp"])
    assert RETRY_AFTER_S[0] <= waited <= RETRY_AFTER_S[0] + 2
    assert retried.verified(asked[0][1]["callback_secret"])["type"] == "interaction.answered"
    for client in (one, other):

        def delivered(client: httpx.Client = client) -> dict[str, object] | None:
            got = client.get(f"/v1/interactions/{asked[0][1]['id']}?wait=0", headers=caller).json()
            return dict(got["callback"]) if got["callback"]["state"] == "delivered" else None

        assert wait_until(delivered) == {"state": "delivered", "attempts": 2, "last_status": 200}
