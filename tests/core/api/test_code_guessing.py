"""Guessing six-digit codes: a live code dies after the wrong guesses that could have hit it, and
no number of strangers can lock pairing or consent for anyone else (see core.services.code_guesses).
"""

from __future__ import annotations

import random

import httpx
import pytest

from core.clock import ManualClock
from core.domain.secrets import pairing_code_digest
from core.principal import Principal
from core.runtime.core import Core
from core.services.code_guesses import guess_bucket
from core.services.consent import ConsentStart, ConsentStarted, start_consent
from core.services.limits import address_key
from core.settings import Settings, explicit_settings
from tests.helpers import FakeDevice, b64, error_code, register_phone, start_pairing

ATTACKER_ADDRESSES = [f"198.51.100.{n}" for n in range(1, 46)]  # 45 forwarded addresses
WRONG_GUESSES = 200
REGISTRATIONS_PER_HOUR = 50  # where registration is open: room for the 45 phones of one hour


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"open_registrations_per_hour": REGISTRATIONS_PER_HOUR})


def open_consent(core: Core) -> ConsentStarted:
    body = ConsentStart(client_id="https://client.example/app", client_name="Client", request_params="{}")
    return core.run_sync(start_consent, Principal.anonymous("192.0.2.9"), body=body)


def confirm(http: httpx.Client, phone: FakeDevice, code: str, **headers: str) -> httpx.Response:
    body = {"code": code, "public_key": phone.public_b64}
    return http.post("/v1/pair/confirm", json=body, headers={**phone.auth, **headers})


def bucket_of(core: Core, code: str) -> str:
    return guess_bucket(pairing_code_digest(code, core.keys.derived_key("pairing-code")))


def test_200_wrong_codes_from_45_addresses_leave_a_victims_pairing_and_consent_codes_working(
    live_server: str, core: Core
) -> None:
    with httpx.Client(base_url=live_server, timeout=10) as http:
        victim = register_phone(http, name="victim")
        computer, pairing_code = start_pairing(http)
        consent = open_consent(core)
        live = {pairing_code, consent.code}
        attackers = [
            (register_phone(http, headers={"X-Forwarded-For": address}), address)
            for address in ATTACKER_ADDRESSES
        ]
        draw = random.Random(16)
        refused = 0
        for n in range(WRONG_GUESSES):
            guess = f"{draw.randrange(1_000_000):06d}"
            while guess in live:
                guess = f"{draw.randrange(1_000_000):06d}"
            phone, address = attackers[n % len(attackers)]
            answer = confirm(http, phone, guess, **{"X-Forwarded-For": address})
            assert answer.status_code in (400, 429), answer.text
            refused += answer.status_code == 429
        assert refused == 0  # every guess was judged: none of them were stopped before the code check

        paired = confirm(http, victim, pairing_code)
        assert paired.status_code == 200, paired.text
        assert paired.json()["device"]["device_id"] == computer.device_id
        approved = confirm(http, victim, consent.code)
        assert approved.status_code == 200, approved.text
        assert approved.json() == {"intent": "connector", "client_name": "Client"}


def test_a_live_code_dies_after_the_wrong_guesses_that_could_have_hit_it(
    live_server: str, core: Core
) -> None:
    with httpx.Client(base_url=live_server, timeout=10) as client:
        guess_until_the_bucket_dies(client, core)


