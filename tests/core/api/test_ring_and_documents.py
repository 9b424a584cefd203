"""Ring (scope, targets, warnings) and documents (off by default, scope, filename and content rules)."""

from __future__ import annotations

import base64
import json

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.domain.envelope import open_envelope
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.services.capability import UNKNOWN_BUILD_WARNING
from core.services.documents import DocumentCreate, send_document
from core.store.tables import ParkedDocument
from tests.helpers import create_token, error_code, pair_computer, register_phone


def test_ring_needs_phone_control(client: TestClient) -> None:
    phone = register_phone(client)
    plain = {"Authorization": f"Bearer {create_token(client, phone)['token']}"}
    response = client.post(f"/v1/devices/{phone.device_id}/ring", headers=plain)
    assert response.status_code == 403 and error_code(response) == "insufficient_scope"


def test_ring_targets_only_your_own_phone(client: TestClient) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    stranger = register_phone(client)
    headers = {"Authorization": f"Bearer {create_token(client, phone, scope='phone:control')['token']}"}
    for device_id, status, code in [
        (computer.device_id, 409, "no_phone_device"),
        (stranger.device_id, 404, "not_found"),
        ("not-a-device", 404, "not_found"),
    ]:
        response = client.post(f"/v1/devices/{device_id}/ring", headers=headers)
        assert (response.status_code, error_code(response)) == (status, code)


def test_ring_is_202_requested_with_warnings_that_say_why(client: TestClient) -> None:
    phone = register_phone(client)
    headers = {"Authorization": f"Bearer {create_token(client, phone, scope='phone:control')['token']}"}
    response = client.post(f"/v1/devices/{phone.device_id}/ring", headers=headers)
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "requested"
    assert len(body["warnings"]) == 2  # never reported a build; no push registration and no stream
    assert response.headers["x-ratelimit-resource"]


def test_ring_on_an_outdated_phone_is_426(client: TestClient, core: Core) -> None:
    core.settings = core.settings.model_copy(update={"min_build_ring": 7})
    phone = register_phone(client, app_build=6)
    headers = {"Authorization": f"Bearer {create_token(client, phone, scope='phone:control')['token']}"}
    response = client.post(f"/v1/devices/{phone.device_id}/ring", headers=headers)
    assert response.status_code == 426 and error_code(response) == "phone_app_outdated"


def test_documents_are_a_plain_404_while_disabled(client: TestClient) -> None:
    phone = register_phone(client)
    headers = {"Authorization": f"Bearer {create_token(client, phone)['token']}"}
    response = client.post("/v1/documents", json={"filename": "a.txt", "content": "x"}, headers=headers)
    assert (response.status_code, response.content) == (404, b"")
    for method in ("GET", "PUT", "DELETE"):  # every method, as while the route does not exist
        other = client.request(method, "/v1/documents", headers=headers)
        assert (other.status_code, other.content) == (404, b"")
    # Identical to an unknown route of the API (the spec's words).
    unknown = client.post("/v1/no-such-route", json={}, headers=headers)
    assert (unknown.status_code, unknown.content, unknown.headers.keys()) == (
        404,
        b"",
        response.headers.keys(),
    )
    assert "/v1/documents" not in client.get("/openapi.json").json()["paths"]
    assert "/v1/documents/{document_id}" in client.get("/openapi.json").json()["paths"]


@pytest.fixture
def documents_core(core: Core) -> Core:
    return core


@pytest.fixture
def documents_client(client: TestClient) -> TestClient:
    return client


def connector(account_id: str) -> Principal:
    """The connector's principal: the only holder of files:send (its OAuth grants arrive later)."""
    return Principal.connector_grant(
        account_id=account_id,
        client_id="test-client",
        grant_id="grant_test",
        scopes=frozenset({"files:send"}),
    )


