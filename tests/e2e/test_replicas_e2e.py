"""Two real ``relaybox serve`` processes on different ports, sharing one PostgreSQL database and one
Redis (a namespace of this run's own), as two replicas behind a load balancer: what one replica
starts, the other finishes.

Both replicas are configured as a deployment would be: the same server key and the same public
URL (``flow.ISSUER``, the address of the balancer they would stand behind; nothing listens there,
and the tests talk to each replica directly so that they choose which one serves each request).

The MCP tests put a ``Balancer`` in the client's transport to show what a connector client sees
when a load balancer without session affinity moves it: legacy sessions live in one process
(404 ``Session not found`` elsewhere, as the MCP transport spec says; the client starts a new
session), while 2026-07-28 clients carry no session and may reach either replica on every call.
"""

from __future__ import annotations

import base64
import re
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import redis
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from core.adapters.limits.redis import RedisRateLimiter
from core.domain.envelope import seal
from core.domain.keys import generate_keypair
from core.services.consent import consent_topic
from tests.e2e.conftest import TRACEBACK, RelayboxServer, free_port
from tests.helpers import FakeDevice, create_token, register_phone, start_pairing
from tests.oauth import flow
from tests.services import REDIS_URL, fresh_postgres_database, require_redis
from tests.sse import events

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.redis, pytest.mark.anyio]

PUBLIC_URL = flow.ISSUER
TOKEN_BURST = 5
WAKE_WITHIN_S = 10.0  # far inside every wait below: a replica was woken, not timed out


@dataclass(frozen=True)
class Replicas:
    urls: tuple[str, str]
    redis_namespace: str

    def __getitem__(self, index: int) -> str:
        return self.urls[index]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """Two replicas, started together on an empty database (so they also migrate it together)."""
    namespace = f"relaybox-e2e-{secrets.token_hex(6)}"
    require_redis()
    with fresh_postgres_database() as database_url:
        env = {
            "RELAYBOX_DATABASE_URL": database_url,
            "RELAYBOX_REDIS_URL": REDIS_URL,
            "RELAYBOX_REDIS_NAMESPACE": namespace,
            "RELAYBOX_SERVER_SECRET_KEY": base64.b64encode(generate_keypair()[0]).decode(),
            "RELAYBOX_PUBLIC_URL": PUBLIC_URL,
            "RELAYBOX_LIMIT_TOKEN_BURST": str(TOKEN_BURST),
            # Every request here comes from 127.0.0.1: per-IP budgets out of the way.
            "RELAYBOX_LIMIT_IP_MINUTE": "10000",
            "RELAYBOX_LIMIT_IP_HOUR": "10000",
            "RELAYBOX_REGISTER_PER_IP_PER_MINUTE": "10000",
            "RELAYBOX_PAIR_INIT_PER_IP_PER_MINUTE": "10000",
        }
        root = tmp_path_factory.mktemp("replicas")
        env["RELAYBOX_FILE_STORE_DIR"] = str(root / "objects")  # one object store for both
        servers = [RelayboxServer(root / f"replica-{n}", env, port=free_port()) for n in range(2)]
        try:
            first, second = (server.wait_until_ready() for server in servers)
            yield Replicas((first, second), namespace)
        finally:
            for server in servers:
                server.stop()
            limits = RedisRateLimiter(REDIS_URL, namespace=namespace)
            limits.reset()
            limits.close()
    for server in servers:
        assert TRACEBACK not in server.stderr(), server.stderr()


