"""Where an answer callback may go, over real HTTP and HTTPS: a callback_url of the wrong shape is
400 invalid_callback_url and a plainly private one 400 callback_url_not_allowed when the question
is asked; a public name that resolves to a private address is refused when the callback is sent,
before any connection; the receiver's certificate is checked for the URL's own host (the TLS
server name) although the connection goes to the address that was checked; and the expiry sweep
keeps a question while its callback is still being tried. Names resolve through a StaticResolver:
the tests never ask the real DNS."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlmodel import Session, select

from app.assembly import create_app
from core.adapters.outbound.client import OutboundError
from core.adapters.outbound.resolver import StaticResolver
from core.bootstrap import build_core
from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.services.maintenance import CALLBACK_GRACE_S, INTERACTION_GRACE_S, sweep_expired
from core.settings import Settings
from core.store.tables import Interaction, InteractionCallback
from tests.fakes.webhook_receiver import HOST_NAME, WebhookReceiver, wait_until
from tests.helpers import FakeDevice, create_token, error_code, register_phone
from tests.live import serve_in_thread


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[WebhookReceiver]:
    with WebhookReceiver(tmp_path) as running:
        yield running


@contextmanager
def server(
    settings: Settings, names: Mapping[str, list[str]] | None = None, **changes: Any
) -> Iterator[tuple[Core, httpx.Client, FakeDevice, dict[str, str]]]:
    """A relaybox on a loopback socket with these settings and names, its phone and a caller."""
    core = build_core(
        settings.model_copy(update=changes),
        clock=ManualClock(float(int(time.time()))),
        resolver=StaticResolver(names or {}),
    )
    try:
        with serve_in_thread(create_app(core=core)) as url, httpx.Client(base_url=url, timeout=30) as http:
            phone = register_phone(http)
            caller = {"Authorization": f"Bearer {create_token(http, phone)['token']}"}
            yield core, http, phone, caller
    finally:
        core.engine.dispose()


def ask(http: httpx.Client, caller: dict[str, str], callback_url: str, **fields: Any) -> httpx.Response:
    return http.post(
        "/v1/interactions",
        json={"question": "Deploy?", "callback_url": callback_url, **fields},
        headers=caller,
    )


def answered_callback(
    core: Core, http: httpx.Client, phone: FakeDevice, caller: dict[str, str], url: str
) -> dict[str, Any]:
    """Ask with ``url``, answer, and wait for the first attempt's outcome as GET shows it."""
    asked = ask(http, caller, url, question=f"Call {url}?")
    assert asked.status_code == 201, asked.text
    interaction_id = asked.json()["id"]
    reply = http.post(
        f"/v1/interactions/{interaction_id}/answer", json={"choice_index": 0}, headers=phone.auth
    )
    assert reply.status_code == 200, reply.text

    def outcome() -> dict[str, Any] | None:
        got = http.get(f"/v1/interactions/{interaction_id}?wait=0", headers=caller).json()["callback"]
        return dict(got) if "last_error" in got or got["state"] != "pending" else None

    return wait_until(outcome)


WRONG_SHAPES = [
    "http://hooks.example/hook",
    "ftp://hooks.example/hook",
    "https://user:pass@hooks.example/hook",
    "https://hooks.example/hook#part",
    "https:///hook",
    "https://hooks.example:99999/hook",
    "https://hooks_example.com/hook",
    "https://2130706433/hook",
    "https://hööks.example/hook",
    "https://hooks.example/a b",
    "https://hooks.example/" + "a" * 2030,
    "hooks.example/hook",
]
PLAINLY_PRIVATE = ["localhost", "api.localhost", "127.0.0.1", "10.1.2.3", "192.168.0.10", "169.254.169.254"]
PLAINLY_PRIVATE += ["[::1]", "[::ffff:127.0.0.1]", "[fd00::1]", "100.64.0.1", "0.0.0.0"]  # noqa: S104


