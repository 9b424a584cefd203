"""Typed replies to questions over real HTTP: a caller allows text beside the choices or instead of
them, the phone seals its text to the server's key, the caller's first read gets it and no later
one does; the database never holds it in plaintext and nothing logs it; every refusal has its code."""

from __future__ import annotations

import base64
import logging
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.domain.canonical import canonical_json
from core.domain.envelope import PairBox
from core.domain.typed_reply import seal_typed_reply
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.services.interactions import take_interaction_text
from tests.helpers import FakeDevice, create_token, error_code, queued_payloads, tables_containing

MARKER = "TYPED-REPLY-MARKER-7f3a"


def ask(http: httpx.Client, caller: dict[str, str], **fields: Any) -> dict[str, Any]:
    asked = http.post("/v1/interactions", json={"question": "Deploy?", **fields}, headers=caller)
    assert asked.status_code == 201, asked.text
    return dict(asked.json())


def sealed(core: Core, phone: FakeDevice, interaction_id: str, text: str) -> str:
    box = PairBox(phone.secret_key, core.keys.public_key)
    return base64.b64encode(seal_typed_reply(box, interaction_id=interaction_id, text=text)).decode()


def answer(http: httpx.Client, phone: FakeDevice, interaction_id: str, **body: Any) -> httpx.Response:
    return http.post(f"/v1/interactions/{interaction_id}/answer", json=body, headers=phone.auth)


def poll(http: httpx.Client, caller: dict[str, str], interaction_id: str, wait: int = 0) -> dict[str, Any]:
    polled = http.get(f"/v1/interactions/{interaction_id}", params={"wait": wait}, headers=caller)
    assert polled.status_code == 200, polled.text
    return dict(polled.json())


