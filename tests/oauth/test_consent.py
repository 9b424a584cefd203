"""The consent page and the phone's confirmation: who is asking, the six-digit code (single use,
300 s, never colliding with a pairing code, under the pairing limits), CSRF, Allow and Deny, the
scopes left ticked, and no replay of a consent for another client."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.runtime.core import Core
from core.services import consent, pairing
from core.store.tables import ConsentSession, Device
from tests.helpers import error_code, register_phone, start_pairing
from tests.oauth.flow import (
    ALL_SCOPES,
    ISSUER,
    Authorization,
    confirm_on_phone,
    decide,
    exchange,
    open_consent,
    redirect_params,
    register_client,
)


@pytest.fixture
def request_(client: TestClient) -> Authorization:
    return Authorization(register_client(client, client_name="Claude")["client_id"])


def test_the_page_names_the_client_its_redirect_host_and_that_it_is_a_loopback_client(
    client: TestClient, request_: Authorization
) -> None:
    page = open_consent(client, request_.url())
    assert re.search(r'<span id="client-name">Claude</span>', page.html)
    assert '<dd id="redirect-host">127.0.0.1:3030</dd>' in page.html
    assert "loopback" in page.html
    assert re.fullmatch(r"[0-9]{6}", page.code)
    assert f"relaybox phone connect {page.code}" in page.html


def test_a_private_use_scheme_client_is_described_as_an_app_on_this_device(client: TestClient) -> None:
    uri = "cursor://anysphere.cursor-retrieval/oauth/callback"
    request = Authorization(register_client(client, redirect_uris=[uri])["client_id"], redirect_uri=uri)
    page = open_consent(client, request.url())
    assert "cursor://anysphere.cursor-retrieval" in page.html
    assert "as an app on this device" in page.html


def test_client_supplied_text_is_escaped(client: TestClient) -> None:
    request = Authorization(register_client(client, client_name="<script>alert(1)</script>")["client_id"])
    page = open_consent(client, request.url())
    assert "<script>alert(1)" not in page.html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.html


def test_the_page_is_locked_down_by_its_headers(client: TestClient, request_: Authorization) -> None:
    response = client.get(request_.url())
    policy = response.headers["content-security-policy"]
    nonce = re.search(r"script-src 'nonce-([^']+)'", policy)
    assert nonce is not None
    assert "default-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "form-action 'self' http://127.0.0.1:3030" in policy
    assert "connect-src 'self'" in policy
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["cache-control"] == "no-store"
    assert f'<script nonce="{nonce[1]}">' in response.text
    assert "style-src 'self';" in policy and "<style" not in response.text  # the site's stylesheet only
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in response.text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", response.text)  # no external assets


def test_the_browser_cookie_is_http_only_strict_and_scoped_to_its_session(
    client: TestClient, request_: Authorization
) -> None:
    response = client.get(request_.url())
    cookie = response.headers["set-cookie"]
    page_session = re.search(r"/oauth/consent/(cns_[0-9a-f]+)/status", response.text)
    assert page_session is not None
    assert f"Path=/oauth/consent/{page_session[1]}" in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie


def test_the_phone_confirms_the_code_as_intent_connector_and_no_device_is_made(
    client: TestClient, core: Core, request_: Authorization
) -> None:
    phone = register_phone(client)
    page = open_consent(client, request_.url())
    response = confirm_on_phone(client, phone, page.code)
    assert response.status_code == 200, response.text
    assert response.json() == {"intent": "connector", "client_name": "Claude"}
    with Session(core.engine) as session:
        assert len(session.exec(select(Device)).all()) == 1
        row = session.get(ConsentSession, page.session_id)
        assert row is not None and row.account_id == phone.account_id and row.code_digest is None
    status = client.get(page.status_url + "?wait=0").json()
    assert status["status"] == "confirmed"
    assert status["phone_name"] == "Pixel"


def test_the_code_is_single_use(client: TestClient, request_: Authorization) -> None:
    phone, other = register_phone(client), register_phone(client)
    page = open_consent(client, request_.url())
    assert confirm_on_phone(client, phone, page.code).status_code == 200
    again = confirm_on_phone(client, other, page.code)
    assert again.status_code == 400 and error_code(again) == "invalid_code"


def test_the_code_expires_after_300_seconds(
    client: TestClient, clock: ManualClock, request_: Authorization
) -> None:
    phone = register_phone(client)
    page = open_consent(client, request_.url())
    clock.advance(300)
    late = confirm_on_phone(client, phone, page.code)
    assert late.status_code == 400 and error_code(late) == "invalid_code"
    assert client.get(page.status_url + "?wait=0").json()["status"] == "expired"
    refused = decide(client, page)
    assert refused.status_code == 410  # consent_expired
    assert "location" not in refused.headers


def test_the_code_is_stored_only_as_a_digest(client: TestClient, core: Core, request_: Authorization) -> None:
    page = open_consent(client, request_.url())
    with Session(core.engine) as session:
        row = session.get(ConsentSession, page.session_id)
        assert row is not None
        assert page.code not in {row.code_digest, row.browser_digest, row.csrf_digest}
        assert page.csrf_token not in row.model_dump_json()


def test_wrong_codes_count_against_the_pairing_limits(client: TestClient, request_: Authorization) -> None:
    phone = register_phone(client)
    page = open_consent(client, request_.url())
    wrong = f"{(int(page.code) + 1) % 1_000_000:06d}"
    for _ in range(5):
        assert error_code(confirm_on_phone(client, phone, wrong, intent="connector")) == "invalid_code"
    blocked = confirm_on_phone(client, phone, page.code, intent="connector")
    assert blocked.status_code == 429 and error_code(blocked) == "too_many_attempts"


def test_a_connector_intent_never_redeems_a_pairing_code_and_a_pair_intent_never_a_consent_code(
    client: TestClient, request_: Authorization
) -> None:
    phone = register_phone(client)
    computer, pairing_code = start_pairing(client)
    page = open_consent(client, request_.url())
    assert error_code(confirm_on_phone(client, phone, pairing_code, intent="connector")) == "invalid_code"
    assert error_code(confirm_on_phone(client, phone, page.code, intent="pair")) == "invalid_code"
    assert client.get("/v1/pair/result", headers=computer.auth).json()["status"] == "pending"
    assert client.get(page.status_url + "?wait=0").json()["status"] == "pending"
    assert confirm_on_phone(client, phone, page.code, intent="connector").json()["intent"] == "connector"
    assert confirm_on_phone(client, phone, pairing_code, intent="pair").json()["intent"] == "pair"


def scripted_codes(*codes: str) -> Iterator[str]:
    yield from codes
    raise AssertionError("more codes drawn than scripted")


def test_a_consent_code_is_never_one_that_is_live_for_pairing(
    client: TestClient, request_: Authorization, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pairing, "new_pairing_code", lambda: "111111")
    _, pairing_code = start_pairing(client)
    codes = scripted_codes("111111", "222222")
    monkeypatch.setattr(consent, "new_pairing_code", lambda: next(codes))
    assert pairing_code == "111111"
    assert open_consent(client, request_.url()).code == "222222"


def test_a_pairing_code_is_never_one_that_is_live_for_consent(
    client: TestClient, request_: Authorization, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consent, "new_pairing_code", lambda: "333333")
    assert open_consent(client, request_.url()).code == "333333"
    codes = scripted_codes("333333", "444444")
    monkeypatch.setattr(pairing, "new_pairing_code", lambda: next(codes))
    assert start_pairing(client)[1] == "444444"


def test_the_decision_needs_the_phone_confirmation_first(client: TestClient, request_: Authorization) -> None:
    page = open_consent(client, request_.url())
    response = decide(client, page)
    assert response.status_code == 409
    assert "Confirm the code on your phone first" in response.text


def test_the_decision_needs_the_pages_csrf_token_and_its_browser(
    client: TestClient, request_: Authorization
) -> None:
    phone = register_phone(client)
    page = open_consent(client, request_.url())
    confirm_on_phone(client, phone, page.code)
    forged = decide(client, page.__class__(page.session_id, page.code, "forged", page.html))
    assert forged.status_code == 403
    jar = dict(client.cookies)
    client.cookies.clear()
    assert decide(client, page).status_code == 404  # another browser
    assert client.get(page.status_url + "?wait=0").status_code == 404
    client.cookies.update(jar)
    assert decide(client, page).status_code == 302


def test_deny_redirects_with_access_denied_state_and_iss(client: TestClient, request_: Authorization) -> None:
    phone = register_phone(client)
    page = open_consent(client, request_.url())
    confirm_on_phone(client, phone, page.code)
    params = redirect_params(decide(client, page, decision="deny"))
    assert params == {
        "error": "access_denied",
        "error_description": params["error_description"],
        "state": request_.state,
        "iss": ISSUER,
    }


def test_allow_redirects_with_a_code_state_and_iss_for_the_ticked_scopes(
    client: TestClient, request_: Authorization
) -> None:
    phone = register_phone(client)
    page = open_consent(client, request_.url())
    confirm_on_phone(client, phone, page.code)
    response = decide(client, page, scopes=["devices:read", "notifications:send", "not:requested"])
    assert response.headers["location"].startswith(request_.redirect_uri + "?")
    params = redirect_params(response)
    assert set(params) == {"code", "state", "iss"}
    assert params["state"] == request_.state and params["iss"] == ISSUER
    tokens = exchange(client, request_, params["code"]).json()
    assert tokens["scope"] == "notifications:send devices:read"


def test_allow_with_every_scope_unticked_is_access_denied(
    client: TestClient, request_: Authorization
) -> None:
    phone = register_phone(client)
    page = open_consent(client, request_.url())
    confirm_on_phone(client, phone, page.code)
    assert redirect_params(decide(client, page, scopes=[]))["error"] == "access_denied"


def test_a_consent_is_answered_once(client: TestClient, request_: Authorization) -> None:
    phone = register_phone(client)
    page = open_consent(client, request_.url())
    confirm_on_phone(client, phone, page.code)
    assert decide(client, page).status_code == 302
    again = decide(client, page)
    assert again.status_code == 409
    assert "already answered" in again.text
    assert client.get(page.status_url + "?wait=0").json()["status"] == "decided"


def test_a_consent_for_one_client_cannot_be_replayed_for_another(
    client: TestClient, request_: Authorization
) -> None:
    phone = register_phone(client)
    other = Authorization(register_client(client, client_name="Mallory")["client_id"])
    page = open_consent(client, request_.url())
    confirm_on_phone(client, phone, page.code)
    # Fields naming another client in the decision are ignored: the stored request is completed.
    response = client.post(
        page.decision_url,
        data={
            "csrf_token": page.csrf_token,
            "decision": "allow",
            "scope": ALL_SCOPES,
            "client_id": other.client_id,
            "redirect_uri": "http://127.0.0.1:9999/steal",
        },
        follow_redirects=False,
    )
    assert response.headers["location"].startswith(request_.redirect_uri + "?")
    code = redirect_params(response)["code"]
    stolen = exchange(client, other, code)
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"
    # The other client's own request needs its own code, confirmed by the phone again.
    other_page = open_consent(client, other.url())
    assert decide(client, other_page).status_code == 409
    assert exchange(client, request_, code).status_code == 200


def test_the_grant_belongs_to_the_account_of_the_phone_that_confirmed(
    client: TestClient, request_: Authorization
) -> None:
    mine, theirs = register_phone(client), register_phone(client)
    page = open_consent(client, request_.url())
    confirm_on_phone(client, theirs, page.code)
    code = redirect_params(decide(client, page))["code"]
    assert exchange(client, request_, code).status_code == 200
    assert client.get("/v1/connector-grants", headers=mine.auth).json() == {"grants": []}
    listed = client.get("/v1/connector-grants", headers=theirs.auth).json()["grants"]
    assert [grant["client_name"] for grant in listed] == ["Claude"]
