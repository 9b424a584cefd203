"""Who may register a phone (``RELAYBOX_REGISTRATION``), over real HTTP: open, invite (the first
phone claims the server, then a single-use invite per phone, made by a phone or by the operator)
and closed; the defaults by public URL; two first phones at once; invites kept as digests."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlmodel import Session, select

from app.assembly import create_app
from core.bootstrap import build_core
from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.services.maintenance import sweep_expired
from core.services.signup import INVITE_TTL_S, MAX_LIVE_INVITES
from core.settings import Settings, explicit_settings
from core.store.tables import Account, Invite, ServerClaim
from tests.helpers import FakeDevice, b64, create_token, error_code, pair_computer, register_phone
from tests.live import serve_in_thread


@pytest.fixture
def server(settings: Settings, clock: ManualClock) -> Iterator[tuple[Core, httpx.Client]]:
    """A server whose registration is by invite (as off loopback), over a real socket."""
    core = build_core(settings.model_copy(update={"registration": "invite"}), clock=clock)
    with serve_in_thread(create_app(core=core)) as url, httpx.Client(base_url=url, timeout=30) as http:
        yield core, http
    core.engine.dispose()


def phone_body(**extra: object) -> dict[str, object]:
    return {"public_key": b64(bytes(32)), "name": "Pixel", **extra}


def invite_from(http: httpx.Client, phone: FakeDevice) -> dict[str, object]:
    made = http.post("/v1/invites", headers=phone.auth)
    assert made.status_code == 201, made.text
    return dict(made.json())


def accounts(core: Core) -> int:
    with Session(core.engine) as session:
        return len(session.exec(select(Account)).all())


def test_by_invite_the_first_phone_claims_and_each_further_one_needs_a_fresh_invite(
    server: tuple[Core, httpx.Client], clock: ManualClock
) -> None:
    core, http = server
    first = register_phone(http)
    with Session(core.engine) as session:
        claim = session.get(ServerClaim, "server")
        assert claim is not None and claim.device_id == first.device_id

    second = http.post("/v1/devices", json=phone_body())
    assert (second.status_code, error_code(second)) == (403, "registration_closed")
    assert second.json()["error"]["details"] == {"registration": "invite"}  # an invite would do

    invite = invite_from(http, first)
    assert str(invite["invite"]).startswith("rbi_")
    assert invite["expires_at"] == int(clock.now()) + INVITE_TTL_S
    invited = register_phone(http, invite=invite["invite"])
    assert invited.account_id != first.account_id  # a phone of its own account

    again = http.post("/v1/devices", json=phone_body(invite=invite["invite"]))
    assert (again.status_code, error_code(again)) == (403, "invalid_invite")
    for wrong in ("rbi_" + "A" * 43, "x"):
        refused = http.post("/v1/devices", json=phone_body(invite=wrong))
        assert (refused.status_code, error_code(refused)) == (403, "invalid_invite")
    assert accounts(core) == 2

    late = invite_from(http, invited)  # any phone of the server may invite
    clock.advance(INVITE_TTL_S)
    expired = http.post("/v1/devices", json=phone_body(invite=late["invite"]))
    assert (expired.status_code, error_code(expired)) == (403, "invalid_invite")
    with Session(core.engine) as session:
        digests = [row.invite_hash for row in session.exec(select(Invite)).all()]
    assert digests == [hashlib.sha256(str(late["invite"]).encode()).hexdigest()]  # its digest, never itself
    assert core.run_sync(sweep_expired, Principal.system()).removed["invites"] == 1


def test_only_a_phone_invites_and_only_so_many_at_once(server: tuple[Core, httpx.Client]) -> None:
    _core, http = server
    phone = register_phone(http)
    computer = pair_computer(http, phone)
    by_computer = http.post("/v1/invites", headers=computer.auth)
    assert (by_computer.status_code, error_code(by_computer)) == (403, "not_a_phone")
    token = create_token(http, phone)["token"]
    by_token = http.post("/v1/invites", headers={"Authorization": f"Bearer {token}"})
    assert by_token.status_code in (401, 403)
    assert http.post("/v1/invites").status_code == 401
    for _ in range(MAX_LIVE_INVITES):
        invite_from(http, phone)
    over = http.post("/v1/invites", headers=phone.auth)
    assert (over.status_code, error_code(over)) == (409, "limit_reached")


def test_two_first_phones_at_once_do_not_both_claim_the_server(server: tuple[Core, httpx.Client]) -> None:
    core, http = server
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: http.post("/v1/devices", json=phone_body()), range(8)))
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [201] + [403] * 7, [answer.text for answer in answers]
    assert {error_code(a) for a in answers if a.status_code == 403} == {"registration_closed"}
    assert accounts(core) == 1


def test_an_invite_is_used_once_even_by_two_phones_at_once(server: tuple[Core, httpx.Client]) -> None:
    core, http = server
    invite = invite_from(http, register_phone(http))["invite"]
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: http.post("/v1/devices", json=phone_body(invite=invite)), range(6)))
    assert sorted(answer.status_code for answer in answers) == [201] + [403] * 5
    assert accounts(core) == 2


def test_closed_takes_no_phone_and_makes_no_invite(settings: Settings, clock: ManualClock) -> None:
    core = build_core(settings.model_copy(update={"registration": "open"}), clock=clock)
    with serve_in_thread(create_app(core=core)) as url, httpx.Client(base_url=url) as http:
        phone = register_phone(http)  # while it was open
        invite = invite_from(http, phone)["invite"]
    core.engine.dispose()
    closed = build_core(settings.model_copy(update={"registration": "closed"}), clock=clock)
    try:
        with serve_in_thread(create_app(core=closed)) as url, httpx.Client(base_url=url) as http:
            for body in (phone_body(), phone_body(invite=invite)):
                refused = http.post("/v1/devices", json=body)
                assert (refused.status_code, error_code(refused)) == (403, "registration_closed")
                assert refused.json()["error"]["details"] == {"registration": "closed"}  # none would do
            minted = http.post("/v1/invites", headers=phone.auth)
            assert (minted.status_code, error_code(minted)) == (403, "registration_closed")
            assert minted.json()["error"]["details"] == {"registration": "closed"}
            assert http.get("/v1/devices/me", headers=phone.auth).status_code == 200  # it keeps working
    finally:
        closed.engine.dispose()


def test_open_takes_phones_up_to_its_hourly_cap_and_an_invite_beyond(
    settings: Settings, clock: ManualClock
) -> None:
    core = build_core(settings.model_copy(update={"open_registrations_per_hour": 3}), clock=clock)
    assert core.settings.effective_registration == "open"  # the test settings' loopback URL
    try:
        with serve_in_thread(create_app(core=core)) as url, httpx.Client(base_url=url) as http:
            phones = [register_phone(http, invite="not an invite, ignored") for _ in range(3)]
            over = http.post("/v1/devices", json=phone_body())
            assert (over.status_code, error_code(over)) == (429, "rate_limit_exceeded")
            assert over.json()["error"]["details"]["resource"] == "open_registrations"
            assert int(over.headers["retry-after"]) > 0
            register_phone(http, invite=invite_from(http, phones[0])["invite"])
            clock.advance(3600)
            register_phone(http)
    finally:
        core.engine.dispose()


@pytest.mark.parametrize(
    ("values", "mode"),
    [
        ({}, "open"),
        ({"public_url": "http://localhost:8787"}, "open"),
        ({"public_url": "http://[::1]:8787"}, "open"),
        ({"public_url": "https://relay.example"}, "invite"),
        ({"host": "0.0.0.0"}, "invite"),  # noqa: S104  (reachable from the network, no public URL)
        ({"public_url": "https://relay.example", "registration": "open"}, "open"),
        ({"registration": "closed"}, "closed"),
    ],
)
def test_the_default_mode_follows_the_public_url(values: dict[str, str], mode: str) -> None:
    assert explicit_settings(**values).effective_registration == mode


def test_a_server_that_already_had_a_phone_is_claimed_by_it_when_it_upgrades(tmp_path: Path) -> None:
    """Migration 0024: switching an old server to invite must not let the next stranger claim it."""
    from sqlalchemy import text

    from core.store import migrate
    from core.store.database import make_engine
    from tests.core.store.test_migrations import _downgrade

    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    migrate.upgrade(engine)
    _downgrade(engine, "0022")
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO accounts (account_id, created_at) VALUES ('acc', 1)"))
        for device, kind, created in (
            ("laptop", "cli", 1),
            ("old-phone", "phone", 2),
            ("new-phone", "phone", 3),
        ):
            connection.execute(
                text(
                    "INSERT INTO devices (device_id, account_id, device_type, surface_kind, public_key, name,"
                    " credential_hash, created_at, ever_paired, ever_drained)"
                    " VALUES (:device, 'acc', 'android', :kind, 'key', '', :device, :created, 0, 0)"
                ),
                {"device": device, "kind": kind, "created": created},
            )
    migrate.upgrade(engine)
    with engine.connect() as connection:
        claims = connection.execute(text("SELECT claim_id, device_id FROM server_claims")).all()
    engine.dispose()
    assert [tuple(row) for row in claims] == [("server", "old-phone")]
