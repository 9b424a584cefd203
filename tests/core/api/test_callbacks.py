"""Answer callbacks over real HTTP and HTTPS: a question asked with callback_url is POSTed to a real
TLS receiver on loopback when it is answered or expires, signed as Standard Webhooks says (checked
with the standardwebhooks package), retried with backoff under the same webhook-id, carrying a
typed reply that a 2xx takes and a failure leaves for GET; redirects are not followed.

The server trusts the receiver's throwaway CA through ``callbacks_ca_file`` and may call loopback
(``callbacks_allow_private``); ``hooks.test`` resolves to 127.0.0.1 through a StaticResolver. The
clock starts at the real time (the package checks timestamps against it) and moves only when told."""

from __future__ import annotations

import base64
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlmodel import Session
from standardwebhooks import WebhookVerificationError

from core.adapters.outbound.resolver import StaticResolver
from core.bootstrap import build_core
from core.clock import ManualClock
from core.domain.envelope import PairBox
from core.domain.typed_reply import seal_typed_reply
from core.runtime.core import Core
from core.services import callback_delivery
from core.settings import Settings
from core.store.tables import InteractionCallback
from tests.fakes.webhook_receiver import HOST_NAME, Reply, WebhookReceiver, wait_until
from tests.helpers import FakeDevice


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[WebhookReceiver]:
    with WebhookReceiver(tmp_path) as running:
        yield running


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(float(int(time.time())))


@pytest.fixture
def core(settings: Settings, clock: ManualClock, receiver: WebhookReceiver) -> Iterator[Core]:
    allowed = settings.model_copy(
        update={"callbacks_allow_private": True, "callbacks_ca_file": receiver.ca_file}
    )
    built = build_core(allowed, clock=clock, resolver=StaticResolver({HOST_NAME: ["127.0.0.1"]}))
    yield built
    built.engine.dispose()


def ask(http: httpx.Client, caller: dict[str, str], **fields: Any) -> dict[str, Any]:
    asked = http.post("/v1/interactions", json={"question": "Deploy?", **fields}, headers=caller)
    assert asked.status_code == 201, asked.text
    return dict(asked.json())


def answer(http: httpx.Client, phone: FakeDevice, interaction_id: str, **body: Any) -> None:
    answered = http.post(f"/v1/interactions/{interaction_id}/answer", json=body, headers=phone.auth)
    assert answered.status_code == 200, answered.text


def read(http: httpx.Client, caller: dict[str, str], interaction_id: str) -> dict[str, Any]:
    polled = http.get(f"/v1/interactions/{interaction_id}", params={"wait": 0}, headers=caller)
    assert polled.status_code == 200, polled.text
    return dict(polled.json())


def settled(core: Core, interaction_id: str, attempts: int) -> dict[str, Any]:
    """The callback's state (as GET shows it) once attempt ``attempts`` has its outcome recorded,
    read from the database: a GET would take a typed reply the callback is meant to take."""

    def probe() -> dict[str, Any] | None:
        with Session(core.engine) as session:
            row = session.get(InteractionCallback, interaction_id)
        assert row is not None
        done = row.attempts == attempts and (row.due_at is None or row.last_error is not None)
        if not done:
            return None
        state = "delivered" if row.delivered_at else "failed" if row.failed_at else "pending"
        shown = {"state": state, "attempts": row.attempts, "last_error": row.last_error}
        return {key: value for key, value in {**shown, "last_status": row.last_status}.items() if value}

    return wait_until(probe)


def deliver_due(core: Core) -> int:
    """One round of the app's sender, run from the test (its own round may get there first)."""
    return anyio.run(callback_delivery.deliver_due, core)


def sealed(core: Core, phone: FakeDevice, interaction_id: str, text: str) -> str:
    box = PairBox(phone.secret_key, core.keys.public_key)
    return base64.b64encode(seal_typed_reply(box, interaction_id=interaction_id, text=text)).decode()