def test_a_document_is_parked_encrypted_and_pulled_once(
    documents_client: TestClient, documents_core: Core
) -> None:
    phone = register_phone(documents_client, app_build=1)
    body = DocumentCreate(filename="../notes/.plan.md", content="MARKER-DOC-CONTENT ✓")
    out = documents_core.run_sync(send_document, connector(phone.account_id), body=body, ip="127.0.0.1")
    assert out.document_id.startswith("doc_") and out.byte_length == len("MARKER-DOC-CONTENT ✓".encode())
    with Session(documents_core.engine) as session:
        parked = session.exec(select(ParkedDocument)).one()
        assert b"MARKER" not in parked.blob and b"plan" not in parked.blob
    pulled = documents_client.get(f"/v1/documents/{out.document_id}", headers=phone.auth)
    assert pulled.status_code == 200
    plaintext = open_envelope(
        base64.b64decode(pulled.json()["blob"]), phone.secret_key, documents_core.keys.public_key
    )
    document = json.loads(plaintext)
    assert (document["filename"], document["content"]) == ("notes.plan.md", "MARKER-DOC-CONTENT ✓")
    assert documents_client.get(f"/v1/documents/{out.document_id}", headers=phone.auth).status_code == 404


@pytest.mark.parametrize("filename", [". ..plan.md", " . . .plan.md", ".\u200b .plan.md"])
def test_no_filename_reaches_the_phone_with_a_leading_dot(
    documents_client: TestClient, documents_core: Core, filename: str
) -> None:
    """Found by fuzzing: one pass of strip-dots-then-spaces left ". ..plan.md" as "..plan.md"."""
    phone = register_phone(documents_client, app_build=1)
    body = DocumentCreate(filename=filename, content="x")
    out = documents_core.run_sync(send_document, connector(phone.account_id), body=body, ip="127.0.0.1")
    pulled = documents_client.get(f"/v1/documents/{out.document_id}", headers=phone.auth)
    plaintext = open_envelope(
        base64.b64decode(pulled.json()["blob"]), phone.secret_key, documents_core.keys.public_key
    )
    assert json.loads(plaintext)["filename"] == "plan.md"


def test_a_parked_document_expires_after_an_hour(
    documents_client: TestClient, documents_core: Core, clock: ManualClock
) -> None:
    phone = register_phone(documents_client, app_build=1)
    body = DocumentCreate(filename="a.txt", content="x")
    out = documents_core.run_sync(send_document, connector(phone.account_id), body=body, ip="127.0.0.1")
    clock.advance(3600)
    assert documents_client.get(f"/v1/documents/{out.document_id}", headers=phone.auth).status_code == 404


@pytest.mark.parametrize(
    ("filename", "content", "code"),
    [
        ("page.html", "x", "invalid_filename"),
        ("drawing.SVG", "x", "invalid_filename"),
        ("binary.exe", "x", "invalid_filename"),
        ("noextension", "x", "invalid_filename"),
        ("....", "x", "invalid_filename"),
        ("a" * 118 + ".txt", "x", "invalid_filename"),
        ("a" * 4097, "x", "invalid_filename"),
        ("notes.txt", "", "invalid_content"),
        ("notes.txt", "x" * 131_073, "content_too_large"),
    ],
)
def test_document_rules(
    documents_core: Core, documents_client: TestClient, filename: str, content: str, code: str
) -> None:
    phone = register_phone(documents_client, app_build=1)
    with pytest.raises(RelayError) as raised:
        documents_core.run_sync(
            send_document,
            connector(phone.account_id),
            body=DocumentCreate(filename=filename, content=content),
            ip="127.0.0.1",
        )
    assert raised.value.code == code


def test_a_phone_that_never_reported_a_build_is_sent_it_with_a_warning(
    documents_core: Core, documents_client: TestClient
) -> None:
    """One capability rule for every feature (core/services/capability.py), as reminders and ring."""
    phone = register_phone(documents_client)
    out = documents_core.run_sync(
        send_document,
        connector(phone.account_id),
        body=DocumentCreate(filename="a.txt", content="x"),
        ip="127.0.0.1",
    )
    assert out.document_id.startswith("doc_") and out.warnings == [UNKNOWN_BUILD_WARNING]


def test_only_the_phone_pulls(documents_core: Core, documents_client: TestClient) -> None:
    phone = register_phone(documents_client, app_build=1)
    computer = pair_computer(documents_client, phone)
    out = documents_core.run_sync(
        send_document,
        connector(phone.account_id),
        body=DocumentCreate(filename="a.txt", content="x"),
        ip="127.0.0.1",
    )
    assert documents_client.get(f"/v1/documents/{out.document_id}", headers=computer.auth).status_code == 403
