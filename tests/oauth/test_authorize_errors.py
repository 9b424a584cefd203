"""The authorization endpoint's errors (RFC 6749 §4.1.2.1, RFC 8707, RFC 9207).

A request whose client or redirect URI cannot be trusted gets an error page and is never
redirected; every other error is redirected to the exact redirect URI with ``error``, ``state``
and ``iss``. The page says in plain words what is wrong and what to do, with the RFC 6749 code.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from core.services import consent
from core.settings import Settings, explicit_settings
from tests.oauth.flow import (
    ISSUER,
    REDIRECT_URI,
    RESOURCE,
    Authorization,
    open_consent,
    redirect_params,
    register_client,
)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return explicit_settings(
        data_dir=tmp_path / "data", database_url=database_url, oauth_consent_per_ip_per_minute=3
    )


@pytest.fixture
def request_(client: TestClient) -> Authorization:
    return Authorization(register_client(client)["client_id"])


def assert_redirected_error(response: Any, request: Authorization, error: str) -> dict[str, str]:
    assert response.status_code == 302, response.text
    assert response.headers["location"].startswith(request.redirect_uri + "?")
    params = redirect_params(response)
    assert params["error"] == error
    assert params["state"] == request.state
    assert params["iss"] == ISSUER
    assert "code" not in params
    return params


def assert_error_page(response: Any) -> None:
    assert response.status_code == 400, response.text
    assert "location" not in response.headers
    assert response.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


def page_text(response: Any) -> str:
    """What a person reads on the page: its text without tags, whitespace collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.text)).split())


def assert_readable_error_page(response: Any, error: str, *phrases: str) -> str:
    """An error page naming the RFC 6749 ``error`` and saying ``phrases``, in plain words."""
    assert_error_page(response)
    text = page_text(response)
    assert f"Error code: {error}" in text
    for phrase in phrases:
        assert phrase in text
    assert "None" not in text and "not supported by the server" not in text
    assert "Start connecting again from the app" in text or "not by hand" in text
    return text


# Never redirected: the client or the redirect URI is not trustworthy.


def test_the_endpoint_opened_by_hand_says_what_it_is(client: TestClient) -> None:
    response = client.get("/oauth/authorize", follow_redirects=False)
    text = assert_readable_error_page(response, "unsupported_response_type")
    assert (
        "This is the authorization endpoint an AI assistant's app opens to connect to relaybox; "
        "open it from the app, not by hand." in text
    )


def test_a_missing_response_type_without_a_known_client_gets_a_readable_page(client: TestClient) -> None:
    response = client.get(Authorization("cli_unknown").url(response_type=None), follow_redirects=False)
    assert_readable_error_page(
        response, "unsupported_response_type", "no response_type", "response_type=code"
    )


def test_an_unsupported_response_type_without_a_known_client_gets_a_readable_page(
    client: TestClient,
) -> None:
    response = client.get(Authorization("cli_unknown").url(response_type="token"), follow_redirects=False)
    assert_readable_error_page(response, "unsupported_response_type", "The response_type must be code")


def test_a_response_type_authlib_cannot_describe_gets_a_page_naming_it(
    client: TestClient, request_: Authorization
) -> None:
    response = client.get(request_.url(response_type='co"de'), follow_redirects=False)
    assert_readable_error_page(response, "unsupported_response_type", "The response_type must be code")


def test_an_unknown_client_gets_an_error_page(client: TestClient) -> None:
    response = client.get(Authorization("cli_unknown").url(), follow_redirects=False)
    assert_readable_error_page(response, "invalid_client", "client_id", "not registered")


def test_a_missing_client_id_gets_an_error_page(client: TestClient, request_: Authorization) -> None:
    response = client.get(request_.url(client_id=None), follow_redirects=False)
    assert_readable_error_page(response, "invalid_client", "no client_id")


def test_a_repeated_client_id_gets_an_error_page_naming_it(
    client: TestClient, request_: Authorization
) -> None:
    response = client.get(request_.url() + f"&client_id={request_.client_id}", follow_redirects=False)
    assert_readable_error_page(response, "invalid_request", "client_id parameter appears more than once")


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "http://127.0.0.1:3030/other",
        "http://127.0.0.1:3030/callback/",
        "https://127.0.0.1:3030/callback",
        "http://localhost:3030/callback",
        'http://127.0.0.1:3030/callback"><script>',
        "http://127.0.0.1:3030/callbäck",
    ],
)
def test_a_redirect_uri_that_is_not_registered_exactly_gets_an_error_page(
    client: TestClient, request_: Authorization, redirect_uri: str
) -> None:
    response = client.get(request_.url(redirect_uri=redirect_uri), follow_redirects=False)
    text = assert_readable_error_page(
        response, "invalid_request", "redirect_uri", "not one this app registered"
    )
    assert "<script>" not in response.text
    assert redirect_uri not in text  # the page does not echo what it refuses


def test_an_unregistered_redirect_uri_is_named_even_beside_a_repeatable_parameter(
    client: TestClient, request_: Authorization
) -> None:
    url = request_.url(redirect_uri="http://127.0.0.1:3030/other") + f"&resource={RESOURCE}"
    response = client.get(url, follow_redirects=False)
    text = assert_readable_error_page(response, "invalid_request", "not one this app registered")
    assert "more than once" not in text


def test_an_https_redirect_uri_must_match_exactly(client: TestClient) -> None:
    registered = "https://app.example/callback"
    request = Authorization(register_client(client, redirect_uris=[registered])["client_id"])
    request.redirect_uri = registered
    assert client.get(request.url(), follow_redirects=False).status_code == 200
    for variant in (registered + "/", "https://app.example:443/callback", "https://APP.example/callback"):
        assert_error_page(client.get(request.url(redirect_uri=variant), follow_redirects=False))


