"""Guessing six-digit codes: a live code dies after the wrong guesses that could have hit it, and
no number of strangers can lock pairing or consent for anyone else (see core.services.code_guesses).
"""

from __future__ import annotations

import random

import httpx

from core.domain.secrets import pairing_code_digest
from core.principal import Principal
from core.runtime.core import Core
from core.services.code_guesses import guess_bucket
from core.services.consent import ConsentStart, ConsentStarted, start_consent
from tests.helpers import FakeDevice, error_code, register_phone, start_pairing

ATTACKER_ADDRESSES = [f"198.51.100.{n}" for n in range(1, 46)]  # 45 forwarded addresses
WRONG_GUESSES = 200


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