def test_a_callback_url_of_the_wrong_shape_or_plainly_private_is_refused(settings: Settings) -> None:
    with server(settings) as (core, http, _phone, caller):
        for url in WRONG_SHAPES:
            refused = ask(http, caller, url)
            assert (refused.status_code, error_code(refused)) == (400, "invalid_callback_url"), url
        for host in PLAINLY_PRIVATE:
            refused = ask(http, caller, f"https://{host}:8443/hook")
            assert (refused.status_code, error_code(refused)) == (400, "callback_url_not_allowed"), host
        with Session(core.engine) as session:  # nothing was half-written
            assert session.exec(select(Interaction)).all() == []


def test_private_callback_urls_are_taken_when_the_operator_allows_them(settings: Settings) -> None:
    with server(settings, callbacks_allow_private=True) as (_core, http, _phone, caller):
        for host in PLAINLY_PRIVATE[:4]:
            asked = ask(http, caller, f"https://{host}:8443/hook", question=f"Deploy to {host}?")
            assert asked.status_code == 201, host


def test_a_public_name_resolving_to_a_private_address_is_refused_when_sending(
    settings: Settings, receiver: WebhookReceiver
) -> None:
    names = {
        "hooks.example": ["127.0.0.1"],
        "mixed.example": ["2606:4700::1111", "93.184.215.14", "10.0.0.5"],
    }
    with server(settings, names, callbacks_ca_file=receiver.ca_file) as (core, http, phone, caller):
        callback = answered_callback(core, http, phone, caller, receiver.url(host="hooks.example"))
        assert callback == {"state": "pending", "attempts": 1, "last_error": "address_not_allowed"}
        unknown = answered_callback(core, http, phone, caller, "https://nowhere.example/hook")
        assert unknown["last_error"] == "dns_failed"
        # One private address among public ones refuses the name (checked without sending: the
        # public addresses are not on this machine, and nothing may be sent to them).
        with pytest.raises(OutboundError) as refused:
            anyio.run(core.webhooks.outbound.vetted_address, "mixed.example", 443)
        assert refused.value.code == "address_not_allowed"
        vetted = anyio.run(core.webhooks.outbound.vetted_address, "2606:4700::1111", 443)
        assert str(vetted) == "2606:4700::1111"
    assert receiver.received == []


def test_the_certificate_is_checked_for_the_urls_host_not_the_address(
    settings: Settings, receiver: WebhookReceiver
) -> None:
    names = {HOST_NAME: ["127.0.0.1"], "other.test": ["127.0.0.1"]}
    with server(settings, names, callbacks_allow_private=True, callbacks_ca_file=receiver.ca_file) as (
        core,
        http,
        phone,
        caller,
    ):
        # The same address and certificate: only the name the server checks it for differs.
        wrong_name = answered_callback(core, http, phone, caller, receiver.url(host="other.test"))
        assert wrong_name["last_error"] == "tls_failed"
        assert answered_callback(core, http, phone, caller, receiver.url("/right"))["state"] == "delivered"
    with server(settings, names, callbacks_allow_private=True) as (core, http, phone, caller):
        untrusted = answered_callback(core, http, phone, caller, receiver.url("/untrusted"))
        assert untrusted["last_error"] == "tls_failed"  # the throwaway CA is not a public one
    assert [item.path for item in receiver.received] == ["/right"]


def test_the_sweep_keeps_a_question_while_its_callback_is_being_tried(settings: Settings) -> None:
    with server(settings, callbacks_allow_private=True) as (core, http, _phone, caller):
        asked = ask(http, caller, "https://127.0.0.1:9/hook", expires_in_seconds=60)
        plain = http.post("/v1/interactions", json={"question": "Plain?"}, headers=caller)
        interaction_id, plain_id = asked.json()["id"], plain.json()["id"]
        with Session(core.engine) as session:  # as if the sender had been down all along
            row = session.get(InteractionCallback, interaction_id)
            assert row is not None and row.due_at is not None
        assert isinstance(core.clock, ManualClock)
        core.clock.advance(600 + INTERACTION_GRACE_S)
        core.run_sync(sweep_expired, Principal.system())
        with Session(core.engine) as session:
            assert session.get(Interaction, plain_id) is None
            assert session.get(Interaction, interaction_id) is not None
        core.clock.advance(CALLBACK_GRACE_S)
        core.run_sync(sweep_expired, Principal.system())
        with Session(core.engine) as session:
            assert session.get(Interaction, interaction_id) is None
            assert session.get(InteractionCallback, interaction_id) is None  # gone with it
