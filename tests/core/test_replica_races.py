"""Two replicas racing on one PostgreSQL database: what must happen once happens once.

Two Cores (each with its own connection pool, as two processes would have) share a fresh
database. In every round several threads, half on each Core, are released together by a
barrier to attempt the same once-only action; the test then checks that exactly one won and
that the rows agree: pairing-code redemption, the first answer to a question, OAuth code
redemption and refresh-token rotation (over HTTP, one server per Core), queue trimming, the
expiry sweeps, and the migrations replicas run as they start.
"""

from __future__ import annotations

import base64
import functools
import multiprocessing
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from sqlalchemy import Engine, inspect, text

from app.assembly import create_app
from core.bootstrap import build_core
from core.clock import ManualClock
from core.domain.envelope import seal
from core.domain.keys import generate_keypair
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.services.auth import Accept, authenticate
from core.services.devices import DeviceCreate, register_phone
from core.services.interactions import Answer, InteractionCreate, answer_interaction, create_interaction
from core.services.maintenance import sweep_expired
from core.services.pairing import PairConfirm, PairConfirmOut, PairInit, init_pairing, redeem_code
from core.services.relay import EnvelopeCreate, relay_envelope
from core.services.tokens import TokenCreate, create_sender_token
from core.settings import Settings, explicit_settings
from core.store import migrate
from core.store.database import make_engine
from oauth.maintenance import sweep_oauth
from tests.helpers import FakeDevice
from tests.helpers import register_phone as register_phone_over_http
from tests.live import serve_in_thread
from tests.oauth import flow
from tests.services import fresh_postgres_database

pytestmark = pytest.mark.postgres

ROUNDS = 20
PER_REPLICA = 2  # contenders on each replica in every round
RACE_TIMEOUT_S = 30.0
IP = "10.9.8.7"
HIGH = 1_000_000  # limits out of the way: the races, not the budgets, are under test
SERVER_KEY = base64.b64encode(generate_keypair()[0]).decode()  # the web push key kept is sealed with it
T = TypeVar("T")


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with fresh_postgres_database() as url:
        yield url