@pytest.fixture
def clients(replicas: Replicas) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    with (
        httpx.Client(base_url=replicas[0], timeout=30, trust_env=False) as one,
        httpx.Client(base_url=replicas[1], timeout=30, trust_env=False) as other,
    ):
        yield one, other


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_for_metric(url: str, name: str, value: int) -> None:
    """Until the replica at ``url`` reports ``name`` (a gauge of waiters on it) at ``value``."""
    pattern = re.compile(rf"^{name} (\d+(?:\.\d+)?)$", re.MULTILINE)
    deadline = time.monotonic() + WAKE_WITHIN_S
    with httpx.Client(timeout=5, trust_env=False) as http:
        while True:  # bounded by the deadline
            found = pattern.search(http.get(f"{url}/metrics").text)
            if found and float(found[1]) == value:
                return
            assert time.monotonic() < deadline, f"{name} did not reach {value} on {url}"
            time.sleep(0.05)


class Background:
    """A request running on a thread (a long poll), so the test can act while it waits."""

    def __init__(self, request: Callable[[], httpx.Response]) -> None:
        self._request = request
        self._outcome: list[httpx.Response | Exception] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._outcome.append(self._request())
        except Exception as error:
            self._outcome.append(error)

    def returned_within(self, seconds: float) -> bool:
        self._thread.join(seconds)
        return not self._thread.is_alive()

    def response(self) -> httpx.Response:
        (outcome,) = self._outcome
        assert isinstance(outcome, httpx.Response), outcome
        return outcome


def wait_for_subscriber(replicas: Replicas, topic: str) -> None:
    """Until some replica listens on the fan-out ``topic`` (its waiter is in place)."""
    channel = f"{replicas.redis_namespace}:fanout:{topic}"
    deadline = time.monotonic() + WAKE_WITHIN_S
    with redis.Redis.from_url(REDIS_URL, socket_timeout=5) as admin:
        while not admin.pubsub_numsub(channel)[0][1]:
            assert time.monotonic() < deadline, f"nobody subscribed to {topic}"
            time.sleep(0.05)


def paired(one: httpx.Client, other: httpx.Client) -> tuple[FakeDevice, FakeDevice]:
    """A phone registered on one replica and a computer whose code it confirms through the other."""
    phone = register_phone(one)
    computer, code = start_pairing(one)
    confirmed = other.post(
        "/v1/pair/confirm", json={"code": code, "public_key": phone.public_b64}, headers=phone.auth
    )
    assert confirmed.status_code == 200, confirmed.text
    return phone, computer


def test_a_poll_waiting_on_one_replica_returns_when_the_phone_answers_through_the_other(
    replicas: Replicas, clients: tuple[httpx.Client, httpx.Client]
) -> None:
    one, other = clients
    phone = register_phone(one)
    token = str(create_token(other, phone)["token"])
    asked = one.post("/v1/interactions", json={"question": "Deploy?"}, headers=bearer(token))
    assert asked.status_code == 201, asked.text
    interaction_id = asked.json()["id"]

    def poll() -> httpx.Response:
        with httpx.Client(base_url=replicas[0], timeout=60, trust_env=False) as http:
            return http.get(f"/v1/interactions/{interaction_id}?wait=45", headers=bearer(token))

    waiter = Background(poll)
    wait_for_metric(replicas[0], "relaybox_waiting_polls", 1)
    answered_at = time.monotonic()
    answer = other.post(
        f"/v1/interactions/{interaction_id}/answer", json={"choice_index": 1}, headers=phone.auth
    )
    assert answer.status_code == 200, answer.text
    assert waiter.returned_within(WAKE_WITHIN_S), "the poll was not woken by the answer on the other replica"
    assert time.monotonic() - answered_at < WAKE_WITHIN_S
    polled = waiter.response()
    body = polled.json()
    assert (polled.status_code, body["status"], body["choice_index"]) == (200, "answered", 1)