def test_an_answer_is_posted_signed_to_the_callback_url(
    http: httpx.Client, caller: dict[str, str], phone: FakeDevice, core: Core, receiver: WebhookReceiver
) -> None:
    asked = ask(http, caller, callback_url=receiver.url(), idempotency_key="deploy-1")
    secret = asked["callback_secret"]
    assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    again = http.post(
        "/v1/interactions", json={"question": "Deploy?", "idempotency_key": "deploy-1"}, headers=caller
    )
    assert (again.status_code, again.json()["callback_secret"]) == (200, secret)  # a retried create
    pending = read(http, caller, asked["id"])
    assert "callback_secret" not in pending
    assert pending["callback"] == {"state": "pending", "attempts": 0}
    answer(http, phone, asked["id"], choice_index=1)
    (delivery,) = receiver.wait_for("/hook", 1)
    event = delivery.verified(secret)  # standardwebhooks: signature and timestamp
    assert delivery.headers["webhook-id"].startswith("evt_")
    assert delivery.headers["host"] == f"{HOST_NAME}:{receiver.port}"
    assert delivery.headers["content-type"] == "application/json"
    assert event["type"] == "interaction.answered"
    assert event["timestamp"].endswith("Z")
    assert event["data"] == {
        "id": asked["id"],
        "status": "answered",
        "expires_at": asked["expires_at"],
        "choice_index": 1,
        "answered_at": event["data"]["answered_at"],
    }
    delivered = {"state": "delivered", "attempts": 1, "last_status": 200}
    assert settled(core, asked["id"], 1) == delivered == read(http, caller, asked["id"])["callback"]
    forged = dict(delivery.headers, **{"webhook-id": "evt_other"})
    with pytest.raises(WebhookVerificationError, match="signature"):
        type(delivery)(delivery.path, forged, delivery.body).verified(secret)


def test_a_repeated_create_naming_another_callback_url_is_409_and_keeps_the_first(
    http: httpx.Client, caller: dict[str, str], phone: FakeDevice, receiver: WebhookReceiver
) -> None:
    asked = ask(http, caller, callback_url=receiver.url("/first"), idempotency_key="deploy-2")
    plain = ask(http, caller, question="No callback?")
    for fields in (
        {"idempotency_key": "deploy-2", "callback_url": receiver.url("/second")},
        {"question": "No callback?", "callback_url": receiver.url("/late")},
    ):
        again = http.post("/v1/interactions", json={"question": "Deploy?", **fields}, headers=caller)
        assert (again.status_code, again.json()["error"]["code"]) == (409, "callback_url_conflict")
        assert "callback_secret" not in again.text
    assert again.json()["error"]["details"]["id"] == plain["id"]
    same = http.post(
        "/v1/interactions",
        json={"question": "Deploy?", "idempotency_key": "deploy-2", "callback_url": receiver.url("/first")},
        headers=caller,
    )
    assert (same.status_code, same.json()["callback_secret"]) == (200, asked["callback_secret"])
    answer(http, phone, asked["id"], choice_index=0)
    answer(http, phone, plain["id"], choice_index=0)
    assert [item.path for item in receiver.wait_for("/first", 1)] == ["/first"]
    assert receiver.to("/second") == receiver.to("/late") == []


def test_an_expiry_is_posted_when_the_question_expires_unanswered(
    http: httpx.Client, caller: dict[str, str], core: Core, clock: ManualClock, receiver: WebhookReceiver
) -> None:
    asked = ask(http, caller, callback_url=receiver.url("/expired"), expires_in_seconds=60)
    clock.advance(59)
    assert deliver_due(core) == 0 and receiver.to("/expired") == []
    clock.advance(1)
    deliver_due(core)
    (delivery,) = receiver.wait_for("/expired", 1)
    event = delivery.verified(asked["callback_secret"])
    assert event["type"] == "interaction.expired"
    assert (event["data"]["id"], event["data"]["status"]) == (asked["id"], "expired")
    assert "choice_index" not in event["data"]
    assert settled(core, asked["id"], 1)["state"] == "delivered"


def test_a_failing_receiver_is_retried_with_backoff_under_one_webhook_id(
    http: httpx.Client,
    caller: dict[str, str],
    phone: FakeDevice,
    core: Core,
    clock: ManualClock,
    receiver: WebhookReceiver,
) -> None:
    receiver.script("/flaky", Reply(500), Reply(503))
    asked = ask(http, caller, callback_url=receiver.url("/flaky"))
    answer(http, phone, asked["id"], choice_index=0)
    receiver.wait_for("/flaky", 1)
    assert settled(core, asked["id"], 1) == {
        "state": "pending",
        "attempts": 1,
        "last_error": "http_error",
        "last_status": 500,
    }
    clock.advance(callback_delivery.RETRY_AFTER_S[0] - 1)
    assert deliver_due(core) == 0  # not yet
    clock.advance(1)
    deliver_due(core)
    receiver.wait_for("/flaky", 2)
    assert settled(core, asked["id"], 2)["last_status"] == 503
    clock.advance(callback_delivery.RETRY_AFTER_S[1])
    deliver_due(core)
    deliveries = receiver.wait_for("/flaky", 3)
    assert settled(core, asked["id"], 3) == {"state": "delivered", "attempts": 3, "last_status": 200}
    assert len({d.headers["webhook-id"] for d in deliveries}) == 1
    times = [int(d.headers["webhook-timestamp"]) for d in deliveries]
    assert [b - a for a, b in itertools.pairwise(times)] == list(callback_delivery.RETRY_AFTER_S[:2])
    for delivery in deliveries:  # each attempt signed for its own timestamp
        assert delivery.verified(asked["callback_secret"])["type"] == "interaction.answered"
    assert deliver_due(core) == 0 and len(receiver.to("/flaky")) == 3


