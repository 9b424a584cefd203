"""Device credentials and sender tokens verified a moment ago come from the verified-credential
cache, and unpairing a device or revoking a token still ends it at once: the very next request is
401, even when the one before was served from the cache."""

from __future__ import annotations

import time

from sqlalchemy import update
from sqlmodel import col
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.credentials import USE_GRANULARITY_S
from core.domain.secrets import digest
from core.runtime.core import Core
from core.store.tables import SenderToken
from tests.helpers import FakeDevice, create_token, error_code, pair_computer, register_phone, start_pairing


def test_an_unpaired_computers_cached_credential_is_401_at_once(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    for _ in range(2):
        assert client.get("/v1/devices/me", headers=computer.auth).status_code == 200
    assert cached(core, computer)
    assert client.delete("/v1/devices/me", headers=computer.auth).status_code in (200, 204)
    assert client.get("/v1/devices/me", headers=computer.auth).status_code == 401
    assert client.get("/v1/devices/me", headers=phone.auth).status_code == 200


def test_a_revoked_sender_tokens_cached_verification_is_401_at_once(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    token = create_token(client, phone)
    auth = {"Authorization": f"Bearer {token['token']}"}
    for _ in range(2):
        assert client.get("/v1/devices", headers=auth).status_code == 200
    assert core.credentials.get(digest(str(token["token"]))) is not None
    assert client.delete(f"/v1/tokens/{token['id']}", headers=phone.auth).status_code == 200
    assert client.get("/v1/devices", headers=auth).status_code == 401


def test_a_computer_still_pending_is_never_cached(client: TestClient, core: Core) -> None:
    computer, _code = start_pairing(client)
    for _ in range(2):
        assert client.get("/v1/pair/result", headers=computer.auth).json()["status"] == "pending"
    assert not cached(core, computer)


def cached(core: Core, device: FakeDevice) -> bool:
    return core.credentials.get(digest(device.token)) is not None


def test_a_cached_devices_last_seen_time_is_still_written_once_a_minute(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    assert client.get("/v1/devices/me", headers=computer.auth).status_code == 200
    clock.advance(USE_GRANULARITY_S - 1)  # the entry expired: read again, no use due
    assert client.get("/v1/devices/me", headers=computer.auth).status_code == 200
    clock.advance(2)  # cached, and a minute since the last noted use
    assert client.get("/v1/devices/me", headers=computer.auth).status_code == 200
    wanted = int(clock.now())
    deadline = time.monotonic() + 5
    while True:  # written just after the request, in the background
        devices = client.get("/v1/devices", headers=phone.auth).json()["devices"]
        seen = [d for d in devices if d["device_id"] == computer.device_id]
        if seen and seen[0]["last_seen_at"] == wanted:
            break
        assert time.monotonic() < deadline, f"last seen {seen}, wanted {wanted}"
        time.sleep(0.01)


def test_the_send_route_serves_a_sender_token_verified_a_moment_ago_from_the_cache(
    client: TestClient, core: Core
) -> None:
    phone = register_phone(client)
    token = create_token(client, phone)
    auth = {"Authorization": f"Bearer {token['token']}"}
    assert client.post("/v1/send", content=b"first", headers=auth).status_code == 200
    # Marked revoked behind the service's back (no cache drop): only the store would refuse it.
    with core.engine.begin() as connection:
        connection.execute(
            update(SenderToken).where(col(SenderToken.token_id) == token["id"]).values(revoked_at=1)
        )
    assert client.post("/v1/send", content=b"second", headers=auth).status_code == 200


def test_revoking_a_sender_token_ends_it_on_the_send_route_at_once(client: TestClient) -> None:
    phone = register_phone(client)
    token = create_token(client, phone)
    auth = {"Authorization": f"Bearer {token['token']}"}
    for _ in range(2):
        assert client.post("/v1/send", content=b"hi", headers=auth).status_code == 200
    assert client.delete(f"/v1/tokens/{token['id']}", headers=phone.auth).status_code == 200
    refused = client.post("/v1/send", content=b"hi", headers=auth)
    assert refused.status_code == 401 and error_code(refused) == "invalid_token"