async def test_a_stream_on_one_replica_receives_an_envelope_posted_through_the_other(
    replicas: Replicas, clients: tuple[httpx.Client, httpx.Client]
) -> None:
    phone, computer = paired(*clients)
    blob = base64.b64encode(seal(b"copied on the phone", phone.secret_key, computer.public_key)).decode()
    async with (
        httpx.AsyncClient(base_url=replicas[0], timeout=httpx.Timeout(10, read=60), trust_env=False) as one,
        httpx.AsyncClient(base_url=replicas[1], timeout=10, trust_env=False) as other,
        one.stream("GET", "/v1/sync", headers=computer.auth) as stream,
    ):
        assert stream.status_code == 200
        await anyio.to_thread.run_sync(wait_for_metric, replicas[0], "relaybox_open_streams", 1)
        listed = await other.get("/v1/devices", headers=phone.auth)  # presence is shared too
        assert {d["device_id"]: d["reachable"] for d in listed.json()["devices"]}[computer.device_id]
        with anyio.fail_after(WAKE_WITHIN_S):
            posted = await other.post(
                "/v1/envelopes",
                json={"to": computer.device_id, "type": "clipboard", "blob": blob},
                headers=phone.auth,
            )
            assert posted.status_code == 202, posted.text
            async for event in events(stream):
                if event.event == "envelope":
                    break
    assert (event.json["seq"], event.json["from"], event.json["blob"]) == (
        posted.json()["seq"],
        phone.device_id,
        blob,
    )


def test_a_sender_tokens_rate_limit_is_one_budget_across_both_replicas(
    clients: tuple[httpx.Client, httpx.Client],
) -> None:
    one, other = clients
    phone = register_phone(one)
    token = str(create_token(one, phone)["token"])
    remaining = []
    for n in range(TOKEN_BURST):
        sent = clients[n % 2].post("/v1/send", json={"message": f"#{n}"}, headers=bearer(token))
        assert sent.status_code == 200, sent.text
        remaining.append(int(sent.headers["X-RateLimit-Remaining"]))
    assert remaining == list(range(TOKEN_BURST - 1, -1, -1))
    for http in (one, other):
        refused = http.post("/v1/send", json={"message": "one too many"}, headers=bearer(token))
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "rate_limit_exceeded"
        assert refused.headers["X-RateLimit-Resource"] == "token_burst"


def authorized(
    replicas: Replicas, one: httpx.Client, other: httpx.Client, phone: FakeDevice
) -> dict[str, Any]:
    """The OAuth flow started on ``one`` and finished on ``other``: the token response.

    The client registers and the browser opens the consent page on ``one``; the page's status
    long-poll there returns when the phone confirms the code through ``other``; the browser (its
    cookie, as behind one origin) allows on ``other``; the code is exchanged on ``one``."""
    client = flow.register_client(one)
    request = flow.Authorization(client["client_id"])
    page = flow.open_consent(one, request.url())
    waiter = Background(lambda: one.get(page.status_url, params={"wait": 30}))
    wait_for_subscriber(replicas, consent_topic(page.session_id))
    assert flow.confirm_on_phone(other, phone, page.code).status_code == 200
    assert waiter.returned_within(WAKE_WITHIN_S), "the consent page was not woken by the other replica"
    assert waiter.response().json()["status"] == "confirmed"
    other.cookies.update(one.cookies)
    code = flow.redirect_params(flow.decide(other, page))["code"]
    issued = flow.exchange(one, request, code)
    assert issued.status_code == 200, issued.text
    tokens: dict[str, Any] = issued.json()
    tokens["client_id"] = request.client_id
    return tokens