@pytest.fixture
def settings(tmp_path: Path, database: str) -> Settings:
    return explicit_settings(
        data_dir=tmp_path / "data",
        database_url=database,
        server_secret_key=SERVER_KEY,  # one key for both replicas, and for every test on this database
        register_per_ip_per_minute=HIGH,
        pair_init_per_ip_per_minute=HIGH,
        pairing_failures_per_ip=HIGH,
        pairing_failures_per_device=HIGH,
        pairing_wrong_guesses_per_code=HIGH,
        limit_token_burst=HIGH,
        limit_token_monthly=HIGH,
        limit_receiver_daily=HIGH,
        limit_ip_minute=HIGH,
        limit_ip_hour=HIGH,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def replicas(settings: Settings, clock: ManualClock) -> Iterator[tuple[Core, Core]]:
    first, second = build_core(settings, clock=clock), build_core(settings, clock=clock)
    try:
        yield first, second
    finally:
        first.engine.dispose()
        second.engine.dispose()


@pytest.fixture
def looker(database: str) -> Iterator[Engine]:
    """A connection of the test's own, for reading rows (and emptied tables at the end)."""
    engine = make_engine(database)
    yield engine
    with engine.begin() as connection:
        names = ", ".join(
            f'"{name}"' for name in inspect(engine).get_table_names() if name != "alembic_version"
        )
        connection.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    engine.dispose()


def race(attempts: list[Callable[[], T]]) -> list[T | Exception]:
    """Run every attempt on its own thread, all released at once; each one's result or exception."""
    barrier = threading.Barrier(len(attempts))
    outcomes: dict[int, T | Exception] = {}

    def attempt(index: int) -> None:
        barrier.wait(RACE_TIMEOUT_S)
        try:
            outcomes[index] = attempts[index]()
        except Exception as error:
            outcomes[index] = error

    threads = [threading.Thread(target=attempt, args=(n,), daemon=True) for n in range(len(attempts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(RACE_TIMEOUT_S)
    assert not any(thread.is_alive() for thread in threads), "a racing attempt hung"
    return [outcomes[n] for n in range(len(attempts))]


def on_each_replica(replicas: tuple[Core, Core], attempt: Callable[[Core, int], T]) -> list[Callable[[], T]]:
    """``PER_REPLICA`` attempts on each replica; ``attempt(core, n)`` with n the contender's number."""
    return [
        functools.partial(attempt, core, n)
        for n, core in enumerate([core for core in replicas for _ in range(PER_REPLICA)])
    ]


def error_codes(outcomes: list[Any]) -> list[str]:
    """The catalogue codes of the attempts that failed; any other exception fails the test."""
    unexpected = [o for o in outcomes if isinstance(o, Exception) and not isinstance(o, RelayError)]
    assert not unexpected, unexpected
    return sorted(o.code for o in outcomes if isinstance(o, RelayError))


def results(outcomes: list[T | Exception]) -> list[T]:
    """What the attempts that did not fail returned."""
    error_codes(outcomes)
    return [o for o in outcomes if not isinstance(o, Exception)]


@dataclass
class Phone:
    principal: Principal
    device_id: str
    account_id: str
    secret: bytes
    public_b64: str


def new_phone(core: Core) -> Phone:
    secret, public = generate_keypair()
    public_b64 = base64.b64encode(public).decode()
    registered = core.run_sync(
        register_phone, Principal.anonymous(IP), body=DeviceCreate(public_key=public_b64, name="Pixel")
    )
    principal = signed_in(core, registered.device_token)
    return Phone(principal, registered.device_id, registered.account_id, secret, public_b64)


def signed_in(core: Core, token: str) -> Principal:
    return core.run_sync(
        authenticate, Principal.anonymous(IP), token=token, accept=Accept.SENDER_TOKEN | Accept.DEVICE
    )


def new_code(core: Core) -> tuple[str, str, bytes]:
    """A pairing code for a new computer: the code, the computer's device id and its public key."""
    _, public = generate_keypair()
    body = PairInit(public_key=base64.b64encode(public).decode(), surface_kind="cli", name="laptop")
    started = core.run_sync(init_pairing, Principal.anonymous(IP), body=body)
    return started.code, started.device_id, public


def rows(engine: Engine, sql: str, **params: Any) -> list[Any]:
    with engine.connect() as connection:
        return list(connection.execute(text(sql), params).all())


# -- pairing codes -------------------------------------------------------------------------------


def test_a_pairing_code_is_redeemed_by_exactly_one_of_several_phones_racing_on_two_replicas(
    replicas: tuple[Core, Core], looker: Engine
) -> None:
    phones = [new_phone(replicas[n % 2]) for n in range(2 * PER_REPLICA)]
    for round_ in range(ROUNDS):
        code, computer_id, _ = new_code(replicas[round_ % 2])

        def redeem(core: Core, n: int, code: str = code) -> PairConfirmOut:
            body = PairConfirm(code=code, public_key=phones[n].public_b64)
            confirmed = core.run_sync(redeem_code, phones[n].principal, body=body, ip=IP)
            if confirmed is None:
                raise RelayError("invalid_code")
            return confirmed

        outcomes = race(on_each_replica(replicas, redeem))
        winners = [n for n, o in enumerate(outcomes) if isinstance(o, PairConfirmOut)]
        assert len(winners) == 1, outcomes
        assert error_codes(outcomes) == ["invalid_code"] * (len(outcomes) - 1)
        winner = phones[winners[0]]
        assert rows(looker, "SELECT account_id FROM devices WHERE device_id = :d", d=computer_id) == [
            (winner.account_id,)
        ]
        assert rows(looker, "SELECT phone_device_id FROM pairs WHERE device_id = :d", d=computer_id) == [
            (winner.device_id,)
        ]
        assert rows(
            looker, "SELECT phone_device_id FROM pair_results WHERE device_id = :d", d=computer_id
        ) == [(winner.device_id,)]
        assert rows(looker, "SELECT 1 FROM pairing_codes WHERE device_id = :d", d=computer_id) == []


# -- first answer wins ---------------------------------------------------------------------------


def test_the_first_answer_wins_when_taps_race_on_two_replicas(
    replicas: tuple[Core, Core], looker: Engine
) -> None:
    phone = new_phone(replicas[0])
    token = replicas[0].run_sync(create_sender_token, phone.principal, body=TokenCreate(label="script"))
    sender = signed_in(replicas[1], token.token)
    for round_ in range(ROUNDS):
        question = InteractionCreate(question=f"deploy #{round_}?", choices=["a", "b", "c", "d"])
        asked = replicas[round_ % 2].run_sync(create_interaction, sender, body=question, ip=IP)

        def tap(core: Core, n: int, interaction_id: str = asked.id) -> int:
            core.run_sync(
                answer_interaction,
                phone.principal,
                interaction_id=interaction_id,
                body=Answer(choice_index=n),
            )
            return n

        outcomes = race(on_each_replica(replicas, tap))
        winners = [o for o in outcomes if isinstance(o, int)]
        assert len(winners) == 1, outcomes
        assert error_codes(outcomes) == ["already_answered"] * (len(outcomes) - 1)
        stored = rows(looker, "SELECT choice_index FROM interactions WHERE interaction_id = :i", i=asked.id)
        assert stored == [(winners[0],)]


# -- the queue keeps the newest 200 --------------------------------------------------------------


def test_a_queue_filled_from_two_replicas_at_once_keeps_exactly_the_newest_200(
    replicas: tuple[Core, Core], looker: Engine
) -> None:
    phone = new_phone(replicas[0])
    code, computer_id, computer_public = new_code(replicas[1])
    assert replicas[0].run_sync(
        redeem_code, phone.principal, body=PairConfirm(code=code, public_key=phone.public_b64), ip=IP
    )
    blob = base64.b64encode(seal(b"clip", phone.secret, computer_public)).decode()
    envelope = EnvelopeCreate(to=computer_id, type="clipboard", blob=blob)
    per_contender = 80  # 4 x 80 = 320 envelopes for a queue of 200
    most_seen: list[int] = []
    done = threading.Event()

    def watch() -> None:  # the cap holds at every commit, not only at the end
        while not done.is_set():
            count = rows(
                looker, "SELECT count(*) FROM queued_envelopes WHERE recipient_device_id = :d", d=computer_id
            )
            most_seen.append(count[0][0])

    def fill(core: Core, _n: int) -> list[int]:
        return [
            core.run_sync(relay_envelope, phone.principal, body=envelope).seq for _ in range(per_contender)
        ]

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        outcomes = race(on_each_replica(replicas, fill))
    finally:
        done.set()
        watcher.join(RACE_TIMEOUT_S)
    assert error_codes(outcomes) == []
    accepted = sorted(seq for batch in results(outcomes) for seq in batch)
    assert len(accepted) == len(set(accepted)) == 2 * PER_REPLICA * per_contender
    kept = rows(
        looker, "SELECT seq FROM queued_envelopes WHERE recipient_device_id = :d ORDER BY seq", d=computer_id
    )
    assert [seq for (seq,) in kept] == accepted[-200:]
    assert most_seen and max(most_seen) <= 200


# -- expiry sweeps -------------------------------------------------------------------------------


def test_expiry_sweeps_racing_on_two_replicas_remove_each_expired_row_once(
    replicas: tuple[Core, Core], clock: ManualClock, looker: Engine
) -> None:
    phone = new_phone(replicas[0])
    code, computer_id, computer_public = new_code(replicas[1])
    assert replicas[0].run_sync(
        redeem_code, phone.principal, body=PairConfirm(code=code, public_key=phone.public_b64), ip=IP
    )
    token = replicas[0].run_sync(create_sender_token, phone.principal, body=TokenCreate(label="script"))
    sender = signed_in(replicas[0], token.token)
    blob = base64.b64encode(seal(b"clip", phone.secret, computer_public)).decode()
    clock.advance(2 * 86_400)
    replicas[0].run_sync(sweep_expired, Principal.system())  # what the set-up left (a token_update, …)
    for round_ in range(ROUNDS // 2):
        created = {"pairing_codes": 0, "queued_envelopes": 0, "interactions": 0}
        for n in range(6):
            core = replicas[n % 2]
            new_code(core)
            core.run_sync(
                relay_envelope,
                phone.principal,
                body=EnvelopeCreate(to=computer_id, type="clipboard", blob=blob, ttl=0),
            )
            question = InteractionCreate(question=f"round {round_} question {n}?", expires_in_seconds=60)
            core.run_sync(create_interaction, sender, body=question, ip=IP)
            # (each question also queues its encrypted prompt for the phone)
            created["pairing_codes"] += 1
            created["queued_envelopes"] += 2
            created["interactions"] += 1
        clock.advance(2 * 86_400)  # past every lifetime and grace period above

        def sweep(core: Core, _n: int) -> dict[str, int]:
            return core.run_sync(sweep_expired, Principal.system()).removed

        outcomes = race(on_each_replica(replicas, sweep))
        assert error_codes(outcomes) == []
        for table, count in created.items():
            assert sum(removed[table] for removed in results(outcomes)) == count, (table, outcomes)
            assert rows(looker, f"SELECT count(*) FROM {table}") == [(0,)]  # noqa: S608 (a constant name)


def test_oauth_sweeps_racing_on_two_replicas_do_not_fail(replicas: tuple[Core, Core], looker: Engine) -> None:
    outcomes = race(
        on_each_replica(replicas, lambda core, _n: core.run_sync(sweep_oauth, Principal.system()).removed)
    )
    assert error_codes(outcomes) == []


# -- OAuth: code redemption and refresh rotation over HTTP, one server per replica ---------------


@pytest.fixture
def servers(replicas: tuple[Core, Core]) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    with (
        serve_in_thread(create_app(core=replicas[0])) as first,
        serve_in_thread(create_app(core=replicas[1])) as second,
        httpx.Client(base_url=first, timeout=30) as one,
        httpx.Client(base_url=second, timeout=30) as other,
    ):
        yield one, other


def on_each_server(
    servers: tuple[httpx.Client, httpx.Client], attempt: Callable[[httpx.Client], httpx.Response]
) -> list[Callable[[], httpx.Response]]:
    return [functools.partial(attempt, http) for http in servers for _ in range(PER_REPLICA)]


def responses(outcomes: list[httpx.Response | Exception]) -> list[httpx.Response]:
    """Every attempt's response, sorted by status; a transport error fails the test."""
    answered = [o for o in outcomes if isinstance(o, httpx.Response)]
    assert len(answered) == len(outcomes), outcomes
    return sorted(answered, key=lambda response: response.status_code)


def consented(
    servers: tuple[httpx.Client, httpx.Client], phone: FakeDevice
) -> tuple[flow.Authorization, str]:
    """A client registered on one replica, its consent page opened there, confirmed by the phone and
    allowed through the other: the authorization request and its code."""
    one, other = servers
    client = flow.register_client(one)
    request = flow.Authorization(client["client_id"])
    page = flow.open_consent(one, request.url())
    assert flow.confirm_on_phone(other, phone, page.code).status_code == 200
    other.cookies.update(one.cookies)  # one browser: behind one origin it sends its cookie to either
    params = flow.redirect_params(flow.decide(other, page))
    return request, params["code"]


def test_an_authorization_code_exchanged_on_two_replicas_at_once_yields_one_token(
    servers: tuple[httpx.Client, httpx.Client], looker: Engine
) -> None:
    phone = register_phone_over_http(servers[0])
    for _ in range(ROUNDS // 4):
        request, code = consented(servers, phone)

        def exchange(http: httpx.Client, request: flow.Authorization = request, code: str = code) -> Any:
            return flow.exchange(http, request, code)

        answered = responses(race(on_each_server(servers, exchange)))
        assert [r.status_code for r in answered] == [200] + [400] * (len(answered) - 1)
        assert {r.json()["error"] for r in answered[1:]} == {"invalid_grant"}
        grants = rows(
            looker, "SELECT revoked_at FROM connector_grants WHERE client_id = :c", c=request.client_id
        )
        assert len(grants) == 1
        # A reused code revokes what its first redemption produced (RFC 6749 §4.1.2).
        assert grants[0][0] is not None


def test_a_refresh_token_rotates_once_when_replayed_on_two_replicas_at_once_and_its_family_dies(
    servers: tuple[httpx.Client, httpx.Client], looker: Engine
) -> None:
    phone = register_phone_over_http(servers[0])
    for round_ in range(ROUNDS // 4):
        request, code = consented(servers, phone)
        issued = flow.exchange(servers[round_ % 2], request, code)
        assert issued.status_code == 200, issued.text
        # Rotation alone, alternating replicas, works: each new refresh token is usable once.
        refresh_token = issued.json()["refresh_token"]
        for http in (*servers, *servers):
            rotated = flow.refresh(http, request.client_id, refresh_token)
            assert rotated.status_code == 200, rotated.text
            refresh_token = rotated.json()["refresh_token"]
        tokens_before = rows(
            looker, "SELECT count(*) FROM oauth_tokens WHERE client_id = :c", c=request.client_id
        )

        def replay(http: httpx.Client, client_id: str = request.client_id, token: str = refresh_token) -> Any:
            return flow.refresh(http, client_id, token)

        answered = responses(race(on_each_server(servers, replay)))
        assert [r.status_code for r in answered] == [200] + [400] * (len(answered) - 1)
        assert {r.json()["error"] for r in answered[1:]} == {"invalid_grant"}
        winner = answered[0]
        tokens_after = rows(
            looker, "SELECT count(*) FROM oauth_tokens WHERE client_id = :c", c=request.client_id
        )
        assert tokens_after[0][0] == tokens_before[0][0] + 1  # exactly one new pair
        # The concurrent copies were replays: the whole family is revoked, the winner's new pair too.
        live = rows(
            looker,
            "SELECT count(*) FROM oauth_tokens WHERE client_id = :c AND revoked_at IS NULL",
            c=request.client_id,
        )
        assert live == [(0,)]
        again = flow.refresh(servers[0], request.client_id, winner.json()["refresh_token"])
        assert (again.status_code, again.json()["error"]) == (400, "invalid_grant")


# -- migrations at start-up ----------------------------------------------------------------------


def test_replicas_starting_together_on_an_empty_database_migrate_it_once() -> None:
    """Processes, as replicas are (Alembic's environment is process-global), released together."""
    processes = 4
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    with fresh_postgres_database() as url:
        started = [
            context.Process(target=migrate_when_released, args=(url, barrier)) for _ in range(processes)
        ]
        for process in started:
            process.start()
        for process in started:
            process.join(RACE_TIMEOUT_S * 2)
        hung = [process for process in started if process.is_alive()]
        for process in hung:
            process.kill()
        assert [process.exitcode for process in started] == [0] * processes
        engine = make_engine(url)
        try:
            assert rows(engine, "SELECT count(*) FROM alembic_version") == [(1,)]
            assert "queued_envelopes" in inspect(engine).get_table_names()
        finally:
            engine.dispose()


def migrate_when_released(url: str, barrier: Any) -> None:
    """In a child process: connect, wait for the others, migrate."""
    engine = make_engine(url)
    try:
        with engine.connect():
            pass
        barrier.wait(RACE_TIMEOUT_S)
        migrate.upgrade(engine)
    finally:
        engine.dispose()