def test_a_denial_with_a_reason_reaches_the_first_read_only(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    created = ask(http, caller, allow_text=True)
    assert queued_payloads(core, phone, "interaction_request")[0] == {
        "type": "interaction_request",
        "id": created["id"],
        "question": "Deploy?",
        "choices": ["Approve", "Deny"],
        "expires_at": created["expires_at"],
        "text_max_chars": 500,
    }
    answered = answer(
        http,
        phone,
        created["id"],
        choice_index=1,
        sealed_text=sealed(core, phone, created["id"], "not on a Friday"),
    )
    assert answered.status_code == 200 and "text" not in answered.json()  # the phone knows its own text
    first = poll(http, caller, created["id"])
    assert (first["status"], first["choice_index"], first["text"]) == ("answered", 1, "not on a Friday")
    assert "text_already_read" not in first
    second = poll(http, caller, created["id"])
    assert "text" not in second and second["text_already_read"] is True and second["choice_index"] == 1


def test_a_typed_reply_alone_wakes_the_long_poll(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    created = ask(http, caller, question="Which branch?", choices=[], allow_text=True, text_max_chars=60)
    assert (
        queued_payloads(core, phone, "interaction_request")[0]["choices"] == []
        and queued_payloads(core, phone, "interaction_request")[0]["text_max_chars"] == 60
    )
    polled: list[dict[str, Any]] = []
    waiter = threading.Thread(target=lambda: polled.append(poll(http, caller, created["id"], wait=20)))
    waiter.start()
    text = "release/2.4 — with ünïcode\nand a second line"
    assert (
        answer(http, phone, created["id"], sealed_text=sealed(core, phone, created["id"], text)).status_code
        == 200
    )
    waiter.join(25)
    assert polled and polled[0]["status"] == "answered" and polled[0]["text"] == text
    assert "choice_index" not in polled[0]
    assert "text" not in poll(http, caller, created["id"])


def test_a_question_without_text_reads_as_before(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    created = ask(http, caller, choices=["Yes", "No"])
    assert "text_max_chars" not in queued_payloads(core, phone, "interaction_request")[0]
    assert answer(http, phone, created["id"], choice_index=0).status_code == 200
    polled = poll(http, caller, created["id"])
    assert "text" not in polled and "text_already_read" not in polled


def test_the_plaintext_is_never_stored_nor_logged(
    http: httpx.Client,
    core: Core,
    phone: FakeDevice,
    caller: dict[str, str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    created = ask(http, caller, allow_text=True)
    answer(http, phone, created["id"], choice_index=0, sealed_text=sealed(core, phone, created["id"], MARKER))
    assert tables_containing(core.engine, MARKER) == []  # waiting: sealed at rest
    assert MARKER not in database_bytes(core, tmp_path)
    assert poll(http, caller, created["id"])["text"] == MARKER
    assert tables_containing(core.engine, MARKER) == []
    assert MARKER not in database_bytes(core, tmp_path)
    assert MARKER not in caplog.text


def database_bytes(core: Core, tmp_path: Path) -> str:
    """Every byte of the SQLite files (the database, its WAL), as Latin-1 text; empty on PostgreSQL,
    whose rows ``tables_containing`` reads."""
    if core.engine.dialect.name != "sqlite":
        return ""
    return "".join(path.read_bytes().decode("latin-1") for path in tmp_path.rglob("*.db*"))


def test_the_duplicate_request_hands_over_the_waiting_text(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    created = ask(http, caller, allow_text=True, idempotency_key="deploy-7")
    answer(
        http, phone, created["id"], choice_index=1, sealed_text=sealed(core, phone, created["id"], "later")
    )
    again = http.post(
        "/v1/interactions",
        json={"question": "Deploy?", "allow_text": True, "idempotency_key": "deploy-7"},
        headers=caller,
    )
    assert again.status_code == 200 and again.json()["text"] == "later"
    assert poll(http, caller, created["id"])["text_already_read"] is True


def test_allowing_text_asks_anew_rather_than_matching_the_same_question_without(
    http: httpx.Client, caller: dict[str, str]
) -> None:
    plain = ask(http, caller)
    typed = ask(http, caller, allow_text=True)
    assert typed["id"] != plain["id"]


def test_two_reads_at_once_one_gets_the_text(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    created = ask(http, caller, allow_text=True)
    answer(http, phone, created["id"], choice_index=0, sealed_text=sealed(core, phone, created["id"], "once"))
    token_id = http.get("/v1/tokens", headers=phone.auth).json()["tokens"][0]["id"]
    principal = Principal.sender_token(
        account_id=phone.account_id, token_id=token_id, label="t", scope=None, priority_cap="urgent"
    )
    texts: list[str | None] = []
    barrier = threading.Barrier(4)

    def read() -> None:
        barrier.wait()
        texts.append(core.run_sync(take_interaction_text, principal, interaction_id=created["id"]).text)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(10)
    assert texts.count("once") == 1 and texts.count(None) == 3


@pytest.mark.parametrize(
    ("asked", "body", "code"),
    [
        ({}, {"choice_index": 0, "text": "x"}, "text_not_allowed"),
        ({"allow_text": True}, {"text": "why"}, "choice_required"),
        ({"choices": [], "allow_text": True}, {"choice_index": 0}, "invalid_choice"),
        ({"choices": [], "allow_text": True}, {"choice_index": 0, "text": "x"}, "invalid_choice"),
        ({"allow_text": True, "text_max_chars": 5}, {"choice_index": 0, "text": "sixsix"}, "text_too_long"),
        ({"allow_text": True}, {"choice_index": 0, "raw": "not base64!"}, "invalid_text"),
        ({"allow_text": True}, {"choice_index": 0, "raw": "é" * 60}, "invalid_text"),
        (
            {"allow_text": True},
            {"choice_index": 0, "raw": base64.b64encode(b"\x01" * 60).decode()},
            "invalid_text",
        ),
        ({"allow_text": True}, {"choice_index": 0, "text": "x", "other_id": True}, "invalid_text"),
        ({"allow_text": True}, {"choice_index": 0, "surrogate": True}, "invalid_text"),
        ({"allow_text": True}, {}, "invalid_body"),
        ({"allow_text": True}, {"choice_index": None}, "invalid_body"),
    ],
)
def test_answers_the_question_does_not_take_are_refused_with_their_code(
    http: httpx.Client,
    core: Core,
    phone: FakeDevice,
    caller: dict[str, str],
    asked: dict[str, Any],
    body: dict[str, Any],
    code: str,
) -> None:
    created = ask(http, caller, **asked)
    sent = {key: value for key, value in body.items() if key == "choice_index"}
    if "text" in body:
        for_id = "int_" + "0" * 32 if body.get("other_id") else created["id"]
        sent["sealed_text"] = sealed(core, phone, for_id, body["text"])
    if "raw" in body:
        sent["sealed_text"] = body["raw"]
    if body.get("surrogate"):
        plaintext = canonical_json({"type": "interaction_text", "id": created["id"], "text": "X"}).replace(
            b'"X"', b'"\\ud800"'
        )
        sent["sealed_text"] = base64.b64encode(
            PairBox(phone.secret_key, core.keys.public_key).seal(plaintext)
        ).decode()
    refused = answer(http, phone, created["id"], **sent)
    assert refused.status_code == 400 and error_code(refused) == code, refused.text
    if code == "text_too_long":
        assert refused.json()["error"]["details"] == {"chars": 6, "max": 5}
    assert poll(http, caller, created["id"])["status"] == "pending"  # nothing was answered


def test_only_the_asker_can_take_the_text(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    created = ask(http, caller, allow_text=True)
    answer(http, phone, created["id"], choice_index=0, sealed_text=sealed(core, phone, created["id"], "mine"))
    other = {"Authorization": f"Bearer {create_token(http, phone)['token']}"}
    hidden = http.get(f"/v1/interactions/{created['id']}", params={"wait": 0}, headers=other)
    assert hidden.status_code == 404 and error_code(hidden) == "not_found"
    grant = Principal.connector_grant(
        account_id=phone.account_id, client_id="c", grant_id="g", scopes=frozenset({"approvals:write"})
    )
    with pytest.raises(RelayError) as raised:
        core.run_sync(take_interaction_text, grant, interaction_id=created["id"])
    assert raised.value.code == "not_found"
    assert poll(http, caller, created["id"])["text"] == "mine"


def test_a_question_answered_by_text_alone_is_no_longer_pending(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    ids = [ask(http, caller, question=f"q{n}", choices=[], allow_text=True)["id"] for n in range(10)]
    refused = http.post("/v1/interactions", json={"question": "q10"}, headers=caller)
    assert refused.status_code == 429 and error_code(refused) == "too_many_pending"
    answer(http, phone, ids[0], sealed_text=sealed(core, phone, ids[0], "done"))
    assert ask(http, caller, question="q10")["status"] == "pending"