def test_an_oauth_flow_started_on_one_replica_completes_on_the_other(
    replicas: Replicas, clients: tuple[httpx.Client, httpx.Client]
) -> None:
    one, other = clients
    phone = register_phone(other)
    tokens = authorized(replicas, one, other, phone)
    refreshed = flow.refresh(other, tokens["client_id"], tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    assert [g["client_id"] for g in grants(one, phone)] == [tokens["client_id"]]
    # The spent refresh token replayed on the first replica: the grant ends, on both.
    replayed = flow.refresh(one, tokens["client_id"], tokens["refresh_token"])
    assert (replayed.status_code, replayed.json()["error"]) == (400, "invalid_grant")
    assert grants(other, phone) == []
    again = flow.refresh(other, tokens["client_id"], refreshed.json()["refresh_token"])
    assert (again.status_code, again.json()["error"]) == (400, "invalid_grant")


def grants(http: httpx.Client, phone: FakeDevice) -> list[dict[str, Any]]:
    listed = http.get("/v1/connector-grants", headers=phone.auth)
    assert listed.status_code == 200, listed.text
    found: list[dict[str, Any]] = listed.json()["grants"]
    return found


# -- MCP sessions: what a client sees when a balancer sends it to the other replica ----------------


class Balancer(httpx2.AsyncBaseTransport):
    """A stand-in load balancer without session affinity: each request goes to the replica
    ``target`` names, whatever the URL's port (the client addresses ``PUBLIC_URL``)."""

    def __init__(self, replicas: Replicas) -> None:
        self.ports = [httpx2.URL(url).port for url in replicas.urls]
        self.target = 0
        self.served: list[int] = []
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.url = request.url.copy_with(port=self.ports[self.target])
        self.served.append(self.target)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.fixture
async def balanced(
    replicas: Replicas, clients: tuple[httpx.Client, httpx.Client]
) -> AsyncIterator[tuple[httpx2.AsyncClient, Balancer]]:
    """An MCP client's HTTP client with an access token, through a ``Balancer``."""
    access_token = authorized(replicas, *clients, register_phone(clients[0]))["access_token"]
    balancer = Balancer(replicas)
    async with httpx2.AsyncClient(
        transport=balancer, headers=bearer(access_token), timeout=httpx2.Timeout(30, read=60)
    ) as http:
        yield http, balancer


async def test_a_legacy_session_sent_to_the_other_replica_gets_404_and_a_new_session_works_there(
    balanced: tuple[httpx2.AsyncClient, Balancer],
) -> None:
    http, balancer = balanced
    with anyio.fail_after(60):
        async with Client(
            streamable_http_client(f"{PUBLIC_URL}/mcp", http_client=http), mode="legacy"
        ) as client:
            assert len((await client.list_tools()).tools) == 11
            balancer.target = 1  # the balancer forgets the affinity
            with pytest.raises(MCPError) as lost:
                await client.list_tools()
            assert "Session not found" in str(lost.value)
        # What arrived at the other replica: 404 with a JSON-RPC error, as the MCP transport spec
        # says for an unknown session; the client's answer is a new session (initialize), here.
        async with Client(
            streamable_http_client(f"{PUBLIC_URL}/mcp", http_client=http), mode="legacy"
        ) as client:
            assert len((await client.list_tools()).tools) == 11
    assert 1 in balancer.served


async def test_the_raw_reply_to_an_unknown_session_is_a_404_json_rpc_error_not_a_500(
    replicas: Replicas, balanced: tuple[httpx2.AsyncClient, Balancer]
) -> None:
    http, balancer = balanced
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "replica-test", "version": "1"},
        },
    }
    opened = await http.post(f"{PUBLIC_URL}/mcp", json=initialize, headers=headers)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    balancer.target = 1
    listed = await http.post(
        f"{PUBLIC_URL}/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers=headers | {"Mcp-Session-Id": session},
    )
    assert listed.status_code == 404
    assert listed.headers["content-type"].startswith("application/json")
    assert listed.json()["error"]["message"] == "Session not found"


async def test_2026_clients_need_no_affinity_each_request_may_reach_either_replica(
    balanced: tuple[httpx2.AsyncClient, Balancer],
) -> None:
    http, balancer = balanced
    with anyio.fail_after(60):
        async with Client(
            streamable_http_client(f"{PUBLIC_URL}/mcp", http_client=http), mode="2026-07-28"
        ) as client:
            for n in range(4):
                balancer.target = n % 2
                devices = await client.call_tool("list_devices", {})
                assert not devices.is_error, devices
                assert devices.structured_content is not None
                assert [d["name"] for d in devices.structured_content["devices"]] == ["Pixel"]
    assert set(balancer.served) == {0, 1}