def test_a_loopback_redirect_uri_may_use_another_port(client: TestClient, request_: Authorization) -> None:
    response = client.get(request_.url(redirect_uri="http://127.0.0.1:49152/callback"))
    assert response.status_code == 200


def test_a_missing_redirect_uri_is_allowed_only_with_a_single_registered_one(client: TestClient) -> None:
    single = Authorization(register_client(client)["client_id"])
    assert client.get(single.url(redirect_uri=None)).status_code == 200
    two = register_client(client, redirect_uris=[REDIRECT_URI, "https://app.example/cb"])
    response = client.get(Authorization(two["client_id"]).url(redirect_uri=None), follow_redirects=False)
    assert_readable_error_page(response, "invalid_request", "no redirect_uri", "more than one")


def test_a_malformed_or_oversized_query_gets_an_error_page(
    client: TestClient, request_: Authorization
) -> None:
    for response in (
        client.get(request_.url() + "&state=%ff%fe", follow_redirects=False),
        client.get(request_.url(state="s" * 9000), follow_redirects=False),
    ):
        assert_readable_error_page(response, "invalid_request")


# Redirected with error, state and iss.


def test_an_unsupported_response_type_is_redirected(client: TestClient, request_: Authorization) -> None:
    response = client.get(request_.url(response_type="token"), follow_redirects=False)
    params = assert_redirected_error(response, request_, "unsupported_response_type")
    assert params["error_description"] == "The response_type must be code."


def test_a_missing_response_type_is_redirected_with_a_readable_description(
    client: TestClient, request_: Authorization
) -> None:
    response = client.get(request_.url(response_type=None), follow_redirects=False)
    params = assert_redirected_error(response, request_, "unsupported_response_type")
    assert params["error_description"] == "The request has no response_type; send response_type=code."


def test_a_client_not_registered_for_the_code_grant_is_unauthorized(client: TestClient) -> None:
    request = Authorization(register_client(client, grant_types=["refresh_token"])["client_id"])
    assert_redirected_error(client.get(request.url(), follow_redirects=False), request, "unauthorized_client")


@pytest.mark.parametrize("scope", ["admin", "notifications:send admin", "openid"])
def test_an_unknown_scope_is_redirected_as_invalid_scope(
    client: TestClient, request_: Authorization, scope: str
) -> None:
    response = client.get(request_.url(scope=scope), follow_redirects=False)
    assert_redirected_error(response, request_, "invalid_scope")


@pytest.mark.parametrize(
    "overrides",
    [
        {"code_challenge": None, "code_challenge_method": None},
        {"code_challenge": None},
        {"code_challenge_method": None},
        {"code_challenge_method": "plain"},
        {"code_challenge": "too-short"},
    ],
    ids=["no-pkce", "no-challenge", "no-method", "plain", "malformed-challenge"],
)
def test_pkce_s256_is_required_at_the_authorize_step(
    client: TestClient, request_: Authorization, overrides: dict[str, str | None]
) -> None:
    response = client.get(request_.url(**overrides), follow_redirects=False)
    assert_redirected_error(response, request_, "invalid_request")


def test_a_repeated_parameter_is_an_invalid_request(client: TestClient, request_: Authorization) -> None:
    response = client.get(request_.url() + "&scope=devices:read", follow_redirects=False)
    assert_redirected_error(response, request_, "invalid_request")


@pytest.mark.parametrize(
    "resource",
    [None, "https://other.example/mcp", f"{ISSUER}/v1", f"{ISSUER}/mcp#frag", ISSUER],
    ids=["missing", "other-server", "other-path", "fragment", "origin"],
)
def test_the_resource_must_name_this_mcp_endpoint(
    client: TestClient, request_: Authorization, resource: str | None
) -> None:
    response = client.get(request_.url(resource=resource), follow_redirects=False)
    assert_redirected_error(response, request_, "invalid_target")


def test_two_resources_are_an_invalid_target(client: TestClient, request_: Authorization) -> None:
    response = client.get(request_.url() + f"&resource={RESOURCE}", follow_redirects=False)
    assert_redirected_error(response, request_, "invalid_target")


def test_a_trailing_slash_on_the_resource_is_tolerated(client: TestClient, request_: Authorization) -> None:
    assert client.get(request_.url(resource=RESOURCE + "/")).status_code == 200


def test_too_many_consent_pages_from_one_address_is_temporarily_unavailable(
    client: TestClient, request_: Authorization
) -> None:
    for _ in range(3):
        open_consent(client, request_.url())
    response = client.get(request_.url(), follow_redirects=False)
    assert_redirected_error(response, request_, "temporarily_unavailable")


def test_an_unexpected_failure_after_validation_is_redirected_as_server_error(
    client: TestClient, request_: Authorization, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("storage fell over")

    monkeypatch.setattr(consent, "start_consent", broken)
    response = client.get(request_.url(), follow_redirects=False)
    assert_redirected_error(response, request_, "server_error")


# What a valid request is offered.


def test_a_request_without_scope_is_offered_every_scope(client: TestClient, request_: Authorization) -> None:
    page = open_consent(client, request_.url(scope=None))
    assert page.html.count('name="scope"') == 6


def test_offline_access_is_tolerated_but_never_offered(client: TestClient, request_: Authorization) -> None:
    page = open_consent(client, request_.url(scope="devices:read offline_access"))
    assert page.html.count('name="scope"') == 1
    assert 'value="devices:read"' in page.html
    assert "offline_access" not in page.html
