"""Typed replies across two real replicas (one PostgreSQL, one Redis): the phone answers through one
replica, and the caller gets the text from the other, once, whether its poll was already waiting
or it reads later. This is why the text waits sealed in the database rather than in one replica's
memory (docs/protocol.md, "Typed replies")."""

from __future__ import annotations

import base64

import httpx
import pytest

from core.domain.envelope import PairBox
from core.domain.keys import generate_keypair
from core.domain.typed_reply import seal_typed_reply
from tests.e2e import test_replicas_e2e as two
from tests.helpers import FakeDevice, b64, create_token

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.redis]

# The two replicas and a client of each, as test_replicas_e2e starts them (assigned, not imported by
# name, so that pytest finds the fixtures here and the test's parameters do not shadow an import).
replicas = two.replicas
clients = two.clients


def test_the_text_answered_through_one_replica_is_read_once_through_the_other(
    replicas: two.Replicas, clients: tuple[httpx.Client, httpx.Client]
) -> None:
    one, other = clients
    secret, public = generate_keypair()
    registered = one.post("/v1/devices", json={"public_key": b64(public), "name": "Pixel"}).json()
    phone = FakeDevice(registered["device_id"], registered["device_token"], secret, public)
    box = PairBox(secret, base64.b64decode(registered["server_public_key"]))
    caller = two.bearer(str(create_token(other, phone)["token"]))

    def ask(question: str) -> str:
        asked = one.post("/v1/interactions", json={"question": question, "allow_text": True}, headers=caller)
        assert asked.status_code == 201, asked.text
        return str(asked.json()["id"])

    def answer(interaction_id: str, text: str) -> None:
        sealed = b64(seal_typed_reply(box, interaction_id=interaction_id, text=text))
        body = {"choice_index": 1, "sealed_text": sealed}
        answered = other.post(f"/v1/interactions/{interaction_id}/answer", json=body, headers=phone.auth)
        assert answered.status_code == 200, answered.text

    # A poll already waiting on the first replica.
    waiting = ask("Deploy?")

    def poll() -> httpx.Response:
        with httpx.Client(base_url=replicas[0], timeout=60, trust_env=False) as http:
            return http.get(f"/v1/interactions/{waiting}?wait=45", headers=caller)

    waiter = two.Background(poll)
    two.wait_for_metric(replicas[0], "relaybox_waiting_polls", 1)
    answer(waiting, "after the backup")
    assert waiter.returned_within(two.WAKE_WITHIN_S)
    body = waiter.response().json()
    assert (body["status"], body["choice_index"], body["text"]) == ("answered", 1, "after the backup")
    assert other.get(f"/v1/interactions/{waiting}?wait=0", headers=caller).json()["text_already_read"] is True

    # Nobody waiting: read later, through the replica that did not take the answer, then the other.
    later = ask("Migrate?")
    answer(later, "not today")
    assert one.get(f"/v1/interactions/{later}?wait=0", headers=caller).json()["text"] == "not today"
    again = other.get(f"/v1/interactions/{later}?wait=0", headers=caller).json()
    assert "text" not in again and again["text_already_read"] is True