@pytest.mark.parametrize(
    ("asked", "waited"), [("300", 300), ("999999999", callback_delivery.RETRY_AFTER_S[-1])]
)
def test_a_receivers_longer_retry_after_postpones_the_retry_up_to_the_longest_wait(
    http: httpx.Client,
    caller: dict[str, str],
    phone: FakeDevice,
    core: Core,
    clock: ManualClock,
    receiver: WebhookReceiver,
    asked: str,
    waited: int,
) -> None:
    receiver.script("/busy", Reply(503, {"Retry-After": asked}))
    question = ask(http, caller, callback_url=receiver.url("/busy"))
    answer(http, phone, question["id"], choice_index=0)
    receiver.wait_for("/busy", 1)
    assert settled(core, question["id"], 1)["last_status"] == 503
    clock.advance(callback_delivery.RETRY_AFTER_S[0])
    assert deliver_due(core) == 0  # the schedule's 10 s are not enough for this receiver
    clock.advance(waited - callback_delivery.RETRY_AFTER_S[0] - 1)
    assert deliver_due(core) == 0
    clock.advance(1)
    deliver_due(core)
    receiver.wait_for("/busy", 2)
    assert settled(core, question["id"], 2)["state"] == "delivered"


def test_a_typed_reply_is_taken_by_the_callback_that_got_through(
    http: httpx.Client, caller: dict[str, str], phone: FakeDevice, core: Core, receiver: WebhookReceiver
) -> None:
    asked = ask(http, caller, allow_text=True, choices=[], callback_url=receiver.url("/text"))
    answer(http, phone, asked["id"], sealed_text=sealed(core, phone, asked["id"], "after the backup"))
    (delivery,) = receiver.wait_for("/text", 1)
    assert delivery.verified(asked["callback_secret"])["data"]["text"] == "after the backup"
    settled(core, asked["id"], 1)
    later = read(http, caller, asked["id"])
    assert "text" not in later and later["text_already_read"] is True


def test_a_typed_reply_whose_callback_failed_waits_for_get(
    http: httpx.Client, caller: dict[str, str], phone: FakeDevice, core: Core, receiver: WebhookReceiver
) -> None:
    receiver.script("/down", Reply(500))
    asked = ask(http, caller, allow_text=True, callback_url=receiver.url("/down"))
    answer(
        http, phone, asked["id"], choice_index=0, sealed_text=sealed(core, phone, asked["id"], "not today")
    )
    (delivery,) = receiver.wait_for("/down", 1)
    assert delivery.json()["data"]["text"] == "not today"  # sent, but not acknowledged
    assert settled(core, asked["id"], 1)["last_error"] == "http_error"
    first = read(http, caller, asked["id"])
    assert (first["text"], first["callback"]["state"]) == ("not today", "pending")
    assert "text" not in read(http, caller, asked["id"])


def test_a_redirect_is_not_followed(
    http: httpx.Client, caller: dict[str, str], phone: FakeDevice, core: Core, receiver: WebhookReceiver
) -> None:
    receiver.script("/moved", Reply(307, {"Location": "/elsewhere"}))
    asked = ask(http, caller, callback_url=receiver.url("/moved"))
    answer(http, phone, asked["id"], choice_index=0)
    receiver.wait_for("/moved", 1)
    callback = settled(core, asked["id"], 1)
    assert (callback["last_error"], callback["last_status"]) == ("redirect_not_followed", 307)
    time.sleep(0.3)
    assert receiver.to("/elsewhere") == []


def test_a_410_stops_the_retries(
    http: httpx.Client,
    caller: dict[str, str],
    phone: FakeDevice,
    core: Core,
    clock: ManualClock,
    receiver: WebhookReceiver,
) -> None:
    receiver.script("/gone", Reply(410))
    asked = ask(http, caller, callback_url=receiver.url("/gone"))
    answer(http, phone, asked["id"], choice_index=0)
    receiver.wait_for("/gone", 1)
    callback = settled(core, asked["id"], 1)
    assert callback == {"state": "failed", "attempts": 1, "last_error": "gone", "last_status": 410}
    clock.advance(86_400)
    assert deliver_due(core) == 0 and len(receiver.to("/gone")) == 1
