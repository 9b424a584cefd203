"""Client ID Metadata Documents: an https ``client_id`` is resolved by fetching its document, with
size, time, redirect and address guards, and cached. Tests serve documents over https from
127.0.0.1, which only ``cimd_allow_private`` (off by default) admits, with a certificate from the
test run's CA, which only ``cimd_ca_file`` makes the server trust."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from app.assembly import create_app
from core.bootstrap import build_core
from core.clock import ManualClock
from core.settings import Settings, explicit_settings
from tests.fakes.tls import ca_file
from tests.helpers import register_phone
from tests.oauth.document_server import DocumentServer, Reply
from tests.oauth.flow import REDIRECT_URI, Authorization, approve, exchange, open_consent

PATH = "/oauth/client-metadata.json"


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return explicit_settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        cimd_allow_private=True,
        cimd_ca_file=ca_file(),
        # Short, for the stalled document's test, but not so short that a loaded machine turns a
        # slow answer of another case into "did not answer in time" (it did at 1 s under two CI runs).
        cimd_timeout_s=3.0,
        cimd_max_bytes=2048,
    )


@pytest.fixture
def documents() -> Iterator[DocumentServer]:
    with DocumentServer() as server:
        yield server


def publish(documents: DocumentServer, path: str = PATH, **fields: Any) -> str:
    client_id = documents.url(path)
    document = {
        "client_id": client_id,
        "client_name": "Docs Assistant",
        "redirect_uris": [REDIRECT_URI],
        **fields,
    }
    documents.replies[path] = Reply.json(document)
    return client_id


def test_a_client_id_url_is_resolved_from_its_document_and_completes_the_flow(
    client: TestClient, documents: DocumentServer
) -> None:
    client_id = publish(documents)
    page = open_consent(client, Authorization(client_id).url())
    assert "Docs Assistant" in page.html
    assert client_id in page.html  # where the client is described
    phone = register_phone(client)
    request = Authorization(client_id)
    params = approve(client, phone, request)
    tokens = exchange(client, request, params["code"])
    assert tokens.status_code == 200, tokens.text
    assert "refresh_token" in tokens.json()


def test_the_document_is_cached_for_its_max_age(
    client: TestClient, documents: DocumentServer, clock: ManualClock
) -> None:
    client_id = documents.url(PATH)
    document = {"client_id": client_id, "client_name": "Cached", "redirect_uris": [REDIRECT_URI]}
    documents.replies[PATH] = Reply.json(document, **{"Cache-Control": "public, max-age=600"})
    for _ in range(3):
        assert client.get(Authorization(client_id).url()).status_code == 200
    assert documents.fetched == [PATH]
    clock.advance(601)
    assert client.get(Authorization(client_id).url()).status_code == 200
    assert documents.fetched == [PATH, PATH]


def test_the_redirect_uri_must_be_one_the_document_lists(
    client: TestClient, documents: DocumentServer
) -> None:
    client_id = publish(documents)
    response = client.get(Authorization(client_id, redirect_uri="https://elsewhere.example/cb").url())
    assert response.status_code == 400
    assert "location" not in response.headers


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            lambda url: Reply.json(
                {"client_id": url + "x", "client_name": "n", "redirect_uris": [REDIRECT_URI]}
            ),
            "client_id is not the URL",
        ),
        (lambda url: Reply.json({"client_id": url, "redirect_uris": [REDIRECT_URI]}), "client_name"),
        (lambda url: Reply.json({"client_id": url, "client_name": "n"}), "redirect_uris"),
        (
            lambda url: Reply.json(
                {"client_id": url, "client_name": "n", "redirect_uris": ["http://evil.example/"]}
            ),
            "not acceptable",
        ),
        (
            lambda url: Reply.json(
                {"client_id": url, "client_name": "n", "redirect_uris": [REDIRECT_URI], "client_secret": "s"}
            ),
            "secret",
        ),
        (
            lambda url: Reply.json(
                {
                    "client_id": url,
                    "client_name": "n",
                    "redirect_uris": [REDIRECT_URI],
                    "token_endpoint_auth_method": "private_key_jwt",
                }
            ),
            "not acceptable",
        ),
        (lambda url: Reply.json(["not", "an", "object"]), "not a JSON object"),
        (lambda url: Reply(200, b"<html>", {"Content-Type": "text/html"}), "not JSON"),
        (lambda url: Reply(404, b"gone"), "HTTP 404"),
        (
            lambda url: Reply.json({"client_id": url, "client_name": "n" * 3000, "redirect_uris": []}),
            "larger than",
        ),
        (lambda url: Reply(stall=True), "in time"),
    ],
    ids=[
        "other-client-id",
        "no-name",
        "no-redirects",
        "bad-redirect",
        "secret",
        "jwt-auth",
        "array",
        "html",
        "404",
        "too-large",
        "too-slow",
    ],
)
def test_an_unusable_document_is_an_error_page_not_a_redirect(
    client: TestClient, documents: DocumentServer, reply: Any, reason: str
) -> None:
    documents.replies[PATH] = reply(documents.url(PATH))
    response = client.get(Authorization(documents.url(PATH)).url())
    assert response.status_code == 400
    assert "location" not in response.headers
    assert reason in response.text


@pytest.mark.parametrize(
    "location",
    [
        "https://10.20.30.40/client.json",
        "https://[::ffff:10.1.2.3]/client.json",
        "http://example.org/client.json",
        "/moved.json",  # the same host: not followed either
    ],
)
def test_a_redirect_is_not_followed(client: TestClient, documents: DocumentServer, location: str) -> None:
    original = documents.url(PATH)
    documents.replies[PATH] = Reply(307, b"", {"Location": location})
    documents.replies["/moved.json"] = Reply.json(
        {"client_id": original, "client_name": "Moved", "redirect_uris": [REDIRECT_URI]}
    )
    response = client.get(Authorization(original).url())
    assert response.status_code == 400
    assert "redirects are not followed" in response.text
    assert documents.fetched == [PATH]


@pytest.mark.parametrize(
    "client_id",
    [
        "https://10.0.0.7/client.json",
        "https://[fd00::7]/client.json",
        "https://169.254.169.254/latest/meta-data",
        "https://app.example/",
        "https://app.example",
        "https://app.example/a/../client.json",
        "https://user@app.example/client.json",
        "https://[64:ff9b::a00:7]/client.json",  # NAT64 of 10.0.0.7
        "https://[2002:a9fe:a9fe::1]/client.json",  # 6to4 of 169.254.169.254
        "https://app.example/client.json\x00",
        "http://app.example/client.json",
    ],
)
def test_client_id_urls_on_private_addresses_or_without_a_path_are_refused(
    client: TestClient, client_id: str
) -> None:
    response = client.get(Authorization(client_id).url())
    assert response.status_code == 400
    assert "location" not in response.headers


def test_loopback_documents_are_refused_unless_the_settings_allow_them(
    tmp_path: Path, documents: DocumentServer
) -> None:
    for name, strict in {
        "private or loopback host": explicit_settings(data_dir=tmp_path / "strict", cimd_ca_file=ca_file()),
        "could not be fetched (tls_failed)": explicit_settings(
            data_dir=tmp_path / "ca", cimd_allow_private=True
        ),
    }.items():
        assert strict.cimd_allow_private is False or strict.cimd_ca_file is None
        core = build_core(strict)
        try:
            with TestClient(create_app(core=core)) as http:
                response = http.get(Authorization(publish(documents)).url())
        finally:
            core.engine.dispose()
        assert response.status_code == 400
        assert name in response.text
    assert documents.fetched == []


def test_a_client_that_expired_unused_is_described_again_by_a_fresh_fetch(
    client: TestClient, documents: DocumentServer, clock: ManualClock
) -> None:
    client_id = documents.url(PATH)
    document = {"client_id": client_id, "client_name": "Returning", "redirect_uris": [REDIRECT_URI]}
    documents.replies[PATH] = Reply.json(document, **{"Cache-Control": "max-age=86400"})
    assert client.get(Authorization(client_id).url()).status_code == 200
    clock.advance(86_400)
    assert client.get(Authorization(client_id).url()).status_code == 200
    assert documents.fetched == [PATH, PATH]