def guess_until_the_bucket_dies(client: httpx.Client, core: Core) -> None:
    computer, code = start_pairing(client)
    consent = open_consent(core)
    bucket = bucket_of(core, code)
    same_bucket = (f"{n:06d}" for n in range(1_000_000) if bucket_of(core, f"{n:06d}") == bucket)
    guesses = [g for g in same_bucket if g not in (code, consent.code)]
    limit = core.settings.pairing_wrong_guesses_per_code
    for n, guess in enumerate(guesses[:limit]):
        address = {"X-Forwarded-For": f"203.0.113.{n}"}
        guesser = register_phone(client, headers=address)
        assert error_code(confirm(client, guesser, guess, **address)) == "invalid_code"

    assert error_code(client.get("/v1/pair/result", headers=computer.auth)) == "pairing_expired"
    owner = register_phone(client)
    assert error_code(confirm(client, owner, code)) == "invalid_code"  # dead, even for the right phone
    consent_died = bucket_of(core, consent.code) == bucket
    answer = confirm(client, owner, consent.code)
    assert (error_code(answer) == "invalid_code") if consent_died else answer.status_code == 200
    _, fresh = start_pairing(client)  # a new code is the remedy
    assert confirm(client, owner, fresh).status_code == 200


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the limits live in the process
def test_many_addresses_and_registrations_leave_a_victims_codes_working_on_an_open_server(
    live_server: str, core: Core, clock: ManualClock
) -> None:
    """Issue 45's attack, over three hours: phones registered from a new address each (as many as
    the hourly cap lets through), then five wrong codes from every one of them within one code's
    life. 750 random wrong codes would put about 47 in each of the 16 buckets, past the 32 that
    kill its codes; only the hour's server-wide share (200) is charged to them, so the victim's
    pairing and consent codes still confirm."""
    assert core.settings.effective_registration == "open"
    per_hour = core.settings.open_registrations_per_hour
    with httpx.Client(base_url=live_server, timeout=10) as http:
        victim = register_phone(http, name="victim")
        attackers: list[tuple[FakeDevice, str]] = []
        for hour in range(3):
            answers = []
            for n in range(per_hour + 10):
                address = f"10.{hour}.{n // 250}.{n % 250 + 1}"
                body = {"public_key": b64(bytes(32)), "name": "guesser"}
                answer = http.post("/v1/devices", json=body, headers={"X-Forwarded-For": address})
                answers.append(answer.status_code)
                if answer.status_code == 201:
                    device = answer.json()
                    guesser = FakeDevice(device["device_id"], device["device_token"], b"", bytes(32))
                    attackers.append((guesser, address))
            assert answers.count(201) == per_hour - (1 if hour == 0 else 0)  # the victim took one
            assert set(answers) == {201, 429}
            clock.advance(3600)

        computer, pairing_code = start_pairing(http)
        consent = open_consent(core)
        live = {pairing_code, consent.code}
        draw = random.Random(45)
        for phone, address in attackers:
            for _ in range(core.settings.pairing_failures_per_device):
                guess = f"{draw.randrange(1_000_000):06d}"
                while guess in live:
                    guess = f"{draw.randrange(1_000_000):06d}"
                answer = confirm(http, phone, guess, **{"X-Forwarded-For": address})
                assert error_code(answer) == "invalid_code", answer.text
        assert len(attackers) * core.settings.pairing_failures_per_device >= 700

        paired = confirm(http, victim, pairing_code)
        assert paired.status_code == 200, paired.text
        assert paired.json()["device"]["device_id"] == computer.device_id
        approved = confirm(http, victim, consent.code)
        assert approved.status_code == 200, approved.text


def test_an_ipv6_network_counts_as_one_address(live_server: str, core: Core) -> None:
    prefix = "2001:db8:45:7"  # one /64
    with httpx.Client(base_url=live_server, timeout=10) as http:
        per_minute = core.settings.register_per_ip_per_minute
        guessers = [
            register_phone(http, headers={"X-Forwarded-For": f"{prefix}::{n:x}"})
            for n in range(1, per_minute + 1)
        ]
        refused = http.post(
            "/v1/devices",
            json={"public_key": b64(bytes(32))},
            headers={"X-Forwarded-For": f"{prefix}:ffff::1"},
        )
        assert (refused.status_code, error_code(refused)) == (429, "rate_limit_exceeded")
        other_network = register_phone(http, headers={"X-Forwarded-For": "2001:db8:45:8::1"})

        budget = core.settings.pairing_failures_per_ip
        for n in range(budget):  # each from a new address of the network, by phones of their own
            phone = guessers[n % len(guessers)]
            answer = confirm(http, phone, "000000", **{"X-Forwarded-For": f"{prefix}:{n:x}::9"})
            assert error_code(answer) == "invalid_code"
        stopped = confirm(http, other_network, "000000", **{"X-Forwarded-For": f"{prefix}::abcd"})
        assert (stopped.status_code, error_code(stopped)) == (429, "too_many_attempts")
        judged = confirm(http, other_network, "000000", **{"X-Forwarded-For": "2001:db8:45:8::1"})
        assert error_code(judged) == "invalid_code"


def test_an_ipv4_mapped_address_counts_as_its_ipv4_address_and_the_prefix_is_a_setting() -> None:
    default = explicit_settings()
    assert (
        address_key(default, "::ffff:198.51.100.7") == address_key(default, "198.51.100.7") == "198.51.100.7"
    )
    assert address_key(default, "2001:db8::1") == address_key(default, "2001:db8::ffff:1") == "2001:db8::/64"
    assert address_key(default, "testclient") == "testclient"
    wider = explicit_settings(ipv6_limit_prefix=48)
    assert address_key(wider, "2001:db8:0:1::1") == address_key(wider, "2001:db8:0:2::1") == "2001:db8::/48"
    exact = explicit_settings(ipv6_limit_prefix=128)
    assert address_key(exact, "2001:db8::1") != address_key(exact, "2001:db8::2")
