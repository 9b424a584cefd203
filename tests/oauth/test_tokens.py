"""Tokens: opaque, stored as digests, an hour and thirty days, rotated on every refresh; single-use
codes (also when redeemed concurrently); replays revoke the whole family."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
from sqlalchemy import Engine
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.principal import Principal, PrincipalKind
from core.redaction import redact
from core.runtime.core import Core
from oauth.tokens import VerifiedToken, check_access_token, verify_access_token
from tests.helpers import register_phone, tables_containing
from tests.oauth.flow import (
    ALL_SCOPES,
    RESOURCE,
    Authorization,
    approve,
    connect,
    exchange,
    refresh,
    register_client,
)


def verify(core: Core, token: str) -> VerifiedToken | None:
    return core.run_sync(check_access_token, Principal.system(), token=token)


def test_a_code_exchanges_for_an_hour_long_access_token_and_a_refresh_token(client: TestClient) -> None:
    phone = register_phone(client)
    request = Authorization(register_client(client)["client_id"])
    response = exchange(client, request, approve(client, phone, request)["code"])
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    tokens = response.json()
    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == 3600
    assert tokens["scope"] == " ".join(ALL_SCOPES)
    assert tokens["access_token"].startswith("rba_")
    assert tokens["refresh_token"].startswith("rbr_")


def test_a_token_stands_for_the_connector_grant_and_is_bound_to_the_mcp_resource(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    request, tokens = connect(client, phone, scopes=["devices:read", "phone:control"])
    verified = verify(core, tokens["access_token"])
    assert verified is not None
    assert verified.resource == RESOURCE
    assert verified.client_id == request.client_id
    assert verified.expires_at == int(clock.now()) + 3600
    principal = verified.principal
    assert principal.kind is PrincipalKind.CONNECTOR_GRANT
    assert principal.account_id == phone.account_id
    assert principal.client_id == request.client_id
    assert principal.scopes == frozenset({"devices:read", "phone:control"})
    grants = client.get("/v1/connector-grants", headers=phone.auth).json()["grants"]
    assert [grant["id"] for grant in grants] == [principal.grant_id]


def test_tokens_and_codes_are_stored_only_as_digests(client: TestClient, engine: Engine) -> None:
    phone = register_phone(client)
    request = Authorization(register_client(client)["client_id"])
    code = approve(client, phone, request)["code"]
    tokens = exchange(client, request, code).json()
    for secret in (code, tokens["access_token"], tokens["refresh_token"], request.pkce.verifier):
        assert tables_containing(engine, secret) == []


def test_unknown_or_malformed_access_tokens_verify_to_nothing(client: TestClient, core: Core) -> None:
    connect(client, register_phone(client))
    for token in ("", "rba_", "rba_unknown", "rbr_" + "x" * 43, "x" * 5000, "rfk_live_" + "a" * 32):
        assert verify(core, token) is None


def test_a_code_is_single_use_and_its_reuse_revokes_what_it_issued(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    request = Authorization(register_client(client)["client_id"])
    code = approve(client, phone, request)["code"]
    first = exchange(client, request, code).json()
    assert verify(core, first["access_token"]) is not None
    again = exchange(client, request, code)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert verify(core, first["access_token"]) is None
    assert refresh(client, request.client_id, first["refresh_token"]).json()["error"] == "invalid_grant"
    assert client.get("/v1/connector-grants", headers=phone.auth).json() == {"grants": []}


def test_an_expired_code_is_refused(client: TestClient, clock: ManualClock) -> None:
    phone = register_phone(client)
    request = Authorization(register_client(client)["client_id"])
    code = approve(client, phone, request)["code"]
    clock.advance(120)
    response = exchange(client, request, code)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"


def test_concurrent_redemptions_of_one_code_issue_tokens_once(live_server: str, core: Core) -> None:
    with httpx.Client(base_url=live_server, timeout=20) as http:
        phone = register_phone(http)
        request = Authorization(register_client(http)["client_id"])
        code = approve(http, phone, request)["code"]
    start = threading.Barrier(8)

    def redeem(_: int) -> httpx.Response:
        with httpx.Client(base_url=live_server, timeout=20) as own:
            start.wait(10)
            response: httpx.Response = exchange(own, request, code)
            return response

    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(redeem, range(8)))
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] + [400] * 7, [r.text for r in responses]
    assert {r.json()["error"] for r in responses if r.status_code == 400} == {"invalid_grant"}
    winner = next(r.json() for r in responses if r.status_code == 200)
    assert verify(core, winner["access_token"]) is None  # the code was used more than once


def test_a_refresh_rotates_both_tokens_and_spends_the_old_refresh_token(
    client: TestClient, core: Core
) -> None:
    phone = register_phone(client)
    request, first = connect(client, phone)
    response = refresh(client, request.client_id, first["refresh_token"], resource=RESOURCE)
    assert response.status_code == 200, response.text
    second = response.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"]
    assert second["scope"] == first["scope"]
    assert verify(core, second["access_token"]) is not None
    assert verify(core, first["access_token"]) is not None  # an access token lives out its hour
    third = refresh(client, request.client_id, second["refresh_token"])
    assert third.status_code == 200


def test_a_replayed_refresh_token_revokes_its_whole_family(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    request, first = connect(client, phone)
    second = refresh(client, request.client_id, first["refresh_token"]).json()
    replay = refresh(client, request.client_id, first["refresh_token"])
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert verify(core, second["access_token"]) is None
    assert verify(core, first["access_token"]) is None
    assert refresh(client, request.client_id, second["refresh_token"]).json()["error"] == "invalid_grant"
    assert client.get("/v1/connector-grants", headers=phone.auth).json() == {"grants": []}


def test_another_family_of_the_same_client_survives_a_replay(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    request, first = connect(client, phone)
    other = Authorization(request.client_id)
    kept = exchange(client, other, approve(client, phone, other)["code"]).json()
    refresh(client, request.client_id, first["refresh_token"])
    refresh(client, request.client_id, first["refresh_token"])
    assert verify(core, kept["access_token"]) is not None


def test_concurrent_refreshes_with_one_refresh_token_rotate_it_once(live_server: str) -> None:
    with httpx.Client(base_url=live_server, timeout=20) as http:
        request, tokens = connect(http, register_phone(http))
    start = threading.Barrier(4)

    def use(_: int) -> httpx.Response:
        with httpx.Client(base_url=live_server, timeout=20) as own:
            start.wait(10)
            response: httpx.Response = refresh(own, request.client_id, tokens["refresh_token"])
            return response

    with ThreadPoolExecutor(4) as pool:
        responses = list(pool.map(use, range(4)))
    assert sorted(r.status_code for r in responses) == [200, 400, 400, 400]


def test_access_tokens_last_an_hour_and_refresh_tokens_thirty_days(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    request, tokens = connect(client, phone)
    clock.advance(3599)
    assert verify(core, tokens["access_token"]) is not None
    clock.advance(1)
    assert verify(core, tokens["access_token"]) is None
    clock.advance(30 * 86_400 - 3600 - 1)
    renewed = refresh(client, request.client_id, tokens["refresh_token"])
    assert renewed.status_code == 200
    clock.advance(30 * 86_400)
    expired = refresh(client, request.client_id, renewed.json()["refresh_token"])
    assert expired.status_code == 400 and expired.json()["error"] == "invalid_grant"


def test_refresh_tokens_need_no_offline_access_scope(client: TestClient) -> None:
    phone = register_phone(client)
    request = Authorization(register_client(client)["client_id"], scope="notifications:send")
    tokens = exchange(client, request, approve(client, phone, request, scopes=["notifications:send"])["code"])
    assert "refresh_token" in tokens.json()


def test_a_client_registered_without_the_refresh_grant_gets_no_refresh_token(client: TestClient) -> None:
    phone = register_phone(client)
    request = Authorization(register_client(client, grant_types=["authorization_code"])["client_id"])
    tokens = exchange(client, request, approve(client, phone, request)["code"]).json()
    assert "access_token" in tokens and "refresh_token" not in tokens


def test_a_refresh_may_narrow_the_scope_but_never_widen_it(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    request, tokens = connect(client, phone, scopes=["devices:read", "notifications:send"])
    wider = refresh(client, request.client_id, tokens["refresh_token"], scope="devices:read files:send")
    assert wider.status_code == 400 and wider.json()["error"] == "invalid_scope"
    narrower = refresh(client, request.client_id, tokens["refresh_token"], scope="devices:read")
    assert narrower.status_code == 200 and narrower.json()["scope"] == "devices:read"
    verified = verify(core, narrower.json()["access_token"])
    assert verified is not None and verified.principal.scopes == frozenset({"devices:read"})


def test_a_refresh_must_keep_the_resource(client: TestClient) -> None:
    phone = register_phone(client)
    request, tokens = connect(client, phone)
    other = refresh(client, request.client_id, tokens["refresh_token"], resource="https://other.example/mcp")
    assert other.status_code == 400 and other.json()["error"] == "invalid_target"
    assert (
        refresh(client, request.client_id, tokens["refresh_token"], resource=RESOURCE + "/").status_code
        == 200
    )


def test_codes_and_tokens_are_redacted_from_logged_text(client: TestClient) -> None:
    phone = register_phone(client)
    request = Authorization(register_client(client)["client_id"])
    code = approve(client, phone, request)["code"]
    tokens = exchange(client, request, code).json()
    for secret in (code, tokens["access_token"], tokens["refresh_token"]):
        line = f'"GET /mcp?token={secret} HTTP/1.1" 401'
        assert secret not in redact(line)


def test_the_connector_verifies_tokens_in_the_apps_event_loop(client: TestClient, core: Core) -> None:
    request, tokens = connect(client, register_phone(client))
    assert client.portal is not None
    verified = client.portal.call(verify_access_token, core, tokens["access_token"])
    assert verified is not None and verified.client_id == request.client_id
    assert client.portal.call(verify_access_token, core, "rba_nothing") is None


def test_what_is_made_of_a_verification_is_made_once_per_maker_and_lives_as_long_as_it(
    client: TestClient, core: Core
) -> None:
    _, tokens = connect(client, register_phone(client))
    assert client.portal is not None
    verified = client.portal.call(verify_access_token, core, tokens["access_token"])
    assert verified is not None
    assert client.portal.call(verify_access_token, core, tokens["access_token"]) is verified  # cached
    made: list[str] = []

    def make(what: str) -> str:
        made.append(what)
        return what

    assert verified.made("gate", lambda: make("caller")) == "caller"
    assert verified.made("gate", lambda: make("other")) == "caller"
    assert verified.made("another gate", lambda: make("its caller")) == "its caller"
    assert made == ["caller", "its caller"]
    assert verified == verify(core, tokens["access_token"])  # what was made is no part of it
